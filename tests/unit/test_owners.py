"""Who owns a run's processes and containers: an owner label names one process for good, and a process that has
exited — a zombie its parent has not reaped yet included — no longer owns anything (its leftovers are removed)."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

from infra.containers import owner_alive, owner_label


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_live_process_owns_and_a_zombie_does_not():
    child = subprocess.Popen(["sleep", "30"])
    try:
        label = owner_label(child.pid)
        assert owner_alive(label) is True
        assert owner_alive(owner_label()) is True  # this process
        child.kill()
        deadline = time.monotonic() + 10
        while _state(child.pid) != "Z":  # exited, not reaped: no wait() or poll() on the Popen yet
            assert time.monotonic() < deadline, "the child did not become a zombie"
            time.sleep(0.01)
        assert owner_alive(label) is False
    finally:
        child.kill()
        child.wait()
    assert owner_alive(label) is False  # reaped: gone from /proc


def test_a_label_from_another_boot_is_dead_and_a_malformed_one_cannot_be_judged():
    boot, rest = owner_label().split("/", 1)
    assert owner_alive(f"not-this-boot/{rest}") is False
    assert owner_alive("garbage") is None
