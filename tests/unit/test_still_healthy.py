"""still_healthy: the job recovered and stayed healthy to the end of the recover phase (chaos/checks/recovery.py), a
target declared by its params (chaos/spec/targets.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.checks.base import ArmData, ControlData
from chaos.checks.recovery import (
    STILL_HEALTHY,
    check_recovery,
    check_still_healthy,
    control_still_healthy,
    still_healthy_bound,
)
from chaos.checks.registry import judge_arm_checks
from chaos.checks.timeline import timeline
from chaos.errors import SpecError
from chaos.history import read_history
from chaos.schema import spec_schema
from chaos.spec import ExperimentSpec, Recovery, load_experiment

from .test_spec import base, write

TARGET = Recovery(within=30.0, healthy_samples=3, lag_below=100)


def _story(lags: list[float | None], batches: list[int] | None = None, ended: bool = True,
           alive: list[bool] | None = None) -> list[dict]:
    """steady 0-10 s, inject 10-20 s (a fault healed at 20 s), recover from 20 s: one sample a second, lags as given
    from t=20.5 on, one batch per sample unless `batches` says otherwise."""
    records: list[dict] = [{"t": 0.0, "type": "phase", "name": "steady", "boundary": "start"},
                           {"t": 5.0, "type": "sample", "lag": 10, "batch_id": 0},
                           {"t": 10.0, "type": "phase", "name": "steady", "boundary": "end"},
                           {"t": 10.0, "type": "phase", "name": "inject", "boundary": "start"},
                           {"t": 10.5, "type": "fault", "name": "network.down", "target": "kafka",
                            "state": "injected", "params": {}},
                           {"t": 20.0, "type": "fault", "name": "network.down", "target": "kafka",
                            "state": "healed", "params": {}},
                           {"t": 20.0, "type": "phase", "name": "inject", "boundary": "end"},
                           {"t": 20.0, "type": "phase", "name": "recover", "boundary": "start"}]
    batches = batches if batches is not None else list(range(1, len(lags) + 1))
    for i, (lag, batch) in enumerate(zip(lags, batches)):
        records.append({"t": 20.5 + i, "type": "sample", "lag": lag, "batch_id": batch, "processed_rate": 0.0,
                        "input_rate": 100.0, "alive": {"job-driver": True if alive is None else alive[i]}})
    if ended:
        records.append({"t": 20.6 + len(lags), "type": "phase", "name": "recover", "boundary": "end"})
    return records


def test_caught_up_at_the_end_passes():
    check = check_still_healthy(timeline(_story([900, 500, 50, 40, 30, 20, 10])), 3, 100)
    assert check.verdict == "PASSED" and check.measured == "max lag 30, batch +3"
    assert "in the last 3 samples of the recover phase" in check.message


def test_recovered_once_then_behind_again_fails_where_recovery_passes():
    records = _story([900, 50, 40, 30, 20, 200, 400, 800])
    assert check_recovery(timeline(records), TARGET).verdict == "PASSED"
    check = check_still_healthy(timeline(records), 3, 100)
    assert check.verdict == "FAILED" and "lag 200 not below 100 at t=25.5s" in check.message


def test_caught_up_but_stuck_with_records_pending_fails():
    check = check_still_healthy(timeline(_story([50, 40, 30, 20, 10, 10], batches=[1, 2, 3, 3, 3, 3])), 3, 100)
    assert check.verdict == "FAILED" and "no batch completed" in check.message and "batch_id stayed at 3" in \
        check.message


def test_no_batch_with_nothing_pending_is_healthy():
    check = check_still_healthy(timeline(_story([50, 0, 0, 0], batches=[1, 2, 2, 2])), 3, 100)
    assert check.verdict == "PASSED"


def test_a_driver_down_or_an_unmeasured_lag_is_not_healthy():
    down = check_still_healthy(timeline(_story([10, 10, 10, 10], alive=[True, True, False, True])), 3, 100)
    assert down.verdict == "FAILED" and "driver was down at t=22.5s" in down.message
    unmeasured = check_still_healthy(timeline(_story([10, 10, None, 10])), 3, 100)
    assert unmeasured.verdict == "FAILED" and "lag was not measured at t=22.5s" in unmeasured.message


def test_too_few_recover_samples_or_no_recover_phase_is_nodata():
    assert check_still_healthy(timeline(_story([10, 10])), 3, 100).verdict == "NODATA"
    no_recover = [r for r in _story([10, 10, 10, 10]) if r.get("name") != "recover"]
    assert check_still_healthy(timeline(no_recover), 3, 100).verdict == "NODATA"


# -- the target in a spec -----------------------------------------------------------------------------------------

def _spec(tmp_path, hardened_targets: dict) -> ExperimentSpec:
    doc = base()
    doc["arms"]["hardened"]["targets"] = hardened_targets
    return load_experiment(write(tmp_path, doc))


def test_the_target_is_validated_kept_in_spec_json_and_in_the_schema(tmp_path):
    spec = _spec(tmp_path, {"progress": True, "still_healthy": {"samples": 5}})
    assert dict(spec.arm("hardened").targets.extra["still_healthy"]) == {"samples": 5}
    assert spec.arm("naive").targets.extra == {}
    assert ExperimentSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    for bad, error in (({"samples": 1}, r"still_healthy\.samples: 1 is not valid; allowed: an integer >= 2"),
                       ({}, r"still_healthy\.samples: missing"),
                       ({"samples": 5, "lag": 3}, r"still_healthy\.lag: unknown field")):
        with pytest.raises(SpecError, match=error):
            _spec(tmp_path, {"still_healthy": bad})
    schema = spec_schema()["properties"]["arms"]["properties"]["hardened"]["properties"]["targets"]["properties"]
    assert schema["still_healthy"]["required"] == ["samples"]


def test_the_bound_is_the_recovery_target_s_else_five_seconds_of_input(tmp_path):
    records = _story([10, 10, 10, 10, 10, 150, 150, 150])  # rate 50/s in the base spec: 5 s of input is 250
    with_recovery = _spec(tmp_path, {"recovery": {"within": "5s", "lag_below": 100}, "still_healthy": {"samples": 3}})
    without = _spec(tmp_path, {"progress": True, "still_healthy": {"samples": 3}})
    judged = {name: next(c for c in judge_arm_checks(ArmData(timeline(records), spec, "hardened"))
                         if c.name == "still_healthy") for name, spec in (("recovery", with_recovery),
                                                                           ("default", without))}
    assert judged["recovery"].verdict == "FAILED" and "lag 150 not below 100 (recovery's lag_below) at" in \
        judged["recovery"].message
    assert judged["default"].verdict == "PASSED"
    assert "below 250 (5 s of input: no recovery target)" in judged["default"].message
    assert STILL_HEALTHY.target_of(without.arm("naive").targets) is None  # opt-in: an arm without it is not judged


def test_the_control_is_judged_only_on_a_recover_phase_it_finished(tmp_path):
    spec = _spec(tmp_path, {"recovery": {"within": "5s", "lag_below": 100}, "still_healthy": {"samples": 3}})

    def control(records: list[dict], ended: frozenset[str]):
        data = ControlData(timeline(records), (0,), (0,), ended, (), spec=spec)
        return control_still_healthy(data, {"samples": 3})

    behind = [10, 10, 10, 500, 800, 900]
    assert control(_story(behind), frozenset({"steady", "inject", "recover"})).verdict == "FAILED"
    cut = control(_story(behind, ended=False), frozenset({"steady", "inject"}))
    assert cut.verdict == "NODATA" and "before its recover phase ended" in cut.message



# -- on stored histories (tests/fixtures/runs) ---------------------------------------------------------------------

def test_on_real_histories_a_job_that_never_came_back_fails_and_one_that_did_passes():
    runs = Path(__file__).resolve().parents[1] / "fixtures" / "runs"

    def judged(arm_dir: Path) -> tuple[str, str]:
        spec = ExperimentSpec.from_dict(json.loads((arm_dir.parent / "spec.json").read_text()))
        lag_below, bound = still_healthy_bound(spec, "hardened")  # the control judged by the hardened bound
        check = check_still_healthy(timeline(read_history(arm_dir / "history.jsonl")), 5, lag_below, bound)
        return check.verdict, check.message

    # corrupted-sst's naive job died on its damaged checkpoint and was never restarted: its recovery FAILED
    verdict, message = judged(runs / "20261123T081854-smoke-13866" / "corrupted-sst" / "naive")
    assert verdict == "FAILED" and "driver was down" in message
    verdict, _ = judged(runs / "20261123T085731-smoke-464" / "kafka-broker-disconnect" / "hardened")
    assert verdict == "PASSED"
