"""Who owns a container or a run record: an owner label names one process for good (boot id, PID namespace, pid,
start time), and tells whether that process still lives. Shared by the containers backend (infra/containers.py,
its container labels) and the run registry (infra/registry.py, its run records), so neither imports the other."""
from __future__ import annotations

import os
from pathlib import Path


# -- who owns a container or a run -------------------------------------------------------------------------------------
def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def pid_namespace(pid: int | str = "self") -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def start_ticks(pid: int | str) -> str | None:
    """The process's start time (clock ticks since boot): with the pid, it names one process for good."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def proc_state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def owner_label(pid: int | None = None) -> str:
    pid = pid or os.getpid()
    return f"{boot_id()}/{pid_namespace(pid)}/{pid}/{start_ticks(pid)}"


def owner_alive(owner: str) -> bool | None:
    """Whether the process named by an owner label lives; None when this host cannot tell (another PID
    namespace: a run started from another container on the same engine)."""
    try:
        boot, namespace, pid, ticks = owner.rsplit("/", 3)
    except ValueError:
        return None
    if boot != boot_id():
        return False  # started before the last reboot
    if namespace != pid_namespace():
        return None
    # A zombie has exited (its parent has not reaped it yet, e.g. a test holding the Popen): it will never
    # tear down what it started, so its containers and processes are leftovers now.
    return start_ticks(pid) == ticks and proc_state(int(pid)) not in ("Z", "X")
