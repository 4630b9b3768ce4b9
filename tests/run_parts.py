"""`make test`'s pytest: the tests in two sessions, so the machine's two cores are used where that is safe.

1. shared: every test not marked `alone`, SHARED_WORKERS test files at a time (pytest-xdist `-n`). Unit tests, and
   integration tests whose checks are outcomes (exactly once, a repair, a clean teardown), not timings: each starts
   its own stack on its own ports, so several side by side share nothing but the CPU and memory.
2. alone: the tests marked `alone`, whose verdicts carry timing bounds (the smoke's recoveries, a target run's
   recovery), with nothing beside them; the smoke on the lanes its suite file names (experiments/suites/smoke.yaml).

    python -m tests.run_parts [PYTEST ARGS...]     # the arguments go to both sessions (-k, -m, paths, ...)

`make test` passes `--deselect-slow` (tests/conftest.py: the tests marked `slow` are left out); `make test-all` not.

A session that selects nothing (pytest's exit 5) is no failure: `-k 'kafka-broker-disconnect and hardened'` selects
only smoke items. Exit: the first session's failure code, else the second's, 5 when neither selected a test, else
0. Ctrl-C (or SIGTERM) stops the running session through its own interrupt path, which tears its stacks down, and
the second does not start.
"""
from __future__ import annotations

import signal
import subprocess
import sys

NOTHING_SELECTED = 5
INTERRUPTED = 2
# Test files the shared session runs at once. Its integration tests mostly wait (for Spark batches, fault windows, a
# restart): two workers kept ~1.2 of the 2 cores busy (`time make test` on 9914a1f: 42 CPU-minutes in 32.4), about
# 0.6 a worker, so three fill the cores. A fourth would ask for ~2.4: the session cannot end sooner than its
# CPU-seconds over 2 cores, and every test's waits would stretch against its timeouts. (`-n 3` measured slower than
# `-n 2` on 2026-11-27, when xdist still handed the long one-test modules out last: docs/lab-notes.md.) Memory is no
# bound: a stack is 855 MiB resident idle (docs/figures.md) plus a job's driver and executor (1 GiB heap each).
SHARED_WORKERS = 3
# loadfile: a module's tests in one worker, so a module-scoped stack (and a module's steps in order) is set up once;
# in the order the workers collected them, longest first (tests/module_order.py), not reordered by their test counts.
PARTS = (("shared", ["-n", str(SHARED_WORKERS), "--dist", "loadfile", "--no-loadscope-reorder"]), ("alone", []))


def run_part(part: str, options: list[str], args: list[str]) -> tuple[int, bool]:
    """One pytest session; its exit code and whether it was interrupted (Ctrl-C or SIGTERM on this runner)."""
    command = [sys.executable, "-m", "pytest", "--chaos-part", part, *options, *args]
    print(f"[tests] {part} part: {' '.join(command[1:])}", flush=True)
    child = subprocess.Popen(command)
    interrupted = []

    def forward(signum, _frame):
        # Ctrl-C reaches the child from the terminal too; SIGTERM (a CI timeout) only this runner: pass it on.
        interrupted.append(signum)
        if signum == signal.SIGTERM and child.poll() is None:
            child.send_signal(signal.SIGTERM)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = child.wait()  # a handled signal does not end the wait (PEP 475): the child ends itself
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return code, bool(interrupted) or code == INTERRUPTED


def main(args: list[str]) -> int:
    codes = []
    for part, options in PARTS:
        code, interrupted = run_part(part, options, args)
        if interrupted:
            return code or INTERRUPTED
        codes.append(code)
    return combined(codes)


def combined(codes: list[int]) -> int:
    """The exit code of the sessions together: the first failure; 5 only when no session selected a test."""
    if all(code == NOTHING_SELECTED for code in codes):
        return NOTHING_SELECTED  # as pytest says it: the arguments selected no test at all
    return next((code for code in codes if code not in (0, NOTHING_SELECTED)), 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
