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
        # Waited for until `sleep` runs under the subshell: between the subshell's fork of it and its exec there is
        # briefly a third copy with the marker (a CI run under load caught 3); after that the tree stands for 30 s.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not _sleep_under_marker():
            time.sleep(0.05)
        assert len(_with_marker()) == 2, "the subshell did not start"
        assert descendants_running(os.getpid(), MARKER.encode()) == [shell.pid]
        assert descendants_running(shell.pid, MARKER.encode()) == [shell.pid]
        assert descendants_running(1 << 22, MARKER.encode()) == []  # not below an unrelated pid
    finally:
        os.killpg(shell.pid, 9)
        shell.wait()


def _sleep_under_marker() -> bool:
    """A `sleep 30` process whose parent's command line carries the marker (the subshell) is running."""
    parents = set(_with_marker())
    for entry in os.listdir("/proc"):
        try:
            if (entry.isdigit() and open(f"/proc/{entry}/cmdline", "rb").read() == b"sleep\x0030\x00"
                    and int(open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1]) in parents):
                return True
        except (OSError, ValueError, IndexError):
            pass
    return False


def _with_marker() -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and MARKER.encode() in open(f"/proc/{entry}/cmdline", "rb").read():
                found.append(int(entry))
        except OSError:
            pass
    return found


def test_a_driver_that_ends_by_itself_is_recorded_once_as_it_ends_and_one_the_harness_ended_is_not(tmp_path):
    import json
    import signal
    import sys
    import types

    from chaos.arm.steps import ArmContext
    from chaos.history import HistoryWriter
    from infra.procs import ManagedProcess

    history = HistoryWriter(tmp_path / "history.jsonl")
    said: list[str] = []
    own = ManagedProcess("job", [sys.executable, "-c", "import sys; sys.exit(1)"], tmp_path / "own.log")
    ctx = types.SimpleNamespace(arm=types.SimpleNamespace(job=own), own_exit_recorded=None, history=history,
                                say=said.append)
    own.wait(30)
    ArmContext.record_own_exit(ctx)  # type: ignore[arg-type]
    ArmContext.record_own_exit(ctx)  # type: ignore[arg-type]  # once per driver
    own.stop(grace=1)  # the arm's stop after the job had ended by itself: still its own exit
    assert not own.signalled_to_end
    # a driver the harness signalled (a kill fault, a stop to damage its checkpoint, the arm's stop) is not its own
    ended = ManagedProcess("job", [sys.executable, "-c", "import time; time.sleep(30)"], tmp_path / "ended.log")
    ended.signal(signal.SIGKILL)
    ended.wait(30)
    ctx.arm.job = ended
    ArmContext.record_own_exit(ctx)  # type: ignore[arg-type]
    # a pause and its continuation end nothing
    paused = ManagedProcess("job", [sys.executable, "-c", "import time; time.sleep(30)"], tmp_path / "paused.log")
    paused.signal(signal.SIGSTOP)
    paused.signal(signal.SIGCONT)
    assert not paused.signalled_to_end
    paused.stop(grace=5)
    assert paused.signalled_to_end
    history.close()
    exits = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert [(e["event"], e["process"], e["code"]) for e in exits if e.get("type") == "job"] == [
        ("exited", "job-driver", 1)]
    assert said == [f"the job's driver ended by itself (exit 1); see {tmp_path / 'own.log'}"]
