"""recovery_vs_control: the hardened arm's recovery against the control's in the same run (issue 37, "bounds no looser
than plain Spark"). Pure: stored histories written with the fake clock, judged by judge_run."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from chaos.checks.judge import judge_run
from chaos.checks.recovery import check_recovery_vs_control
from chaos.checks.timeline import timeline
from chaos.errors import SpecError
from chaos.spec import load_experiment
from tests.unit.test_checkers import Story, dead_after_fault, recovering, write_history
from tests.unit.test_discrimination import HARDENED, make_run, spec_of


def quick(t: float) -> dict:
    """Down at 25..35 like `recovering`, then caught up twice as fast: lag below 1000 from t=39."""
    sample = recovering(t)
    if t >= 35:
        sample.update(lag=max(5, int(5000 - 1000 * (t - 35))))
    return sample


def with_margin(margin: str) -> str:
    return HARDENED.replace("grouped: true}", f"grouped: true, control_margin: {margin}}}")


def hardened_checks(tmp_path: Path, margin: str | None, control: Story | None) -> dict[str, dict]:
    spec = spec_of(tmp_path, hardened=with_margin(margin) if margin else HARDENED)
    results = judge_run(make_run(tmp_path, spec, control))
    [arm] = [a for a in results["experiments"][0]["arms"] if a["profile"] == "hardened"]
    return {c["name"]: {**c, "arm": arm["verdict"]} for c in arm["checks"]}


def test_a_hardened_recovery_past_the_controls_plus_the_margin_fails_the_hardened_arm(tmp_path):
    checks = hardened_checks(tmp_path, "2s", Story(metrics=quick))
    check = checks["recovery_vs_control"]
    assert check["verdict"] == "FAILED" and check["arm"] == "FAILED"
    assert checks["recovery"]["verdict"] == "PASSED"  # its own bound holds: only plain Spark's figure catches it
    control_s = float(check["expected"].split("the control's ")[1].split(" s")[0])
    measured_s = float(check["measured"].rstrip("s"))
    assert measured_s > control_s + 2
    assert check["expected"].startswith(f"<= {round(control_s + 2, 1):g}s")


def test_within_the_margin_it_passes(tmp_path):
    check = hardened_checks(tmp_path, "10s", Story(metrics=quick))["recovery_vs_control"]
    assert check["verdict"] == "PASSED" and check["arm"] == "PASSED"
    assert "hardened" in check["message"] and "against the control's" in check["message"]


def test_a_control_that_never_recovered_leaves_the_hardened_bound_alone(tmp_path):
    check = hardened_checks(tmp_path, "2s", Story(metrics=dead_after_fault))["recovery_vs_control"]
    assert (check["verdict"], check["measured"]) == ("PASSED", "control not recovered")


@pytest.mark.parametrize("margin,control", [
    (None, Story(metrics=quick)),            # the spec states no margin
    ("2s", None),                            # no control in this run (the nightly's waived experiments)
    ("2s", Story(metrics=quick, end=45.0)),  # the control stopped before its recover phase ended
    ("2s", Story(metrics=quick, faults=[("network.down", "kafka", 25.0, None)])),  # a fault never healed
])
def test_without_a_comparable_control_there_is_no_check(tmp_path, margin, control):
    assert "recovery_vs_control" not in hardened_checks(tmp_path, margin, control)


def test_the_pure_check_fails_a_hardened_arm_that_never_recovered_and_needs_a_margin(tmp_path):
    spec = spec_of(tmp_path, hardened=with_margin("5s"))
    target = spec.arm("hardened").targets.recovery
    assert target is not None and target.control_margin == 5.0
    hung = timeline(write_history(tmp_path / "hung.jsonl", Story(metrics=dead_after_fault)))
    control = timeline(write_history(tmp_path / "control.jsonl", Story(metrics=quick)))
    check = check_recovery_vs_control(hung, control, target)
    assert check is not None and (check.verdict, check.measured) == ("FAILED", "not recovered")
    assert check_recovery_vs_control(hung, control, dataclasses.replace(target, control_margin=None)) is None


def test_a_margin_round_trips_through_spec_json_and_a_bad_one_is_one_line(tmp_path):
    spec = spec_of(tmp_path, hardened=with_margin("7s"))
    assert json.loads(json.dumps(spec.to_dict()))["arms"][0]["targets"]["recovery"]["control_margin"] == 7.0
    with pytest.raises(SpecError, match="control_margin.*is not a duration"):
        spec_of(tmp_path, hardened=with_margin("soon"))


def test_every_experiment_whose_control_survives_follows_plain_spark():
    """Issue 37: where the naive job survives the fault (the spec's `cannot_discriminate`), the hardened recovery is
    compared with the control's in every run that has both (pre-release)."""
    root = Path(__file__).resolve().parents[2] / "experiments"
    missing = []
    for path in sorted(root.glob("*.yaml")):
        spec = load_experiment(path)
        target = spec.arm("hardened").targets.recovery
        if spec.cannot_discriminate and target is not None and target.control_margin is None:
            missing.append(spec.name)
    assert missing == []
