"""The checkpoint lease's decisions (job/lease.py) over an object store that holds objects in memory and can be cut
off: what a lapse while S3 is out of reach does, and what a takeover does. The conditional writes themselves are
checked against MinIO in tests/integration/test_hardening.py; here only the lease's logic over them."""
from __future__ import annotations

import itertools

import pytest

from job.lease import CheckpointLease, LeaseHeld, LeaseLost, LeaseRecord, LeaseUnconfirmed
from job.objectstore import Missing, PreconditionFailed
from job.supervisor import RestartPolicy, classify, out_of_reach, root_cause

KEY = "dep/checkpoint/_lease"


class Denied(Exception):
    """An answer from S3 that is not an outage (access denied, say)."""


class MemoryStore:
    """The three calls the lease makes, with S3's conditional-write semantics (If-None-Match: *, If-Match). Cut off
    (`reachable` False) it refuses every call, as a disabled proxy does; `answers_lost` True stores writes but loses
    their answers, as a timeout downstream of S3 does; `denied` True answers every call with a refusal. `s3_now` is
    S3's own clock: get_aged says an object's age by it, in whole seconds as S3's Date and Last-Modified do."""

    def __init__(self) -> None:
        self.objects: dict[str, tuple[bytes, str]] = {}
        self.s3_now = 1_000.0
        self.written: dict[str, float] = {}
        self.reachable = True
        self.answers_lost = False
        self.denied = False
        self._etags = (f"etag-{n}" for n in itertools.count(1))

    def _reach(self) -> None:
        if not self.reachable:
            raise ConnectionRefusedError(111, "Connection refused")
        if self.denied:
            raise Denied("AccessDenied")

    def get(self, key: str) -> tuple[bytes, str]:
        self._reach()
        if key not in self.objects:
            raise Missing(key)
        return self.objects[key]

    def get_aged(self, key: str) -> tuple[bytes, str, float]:
        data, etag = self.get(key)
        return data, etag, float(int(self.s3_now) - int(self.written[key]))

    def put_if_absent(self, key: str, data: bytes) -> str:
        self._reach()
        if key in self.objects:
            raise PreconditionFailed(key)
        return self._put(key, data)

    def put_if_match(self, key: str, data: bytes, etag: str) -> str:
        self._reach()
        if key not in self.objects or self.objects[key][1] != etag:
            raise PreconditionFailed(key)
        stored = self._put(key, data)
        if self.answers_lost:
            raise TimeoutError("read timed out")  # stored, but the answer never came
        return stored

    def _put(self, key: str, data: bytes) -> str:
        etag = next(self._etags)
        self.objects[key] = (data, etag)
        self.written[key] = self.s3_now
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


def test_a_renewal_stored_while_its_answer_was_lost_is_taken_back_and_written_fresh():
    """A timeout downstream of S3 stores the renewals and loses their answers: the lease's next renewal finds an
    ETag it did not hear of, reads its own instance there, and writes a fresh expiry over it (the stored one ran out
    during the outage)."""
    store, clock = MemoryStore(), Clock()
    lease = leased(store, clock)
    store.answers_lost = True
    clock.now += 5
    lease.check()  # stored (expiry 1,020 s), answer lost: the lease still counts by our clock
    clock.now += 35
    with pytest.raises(LeaseUnconfirmed):
        lease.check()  # stored again (expiry 1,055 s), answer lost, and the one we knew of ran out
    store.answers_lost = False
    lease.check()
    record = LeaseRecord.from_bytes(store.objects[KEY][0])
    assert (record.owner, record.expires_at_ms) == ("dep", int((clock.now + 15) * 1000))
    assert lease.record == record and lease.etag == store.objects[KEY][1]


def test_past_its_expiry_an_answer_that_is_not_an_outage_is_a_loss():
    store, clock = MemoryStore(), Clock()
    lease = leased(store, clock)
    store.denied = True
    clock.now += 10
    lease.check()  # still valid by our clock
    clock.now += 10
    with pytest.raises(LeaseLost, match="expired and could not be renewed .Denied"):
        lease.check()


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
    counted as a repeating failure to repair), a loss is fatal; and a restart's own check says the same by name."""
    store, clock = MemoryStore(), Clock()
    lease = leased(store, clock)
    store.reachable = False
    clock.now += 40
    with pytest.raises(LeaseUnconfirmed) as lapse:
        lease.check()
    lapsed = f"Traceback (most recent call last):\njob.lease.LeaseUnconfirmed: {lapse.value}"
    assert classify(lapsed) == "transient" and out_of_reach(root_cause(lapsed))
    policy = RestartPolicy(budget=20)
    for _ in range(4):  # an outage repeats the same way until it ends: never taken for a failure to repair
        policy.failed(root_cause(lapsed))
    assert not policy.repeating()
    store.reachable = True
    leased(store, clock, owner="other")
    with pytest.raises(LeaseLost) as loss:
        lease.check()
    assert classify(f"Traceback (most recent call last):\njob.lease.LeaseLost: {loss.value}") == "fatal"
    assert classify(f"job.lease.LeaseLost: {loss.value}") == "fatal"  # as job/__main__.py names a start's failure


def test_with_stop_on_takeover_off_a_takeover_is_said_once_and_the_deployment_goes_on():
    """The switch stop_on_takeover off (chaos/switches.py): the loss no check raises, the renewal thread reports none,
    and the job goes on writing beside the new holder."""
    store, clock, said = MemoryStore(), Clock(), []
    lease = CheckpointLease(store, KEY, "dep", "s3a://chaos/dep/checkpoint", ttl_s=15, clock=clock, say=said.append,
                            stop_when_lost=False)
    lease.acquire()
    store.reachable = False
    clock.now += 40
    with pytest.raises(LeaseUnconfirmed):  # a lapse still fails the batch: that is not the switch
        lease.check()
    store.reachable = True
    leased(store, clock, owner="other")
    lease.check()
    lease.check()
    assert lease.lost and "'other'" in lease.lost
    assert [line for line in said if "going on" in line] == [f"lease: {lease.lost}; going on (stop_on_takeover is off)"]
    assert LeaseRecord.from_bytes(store.objects[KEY][0]).owner == "other"  # it never takes the lease back


# -- clocks (issue 40): a holder whose wall clock runs behind, or jumps while S3 is out of reach ---------------------
def clocked(store: MemoryStore, wall: Clock, mono: Clock, owner: str, store_clock: bool) -> CheckpointLease:
    lease = CheckpointLease(store, KEY, owner, "s3a://chaos/dep/checkpoint", ttl_s=15, clock=wall,
                            say=lambda line: None, store_clock=store_clock, monotonic=mono)
    lease.acquire()
    return lease


@pytest.mark.parametrize("store_clock", [True, False])
def test_a_holder_whose_clock_runs_behind_keeps_its_lease_only_when_expiry_is_judged_by_s3s_clock(store_clock):
    """The holder renews every few seconds, but its wall clock is 60 s behind (a TTL of 15 s): each record it writes
    has expired by every other clock already. By the records' wall-clock times a waiting deployment takes the
    lease from a live holder; by S3's clock (the age of the last write) the lease is fresh and the start is
    refused."""
    store, holder_wall, mono, other_wall = MemoryStore(), Clock(), Clock(), Clock()
    holder = clocked(store, holder_wall, mono, "dep", store_clock)
    holder_wall.now -= 60  # the jump back
    for _ in range(3):  # renewing every 5 s, by every clock but its own wall clock
        for clock in (mono, other_wall):
            clock.now += 5
        store.s3_now += 5
        holder.check()
    if store_clock:
        with pytest.raises(LeaseHeld, match="owned by deployment 'dep'"):
            clocked(store, other_wall, Clock(), "other", store_clock)
        holder.check()
    else:
        taker = clocked(store, other_wall, Clock(), "other", store_clock)
        assert taker.record is not None and taker.record.fencing == 2
        with pytest.raises(LeaseLost, match="'other'"):
            holder.check()


def test_a_crashed_holders_lease_is_taken_over_after_its_ttl_by_s3s_clock_whatever_its_clock_said():
    store, ahead, behind = MemoryStore(), Clock(), Clock()
    ahead.now += 3_600  # the crashed holder's clock ran an hour ahead: its record says it counts an hour more
    clocked(store, ahead, Clock(), "dep", store_clock=True)
    store.s3_now += 10
    with pytest.raises(LeaseHeld):
        clocked(store, behind, Clock(), "other", store_clock=True)
    store.s3_now += 7  # 17 s by S3's clock: past the TTL and the second of whole-second headers
    taker = clocked(store, behind, Clock(), "other", store_clock=True)
    assert taker.record is not None and taker.record.fencing == 2


@pytest.mark.parametrize("store_clock", [True, False])
def test_while_s3_is_out_of_reach_a_clock_stepped_back_extends_the_holders_lease_only_by_wall_clock(store_clock):
    """S3 out of reach and the holder's wall clock stepped back 600 s: by the record's wall-clock expiry the lease
    would count ten minutes more (another deployment, by its own clock or S3's, sees it expired after 15 s); by the
    monotonic clock since the last renewal it runs out after its TTL."""
    store, wall, mono = MemoryStore(), Clock(), Clock()
    lease = clocked(store, wall, mono, "dep", store_clock)
    store.reachable = False
    wall.now -= 600
    mono.now += 20
    if store_clock:
        with pytest.raises(LeaseUnconfirmed):
            lease.check()
    else:
        lease.check()  # the hole the monotonic rule closes: a lapse that does not stop the batch
