"""The SKIPPED verdict (chaos/verdicts.py, issue 19): an arm deliberately not run, with its reason (a fault that
cannot act on a target). It is never PASSED: it ranks above PASSED and below every verdict that says something is
broken; a run of PASSED and SKIPPED arms is SKIPPED and exits 6; junit.xml shows it as skipped with the reason, and so
does the report page."""
from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from chaos import errors
from chaos.checks.arm import judge_records, skipped_reason
from chaos.commands.runs import check
from chaos.history import HistoryWriter, read_history
from chaos.spec import load_stored
from chaos.verdicts import DISPLAY_ORDER, EXIT, SKIPPED, VERDICTS, exit_code, worst
from tests.unit.fixture_runs import passed_copy

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "20261123T085731-smoke-464"  # passed_copy: PASSED
REASON = "process.kill on broker: the target has no hook for broker (docs/targets.md)"


@pytest.mark.parametrize("others,expected", [
    (["PASSED"], "SKIPPED"), (["PASSED", "PASSED"], "SKIPPED"), (["NODATA"], "NODATA"), (["HANG"], "HANG"),
    (["UNKNOWN", "PASSED"], "UNKNOWN"), (["FAILED"], "FAILED")])
def test_skipped_is_never_passed_and_a_broken_environment_outranks_it(others, expected):
    assert worst([SKIPPED, *others]) == expected
    assert worst(others + [SKIPPED]) == expected


def test_skipped_has_its_own_place_and_exit_code():
    assert VERDICTS.index("NODATA") < VERDICTS.index(SKIPPED) < VERDICTS.index("PASSED")
    assert DISPLAY_ORDER.index("INTERRUPTED") < DISPLAY_ORDER.index(SKIPPED) < DISPLAY_ORDER.index("PASSED")
    assert exit_code(SKIPPED) == errors.SKIPPED == 6
    assert len(set(EXIT.values())) == len(EXIT)  # no two verdicts share an exit code
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "| 6 | skipped:" in readme and "SKIPPED 6" in readme


def _skip(arm_dir: Path, reason: str = REASON) -> None:
    """The arm as a run against a target leaves one that could not act: a history saying why, nothing else."""
    shutil.rmtree(arm_dir)
    arm_dir.mkdir()
    with HistoryWriter(arm_dir / "history.jsonl") as history:
        history.skipped(reason)


def test_an_arm_with_a_skipped_record_is_skipped_with_its_reason(tmp_path):
    spec = load_stored(FIXTURE / "process-crash" / "spec.json")
    _skip(tmp_path)
    records = read_history(tmp_path / "history.jsonl")
    assert skipped_reason(records) == REASON
    arm = judge_records(records, spec, "hardened")
    assert arm["verdict"] == SKIPPED and arm["skipped"] == REASON and arm["checks"] == []


@pytest.fixture
def skipped_run(tmp_path) -> Path:
    run_dir = tmp_path / FIXTURE.name
    shutil.copytree(FIXTURE, run_dir)
    passed_copy(run_dir, keep=("process-crash",))  # its arm is skipped below
    _skip(run_dir / "process-crash" / "hardened")
    _skip(run_dir / "kafka-broker-disconnect" / "naive", "network.down on kafka: the target has no kafka proxy")
    return run_dir


def test_a_run_of_passed_and_skipped_arms_is_skipped_exits_6_and_says_so(skipped_run, capsys):
    assert check(skipped_run) == 6
    out = capsys.readouterr().out
    assert f"SKIPPED     process-crash / hardened  (not run: {REASON})" in out
    assert "some arms were not run" in out and f"SKIPPED: {skipped_run}" in out
    results = json.loads((skipped_run / "results.json").read_text())
    assert results["verdict"] == SKIPPED
    by_name = {e["name"]: e for e in results["experiments"]}
    assert by_name["process-crash"]["verdict"] == SKIPPED
    assert by_name["slow-s3-put"]["verdict"] == "PASSED"
    disc = by_name["kafka-broker-disconnect"]["discrimination"]
    assert disc["status"] == "not_run" and "skipped: network.down on kafka" in disc["message"]
    result = json.loads((skipped_run / "process-crash" / "hardened" / "result.json").read_text())
    assert result["skipped"] == REASON


def test_junit_and_the_page_show_a_skipped_arm_as_skipped_with_its_reason(skipped_run):
    check(skipped_run)
    suite = ET.parse(skipped_run / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    case = next(c for c in suite.iter("testcase") if c.get("classname") == "process-crash")
    skipped = case.find("skipped")
    assert skipped is not None and skipped.get("message") == f"SKIPPED: {REASON}"
    assert case.find("failure") is None and case.find("error") is None
    assert int(suite.get("skipped") or 0) >= 2 and suite.get("failures") == "0" and suite.get("errors") == "0"
    page = (skipped_run / "index.html").read_text()
    assert "<h1>SKIPPED</h1>" in page
    assert page.count("the target has no hook for broker") >= 3  # failures block, summary row, arm section
    assert "not run: nothing was judged" in page
