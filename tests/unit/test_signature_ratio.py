"""A control's log signature stands for its incident only against the hardened arm's count of the same line
(chaos/checks/logs.py signature_ratio, applied by chaos/checks/judge.py)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from chaos.checks.judge import judge_run
from chaos.checks.logs import SIGNATURE_RATIO, signature_ratio
from chaos.checks.timeline import timeline

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "20261123T081854-smoke-13866"
PATTERN = "boom \\d+"


def _story(lines: int, watch: bool = True) -> list[dict]:
    records: list[dict] = [{"t": 0.0, "type": "watch", "patterns": [PATTERN]}] if watch else []
    records += [{"t": 1.0, "type": "phase", "name": "steady", "boundary": "start"},
                {"t": 10.0, "type": "phase", "name": "inject", "boundary": "start"},
                {"t": 10.0, "type": "phase", "name": "steady", "boundary": "end"}]
    records += [{"t": 11.0 + i, "type": "log", "signature": PATTERN, "source": "logs/a.log", "line": i + 1,
                 "text": f"boom {i}", "count": i + 1} for i in range(lines)]
    records += [{"t": 40.0, "type": "phase", "name": "inject", "boundary": "end"}]
    return records


def _ratio(control: int, hardened: int, watch: bool = True):
    return signature_ratio(timeline(_story(control)), timeline(_story(hardened, watch)),
                           {PATTERN} if watch else set(), [PATTERN])


def test_a_signature_the_hardened_arm_never_logs_stands():
    check = _ratio(5, 0)
    assert check.verdict == "PASSED" and "never" in check.message


def test_a_signature_the_hardened_arm_logs_as_often_is_no_evidence():
    check = _ratio(5, 4)
    assert check.verdict == "FAILED" and "logs 'boom \\\\d+' too" in check.message
    assert check.measured == "5 vs 4 lines"


def test_the_stated_ratio_is_the_boundary():
    assert SIGNATURE_RATIO == 3.0
    assert _ratio(9, 3).verdict == "PASSED"
    assert _ratio(8, 3).verdict == "FAILED"


def test_a_signature_the_hardened_arm_did_not_look_for_is_nodata():
    assert _ratio(5, 0, watch=False).verdict == "NODATA"


def _copy_with_hardened_lines(tmp_path: Path, lines: int | None) -> Path:
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    naive = json.loads((run / "slow-s3-put" / "spec.json").read_text())
    pattern = next(a for a in naive["arms"] if a["profile"] == "naive")["targets"]["logs"]["expected"][0]
    history = run / "slow-s3-put" / "hardened" / "history.jsonl"
    records = [json.loads(line) for line in history.read_text().splitlines()]
    if lines is not None:
        first_t = records[0]["t"]
        inject = next(r["t"] for r in records if r.get("name") == "inject" and r.get("boundary") == "start")
        records.append({"t": first_t, "type": "watch", "patterns": [pattern]})
        records += [{"t": inject + 1 + i, "type": "log", "signature": pattern, "source": "logs/h.log",
                     "line": i + 1, "text": "falling behind", "count": i + 1} for i in range(lines)]
        records.sort(key=lambda r: r["t"])
    history.write_text("".join(json.dumps(r) + "\n" for r in records))
    return run


def _naive(results: dict) -> dict:
    experiment = next(e for e in results["experiments"] if e["name"] == "slow-s3-put")
    return next(a for a in experiment["arms"] if a["profile"] == "naive")


def test_the_control_fails_when_the_hardened_arm_logs_its_signature_too(tmp_path):
    naive = _naive(judge_run(_copy_with_hardened_lines(tmp_path, 2)))
    check = next(c for c in naive["checks"] if c["name"] == "signature_ratio")
    assert check["verdict"] == "FAILED" and naive["verdict"] == "FAILED"


def test_the_control_stands_when_the_hardened_arm_never_logs_it(tmp_path):
    naive = _naive(judge_run(_copy_with_hardened_lines(tmp_path, 0)))
    check = next(c for c in naive["checks"] if c["name"] == "signature_ratio")
    assert check["verdict"] == "PASSED" and naive["verdict"] == "PASSED"


def test_runs_recorded_before_arms_watched_each_other_are_judged_as_before(tmp_path):
    naive = _naive(judge_run(_copy_with_hardened_lines(tmp_path, None)))
    assert "signature_ratio" not in [c["name"] for c in naive["checks"]]
