"""A child process in its own process group, logging to a file, that can be signalled and stopped.

Each component runs in a new session so one killpg reaches everything it spawned (a Spark worker's
executors, for example), and a Ctrl-C on the terminal reaches only the harness, which then tears the
stack down in order.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


class ManagedProcess:
    def __init__(self, name: str, argv: list[str], log_path: Path, env: dict[str, str] | None = None,
                 cwd: Path | None = None):
        self.name = name
        self.argv = argv
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        # Every process carries its log path (under the run directory) in its environment: that is how a later
        # `chaos clean` and the tests tell a run's processes from others (Toxiproxy's and the Spark master's
        # command lines name nothing of the run) after the harness that started them was killed.
        env = {**(os.environ if env is None else env), "CHAOS_PROCESS_LOG": str(log_path)}
        with open(log_path, "ab") as log:
            self._popen = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                           env=env, cwd=cwd, start_new_session=True)
        self.pid = self._popen.pid
        # Set once a signal that ends processes was sent: an exit after it was asked for, not the process's own.
        self.signalled_to_end = False

    def alive(self) -> bool:
        return self._popen.poll() is None

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    def signal(self, signum: int) -> None:
        """Signal the whole process group (the component and its children)."""
        self._note(signum)
        try:
            os.killpg(self.pid, signum)
        except ProcessLookupError:
            pass

    def signal_leader(self, signum: int) -> None:
        """Signal only the process itself, e.g. a graceful stop of a PySpark driver: its JVM must not get
        the SIGTERM too, or it shuts the SparkContext down under the running query."""
        self._note(signum)
        try:
            os.kill(self.pid, signum)
        except ProcessLookupError:
            pass

    def _note(self, signum: int) -> None:
        # a signal to a process that had already ended by itself asks nothing of it
        if self._popen.poll() is None and signum not in (signal.SIGSTOP, signal.SIGCONT, signal.SIGTSTP, 0):
            self.signalled_to_end = True

    def wait(self, timeout: float | None = None) -> int | None:
        try:
            return self._popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM the group, SIGKILL whatever is left after `grace` seconds; returns when the group is gone."""
        self.signal(signal.SIGCONT)  # a paused process cannot act on SIGTERM
        self.signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while group_alive(self.pid) and time.monotonic() < deadline:
            self._popen.poll()
            time.sleep(0.05)
        if group_alive(self.pid):
            self.signal(signal.SIGKILL)
            while group_alive(self.pid):
                self._popen.poll()
                time.sleep(0.02)
        self._popen.wait()


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie leader keeps the group "alive" until reaped; treat a group of only zombies as gone.
    return any(_state(pid) not in ("Z", None) for pid in members(pgid))


def members(pgid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid:
                members.append(int(entry))
    return members


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def descendants_running(ancestor: int, marker: bytes) -> list[int]:
    """`ancestor` and the processes below it (its children, theirs, ...) whose command line contains `marker`: a
    Spark worker's executors (CoarseGrainedExecutorBackend), a PySpark driver's JVM (SparkSubmit).

    Only the outermost match of each line: a JVM that spawns a process (an executor starting its Python workers) has,
    for a moment before exec, a child with the JVM's command line; that child is not another executor."""
    matches = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker in cmdline:
            chain = _ancestry(int(entry), ancestor)
            if chain is not None:
                matches[int(entry)] = chain
    return sorted(pid for pid, chain in matches.items() if not any(above in matches for above in chain))


def _ancestry(pid: int, ancestor: int) -> list[int] | None:
    """The processes between `pid` (excluded) and `ancestor` (included), or None when pid does not descend from it."""
    chain: list[int] = []
    for _ in range(20):
        if pid == ancestor:
            return chain
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        if pid <= 1:
            return None
        chain.append(pid)
    return None
