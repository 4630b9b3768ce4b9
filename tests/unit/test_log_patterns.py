"""No vacuous log check: an expected log pattern (the evidence a fault had its effect) must not match what a clean
run prints. Every expected pattern of every experiment and of every suite's overrides is matched against every line of
stored hardened job logs that show no incident: complete logs of a hardened driver restarted on an intact checkpoint
(process-crash: killed, restarted, "state version N verified"). Once, corrupted-sst expected `integrity: state
version \\d+`, which that clean line matches."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from chaos.spec import load_experiment, load_suite
from job.repair_plan import Plan

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "runs"
# Hardened drivers restarted by process-crash on an intact checkpoint, kept whole by tests/fixtures/make_runs.py.
CLEAN_LOGS = ("20261123T085731-smoke-464/logs/job-hardened-d6339458-2.log",
              "20261123T081854-smoke-13866/logs/job-hardened-5d8f258b-2.log")


def expected_patterns() -> dict[str, set[str]]:
    """pattern -> where it is expected (experiment/profile, or suite:experiment/profile)."""
    found: dict[str, set[str]] = {}

    def collect(spec, where: str) -> None:
        for arm in spec.arms:
            for pattern in arm.targets.logs.expected if arm.targets.logs else ():
                found.setdefault(pattern, set()).add(f"{where}{spec.name}/{arm.profile}")

    for path in sorted((ROOT / "experiments").glob("*.yaml")):
        collect(load_experiment(path), "")
    for path in sorted((ROOT / "experiments" / "suites").glob("*.yaml")):
        for entry in load_suite(path).entries:
            collect(entry.spec, f"{path.stem}:")
    return found


def clean_lines() -> list[tuple[str, int, str]]:
    lines = []
    for name in CLEAN_LOGS:
        run, log = name.split("/", 1)
        kept = json.loads((FIXTURES / run / "fixture.json").read_text())["logs"][log]
        assert kept["dropped"] == 0, f"{name}: the fixture dropped lines of it; keep it whole in make_runs.py"
        text = (FIXTURES / name).read_text().splitlines()
        lines += [(name, number, line) for number, line in enumerate(text, 1) if line.strip()]
    return lines


def test_the_clean_logs_are_clean_restarts_of_a_hardened_job():
    lines = [line for _, _, line in clean_lines()]
    assert sum(bool(re.fullmatch(r"job: integrity: state version \d+ verified", line)) for line in lines) == 2
    assert not [line for line in lines if "Exception" in line or "ERROR" in line or "query failed" in line]


def test_no_expected_log_pattern_matches_a_clean_hardened_log():
    patterns = expected_patterns()
    assert len(patterns) >= 6  # every experiment's and every suite's, not an empty set by mistake
    matched = [f"{sorted(where)[0]} expects {pattern!r}, which {name}:{number} matches: {line}"
               for pattern, where in sorted(patterns.items()) for name, number, line in clean_lines()
               if re.search(pattern, line)]
    assert matched == []


@pytest.mark.parametrize("plan", [
    Plan(version=12, restart_version=12, damaged={"state/0/1/SSTs/a.sst": "bad table magic number"},
         quarantine=["state/0/1/SSTs/a.sst"]),
    Plan(version=12, restart_version=9, damaged={"state/0/1/12.changelog": "truncated"}, drop_batches=[9, 10, 11]),
    Plan(version=12, restart_version=0, damaged={"state/0/1/1.zip": "unreadable zip"}, start_over=True),
])
def test_corrupted_sst_expects_every_repair_line_of_the_job(plan):
    """The pattern that replaced the vacuous one still matches each line the job logs when it repairs."""
    [pattern] = load_experiment(ROOT / "experiments" / "corrupted-sst.yaml").arm("hardened").targets.logs.expected
    assert re.search(pattern, f"job: integrity: {plan.describe()}")
    assert not re.search(pattern, "job: integrity: state version 12 verified")
