"""A stored run judged again from its files: every arm's result.json and results.json rewritten, then its report
(junit.xml, index.html) drawn from the new verdicts, so no file of it is left stale. The one path for `chaos run` as
a run ends, `chaos check RUN_DIR`, and `chaos clean` closing a run whose harness was killed.

An interrupted run (Ctrl-C, SIGTERM) must end within seconds: its arm cut short stored its outputs unjudged
(judge-later.json beside sessions.jsonl, chaos/arm/steps.py store_outputs), the run writes its verdicts and
junit.xml only, and the next `chaos check` judges those outputs (judge_left) and draws the report.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .checks.judge import judge_run
from .store import JUDGE_LATER_FILE, SESSIONS_FILE, SPEC_FILE, RunStore, write_oracle


def rejudge(run_dir: Path, say: Callable[[str], None], interrupted: bool = False) -> dict[str, Any]:
    """Judge the run in `run_dir` (each arm's result.json written), store results.json, write its report; returns
    results.json's content. `say` gets the report's one-line failures and the flaky arms. `interrupted`: the run
    is on its way out of an interrupt: verdicts and junit.xml only, the rest left to `chaos check`."""
    if not interrupted:
        judge_left(run_dir, say)
    results = judge_run(run_dir)
    RunStore(run_dir).write_results(results)
    if interrupted:
        write_report(run_dir, say, page=False)
        say(f"interrupted: the outputs and the report are judged by: chaos check {run_dir}")
        return results
    write_report(run_dir, say)
    return results


def judge_left(run_dir: Path, say: Callable[[str], None]) -> int:
    """Judge every arm whose outputs an interrupt left unjudged: oracle.json from its ledger.jsonl, its
    sessions.jsonl and progress.jsonl, by the session rules its spec.json gives its profile (the topic read-back
    is gone with the stack: oracle.json says so). Returns how many arms were judged."""
    from .arm.config import arm_config
    from .arm.job import judge_arm_outputs
    from .spec import ExperimentSpec

    judged = 0
    for note_path in sorted(run_dir.glob(f"*/*/{JUDGE_LATER_FILE}")):
        arm_dir = note_path.parent
        try:
            note = json.loads(note_path.read_text())
            spec = ExperimentSpec.from_dict(json.loads((arm_dir.parent / SPEC_FILE).read_text()),
                                            where=f"{arm_dir.parent.name}/{SPEC_FILE}")
            report, _rows = judge_arm_outputs(arm_dir, arm_config(spec, arm_dir.name), _stored_sessions(arm_dir),
                                              {}, {"topic_audit": note.get("topic_audit")})
        except Exception as exc:  # noqa: BLE001 - left as it was: its lost/duplicated stay NODATA, and say why
            say(f"{arm_dir.relative_to(run_dir)}: its outputs could not be judged: {type(exc).__name__}: {exc}")
            continue
        write_oracle(arm_dir, {**report, "drained": note.get("drained"), "judged_by": "chaos check"})
        note_path.unlink()
        judged += 1
        say(f"{arm_dir.relative_to(run_dir)}: outputs judged (left by an interrupt)")
    return judged


def _stored_sessions(arm_dir: Path) -> Iterator[dict]:
    with open(arm_dir / SESSIONS_FILE) as rows:
        for line in rows:
            if line.strip():
                yield json.loads(line)


def write_report(run_dir: Path, say: Callable[[str], None], page: bool = True) -> None:
    try:
        from . import report
    except ImportError as exc:
        say(f"report not written: {exc}")
        return
    # junit.xml first and on its own: a page that cannot be drawn (its plots) must not take the CI's file with it.
    writers = ((report.write_junit, "junit.xml"), (report.write_report, "index.html"))
    for write, what in writers if page else writers[:1]:
        try:
            write(run_dir)
        except Exception as exc:  # the results are already stored; a report failure must not hide them
            say(f"{what} not written: {type(exc).__name__}: {exc}")
    try:  # a pre-release run repeats the suite: the arms whose verdicts differ, on the console too
        for line in report.flaky_lines(json.loads(RunStore(run_dir).results_file.read_text())):
            say(line)
    except (OSError, ValueError):
        pass
