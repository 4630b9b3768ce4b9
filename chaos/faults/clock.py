"""Clock faults: the job's driver's wall clock jumps, forward or back, while every other clock stays.

The driver (its Python process, and the Spark driver JVM it starts, which inherits the preload) runs with the clock
shim (infra/shims/clock.c) when its arm has a fault of this family: the shim adds the offset in the arm's clock file
to CLOCK_REALTIME, gettimeofday and time, and leaves the monotonic clock alone. A fault writes the offset; the shim
sees it within 20 ms. The heal writes 0, which is itself a jump: back by as much as the fault moved the clock
forward, or forward by as much as it moved it back.

What moves with the driver's wall clock (docs/experiments.md, "Clocks"): the lease's expiry times (job/lease.py), the
processing-time trigger's waits and the batch timestamps (Spark's SystemClock), and whatever the driver reports in
wall time (its progress lines). Event time comes from the producer's timestamps in the events: the watermark does
not move. S3 signs requests with the client's time and refuses them 15 minutes off: a jump past that is an S3
outage, not a clock fault.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..spec.fields import Invalid
from .base import BaseFault, FaultError, FaultKind, Needs, Param, params

if TYPE_CHECKING:
    from ..spec.model import Fault

SHIM = "clock"  # infra/shims/clock.c
MAX_OFFSET_S = 3_600.0


def write_offset(path: Path, seconds: float) -> None:
    """The shim's control file, replaced whole (a reader never sees half a number)."""
    staging = path.with_name(path.name + ".tmp")
    staging.write_text(f"{seconds:.3f}\n")
    staging.replace(path)


class ClockJump(BaseFault):
    """The driver's wall clock moves by `offset` seconds at the inject and back at the heal."""

    def _clock_file(self) -> Path:
        path = self.ctx.arm.clock_file
        if path is None:
            raise FaultError("clock.jump: the job's driver was started without the clock shim (no clock file)")
        return path

    def inject(self) -> None:
        write_offset(self._clock_file(), self.params["offset"])

    def heal(self) -> None:
        write_offset(self._clock_file(), 0.0)


def _validate_jump(fault: Fault, path: tuple[str, ...]) -> None:
    p: Mapping[str, Any] = fault.params
    if p["offset"] == 0:
        raise Invalid(path + ("params", "offset"), "0 moves nothing", "a number of seconds, negative: back")


KINDS = (
    FaultKind("clock.jump", "the job's driver's wall clock (its Python side and its JVM) jumps by `offset` seconds; "
              "the heal jumps it back (itself a jump the other way); its monotonic clock never moves",
              ("job-driver",), params(
                  offset=Param("number", "seconds the wall clock moves (negative: back); past 15 minutes S3 refuses "
                               "the driver's signed requests", required=True, minimum=-MAX_OFFSET_S,
                               maximum=MAX_OFFSET_S),
              ), implementation=ClockJump, validate=_validate_jump,
              needs=Needs(driver_shims=(SHIM,), code=("infra/shims/clock.c", "job/clock.py"))),
)
