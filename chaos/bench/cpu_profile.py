"""`chaos bench cpu -- COMMAND ...`: where a command's CPU went, by kind of process, read from /proc once a second.

The smoke is CPU-bound on two cores (docs/lab-notes.md): its wall cannot go below the CPU work it does divided by
the cores. This measures that work while the command runs (a suite, a test session): CPU seconds per kind of
process (the job's driver and executor JVMs, the naive job's pandas workers, the harness, the broker, MinIO, the
proxies), how busy the machine was (/proc/stat), and what starting a JVM costs: each driver's and executor's CPU in
its first STARTUP_S seconds of life, against what it used after, per second alive.

Only the command and its descendants are counted (a process whose parent is counted when it is first seen), so
another run beside it, or an editor, is not. A process seen only between two samples is missed; one seen late
loses the CPU it used before (under a second); one whose parent ended before it was seen is not counted.
On the containers backend the servers run in containers, children of the Docker engine rather than of the command:
they are not counted there (the machine's busy figure still includes them). Profile the local backend for the full
breakdown.
"""
from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

STARTUP_S = 20.0  # a driver's launch to its first fast batch (docs/lab-notes.md: 21.5 s with class-data archives)
PROC = Path("/proc")

# (kind, test on the command line), first match wins; JVMs by their main class (a driver's classpath names Kafka
# jars too, so "kafka" alone would not tell the broker from a job)
KINDS: tuple[tuple[str, Callable[[list[str]], bool]], ...] = (
    # spark-submit's own short JVM that builds the driver's command line: it names SparkSubmit as an argument, and
    # counted as a driver it made ~12 of a smoke's "driver starts" that were none
    ("spark launcher", lambda argv: "org.apache.spark.launcher.Main" in argv),
    ("spark executor", lambda argv: "org.apache.spark.executor.CoarseGrainedExecutorBackend" in argv),
    ("spark driver", lambda argv: "org.apache.spark.deploy.SparkSubmit" in argv),
    ("spark master/worker", lambda argv: any(a.startswith("org.apache.spark.deploy.") for a in argv)),
    ("kafka broker", lambda argv: "kafka.Kafka" in argv),
    ("job (python)", lambda argv: _module(argv) == "job"),
    ("naive job's pandas workers", lambda argv: _module(argv) in ("pyspark.daemon", "pyspark.worker")),
    ("minio", lambda argv: bool(argv) and Path(argv[0]).name.startswith("minio")),
    ("toxiproxy", lambda argv: bool(argv) and Path(argv[0]).name.startswith("toxiproxy")),
    ("s3 proxy", lambda argv: bool(argv) and Path(argv[0]).name.startswith("s3proxy")),
    ("harness (python)", lambda argv: _module(argv) in ("chaos.cli", "pytest", "xdist")
     or any(Path(a).name in ("chaos", "pytest") for a in argv[:2])),
)
STARTING = ("spark driver", "spark executor")  # the kinds whose start-up cost is split out


def _module(argv: list[str]) -> str | None:
    """The module of `python -m MODULE ...`, else None."""
    return argv[argv.index("-m") + 1] if "-m" in argv[:-1] else None


def kind_of(argv: list[str]) -> str:
    """The kind of a process, from its command line (argv as /proc/PID/cmdline gives it)."""
    for kind, matches in KINDS:
        if matches(argv):
            return kind
    return "other"


@dataclass
class Seen:
    """One process as sampled: its kind, when it was first seen and its CPU seconds then, at STARTUP_S of life
    and at the last sample."""
    kind: str
    first_at: float
    first_cpu: float
    last_at: float
    last_cpu: float
    cpu_at_startup: float | None = None


@dataclass
class Profile:
    root: int  # the command's pid: it and its descendants are counted
    seen: dict[int, Seen] = field(default_factory=dict)
    other: set[int] = field(default_factory=set)  # not the command's: never counted

    def members(self, parents: dict[int, int]) -> set[int]:
        """Of the processes sampled now (pid: parent pid), the command's: the command, those counted before and, to
        any depth, the children of those. The others are never counted (decided once per pid)."""
        counted = {pid for pid in parents if pid == self.root or pid in self.seen}
        while True:
            adopted = {pid for pid, parent in parents.items()
                       if parent in counted and pid not in counted and pid not in self.other}
            if not adopted:
                break
            counted |= adopted
        self.other |= set(parents) - counted
        return counted

    def record(self, now: float, pid: int, argv: list[str] | None, cpu_s: float) -> None:
        """One sample of one counted process (argv read only for a pid not seen before)."""
        entry = self.seen.get(pid)
        if entry is None:
            self.seen[pid] = Seen(kind_of(argv or []), now, cpu_s, now, cpu_s)
            return
        if entry.cpu_at_startup is None and now - entry.first_at >= STARTUP_S:
            entry.cpu_at_startup = cpu_s
        entry.last_at, entry.last_cpu = now, cpu_s


def summarize(profile: Profile, wall_s: float, busy_fraction: float | None, cores: int) -> dict:
    """The figures of a profile (pure: re-computable from a stored one)."""
    by_kind: dict[str, float] = {}
    count: dict[str, int] = {}
    startup: dict[str, dict] = {}
    for entry in profile.seen.values():
        by_kind[entry.kind] = by_kind.get(entry.kind, 0.0) + entry.last_cpu - entry.first_cpu
        count[entry.kind] = count.get(entry.kind, 0) + 1
        if entry.kind in STARTING:
            figures = startup.setdefault(entry.kind, {"starts": 0, "startup_cpu_s": 0.0, "after_cpu_s": 0.0,
                                                      "after_alive_s": 0.0})
            figures["starts"] += 1
            if entry.cpu_at_startup is None:  # ended within its start-up: all of it was start-up
                figures["startup_cpu_s"] += entry.last_cpu - entry.first_cpu
            else:
                figures["startup_cpu_s"] += entry.cpu_at_startup - entry.first_cpu
                figures["after_cpu_s"] += entry.last_cpu - entry.cpu_at_startup
                figures["after_alive_s"] += entry.last_at - entry.first_at - STARTUP_S
    total = sum(by_kind.values())
    for figures in startup.values():
        figures["startup_cpu_s_each"] = round(figures["startup_cpu_s"] / figures["starts"], 1)
        figures["after_cores"] = (round(figures["after_cpu_s"] / figures["after_alive_s"], 2)
                                  if figures["after_alive_s"] else None)
        for key in ("startup_cpu_s", "after_cpu_s", "after_alive_s"):
            figures[key] = round(figures[key])
    machine_cpu_s = busy_fraction * cores * wall_s if busy_fraction is not None else None
    return {
        "wall_s": round(wall_s, 1), "cores": cores,
        "machine_busy": None if busy_fraction is None else round(busy_fraction, 3),
        "machine_cpu_s": None if machine_cpu_s is None else round(machine_cpu_s),
        # the wall this much CPU work needs with every core busy all the time
        "floor_s": None if machine_cpu_s is None else round(machine_cpu_s / cores, 1),
        "counted_cpu_s": round(total),
        "cpu_s_by_kind": {kind: round(seconds) for kind, seconds in
                          sorted(by_kind.items(), key=lambda item: -item[1])},
        "processes_by_kind": count,
        "startup": startup,
    }


def cpu_by_process(kinds: Iterable[str] = STARTING) -> dict[int, tuple[str, float]]:
    """The processes of `kinds` alive now: pid -> (kind, CPU seconds so far). For a benchmark that reads a job's
    JVMs at a mark (`chaos bench startup`); a process that ends while read is left out."""
    wanted, ticks = set(kinds), os.sysconf("SC_CLK_TCK")
    found: dict[int, tuple[str, float]] = {}
    for pid, proc_dir in _processes():
        try:
            argv = _argv(proc_dir)
            kind = kind_of(argv)
            if kind in wanted:
                found[pid] = (kind, _stat(proc_dir, ticks)[1])
        except (OSError, IndexError, ValueError):  # ended while read
            continue
    return found


def _processes() -> Iterable[tuple[int, Path]]:
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            yield int(entry.name), entry


def _argv(proc_dir: Path) -> list[str]:
    """A process's command line, as /proc/PID/cmdline gives it (NUL-separated)."""
    return (proc_dir / "cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]


def _stat(proc_dir: Path, ticks: int) -> tuple[int, float]:
    """(parent pid, CPU seconds: utime + stime) of a process."""
    fields = (proc_dir / "stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / ticks


def _machine_ticks() -> tuple[int, int]:
    """(all ticks, idle + iowait ticks) since boot."""
    values = [int(v) for v in (PROC / "stat").read_text().splitlines()[0].split()[1:9]]
    return sum(values), values[3] + values[4]


def profile_command(command: list[str], say: Callable[[str], None] = print) -> tuple[int, dict]:
    """Run `command` (its output passes through) while sampling every process once a second; (its exit code, the
    figures). Ctrl-C reaches the command through the terminal; it is waited for, and the figures cover its
    teardown too."""
    ticks = os.sysconf("SC_CLK_TCK")
    started, machine_before = time.monotonic(), _machine_ticks()
    child = subprocess.Popen(command)
    profile = Profile(root=child.pid)
    try:
        while True:
            _sample(profile, ticks)
            if child.poll() is not None:
                break
            time.sleep(1.0)
    except KeyboardInterrupt:
        say("bench cpu: interrupted; waiting for the command to stop")
        child.wait()
    machine_after = _machine_ticks()
    all_ticks, idle = (after - before for after, before in zip(machine_after, machine_before))
    busy = 1 - idle / all_ticks if all_ticks else None
    code = child.returncode if child.returncode >= 0 else 128 - child.returncode  # ended by a signal: as a shell says
    return code, summarize(profile, time.monotonic() - started, busy, os.cpu_count() or 1)


def _sample(profile: Profile, ticks: int) -> None:
    now = time.monotonic()
    sampled: dict[int, tuple[Path, int, float]] = {}
    for pid, proc_dir in _processes():
        try:
            sampled[pid] = (proc_dir, *_stat(proc_dir, ticks))
        except (OSError, IndexError, ValueError):  # ended while read
            continue
    for pid in profile.members({pid: parent for pid, (_, parent, _) in sampled.items()}):
        proc_dir, _parent, cpu_s = sampled[pid]
        argv = None
        if pid not in profile.seen:
            try:
                argv = _argv(proc_dir)
            except OSError:
                argv = []
        profile.record(now, pid, argv, cpu_s)


def print_profile(figures: dict) -> None:
    if figures["machine_busy"] is None:
        print(f"wall {figures['wall_s']:.0f} s: too short to measure")
        return
    print(f"wall {figures['wall_s'] / 60:.1f} min on {figures['cores']} cores; machine busy "
          f"{figures['machine_busy']:.0%}: {figures['machine_cpu_s']} CPU-s, which need {figures['floor_s'] / 60:.1f} "
          f"min with every core busy")
    print(f"counted by process ({figures['counted_cpu_s']} CPU-s):")
    for kind, seconds in figures["cpu_s_by_kind"].items():
        share = seconds / figures["counted_cpu_s"] if figures["counted_cpu_s"] else 0
        print(f"  {kind:<28} {seconds:>6} CPU-s  {share:>4.0%}  ({figures['processes_by_kind'][kind]} processes)")
    for kind, start in figures["startup"].items():
        print(f"  {kind} starts: {start['starts']}, their first {STARTUP_S:.0f} s {start['startup_cpu_s']} CPU-s "
              f"({start['startup_cpu_s_each']} each); after that {start['after_cores']} cores each while alive")
