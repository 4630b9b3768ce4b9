"""outage_reported: a lasting fault reported by the job itself (a documented failure code) within its bound
(chaos/checks/outage.py), a target declared by its params (chaos/spec/targets.py)."""
from __future__ import annotations

from chaos.checks.base import ArmData, ControlData
from chaos.checks.outage import OUTAGE_REPORTED, check_outage_reported, control_outage_reported
from chaos.checks.registry import CHECKS, judge_arm_checks
from chaos.checks.timeline import timeline
from chaos.spec import load_experiment

from .test_spec import ROOT


def _history(*jobs: dict, fault: str = "network.reset_peer") -> list[dict]:
    """steady 0-10 s, the fault from 10 s (`injecting` at 10.0, `injected` at 10.2) to 70 s, then `jobs` records."""
    records: list[dict] = [{"t": 0.0, "type": "phase", "name": "steady", "boundary": "start"},
                           {"t": 1.0, "type": "job", "event": "started", "process": "job-driver"},
                           {"t": 10.0, "type": "phase", "name": "steady", "boundary": "end"},
                           {"t": 10.0, "type": "phase", "name": "inject", "boundary": "start"},
                           {"t": 10.0, "type": "fault", "name": fault, "target": "s3", "state": "injecting",
                            "params": {}},
                           {"t": 10.2, "type": "fault", "name": fault, "target": "s3", "state": "injected",
                            "params": {}},
                           {"t": 70.0, "type": "fault", "name": fault, "target": "s3", "state": "healed",
                            "params": {}},
                           {"t": 70.0, "type": "phase", "name": "inject", "boundary": "end"},
                           {"t": 70.0, "type": "phase", "name": "recover", "boundary": "start"},
                           {"t": 80.0, "type": "phase", "name": "recover", "boundary": "end"}]
    return sorted(records + list(jobs), key=lambda r: r["t"])


def _exit(t: float, code: int | None, **more) -> dict:
    return {"t": t, "type": "job", "event": "exited", "process": "job-driver", "code": code, **more}


def test_reported_in_time_passes():
    check = check_outage_reported(timeline(_history(_exit(35.0, 4))), 45.0)
    assert check.verdict == "PASSED" and check.measured == "exit 4 (failure budget exceeded) after 25.0s"


def test_never_reported_fails():
    # the job restarted through the outage and was stopped by the arm at its end (exit 0): never reported
    check = check_outage_reported(timeline(_history(_exit(81.0, 0))), 45.0)
    assert check.verdict == "FAILED" and check.measured == "never reported"
    assert "network.reset_peer on s3 from t=10.0s" in check.message


def test_reported_late_fails():
    check = check_outage_reported(timeline(_history(_exit(60.0, 4))), 45.0)
    assert check.verdict == "FAILED" and "50.0s, past the bound of 45.0s" in check.message


def test_a_harness_kill_or_a_signal_is_not_a_report():
    killed = _exit(20.0, None, cause="signal 9")
    stopped = _exit(25.0, 1, cause="stopped to corrupt its checkpoint")
    for records in (_history(killed), _history(stopped), _history(_exit(30.0, -9)), _history(_exit(30.0, 137))):
        assert check_outage_reported(timeline(records), 45.0).measured == "never reported"
    # a report after the harness's kill still counts
    assert check_outage_reported(timeline(_history(killed, _exit(40.0, 4))), 45.0).verdict == "PASSED"


def test_an_exit_before_the_fault_or_a_workload_shape_is_no_outage():
    assert check_outage_reported(timeline(_history(_exit(5.0, 1))), 45.0).measured == "never reported"
    assert check_outage_reported(timeline(_history(_exit(35.0, 4), fault="data.hot_key")), 45.0).verdict == "NODATA"


def test_registered_set_on_the_experiment_that_claims_failure_budget_and_judged_there():
    assert OUTAGE_REPORTED in CHECKS
    spec = load_experiment(ROOT / "experiments" / "checkpoint-commit-budget.yaml")
    assert "failure_budget" in spec.claims
    assert dict(spec.arm("hardened").targets.extra["outage_reported"]) == {"within": 45.0}
    judged = {c.name: c for c in judge_arm_checks(ArmData(timeline(_history(_exit(81.0, 0))), spec, "hardened"))}
    assert judged["outage_reported"].verdict == "FAILED"


def test_the_control_s_never_reported_stands_only_on_a_whole_history():
    records = _history()
    whole = ControlData(timeline(records), (0,), (0,), frozenset({"steady", "inject", "recover"}), ())
    cut = ControlData(timeline(records), (0,), (0,), frozenset({"steady"}), ())
    assert control_outage_reported(whole, {"within": 45.0}).verdict == "FAILED"
    assert control_outage_reported(cut, {"within": 45.0}).verdict == "NODATA"
