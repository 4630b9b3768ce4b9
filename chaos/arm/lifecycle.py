"""Realising lifecycle triggers (chaos/triggers.py) on a running arm: the job's starts, and its S3 requests as the
s3proxy sees them.

For an S3 event the watch installs a one-off `hold` rule on s3proxy for the event's key pattern (in this arm's
deployment only), lets the first `skip` matches go on (forwarded at once), and hands the next one back held: the
fault acts while the job waits on that request, then `release()` sends it on (forward) or drops it (the process
that sent it was killed: its answer never arrives). A `job_started` event fires `after` seconds after a start of the
driver (the latest, if that moment is still ahead; else the next start). A `state_reached` event fires on the first
batch completed after the watch began waiting whose progress reports the trigger's `bytes` of RocksDB SST (read
from the job's progress file, so each firing of a count has a batch of its own).

Each realised firing is described by an `Occurrence`, which the runner writes to the history as a `trigger` record
together with where the checkpoint stood (its newest commit and the batch in flight), so "a kill before the first
commit" or "between offsets/N and commits/N" can be counted from the history alone.
"""
from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from infra.errors import InfraError

from ..state_held import sst_bytes
from ..triggers import EVENTS, Draw, Trigger, key_pattern
from .sampler import ProgressTail

HOLD_TIMEOUT_MS = 30_000  # a harness that dies with a request held: s3proxy forwards it after this long
POLL_S = 0.5


@dataclass
class Occurrence:
    event: str
    draw: Draw
    batch: int | None = None
    key: str | None = None
    op: str | None = None
    phase: str | None = None
    request_id: str | None = None
    passed: int = 0                   # matches let through before this one
    state_bytes: int | None = None    # state_reached: the SST bytes the firing batch reported
    fired_at: float = field(default_factory=time.monotonic)
    released: str | None = None

    def to_dict(self) -> dict:
        return {"event": self.event, "batch": self.batch, "key": self.key, "op": self.op, "phase": self.phase,
                "request": self.request_id, "passed": self.passed,
                **({} if self.state_bytes is None else {"state_bytes": self.state_bytes}),
                **{f"draw_{k}": v for k, v in self.draw.to_dict().items()}}


class LifecycleWatch:
    def __init__(self, s3proxy, deployment: str, checkpoint_lister=None, progress_path: Path | None = None):
        """`s3proxy`: infra.s3proxy.S3ProxyClient; `checkpoint_lister()`: keys under the checkpoint (direct to
        MinIO), for where the checkpoint stood when a trigger fired (None: not recorded); `progress_path`: the job's
        progress lines, for state_reached (None: that event never comes)."""
        self.s3proxy = s3proxy
        self.deployment = deployment
        self.checkpoint_lister = checkpoint_lister
        self.progress_path = progress_path
        self._starts: list[tuple[float, int]] = []  # (monotonic time, s3proxy seq) of each driver start
        self._changed = threading.Condition()

    # -- job starts ----------------------------------------------------------------------------------------------
    def job_started(self) -> None:
        try:  # no S3 fault proxy (a target without one): no request events, and no trigger waits on them
            seq = self.s3proxy.last_seq() if self.s3proxy is not None else 0
        except InfraError:
            seq = 0
        with self._changed:
            self._starts.append((time.monotonic(), seq))
            self._changed.notify_all()

    def _next_start(self, after_index: int, deadline: float, stop: threading.Event) -> int | None:
        """Index of a start after `after_index`, waiting for one until the deadline."""
        with self._changed:
            while len(self._starts) - 1 <= after_index:
                left = deadline - time.monotonic()
                if left <= 0 or stop.is_set():
                    return None
                self._changed.wait(min(left, POLL_S))
            return len(self._starts) - 1

    # -- waiting for one firing ----------------------------------------------------------------------------------
    def wait(self, trigger: Trigger, draw: Draw, deadline: float, stop: threading.Event) -> Occurrence | None:
        """Block until the drawn event happens (None: the deadline passed or `stop` was set first)."""
        if draw.event == "job_started":
            return self._wait_start(draw, deadline, stop)
        if draw.event == "state_reached":
            return self._wait_state(trigger, draw, deadline, stop)
        if draw.event == "first_batch":
            return self._wait_first_batch(trigger, draw, deadline, stop)
        return self._hold(trigger, draw, deadline, stop)

    def _wait_start(self, draw: Draw, deadline: float, stop: threading.Event) -> Occurrence | None:
        with self._changed:
            starts = list(self._starts)
        now = time.monotonic()
        index = len(starts) - 1
        if not starts or starts[-1][0] + draw.after < now:
            found = self._next_start(len(starts) - 1, deadline, stop)
            if found is None:
                return None
            index = found
        with self._changed:
            at = self._starts[index][0] + draw.after
        if at > deadline or stop.wait(max(0.0, at - time.monotonic())):
            return None
        return Occurrence(event="job_started", draw=draw)

    def _wait_state(self, trigger: Trigger, draw: Draw, deadline: float, stop: threading.Event) -> Occurrence | None:
        """The first batch completed from now on that reports at least the trigger's bytes of SST."""
        if self.progress_path is None or trigger.state_bytes is None:
            return None
        tail = ProgressTail(self.progress_path)
        tail.new()  # batches completed before the watch began are not this firing's
        while not stop.is_set():
            for record in tail.new():
                progress = record.get("progress") if record.get("event") == "progress" else None
                if progress and sst_bytes(progress) >= trigger.state_bytes:
                    return Occurrence(event="state_reached", draw=draw, batch=progress.get("batchId"),
                                      state_bytes=sst_bytes(progress))
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            stop.wait(min(POLL_S, left))
        return None

    def _wait_first_batch(self, trigger: Trigger, draw: Draw, deadline: float,
                          stop: threading.Event) -> Occurrence | None:
        """The first offsets write of the latest start; if that start already wrote one, the next start's."""
        with self._changed:
            index = len(self._starts) - 1
        if index < 0 or self._first_batch_seen(trigger, self._starts[index][1]):
            found = self._next_start(index, deadline, stop)
            if found is None:
                return None
            index = found
        return self._hold(trigger, draw, deadline, stop)

    def launch_pending(self) -> bool:
        """Has the latest driver start not yet begun its first batch (so a launch event can still come)?"""
        with self._changed:
            if not self._starts:
                return True
            since = self._starts[-1][1]
        try:
            return not self._first_batch_seen(Trigger(("first_batch",)), since)
        except InfraError:
            return False

    def _first_batch_seen(self, trigger: Trigger, since: int) -> bool:
        pattern = re.compile(key_pattern(EVENTS["first_batch"], self.deployment, trigger))
        while True:
            events, since = self.s3proxy.events(since, limit=10_000)
            if not events:
                return False
            if any(e.type == "start" and e.op == "PUT" and pattern.search(e.key) for e in events):
                return True

    def _hold(self, trigger: Trigger, draw: Draw, deadline: float, stop: threading.Event) -> Occurrence | None:
        event = EVENTS[draw.event]
        pattern = key_pattern(event, self.deployment, trigger)
        since = self.s3proxy.last_seq()
        rule = self.s3proxy.add_rule(ops=list(event.ops), key=pattern, action="hold", phase=event.phase,
                                     limit=draw.skip + 1, hold_timeout_ms=HOLD_TIMEOUT_MS, on_timeout="forward")
        passed = 0
        try:
            while not stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                events, since = self.s3proxy.events(since, wait_s=min(POLL_S, left))
                for held in (e for e in events if e.type == "held" and e.rule == rule):
                    if passed < draw.skip:
                        self._release(held.request_id, "forward")
                        passed += 1
                        continue
                    match = re.search(pattern, held.key)
                    return Occurrence(event=draw.event, draw=draw, batch=event.batch_of(match) if match else None,
                                      key=held.key[len(self.deployment) + 1:], op=held.op, phase=event.phase,
                                      request_id=held.request_id, passed=passed)
            return None
        finally:
            try:
                self.s3proxy.remove_rule(rule)
            except InfraError:
                pass  # the stack's reset clears it at the end of the arm

    # -- after the fault acted -----------------------------------------------------------------------------------
    def release(self, occurrence: Occurrence, mode: str) -> None:
        if occurrence.request_id is None:
            return
        occurrence.released = mode
        self._release(occurrence.request_id, mode)

    def _release(self, request_id: str, mode: str) -> None:
        try:
            self.s3proxy.release(request_id, mode)
        except InfraError:
            pass  # gone already: its client went away, or the hold timed out and it was forwarded

    def position(self) -> dict:
        """Where the checkpoint stands: its newest commit and the offsets entries past it (the batch in flight)."""
        if self.checkpoint_lister is None:
            return {}
        try:
            keys = self.checkpoint_lister()
        except Exception as error:  # a listing that failed is no reason to lose the firing
            return {"position_error": f"{type(error).__name__}: {error}"[:200]}
        commits = [int(k.split("/")[1]) for k in keys if re.fullmatch(r"commits/\d+", k)]
        offsets = [int(k.split("/")[1]) for k in keys if re.fullmatch(r"offsets/\d+", k)]
        last = max(commits, default=None)
        return {"last_commit": last, "in_flight": [b for b in sorted(offsets) if last is None or b > last]}
