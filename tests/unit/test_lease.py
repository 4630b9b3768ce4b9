"""The checkpoint lease's decisions (job/lease.py) over an object store that holds objects in memory and can be cut
off: what a lapse while S3 is out of reach does, and what a takeover does. The conditional writes themselves are
checked against MinIO in tests/integration/test_hardening.py; here only the lease's logic over them."""
from __future__ import annotations

import itertools

import pytest

from job.lease import CheckpointLease, LeaseLost, LeaseRecord, LeaseUnconfirmed
from job.objectstore import Missing, PreconditionFailed
from job.supervisor import classify, out_of_reach, root_cause

KEY = "dep/checkpoint/_lease"


class Unreachable(Exception):
    """What the S3 client raises while the store is cut off (a read timeout, a refused connection)."""


class MemoryStore:
    """The three calls the lease makes, with S3's conditional-write semantics (If-None-Match: *, If-Match)."""

    def __init__(self) -> None:
        self.objects: dict[str, tuple[bytes, str]] = {}
        self.reachable = True
        self._etags = (f"etag-{n}" for n in itertools.count(1))

    def _reach(self) -> None:
        if not self.reachable:
            raise Unreachable("Max retries exceeded (ReadTimeoutError)")

    def get(self, key: str) -> tuple[bytes, str]:
        self._reach()
        if key not in self.objects:
            raise Missing(key)
        return self.objects[key]

    def put_if_absent(self, key: str, data: bytes) -> str:
        self._reach()
        if key in self.objects:
            raise PreconditionFailed(key)
        return self._put(key, data)

    def put_if_match(self, key: str, data: bytes, etag: str) -> str:
        self._reach()
        if key not in self.objects or self.objects[key][1] != etag:
            raise PreconditionFailed(key)
        return self._put(key, data)

    def _put(self, key: str, data: bytes) -> str:
        etag = next(self._etags)
        self.objects[key] = (data, etag)
        return etag


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def leased(store: MemoryStore, clock: Clock, owner: str = "dep") -> CheckpointLease:
    lease = CheckpointLease(store, KEY, owner, "s3a://chaos/dep/checkpoint", ttl_s=15, clock=clock,
                            say=lambda line: None)
    lease.acquire()
    return lease


def test_while_s3_is_out_of_reach_the_lease_counts_until_it_runs_out_then_only_the_batch_stops():
    store, clock = MemoryStore(), Clock()
    lease = leased(store, clock)
    store.reachable = False
    clock.now += 10
    lease.check()  # not expired yet by our clock: the batch goes on (its own S3 writes fail meanwhile)
    clock.now += 10
    with pytest.raises(LeaseUnconfirmed, match="ran out while S3 could not be reached"):
        lease.check()
    assert lease.lost is None  # a lapse is not a loss: nothing proves anyone else holds it


def test_after_a_lapse_the_next_check_that_reaches_s3_renews_the_lease_if_nobody_took_it():
    store, clock = MemoryStore(), Clock()
    lease = leased(store, clock)
    store.reachable = False
    clock.now += 40  # an outage longer than the TTL
    with pytest.raises(LeaseUnconfirmed):
        lease.check()
    store.reachable = True
    lease.check()  # the write conditional on our last ETag proves nobody wrote the lease since
    record = LeaseRecord.from_bytes(store.objects[KEY][0])
    assert (record.owner, record.fencing, record.expires_at_ms) == ("dep", 1, int((clock.now + 15) * 1000))


def test_after_a_lapse_a_takeover_is_found_and_is_final():
    store, clock = MemoryStore(), Clock()
    lease = leased(store, clock)
    store.reachable = False
    clock.now += 40
    with pytest.raises(LeaseUnconfirmed):
        lease.check()
    store.reachable = True
    usurper = leased(store, clock, owner="other")  # takes over the expired lease, fencing 2
    assert usurper.record is not None and usurper.record.fencing == 2
    with pytest.raises(LeaseLost, match="'other'"):
        lease.check()
    with pytest.raises(LeaseLost):  # lost for good: no later check renews it
        lease.check()
    assert LeaseRecord.from_bytes(store.objects[KEY][0]).owner == "other"


def test_the_supervisor_restarts_a_lapse_and_stops_on_a_loss():
    """The text a failed batch carries to the supervisor: a lapse is an outage (restarted within the budget, never
    counted as a repeating failure to repair), a loss is fatal."""
    store, clock = MemoryStore(), Clock()
    lease = leased(store, clock)
    store.reachable = False
    clock.now += 40
    with pytest.raises(LeaseUnconfirmed) as lapse:
        lease.check()
    lapsed = f"Traceback (most recent call last):\njob.lease.LeaseUnconfirmed: {lapse.value}"
    assert classify(lapsed) == "transient" and out_of_reach(root_cause(lapsed))
    store.reachable = True
    leased(store, clock, owner="other")
    with pytest.raises(LeaseLost) as loss:
        lease.check()
    assert classify(f"Traceback (most recent call last):\njob.lease.LeaseLost: {loss.value}") == "fatal"
