"""Steps of the wall clock, seen from the driver: the wall clock less the monotonic clock moves only when the wall
clock is set (by NTP stepping it, by hand, by a fault).

Spark's processing-time trigger waits by the wall clock (ProcessingTimeExecutor over SystemClock.waitTillTime,
System.currentTimeMillis): after a step back of S seconds during its wait, the query runs no batch for S seconds. A
step forward only ends the wait early. The job restarts the query on a step back (Settings.restart_on_clock_step,
job/__main__.py): a new query's trigger starts from the clock as it is now.
"""
from __future__ import annotations

import time
from collections.abc import Callable


class WallClockSteps:
    def __init__(self, threshold_s: float, wall: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic):
        self.threshold_s = threshold_s
        self.wall = wall
        self.monotonic = monotonic
        self._offset = wall() - monotonic()

    def stepped_back(self) -> float | None:
        """Seconds the wall clock stepped back since the last call, when more than the threshold; else None. A step
        forward is taken in silently (the next step back is measured from it)."""
        offset = self.wall() - self.monotonic()
        step, self._offset = self._offset - offset, offset
        return step if step > self.threshold_s else None
