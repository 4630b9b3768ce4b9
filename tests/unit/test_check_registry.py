"""The registry of checks (chaos/checks/registry.py): a check that raises is UNKNOWN with its error and never costs the
run its results; which checks an arm's targets set decides whether a control may end early
(chaos.arm.schedule.ends_early)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from chaos import cli, errors
from chaos.arm.schedule import drain_judged, ends_early
from chaos.checks import registry
from chaos.checks.base import CheckDef
from chaos.checks.judge import judge_arm, judge_run
from chaos.checks.registry import CHECKS, holding_back, registered
from chaos.spec import TARGET_PARAMS, ExperimentSpec, Targets, load_experiment
from tests.unit.fixture_runs import passed_copy

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
PASSING_RUN = FIXTURES / "20261123T085731-smoke-464"  # FAILED since issue 36: passed_copy makes it pass
ARM = PASSING_RUN / "slow-s3-put"  # its hardened arm PASSED


def _boom(_arm, _target):
    raise ZeroDivisionError("a bug in the check")


def _spec() -> ExperimentSpec:
    return ExperimentSpec.from_dict(json.loads((ARM / "spec.json").read_text()), where="spec.json")


# The checks results.json has always listed, in that order; a check added later may sit anywhere between them.
ESTABLISHED = ["environment", "progress", "recovery", "max_lag", "lost", "duplicated", "state", "logs", "lineage",
               "refused_within", "exit_code", "probe"]


def test_the_registry_lists_every_check_once_in_the_order_results_show():
    names = [c.name for c in CHECKS]
    assert len(names) == len(set(names))
    assert [n for n in names if n in ESTABLISHED] == ESTABLISHED  # every one, in its order
    assert names[0] == "environment" and names[-1] == "probe"
    assert names == [c.name for seam in registry.SEAMS for c in registry.declared(seam)]  # gathered from the seams
    # every check judges a field of Targets or a target declared by its params, and each of those has its check
    declared = set(Targets.__dataclass_fields__) - {"extra"} | set(TARGET_PARAMS)
    assert all(c.target is None or c.target in declared for c in CHECKS)
    assert set(TARGET_PARAMS) <= {c.target for c in CHECKS}
    with pytest.raises(ValueError):
        registry.register(CHECKS[1])


def test_every_check_a_seam_module_holds_is_registered_once():
    # a CheckDef whose judge was written in another module would be taken for an import and silently left out
    held = {id(v): v for seam in registry.SEAMS for v in vars(seam).values() if isinstance(v, CheckDef)}
    assert sorted(c.name for c in held.values()) == sorted(c.name for c in CHECKS)


def test_a_seam_module_s_checks_are_the_ones_it_defines_not_ones_it_imports():
    import types

    from chaos.checks import progress, recovery
    seam = types.ModuleType("chaos.checks.made_up")
    seam.PROGRESS = progress.PROGRESS  # imported: progress.py's
    seam.MINE = CheckDef("mine", "progress", _boom)  # _boom is this test module's: not the seam's either
    assert registry.declared(seam) == []
    assert [c.name for c in registry.declared(recovery)][:2] == ["recovery", "max_lag"]  # in the order defined


def test_a_check_that_raises_is_unknown_with_its_error_and_the_other_checks_stand():
    spec = _spec()
    before = judge_arm(ARM / "hardened", spec, "hardened")
    with registered(CheckDef("exploding", "progress", _boom), after="progress"):
        after = judge_arm(ARM / "hardened", spec, "hardened")
    names = [c["name"] for c in after["checks"]]
    assert names == [c["name"] for c in before["checks"]][:names.index("exploding")] + ["exploding"] \
        + [c["name"] for c in before["checks"]][names.index("exploding"):]
    exploded = after["checks"][names.index("exploding")]
    assert exploded["verdict"] == "UNKNOWN"
    assert "ZeroDivisionError" in exploded["message"] and "a bug in the check" in exploded["message"]
    assert "test_check_registry.py" in exploded["message"]  # where it raised
    assert [c for c in after["checks"] if c["name"] != "exploding"] == before["checks"]
    assert before["verdict"] == "PASSED" and after["verdict"] == "UNKNOWN"  # the harness broke, not the job
    assert after["recovery_s"] == before["recovery_s"]
    assert [c.name for c in CHECKS].count("exploding") == 0  # unregistered on the way out


def test_a_check_that_returns_no_check_is_unknown_too():
    with registered(CheckDef("confused", "progress", lambda arm, target: "PASSED")):
        result = judge_arm(ARM / "hardened", _spec(), "hardened")
    confused = next(c for c in result["checks"] if c["name"] == "confused")
    assert confused["verdict"] == "UNKNOWN" and "TypeError" in confused["message"]


def test_a_control_judge_that_raises_is_unknown_in_the_discrimination(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(PASSING_RUN, run)
    with registered(CheckDef("exploding", "progress", lambda arm, target: None, control=_boom)):
        results = judge_run(run)
    discrimination = next(e for e in results["experiments"] if e["name"] == "kafka-broker-disconnect")[
        "discrimination"]
    exploded = next(c for c in discrimination["checks"] if c["name"] == "exploding")
    assert exploded["verdict"] == "UNKNOWN" and "ZeroDivisionError" in exploded["message"]


def test_chaos_check_still_writes_results_when_a_check_raises(tmp_path, capsys):
    """End to end, offline: `chaos check` on a copy of a stored run, with a check that raises on every arm."""
    run = passed_copy(shutil.copytree(PASSING_RUN, tmp_path / "run"))
    (run / "results.json").unlink()
    with registered(CheckDef("exploding", None, _boom)):
        code = cli.main(["check", str(run)])
    results = json.loads((run / "results.json").read_text())
    assert code == errors.ENVIRONMENT and results["verdict"] == "UNKNOWN"
    arms = [a for e in results["experiments"] for a in e["arms"]]
    exploded = [next(c for c in a["checks"] if c["name"] == "exploding") for a in arms]
    assert arms and all(c["verdict"] == "UNKNOWN" and "ZeroDivisionError" in c["message"] for c in exploded)
    assert all(len(a["checks"]) > 1 for a in arms)  # the other checks were judged as usual
    for experiment in results["experiments"]:
        for arm in experiment["arms"]:
            assert json.loads((run / experiment["name"] / arm["profile"] / "result.json").read_text()) == arm
    assert "UNKNOWN" in capsys.readouterr().out


def test_a_judge_that_raises_outside_any_check_makes_the_arm_unknown_not_the_run_lost(tmp_path, monkeypatch):
    run = tmp_path / "run"
    shutil.copytree(PASSING_RUN, run)
    from chaos.checks import arm

    def broken(records):
        raise RuntimeError("history index broke")

    monkeypatch.setattr(arm, "timeline", broken)
    results = judge_run(run)
    arms = [a for e in results["experiments"] for a in e["arms"]]
    assert arms and all(a["verdict"] == "UNKNOWN" and "history index broke" in a["checks"][0]["message"]
                        for a in arms)
    assert results["verdict"] == "UNKNOWN"


def _control(tmp_path, targets: str):
    path = tmp_path / "early.yaml"
    path.write_text(f"""
name: early
description: test
incident: {{file: 003-cep-state-leak-key-rotation.txt, error: leak}}
seed: 5
workload: {{shape: uniform, keys: 20, rate: 50, partitions: 2}}
job: {{session_gap: 2s, max_session_length: 20s, watermark: 1s}}
phases: {{steady: 10s, inject: 20s, recover: 10s}}
faults:
  - {{fault: network.down, target: kafka, at: 0s, duration: 5s}}
arms:
  hardened: {{targets: {{lost: 0}}}}
  naive: {{targets: {targets}}}
""")
    return load_experiment(path).arm("naive")


def test_which_checks_hold_an_arm_back_comes_from_the_registry(tmp_path):
    assert ends_early(_control(tmp_path, "{logs: {expected: [boom]}, lineage: true}"))
    # A bound of 0 is a target like any other (0 == False once let it through: the hand-kept list it replaced).
    arm = _control(tmp_path, "{lost: 0, logs: {expected: [boom]}}")
    assert holding_back(arm.targets) == ["lost"] and not ends_early(arm)
    arm = _control(tmp_path, "{logs: {expected: [boom]}}")
    with registered(CheckDef("needs-the-end", "logs", lambda a, t: None)):
        assert holding_back(arm.targets) == ["needs-the-end"] and not ends_early(arm)
    assert ends_early(arm)


def _experiment(tmp_path, hardened: str, naive: str):
    path = tmp_path / "drained.yaml"
    path.write_text(f"""
name: drained
description: test
incident: {{file: 003-cep-state-leak-key-rotation.txt, error: leak}}
seed: 5
workload: {{shape: uniform, keys: 20, rate: 50, partitions: 2}}
job: {{session_gap: 2s, max_session_length: 20s, watermark: 1s}}
phases: {{steady: 10s, inject: 20s, recover: 10s}}
faults:
  - {{fault: network.down, target: kafka, at: 0s, duration: 5s}}
  - {{fault: network.down, target: kafka, at: 10s, duration: 5s}}
arms:
  hardened: {hardened}
  naive: {naive}
""")
    spec = load_experiment(path)
    return spec.arm("naive"), spec.arm("hardened")


@pytest.mark.parametrize("outcome", ["lost: 0", "duplicated: 0", "lineage: true", "progress: true"])
def test_a_control_judged_by_hardened_outcomes_runs_to_its_end(tmp_path, outcome):
    """Discrimination counts outcomes only: a control stopped at its log line would leave every one NODATA."""
    naive = "{targets: {logs: {expected: [boom]}}}"
    control, subject = _experiment(tmp_path, f"{{targets: {{{outcome}, logs: {{expected: [ok]}}}}}}", naive)
    assert ends_early(control) and not ends_early(control, subject)
    # on fewer of the hardened arm's faults its failures still stand (settle): it runs to its end as well
    control, subject = _experiment(tmp_path, f"{{targets: {{{outcome}}}}}", "{faults: [0], " + naive[1:])
    assert not ends_early(control, subject)


def test_a_control_may_still_stop_where_no_hardened_outcome_could_be_judged_on_it(tmp_path):
    naive = "{targets: {logs: {expected: [boom]}}}"
    # the hardened targets are a log line and an exit code: no outcome to run to the end for
    control, subject = _experiment(tmp_path, "{targets: {logs: {expected: [ok]}, exit_code: 0}}", naive)
    assert ends_early(control, subject)
    # a fault the hardened arm never ran: its outcomes cannot stand for the hardened targets, however long it runs
    control, subject = _experiment(tmp_path, "{faults: [0], targets: {lost: 0}}", "{faults: [1], " + naive[1:])
    assert ends_early(control, subject)


def test_a_control_is_drained_only_where_something_reads_its_output(tmp_path):
    """scale-hot-key-list-state's control runs a fault of its own and sets no output target: a drain would wait
    seven minutes for sessions no check reads. A control judged by the hardened arm's outcomes, or by its own lost
    or duplicated, is drained; a hardened arm always."""
    naive = "{targets: {logs: {expected: [boom]}}}"
    control, subject = _experiment(tmp_path, "{faults: [0], targets: {lost: 0}}", "{faults: [1], " + naive[1:])
    assert not drain_judged(control, subject) and drain_judged(subject, subject)
    control, subject = _experiment(tmp_path, "{faults: [0], targets: {lost: 0}}",
                                   "{faults: [1], targets: {duplicated: 0}}")
    assert drain_judged(control, subject)
    control, subject = _experiment(tmp_path, "{targets: {lost: 0}}", naive)
    assert drain_judged(control, subject)
    control, subject = _experiment(tmp_path, "{targets: {logs: {expected: [ok]}}}", naive)
    assert not drain_judged(control, subject)  # no hardened outcome for discrimination to judge it by
