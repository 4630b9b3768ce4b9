"""Disk faults: the executors' local disk under RocksDB's working directories fills up (ENOSPC) or fails (EIO).

They act through the fsfault shim every local Spark worker preloads (infra/shims/fsfault.c, infra/preloads.py):
inject writes "<ERRNO> <CALLS>" into each worker's control file, heal removes it; the running executors see the
change within 50 ms. Only RocksDB's own files are hit (its working directories, and the files Spark copies into them
from the checkpoint); shuffle files, logs and the checkpoint in S3 are not. The containers backend and targets
preload no shim: their arms are SKIPPED (chaos/target/gate.py).
"""
from __future__ import annotations

import os
from pathlib import Path

from .base import BaseFault, FaultError, FaultKind, Needs, Param, params

TARGETS = ("executor",)
CALLS = ("write", "read", "all")  # the shim's words: write covers pwrite, fsync, fallocate...; read covers pread...

# kind -> the errno its calls fail with
ERRNOS = {"disk.full": "ENOSPC", "disk.error": "EIO"}


def control_line(kind: str, calls: str) -> str:
    """What the control file holds while the fault is in place (read by infra/shims/fsfault.c)."""
    return f"{ERRNOS[kind]} {calls}\n"


class DiskFault(BaseFault):
    def _controls(self) -> list[Path]:
        controls = self.ctx.stack.info.disk_fault_controls
        if not controls:  # a stack without the preload SKIPs such an arm before it starts (chaos/run.py)
            raise FaultError("no Spark worker of this stack preloads the fsfault shim (infra/preloads.py)")
        return [Path(path) for path in controls.values()]

    def inject(self) -> None:
        line = control_line(self.fault.fault, self.params.get("calls", "write"))
        for control in self._controls():
            # written whole then renamed: the shim never reads half a line
            partial = control.with_name(control.name + ".partial")
            partial.write_text(line)
            os.replace(partial, control)

    def heal(self) -> None:
        for control in self._controls():
            control.unlink(missing_ok=True)


# infra/preloads.py is not named: it sets every worker's local directory, so a change there may touch any experiment
_NEEDS = Needs(worker_shims=("fsfault",), code=("infra/shims/fsfault.c",))

KINDS = (
    FaultKind("disk.full", "the executors' local disk is full under RocksDB's working directories: every write, "
              "fsync and fallocate there fails with ENOSPC; reads still work", TARGETS,
              implementation=DiskFault, needs=_NEEDS),
    FaultKind("disk.error", "the executors' local disk fails under RocksDB's working directories: the chosen calls "
              "there fail with EIO", TARGETS, params(
                  calls=Param("choice", "which calls fail: write (write, fsync, fallocate...), read (read, pread...) "
                              "or all", default="all", choices=CALLS),
              ), implementation=DiskFault, needs=_NEEDS),
)
