"""Checkpoint ownership: one deployment at a time writes a checkpoint, enforced by a lease object in it.

Incident 001 ("_metadata already exists"): two deployments shared one checkpoint directory, and nothing stopped
the second. Spark has no lock either (FACTS.md): two queries on one checkpoint are detected late and racily.
Here every deployment holds `<checkpoint>/_lease` before it starts Spark:

- acquire: create the object only if absent (If-None-Match: *). If it exists, read it: a lease of another
  deployment that has not expired refuses the start (LeaseHeld: one line naming the owner and the path); an
  expired or released lease, or our own deployment's (a restart after a crash: the platform runs one instance of a
  deployment), is taken over by replacing it only if its ETag is unchanged (If-Match), with the fencing number
  raised by one. Two deployments racing for the same expired lease: exactly one If-Match wins.
- renew: every `ttl/3`, replace-if-unchanged with a new expiry. A failed precondition means someone else took
  the lease: it is lost for good.
- before every batch's output (job/sink.py) the holder renews the lease conditionally, or, while S3 cannot be
  reached, checks it has not expired by its own clock (see Clocks below); if it cannot prove that, it stops before
  writing anything. Proof that another deployment took the lease over ends the deployment (LeaseLost). A lease that
  ran out while S3 could not be reached only fails the batch (LeaseUnconfirmed): nobody is known to hold it, and the
  next attempt's renewal, conditional on the ETag this deployment last wrote, either proves nobody wrote the lease
  since (it goes on) or finds the new holder (LeaseLost). A restarted query checks the lease before it starts
  (job/__main__.py), so a deployment that was taken over during a lapse writes nothing more, not even the next
  offsets entry (docs/job.md has the history).
- stop: renewal ends and the lease runs out after its TTL (it is never deleted: MinIO ignores If-Match on
  DELETE, so a delete could remove another deployment's fresh lease). A restarted instance of the same
  deployment takes it back at once; another deployment waits for the expiry.

Clocks (issue 40): with `store_clock` (Settings.lease_store_clock), no host's wall clock decides an expiry. Another
deployment's lease has expired when its last write is older than its TTL by S3's clock (the answer's Date less the
object's Last-Modified), and the holder's own lease counts, while S3 cannot be reached, until its TTL has passed on
the monotonic clock since its last successful renewal was sent (never later than S3 sees it expire). Without it,
expiry is the wall-clock time written in the record: a holder whose clock runs behind by more than the TTL writes
records that are already expired to everyone else, and a waiting deployment takes a lease that is being renewed.
"""
from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass

from .objectstore import Missing, ObjectStore, PreconditionFailed


class LeaseHeld(Exception):
    """Another deployment owns the checkpoint: this one must not start."""


class LeaseLost(Exception):
    """This deployment no longer owns its checkpoint: it must stop before it commits or writes anything."""


class LeaseUnreadable(Exception):
    """A renewal's precondition failed and the lease could not be read back to see whose it is: transient."""


def _is_outage(error: Exception) -> bool:
    """S3 did not answer (a refused or reset connection, a timeout) or answered that it is overloaded: an outage,
    which says nothing about who holds the lease. An answer (access denied, no such bucket) or a bug is not one."""
    if isinstance(error, (OSError, LeaseUnreadable)):
        return True
    try:
        from minio.error import S3Error, ServerError
        from urllib3.exceptions import HTTPError
    except ImportError:  # the job always has both; a bare test environment may not
        return False
    if isinstance(error, (HTTPError, ServerError)):
        return True
    return isinstance(error, S3Error) and error.code in ("SlowDown", "ServiceUnavailable", "InternalError",
                                                         "RequestTimeout")


class LeaseUnconfirmed(Exception):
    """The lease ran out by this process's clock while S3 could not be reached: the batch must not commit, but
    nobody is known to hold the lease, so a later attempt may renew it (conditionally: see the module doc)."""


@dataclass(frozen=True)
class LeaseRecord:
    owner: str          # the deployment id
    instance: str       # this process's incarnation (a restarted deployment has a new one)
    fencing: int        # raised by one on every takeover: a stale holder's number is lower
    expires_at_ms: int  # 0 when released
    host: str
    pid: int
    ttl_ms: int = 0     # the holder's TTL: how long after its last write (by S3's clock) the lease counts

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> LeaseRecord:
        raw = json.loads(data)
        return cls(**{name: raw[name] for name in cls.__dataclass_fields__ if name in raw})


class CheckpointLease:
    def __init__(self, store: ObjectStore, key: str, owner: str, checkpoint_uri: str, ttl_s: float = 15.0,
                 clock: Callable[[], float] = time.time, say: Callable[[str], None] = print,
                 stop_when_lost: bool = True, store_clock: bool = False,
                 monotonic: Callable[[], float] = time.monotonic):
        self.store = store
        self.key = key
        self.owner = owner
        self.checkpoint_uri = checkpoint_uri
        self.ttl_s = ttl_s
        self.clock = clock
        self.say = say
        self.instance = uuid.uuid4().hex[:12]
        self.record: LeaseRecord | None = None
        self.etag: str | None = None
        self.lost: str | None = None  # why, once lost
        # Off (Settings.stop_on_takeover false): a lease taken over is said once and ignored; the deployment goes on
        # writing beside the new holder, which is what the switch exists to show.
        self.stop_when_lost = stop_when_lost
        self.store_clock = store_clock
        self.monotonic = monotonic
        self._renewed_at: float | None = None  # monotonic time the last successful write of the lease was sent
        self._said_going_on = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _new_record(self, fencing: int) -> LeaseRecord:
        return LeaseRecord(self.owner, self.instance, fencing, self._now_ms() + int(self.ttl_s * 1000),
                           socket.gethostname(), os.getpid(), int(self.ttl_s * 1000))

    def _remaining_s(self, current: LeaseRecord, age_s: float | None) -> float:
        """How long another deployment's lease still counts: by S3's clock (its last write's age against its TTL,
        a second added for the whole-second headers) or, without store_clock, a TTL in the record (written by an
        older job) or an age (an answer without Date or Last-Modified), by its wall-clock expiry against ours."""
        if not current.expires_at_ms:
            return 0.0  # released
        if self.store_clock and current.ttl_ms and age_s is not None:
            return current.ttl_ms / 1000 - age_s + 1.0
        return (current.expires_at_ms - self._now_ms()) / 1000

    def _holds_by_own_clock(self) -> bool:
        """Whether this holder's lease still counts while S3 cannot say: by the monotonic clock since the last
        renewal was sent (store_clock), else by the record's wall-clock expiry."""
        if self.store_clock:
            return self._renewed_at is not None and self.monotonic() - self._renewed_at < self.ttl_s
        return self.record is not None and self.record.expires_at_ms > self._now_ms()

    # -- acquire -----------------------------------------------------------------------------------------------
    def acquire(self) -> LeaseRecord:
        for _attempt in range(5):  # a lost race re-reads the winner's record and decides again
            record = self._new_record(fencing=1)
            sent = self.monotonic()
            try:
                self.etag = self.store.put_if_absent(self.key, record.to_bytes())
                self._renewed_at = sent
                self.record = record
                self.say(f"lease: acquired {self.checkpoint_uri} (fencing 1)")
                return record
            except PreconditionFailed:
                pass
            try:
                data, etag, age_s = self.store.get_aged(self.key)
            except Missing:
                continue  # removed in between (by hand): try to create again
            current = LeaseRecord.from_bytes(data)
            if current.owner == self.owner and current.instance == self.instance:
                self.record, self.etag = current, etag  # our own write whose answer was lost and retried
                self._renewed_at = sent
                return current
            remaining_s = self._remaining_s(current, age_s)
            if current.owner != self.owner and remaining_s > 0:
                raise LeaseHeld(f"checkpoint {self.checkpoint_uri} is owned by deployment {current.owner!r} "
                                f"(pid {current.pid} on {current.host}, fencing {current.fencing}, lease valid "
                                f"{remaining_s:.0f} s more); give this deployment its own checkpoint path, "
                                f"or stop {current.owner!r} first")
            record = self._new_record(fencing=current.fencing + 1)
            sent = self.monotonic()
            try:
                self.etag = self.store.put_if_match(self.key, record.to_bytes(), etag)
            except PreconditionFailed:
                continue  # another deployment took it over first: read its record
            self.record, self._renewed_at = record, sent
            why = (f"the released lease of {current.owner!r}" if not current.expires_at_ms
                   else f"the expired lease of {current.owner!r}" if remaining_s <= 0
                   else "this deployment's previous instance (restarted)")
            self.say(f"lease: took over {self.checkpoint_uri} from {why} (fencing {record.fencing})")
            return record
        raise LeaseHeld(f"checkpoint {self.checkpoint_uri}: lost the race for its lease 5 times; another "
                        "deployment is starting on it")

    # -- holding -----------------------------------------------------------------------------------------------
    def renew(self) -> None:
        with self._lock:
            if self.lost:
                raise LeaseLost(self.lost)
            if self.record is None or self.etag is None:
                raise LeaseLost("the lease was never acquired")
            for _attempt in range(2):
                record = self._new_record(self.record.fencing)
                sent = self.monotonic()
                try:
                    self.etag = self.store.put_if_match(self.key, record.to_bytes(), self.etag)
                    self.record, self._renewed_at = record, sent
                    return
                except PreconditionFailed:
                    current = self._current()
                if current is None:  # neither ours nor anyone else's is proven: an outage, not a loss
                    raise LeaseUnreadable(f"the lease on {self.checkpoint_uri} changed and could not be read back")
                if current[0].instance != self.instance:
                    self.lost = self._describe_loss(current)
                    raise LeaseLost(self.lost)
                # Our own earlier write landed but its answer was lost (an outage that dropped answers, not
                # requests): take its ETag and write a fresh expiry over it, since that write may be long expired.
                self.record, self.etag = current
            raise LeaseUnreadable(f"the lease on {self.checkpoint_uri} kept changing under this instance's writes")

    def _current(self) -> tuple[LeaseRecord, str] | None:
        try:
            data, etag = self.store.get(self.key)
            return LeaseRecord.from_bytes(data), etag
        except Exception:
            return None

    def _describe_loss(self, current: tuple[LeaseRecord, str] | None) -> str:
        holder = (f"deployment {current[0].owner!r} (fencing {current[0].fencing})" if current is not None
                  else "another deployment")
        return (f"lost the lease on {self.checkpoint_uri}: {holder} holds it now; stopping before the next "
                f"commit (this deployment had fencing {self.record.fencing if self.record else '?'})")

    def check(self) -> None:
        """Prove this process holds the lease now, or raise LeaseLost or LeaseUnconfirmed. Called before each batch
        is computed, again before its output is written, and before a restarted query starts: a conditional renewal
        per call, so a takeover is seen before the next batch commits, not only at the next renewal period. If S3
        cannot be reached, the lease still counts until its expiry by our own clock (the monotonic clock with
        store_clock: _holds_by_own_clock) (the batch's own S3 writes fail
        anyway meanwhile); past it the batch stops with LeaseUnconfirmed, and a later check that reaches S3 renews
        the lease or loses it. Any other failure to renew past the expiry (an answer such as access denied, or a
        bug) is a loss, as it always was."""
        if self.lost and not self.stop_when_lost:
            return
        if self.lost:
            raise LeaseLost(self.lost)
        if self.record is None:
            raise LeaseLost("the lease was never acquired")
        try:
            self.renew()
        except LeaseLost as lost:
            if self.stop_when_lost:
                raise
            self._going_on(str(lost))
            return
        except Exception as error:
            if self._holds_by_own_clock():
                return
            what = f"({type(error).__name__}: {str(error)[:200]})"
            if not _is_outage(error):
                raise LeaseLost(f"the lease on {self.checkpoint_uri} expired and could not be renewed {what}") from None
            raise LeaseUnconfirmed(f"the lease on {self.checkpoint_uri} ran out while S3 could not be reached "
                                   f"{what}; stopping this batch before it writes output or commits: the next "
                                   "attempt renews the lease only if nobody took it over") from None

    def _going_on(self, why: str) -> None:
        with self._lock:
            self.lost = self.lost or why
            said, self._said_going_on = self._said_going_on, True
        if not said:
            self.say(f"lease: {why}; going on (stop_on_takeover is off)")

    def start_renewing(self, on_lost: Callable[[str], None]) -> None:
        def loop() -> None:
            failing_since = None
            while not self._stop.wait(self.ttl_s / 3):
                try:
                    self.renew()
                except LeaseLost as lost:
                    if self.stop_when_lost:
                        on_lost(str(lost))
                    else:
                        self._going_on(str(lost))
                    return
                except Exception as error:  # transient: retried next period; check() decides at expiry
                    if failing_since is None:  # one line per outage, not one per period
                        failing_since = self._now_ms()
                        self.say(f"lease: renewal failed ({type(error).__name__}: {str(error)[:160]}); retrying")
                    continue
                if failing_since is not None:
                    self.say(f"lease: renewed again after {(self._now_ms() - failing_since) / 1000:.0f} s of failures")
                    failing_since = None

        self._thread = threading.Thread(target=loop, name="lease-renewal", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop renewing. The lease is not released: it expires after its TTL. A restarted instance of this
        deployment takes it back at once; another deployment must wait for the expiry, so a deployment that
        restarts (or is stopped to be restarted) keeps its checkpoint even when a colliding one starts at the
        same moment."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
