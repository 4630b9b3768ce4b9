"""A record of what each live stack started, so a run killed with SIGKILL can be cleaned up by the next one.

Every server and driver runs in a session of its own (infra/procs.py), so nothing dies with a harness that is
killed outright: Kafka, MinIO, Toxiproxy (with its toxics), Spark and the job drivers would keep running and
listening. While a stack is up it keeps `<cache>/active-runs/<pid>-<start>.json` current: who owns it (the same
owner label the containers carry: boot id, PID namespace, pid, start time), its run directory, and the process
group of everything it launched. A clean teardown removes the record. `cleanup_dead()` — called when a stack
starts, and by `chaos clean` — finds records whose owner is dead, stops their process groups (only processes
that still belong to that run: their command line or environment names its run directory, so a reused pid is
never touched), removes the containers of dead runs by label, and deletes the records.
"""
from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .owners import owner_alive, owner_label  # one owner label for containers and run records
from .paths import cache_dir
from .procs import group_alive, members

__all__ = ["REGISTRY_ENV", "RunRecord", "cleanup_dead", "owner_label", "registry_dir", "stop_group"]


REGISTRY_ENV = "CHAOS_RUN_REGISTRY"


def registry_dir() -> Path:
    """`<cache>/active-runs`, shared by every run of this user; CHAOS_RUN_REGISTRY gives a group of runs a registry
    of its own, so that one's clean-up never judges the others' (a test that kills a run on purpose and then checks
    that `chaos clean` finds it, beside other tests starting stacks)."""
    override = os.environ.get(REGISTRY_ENV)
    return Path(override).expanduser().resolve() if override else cache_dir() / "active-runs"


@dataclass
class RunRecord:
    owner: str
    pid: int
    run_dir: str
    backend: str
    started: float = field(default_factory=time.time)
    groups: dict[str, int] = field(default_factory=dict)  # process name -> process group id

    @property
    def path(self) -> Path:
        return registry_dir() / f"{self.pid}-{self.owner.rsplit('/', 1)[-1]}.json"

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(asdict(self), indent=1))
        temporary.replace(self.path)  # atomic: a reader never sees half a record

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def _belongs(pid: int, run_dir: str) -> bool:
    """Does this process belong to that run? (A pid the kernel gave to someone else since must not be killed.)"""
    marker = run_dir.encode()
    for name in ("cmdline", "environ"):
        try:
            if marker in Path(f"/proc/{pid}/{name}").read_bytes():
                return True
        except OSError:
            continue
    return False


def stop_group(pgid: int, run_dir: str, grace: float = 5.0) -> bool:
    """Stop a recorded process group if its processes still belong to the run; True if something was stopped."""
    own = [pid for pid in members(pgid) if _belongs(pid, run_dir)]
    if not own:
        return False
    for signum in (signal.SIGCONT, signal.SIGTERM):  # a paused process cannot act on SIGTERM
        for pid in own:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in members(pgid):
        if _belongs(pid, run_dir):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return True


def cleanup_dead(progress: Callable[[str], None] = lambda message: None) -> list[tuple[str, str]]:
    """Stop what runs whose harness died left behind; returns (run directory, what was done) per run cleaned."""
    cleaned = []
    directory = registry_dir()
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            record = RunRecord(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            path.unlink(missing_ok=True)  # a torn record of a run that died writing it
            continue
        if owner_alive(record.owner) is not False:
            continue  # alive, or started in another PID namespace: not ours to judge
        stopped = [name for name, pgid in sorted(record.groups.items()) if stop_group(pgid, record.run_dir)]
        record.remove()
        line = (f"run {record.run_dir} (pid {record.pid}) had died: stopped {', '.join(stopped)}" if stopped
                else f"run {record.run_dir} (pid {record.pid}) had died: nothing of it was still running")
        progress(line)
        cleaned.append((record.run_dir, line))
    try:
        from . import images
        from .containers import remove_leftovers

        client = images.docker_client(timeout=5)
    except Exception:
        return cleaned  # no engine: no containers to clean
    for name in remove_leftovers(client, progress):
        cleaned.append(("", f"removed container {name} of a dead run"))
    return cleaned
