"""Verdicts: their names, their order, how they combine and the exit code each one gives. The one owner of these;
the checks (chaos/checks/), the report (chaos/report/) and the command line (chaos/cli.py) import them from here.

Worst first: FAILED > UNKNOWN > HANG > NODATA > SKIPPED > PASSED; a combined verdict is the worst of its parts
(`worst`).
UNKNOWN is the environment failing (an `error` record, or a check that raised): never reported as a job failure, but
a FAILED check still wins. HANG is a job that made no progress at all after the first fault. NODATA is a check with
nothing to judge: never PASSED. SKIPPED is an arm that was deliberately not run, with the reason (a fault that cannot
act on a target: a process fault with no hook, a network fault with no proxy in the path; docs/targets.md): it ranks
below every verdict that says something is broken (a broken environment or a failed check still wins) and above
PASSED, so a run of PASSED and SKIPPED arms is SKIPPED, never PASSED, and exits 6, not 0. An arm is SKIPPED by a
`skipped` record in its history (chaos/checks/arm.py). INTERRUPTED is a whole run cut short (run.json status
`interrupted`), and an arm cut short by it (an `interrupted` record in its history, or a history that ends before
the arm stopped its job): such an arm is never PASSED, whatever its checks measured. It is never a check's verdict;
it ranks between NODATA and SKIPPED (DISPLAY_ORDER), so a FAILED arm that did finish still fails its experiment.
"""
from __future__ import annotations

from collections.abc import Iterable

from . import errors

FAILED, UNKNOWN, HANG, NODATA, SKIPPED, PASSED = "FAILED", "UNKNOWN", "HANG", "NODATA", "SKIPPED", "PASSED"
INTERRUPTED = "INTERRUPTED"

VERDICTS = (FAILED, UNKNOWN, HANG, NODATA, SKIPPED, PASSED)  # worst first: what a check or an arm can be
# Worst first with a run's INTERRUPTED among them (cut short ranks above a pass): the order to list verdicts in.
DISPLAY_ORDER = (FAILED, UNKNOWN, HANG, NODATA, INTERRUPTED, SKIPPED, PASSED)
RANK = {verdict: rank for rank, verdict in enumerate(DISPLAY_ORDER)}

# The exit code of `chaos run`, `chaos check` and the other commands that judge: one per verdict (chaos/errors.py).
EXIT = {PASSED: errors.PASSED, FAILED: errors.FAILED, UNKNOWN: errors.ENVIRONMENT, HANG: errors.HANG,
        NODATA: errors.NODATA, SKIPPED: errors.SKIPPED, INTERRUPTED: errors.INTERRUPTED}


def worst(verdicts: Iterable[str], default: str = NODATA) -> str:
    """The worst verdict (FAILED > UNKNOWN > HANG > NODATA > INTERRUPTED > SKIPPED > PASSED); `default` when there
    is none."""
    found = list(verdicts)
    for verdict in found:
        if verdict not in RANK:
            raise ValueError(f"verdict {verdict!r} is not one of {', '.join(DISPLAY_ORDER)}")
    return min(found, key=RANK.__getitem__) if found else default


def exit_code(verdict: str) -> int:
    """The process exit code for a run's verdict; an unknown verdict exits as FAILED."""
    return EXIT.get(verdict, errors.FAILED)
