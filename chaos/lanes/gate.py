"""Lanes take turns for the part of an arm that must not share the machine: its job's start and its steady phase.

A job's start (driver and executor JVMs, the Spark session, the first batch) is the biggest burst of CPU an arm
makes; the steady phase is the arm's baseline, judged on batches completing steadily before any fault. On two cores a
start in one lane starved the other lane's steady phase: a clean-clone CI run (2026-11-25) failed three hardened arms
on steady progress (their batches took 4-12 s where 1 s was planned), each one whose steady phase met a job start
(the other lane's, or both lanes' first), and none whose steady phase did not.

So the lanes of one run hold a turn (`flock` on a file in the run's directory) from their job's start, through its
warm-up, to the end of its steady phase; one lane at a time. The rest of an arm (faults, recovery, drain: most of its
time) runs beside the other lanes as before. A wait is bounded (`WAIT_S`); past it the lane goes on without a turn
and says so: a gate must never hang a run. Faults that restart a job mid-arm are not gated: they are what the arm
measures.
"""
from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

WAIT_S = 120.0  # longer than another lane's start and steady phase take on this machine (30-60 s)
POLL_S = 0.2
# How much of an arm holds the turn, from the environment variable CHAOS_LANE_GATE: `steady` (the default: the job's
# start, warm-up and steady phase), `start` (its start and warm-up only) or `off` (no turns). For measuring what the
# turns cost and buy (docs/lab-notes.md, "Lanes"); a lane child inherits it.
SPANS = ("steady", "start", "off")


def span_from_env() -> str:
    span = os.environ.get("CHAOS_LANE_GATE", "steady")
    if span not in SPANS:
        from ..errors import USAGE, ChaosError
        raise ChaosError(f"CHAOS_LANE_GATE={span!r} is not one of {', '.join(SPANS)}; unset it for the default "
                         "(steady)", USAGE)
    return span


class LaneGate:
    """The turns of one run's lanes (a lock file in their shared run directory)."""

    def __init__(self, directory: Path, wait_s: float = WAIT_S, span: str = "steady"):
        self.path = directory / "turn.lock"
        self.wait_s = wait_s
        self.span = span
        directory.mkdir(parents=True, exist_ok=True)

    def start(self, say: Callable[[str], None]) -> Turn:
        """Wait for this arm's turn to start its job; it is held until `Turn.steady`'s phase ends or `Turn.release`."""
        began = time.monotonic()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() - began >= self.wait_s:
                    os.close(fd)
                    say(f"lane gate: no turn within {self.wait_s:.0f} s; starting beside the other lanes")
                    return Turn(None)
                time.sleep(POLL_S)
        waited = time.monotonic() - began
        if waited >= 1.0:
            held = "start and steady phase" if self.span == "steady" else "start"
            say(f"lane gate: waited {waited:.0f} s for another lane's {held}")
        return Turn(fd, until_steady_ends=self.span == "steady")


class Turn:
    """One arm's turn: held while its job starts and warms up and during its steady phase, then given back."""

    def __init__(self, fd: int | None, until_steady_ends: bool = True):
        self._fd = fd
        self._until_steady_ends = until_steady_ends
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def steady(self, seconds: float) -> None:
        """The job is warm and its steady phase begins: the turn is given back when `seconds` have passed (at once
        for a gate that spans the start only)."""
        if not self._until_steady_ends:
            self.release()
            return
        with self._lock:
            if self._fd is None or self._timer is not None:
                return
            self._timer = threading.Timer(seconds, self.release)
            self._timer.daemon = True
            self._timer.start()

    def release(self) -> None:
        """Given back now, if still held (idempotent; the arm's `finally` calls it)."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            if self._fd is not None:
                fd, self._fd = self._fd, None
                os.close(fd)  # closing the only fd of the open file releases its flock
