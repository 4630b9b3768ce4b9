"""A stored run judged again from its files: every arm's result.json and results.json rewritten, then its report
(junit.xml, index.html) drawn from the new verdicts, so no file of it is left stale. The one path for `chaos run` as
a run ends, `chaos check RUN_DIR`, and `chaos clean` closing a run whose harness was killed."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .checks.judge import judge_run
from .store import RunStore


def rejudge(run_dir: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """Judge the run in `run_dir` (each arm's result.json written), store results.json, write its report; returns
    results.json's content. `say` gets the report's one-line failures and the flaky arms."""
    results = judge_run(run_dir)
    RunStore(run_dir).write_results(results)
    write_report(run_dir, say)
    return results


def write_report(run_dir: Path, say: Callable[[str], None]) -> None:
    try:
        from . import report
    except ImportError as exc:
        say(f"report not written: {exc}")
        return
    # junit.xml first and on its own: a page that cannot be drawn (its plots) must not take the CI's file with it.
    for write, what in ((report.write_junit, "junit.xml"), (report.write_report, "index.html")):
        try:
            write(run_dir)
        except Exception as exc:  # the results are already stored; a report failure must not hide them
            say(f"{what} not written: {type(exc).__name__}: {exc}")
    try:  # a pre-release run repeats the suite: the arms whose verdicts differ, on the console too
        for line in report.flaky_lines(json.loads(RunStore(run_dir).results_file.read_text())):
            say(line)
    except (OSError, ValueError):
        pass
