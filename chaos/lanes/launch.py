"""`chaos run --lanes N`: a run's experiments side by side, one stack per lane.

Each lane is a child process (`chaos lane RUN_DIR --lane lane-I ...`) that runs experiments one after another on its
own stack, in the same run directory: experiment directories are distinct, and the lane's stack files and logs go
under stack/lane-I/ and logs/lane-I/ (infra/stack.py), so every path a history records stays relative to the run
directory. The parent writes run.json and every spec.json before the lanes start, waits, and judges the whole run
once they end, as a one-lane run does. A lane is a process, not a thread, so each handles Ctrl-C and SIGTERM with the
same teardown as a plain run.

Two rules, each from a measured failure (docs/lab-notes.md, "Lanes" and "The nightly on two lanes, again"):
- The one-node experiments go through a shared queue (chaos/lanes/queue.py): a free lane takes the next one, and
  experiments that restart processes run one at a time, never beside each other.
- The experiments of a multi-node topology (`cluster`) run after the one-node lanes end, in one lane of their own,
  alone: two cluster stacks side by side (six brokers and two jobs on two cores) starved the controls' batches
  (12-25 % of steady-state intervals advanced), and the one-node arms that ran beside one cluster stack failed their
  restarts and catch-ups.
Running side by side shares the machine's cores: whether verdicts and recovery times hold is measured, not assumed.
"""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from infra.stack import signals_deferred

from ..spec import ExperimentSpec
from ..spec.fields import LIMITS
from .queue import offered_order, queue_dir, write_queue

MAX_LANES = int(LIMITS["lanes"])
STOP_GRACE_S = 180.0  # a lane's teardown after Ctrl-C: heals, job stop, stack close (measured 20-60 s)

Planned = Sequence[tuple[str, ExperimentSpec]]


def split(planned: Planned) -> tuple[list[tuple[str, ExperimentSpec]], list[tuple[str, ExperimentSpec]]]:
    """(the one-node experiments, for the queue; those of other topologies, to run alone after them), each in the
    run's order."""
    return ([entry for entry in planned if entry[1].topology == "single"],
            [entry for entry in planned if entry[1].topology != "single"])


def run_lanes(run_dir: Path, planned: Planned, lanes: int, backend: str, arms: list[str] | None,
              say: Callable[[str], None], seconds: Callable[[ExperimentSpec], float]) -> str:
    """Start the lanes, wait for them; the run's status: completed when every lane ended 0, else error (a lane
    that could not start its stack or died). Ctrl-C/SIGTERM reach every lane and the parent waits for their
    teardown. `seconds`: an experiment's planned length (chaos/run.py)."""
    queued, alone = split(planned)
    children: list[tuple[str, subprocess.Popen]] = []
    try:
        if queued:
            count = min(lanes, len(queued))
            items = offered_order(queued, seconds)
            write_queue(queue_dir(run_dir), items, count)
            minutes = sum(item.seconds for item in items) / 60 / count
            restarting = [item.directory for item in items if item.restarts]
            say(f"lanes 1-{count}: {len(items)} one-node experiments from a shared queue (about {minutes:.0f} min); "
                f"one at a time of those that restart processes: {', '.join(restarting) or 'none'}")
            for number in range(1, count + 1):  # each lane's output, lane-prefixed, goes to ours
                command = lane_command(run_dir, f"lane-{number}", backend, arms, queue=True)
                children.append((f"lane-{number}", subprocess.Popen(command)))
            _wait(children)
        if alone:
            lane = f"lane-{len(children) + 1}"
            minutes = sum(seconds(spec) for _, spec in alone) / 60
            say(f"{lane}: {', '.join(directory for directory, _ in alone)} (about {minutes:.0f} min), alone"
                + (", after the one-node lanes" if queued else ""))
            command = lane_command(run_dir, lane, backend, arms, directories=[d for d, _ in alone])
            children.append((lane, subprocess.Popen(command)))
            _wait(children)
    except KeyboardInterrupt:
        _stop(children, say)
        raise
    failed = [(lane, child.returncode) for lane, child in children if child.returncode != 0]
    for lane, code in failed:
        say(f"{lane} ended with exit code {code}: its experiments are judged on what they recorded")
    return "error" if failed else "completed"


def lane_command(run_dir: Path, lane: str, backend: str, arms: list[str] | None, queue: bool = False,
                 directories: Sequence[str] = ()) -> list[str]:
    """`chaos lane`'s command line. The directories come right after RUN_DIR: argparse gives an optional list of
    positionals only what sits next to the first one."""
    return [sys.executable, "-m", "chaos.cli", "lane", str(run_dir), *directories, "--lane", lane,
            "--backend", backend, *(["--arms", ",".join(arms)] if arms else []), *(["--queue"] if queue else [])]


def _wait(children: Sequence[tuple[str, subprocess.Popen]]) -> None:
    while any(child.poll() is None for _, child in children):
        time.sleep(0.5)


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
