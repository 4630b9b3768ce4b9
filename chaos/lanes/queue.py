"""The queue a run's lanes take their one-node experiments from, one at a time (chaos/lanes/launch.py).

Why a queue and not a share fixed at the start:
- Experiments that restart processes (a fault whose kind declares `restarts_processes`: kills, pauses, a second
  deployment, a corrupted checkpoint the job restarts on) must not run beside one another. On two cores two such
  arms side by side pushed restarts and catch-ups over the bounds measured one at a time: a two-lane nightly failed 6
  arms that way and none otherwise (docs/lab-notes.md, "The nightly on two lanes, again"). A queue lets the other lane
  take a network, S3 or data experiment meanwhile instead of waiting.
- Lanes balanced by planned time ended unevenly: a compact experiment runs well under its plan. A lane that asks for
  work when it is free needs no plan to be right.

A free lane takes the longest restarting experiment if no other lane is running one, else the longest of the others;
when only restarting ones are left and another lane runs one, it waits. The files, under the run's stack/queue/:
- queue.json, written by the parent: the experiments in the order they are offered, whether each restarts
  processes, and their planned seconds;
- claimed: the directories taken so far, one per line, appended under queue.lock;
- restarts.lock: an flock held by the lane running a restarting experiment. The kernel frees it when that lane's
  process dies, so a lane that died never blocks the others.
"""
from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from ..faults import registry as fault_registry  # by module: its kinds are read when a queue is planned
from ..spec import ExperimentSpec

POLL_S = 1.0


def queue_dir(run_dir: Path) -> Path:
    return run_dir / "stack" / "queue"


def restarts_processes(spec: ExperimentSpec) -> bool:
    """Whether an experiment's faults kill, pause or restart a process (the job's, a broker's, a second driver)."""
    return any(fault_registry.FAULTS[fault.fault].restarts_processes for fault in spec.faults)


@dataclass(frozen=True)
class QueueItem:
    directory: str
    restarts: bool
    seconds: float


def offered_order(planned: Sequence[tuple[str, ExperimentSpec]],
                  seconds: Callable[[ExperimentSpec], float]) -> list[QueueItem]:
    """Restarting experiments first, each class longest first: the restarting ones can only run one at a time, so
    they are the run's critical path and start at once; the others fill the other lanes around them."""
    items = [QueueItem(directory, restarts_processes(spec), seconds(spec)) for directory, spec in planned]
    return sorted(items, key=lambda item: (not item.restarts, -item.seconds))


def write_queue(directory: Path, items: Sequence[QueueItem], lanes: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "claimed").write_text("")
    (directory / "queue.json").write_text(json.dumps({"lanes": lanes, "items": [asdict(i) for i in items]}, indent=2))


class LaneQueue:
    """One lane's handle on the shared queue. `claim` the next experiment, run it, then `done`."""

    def __init__(self, directory: Path, poll_s: float = POLL_S):
        self.directory = directory
        self.poll_s = poll_s
        document = json.loads((directory / "queue.json").read_text())
        self.lanes = int(document["lanes"])
        self.items = [QueueItem(**item) for item in document["items"]]
        self._restarts_fd: int | None = None

    @contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self.directory / "queue.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _claimed(self) -> set[str]:
        return set((self.directory / "claimed").read_text().split())

    def _take_restarts(self) -> bool:
        fd = os.open(self.directory / "restarts.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._restarts_fd = fd
        return True

    def claim(self, say: Callable[[str], None]) -> str | None:
        """The next experiment's directory for this lane, or None when every one is taken. Waits while only
        restarting experiments are left and another lane runs one."""
        self.done()  # a lane runs one experiment at a time: whatever it held for the last one is given back
        began: float | None = None
        while True:
            with self._locked():
                claimed = self._claimed()
                left = [item for item in self.items if item.directory not in claimed]
                if not left:
                    return None
                # the restarts lock is tried once per pass, for the first restarting experiment left
                first_restarting = next((item for item in left if item.restarts), None)
                if first_restarting is not None and self._take_restarts():
                    chosen: QueueItem | None = first_restarting
                else:
                    chosen = next((item for item in left if not item.restarts), None)
                if chosen is not None:
                    with open(self.directory / "claimed", "a") as out:
                        out.write(chosen.directory + "\n")
                    if began is not None:
                        say(f"lane queue: waited {time.monotonic() - began:.0f} s for another lane's restarting "
                            "experiment to end")
                    return chosen.directory
            began = began if began is not None else time.monotonic()
            time.sleep(self.poll_s)

    def done(self) -> None:
        """The claimed experiment ended: a restarting one lets the next restarting one start (idempotent)."""
        if self._restarts_fd is not None:
            fd, self._restarts_fd = self._restarts_fd, None
            os.close(fd)

    def unclaimed_s(self) -> float:
        """Planned seconds still unclaimed, shared by the lanes: a progress line's estimate of what is left."""
        claimed = self._claimed()
        return sum(item.seconds for item in self.items if item.directory not in claimed) / max(1, self.lanes)
