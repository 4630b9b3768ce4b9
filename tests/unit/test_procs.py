"""Finding a JVM among a process's descendants by its command line (real processes, no services)."""
from __future__ import annotations

import os
import subprocess
import time

from infra.procs import descendants_running

MARKER = "descendants-marker-7f3a"


def test_a_forked_copy_with_the_same_command_line_is_not_counted_twice():
    # bash's subshell is a fork without exec: a child with its parent's command line, like a JVM's child
    # between fork and exec while it spawns a Python worker.
    shell = subprocess.Popen(["bash", "-c", f"( sleep 30; : {MARKER} ); : {MARKER}"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(_with_marker()) < 2:
            time.sleep(0.05)
        assert len(_with_marker()) == 2, "the subshell did not start"
        assert descendants_running(os.getpid(), MARKER.encode()) == [shell.pid]
        assert descendants_running(shell.pid, MARKER.encode()) == [shell.pid]
        assert descendants_running(1 << 22, MARKER.encode()) == []  # not below an unrelated pid
    finally:
        os.killpg(shell.pid, 9)
        shell.wait()


def _with_marker() -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and MARKER.encode() in open(f"/proc/{entry}/cmdline", "rb").read():
                found.append(int(entry))
        except OSError:
            pass
    return found
