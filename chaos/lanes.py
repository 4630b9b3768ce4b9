"""`chaos run --lanes N`: a run's experiments side by side, one stack per lane.

Each lane is a child process (`chaos lane RUN_DIR --lane lane-I DIR...`) that runs its share of the experiments one
after another on its own stack, in the same run directory: experiment directories are distinct, and the lane's
stack files and logs go under stack/lane-I/ and logs/lane-I/ (infra/stack.py), so every path a history records
stays relative to the run directory. The parent writes run.json and every spec.json before the lanes start, waits,
and judges the whole run once they end, as a one-lane run does. A lane is a process, not a thread, so each handles
Ctrl-C and SIGTERM with the same teardown as a plain run.

Experiments go to lanes by their planned length, longest first, each to the lane with the least planned time so
far (within a lane they keep the run's order). Running side by side shares the machine's cores: whether verdicts and
recovery times hold is measured, not assumed (docs/benchmarks.md, "Lanes").
"""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

from infra.stack import signals_deferred

from .spec import ExperimentSpec

MAX_LANES = 4
STOP_GRACE_S = 180.0  # a lane's teardown after Ctrl-C: heals, job stop, stack close (measured 20-60 s)


def partition(planned: Sequence[tuple[str, ExperimentSpec]], lanes: int,
              seconds: Callable[[ExperimentSpec], float]) -> list[list[tuple[str, ExperimentSpec]]]:
    """Longest planned experiment first, each to the lane with the least planned time; every lane keeps the run's
    order. Empty lanes are dropped.

    The experiments of a multi-node topology (`cluster`) stay together in one lane, as one unit: two cluster stacks
    side by side (six brokers and two jobs on this machine's two cores) starved the controls' batches (measured:
    12-25 % of steady-state intervals advanced, where one lane gave the same arms a steady cadence), and one lane
    starts that stack once."""
    units: list[list[int]] = []
    together: dict[str, list[int]] = {}
    for index, (_directory, spec) in enumerate(planned):
        if spec.topology == "single":
            units.append([index])
        elif spec.topology in together:
            together[spec.topology].append(index)
        else:
            together[spec.topology] = [index]
            units.append(together[spec.topology])

    def length(unit: list[int]) -> float:
        return sum(seconds(planned[i][1]) for i in unit)

    loads = [0.0] * lanes
    chosen: list[list[int]] = [[] for _ in range(lanes)]
    for unit in sorted(units, key=lambda u: -length(u)):
        lane = min(range(lanes), key=lambda i: (loads[i], i))
        loads[lane] += length(unit)
        chosen[lane].extend(unit)
    return [[planned[i] for i in sorted(indexes)] for indexes in chosen if indexes]


def run_lanes(run_dir: Path, planned: Sequence[tuple[str, ExperimentSpec]], lanes: int, backend: str,
              arms: list[str] | None, say: Callable[[str], None], seconds: Callable[[ExperimentSpec], float]) -> str:
    """Start the lanes, wait for them; the run's status: completed when every lane ended 0, else error (a lane
    that could not start its stack or died). Ctrl-C/SIGTERM reach every lane and the parent waits for their
    teardown. `seconds`: an experiment's planned length (chaos/run.py)."""
    groups = partition(planned, lanes, seconds)
    children: list[tuple[str, subprocess.Popen]] = []
    try:
        for number, group in enumerate(groups, 1):
            lane = f"lane-{number}"
            minutes = sum(seconds(spec) for _, spec in group) / 60
            say(f"{lane}: {', '.join(directory for directory, _ in group)} (about {minutes:.0f} min)")
            command = [sys.executable, "-m", "chaos.cli", "lane", str(run_dir), "--lane", lane, "--backend", backend,
                       *(["--arms", ",".join(arms)] if arms else []), *(directory for directory, _ in group)]
            children.append((lane, subprocess.Popen(command)))  # its output, lane-prefixed, goes to ours
        while any(child.poll() is None for _, child in children):
            time.sleep(0.5)
    except KeyboardInterrupt:
        _stop(children, say)
        raise
    failed = [(lane, child.returncode) for lane, child in children if child.returncode != 0]
    for lane, code in failed:
        say(f"{lane} ended with exit code {code}: its experiments are judged on what they recorded")
    return "error" if failed else "completed"


def _stop(children: Sequence[tuple[str, subprocess.Popen]], say: Callable[[str], None]) -> None:
    """Every lane tears down as a plain run does on Ctrl-C; the parent waits (a second Ctrl-C is held)."""
    with signals_deferred():
        deadline = time.monotonic() + 3.0  # a terminal's Ctrl-C reached the lanes too: let them start on their own
        while time.monotonic() < deadline and any(child.poll() is None for _, child in children):
            time.sleep(0.2)
        for _lane, child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        say("stopping the lanes: every fault healed, every process stopped")
        deadline = time.monotonic() + STOP_GRACE_S
        while time.monotonic() < deadline and any(child.poll() is None for _, child in children):
            time.sleep(0.5)
        killed = False
        for lane, child in children:
            if child.poll() is None:
                say(f"{lane} did not stop within {STOP_GRACE_S:.0f} s: killed")
                child.kill()
                child.wait()
                killed = True
        if killed:  # what a killed lane started is stopped by its run record, as for any run killed with SIGKILL
            from infra import registry

            registry.cleanup_dead(say)
