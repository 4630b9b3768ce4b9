"""Discrimination (chaos/checks/discrimination.py `discriminate`): every control's history and outputs judged again by
its experiment's hardened targets. Synthetic histories (tests/unit/test_checkers.py's Story, written through
HistoryWriter with a fake clock) cover each status and each way the control's data can fail to stand for a target;
the stored real runs in tests/fixtures/runs pin what `chaos check` finds on them (docs/lab-notes.md), with the
suite's flag, the waiver, the exit code, the report line and the junit case. Pure: no services."""
from __future__ import annotations

import dataclasses
import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from chaos import cli
from chaos.checks.discrimination import NOT_DISCRIMINATING, discriminate, discrimination_result
from chaos.checks.judge import judge_run
from chaos.checks.timeline import Check
from chaos.errors import SpecError
from chaos.oracle import coverage
from chaos.report import load_run, render_report, write_junit
from chaos.spec import ExperimentSpec, load_experiment, load_suite
from chaos.workload import Event
from tests.unit.check_lists import assert_checks
from tests.unit.fixture_runs import passed_copy
from tests.unit.test_checkers import Story, _log, clean_oracle, dead_after_fault, healthy, recovering, write_history

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
RUN_A = "20261123T081854-smoke-13866"
RUN_B = "20261123T085731-smoke-464"
ROOT = Path(__file__).resolve().parents[2]

SPEC = """
name: t-disc
description: test
incident: {{file: 001-x.txt, error: boom}}
seed: 1
workload: {{shape: uniform, keys: 20, rate: 50, partitions: 2}}
phases: {{steady: 10s, inject: 20s, recover: 20s}}
faults:
  - {{fault: network.down, target: kafka, at: 5s, duration: 10s}}
  - {{fault: network.latency, target: s3, at: 16s, duration: 2s, params: {{latency: 100ms}}}}
arms:
  hardened:
{hardened}
  naive:
{naive}
{top}
"""
# grouped: the two faults come closer than a recovery judged alone could be seen (chaos/spec/order.py)
HARDENED = ("    targets: {progress: true, recovery: {within: 10s, lag_below: 1000, grouped: true}, lost: 0, "
            "duplicated: 0}")
NAIVE = "    targets: {logs: {expected: [boom]}}"


def spec_of(tmp_path: Path, hardened: str = HARDENED, naive: str = NAIVE, top: str = "") -> ExperimentSpec:
    path = tmp_path / "t-disc.yaml"
    path.write_text(SPEC.format(hardened=hardened, naive=naive, top=top))
    return load_experiment(path)


def history(tmp_path: Path, **changes) -> list[dict]:
    return write_history(tmp_path / f"h-{len(list(tmp_path.glob('h-*')))}.jsonl", Story(**changes))


def covered(lost: int = 0) -> dict:
    """A coverage report (the naive, processing-time profile's oracle): 10 acknowledged events, `lost` of them
    never in the output."""
    acked = [Event("a", seq, 1000 * seq, "") for seq in range(10)]
    emitted = [{"key": "a", "first_seq": 0, "last_seq": 9 - lost, "count": 10 - lost}]
    return {**coverage(acked, [], emitted).to_dict(), "drained": True}


def verdicts(result: dict) -> dict[str, str]:
    return {c["name"]: c["verdict"] for c in result["checks"]}


def message(result: dict, name: str) -> str:
    return next(c["message"] for c in result["checks"] if c["name"] == name)


# -- the statuses ----------------------------------------------------------------------------------------------
def test_a_control_that_meets_every_hardened_target_is_not_discriminating(tmp_path):
    result = discriminate(history(tmp_path, metrics=recovering), spec_of(tmp_path), oracle=covered())
    assert result["status"] == result["measured"] == "not_discriminating"
    assert_checks(result["checks"], {"progress": "PASSED", "recovery": "PASSED", "lost": "PASSED",
                                     "duplicated": "PASSED"})
    assert result["message"] == NOT_DISCRIMINATING == ("not discriminating: a job without the hardening passes "
                                                       "every hardened target")
    assert (result["required"], result["verdict"], result["failed"]) == (False, "PASSED", [])
    assert list(result) == ["status", "required", "verdict", "message", "measured", "waiver", "control", "targets",
                            "failed", "checks"]
    # the oracles differ in kind (events vs sessions): at a bound of 0 they mean the same, and the message says so
    assert "the control's oracle counts acknowledged events, not sessions" in message(result, "lost")


def test_a_control_that_fails_a_hardened_target_discriminates_and_names_the_checks(tmp_path):
    result = discriminate(history(tmp_path, metrics=dead_after_fault), spec_of(tmp_path), oracle=covered(lost=3))
    assert result["status"] == "discriminating"
    assert [(f["name"], f["verdict"]) for f in result["failed"]] == [("progress", "HANG"), ("recovery", "FAILED"),
                                                                     ("lost", "FAILED")]
    assert result["message"].startswith("a job without the hardening: HANG on progress (batch_id stayed at 24 ")
    assert "; FAILED on recovery (not recovered: never 3 healthy samples in a row" in result["message"]
    assert "; FAILED on lost (3 acknowledged events lost" in result["message"]
    assert verdicts(result)["duplicated"] == "PASSED"


def test_a_control_without_an_oracle_is_inconclusive_not_passed(tmp_path):
    result = discriminate(history(tmp_path, metrics=recovering), spec_of(tmp_path),
                          missing={"oracle": "no oracle.json"})
    assert result["status"] == "inconclusive"
    assert_checks(result["checks"], {"progress": "PASSED", "recovery": "PASSED", "lost": "NODATA",
                                     "duplicated": "NODATA"})
    assert result["message"].startswith("inconclusive: a job without the hardening failed no hardened outcome target, "
                                        "but lost could not be judged on its data (no oracle.json")


def test_an_environment_error_in_the_control_is_inconclusive_unless_something_failed(tmp_path):
    error = [(36.0, "error", ("toxiproxy: reset failed",), {})]
    broken = discriminate(history(tmp_path, metrics=recovering, extra=error), spec_of(tmp_path), oracle=covered())
    assert (broken["status"], verdicts(broken)["environment"]) == ("inconclusive", "UNKNOWN")
    failed = discriminate(history(tmp_path, metrics=dead_after_fault, extra=error), spec_of(tmp_path),
                          oracle=covered())
    assert failed["status"] == "discriminating"  # as for an arm: a failure still wins over a broken environment


def test_a_waiver_replaces_not_discriminating_and_inconclusive_but_never_a_failure(tmp_path):
    top = "cannot_discriminate: Spark has no such failure"
    spec = spec_of(tmp_path, top=top)
    assert spec.cannot_discriminate == "Spark has no such failure"
    passes = discriminate(history(tmp_path, metrics=recovering), spec, oracle=covered())
    assert (passes["status"], passes["measured"], passes["waiver"]) == ("waived", "not_discriminating",
                                                                        "Spark has no such failure")
    assert passes["message"] == "waived: Spark has no such failure (measured: not discriminating)"
    unjudged = discriminate(history(tmp_path, metrics=recovering), spec)
    assert (unjudged["status"], unjudged["measured"]) == ("waived", "inconclusive")
    fails = discriminate(history(tmp_path, metrics=dead_after_fault), spec, oracle=covered())
    assert fails["status"] == "discriminating"
    assert fails["message"].endswith("(though the spec says it cannot discriminate: Spark has no such failure)")


def test_required_discrimination_fails_a_control_that_passes_everything_or_shows_nothing(tmp_path):
    spec = dataclasses.replace(spec_of(tmp_path), require_discrimination=True)
    passes = discriminate(history(tmp_path, metrics=recovering), spec, oracle=covered())
    assert (passes["status"], passes["required"], passes["verdict"]) == ("not_discriminating", True, "FAILED")
    inconclusive = discriminate(history(tmp_path, metrics=recovering), spec)
    # nothing judged is nothing shown: a requirement is not met by a control whose outcomes could not be judged
    assert (inconclusive["status"], inconclusive["verdict"]) == ("inconclusive", "FAILED")
    assert discriminate(history(tmp_path, metrics=recovering), dataclasses.replace(spec, require_discrimination=False)
                        )["verdict"] == "PASSED"  # reported only, where the suite does not require it
    waived = dataclasses.replace(spec, cannot_discriminate="no counterpart")
    assert discriminate(history(tmp_path, metrics=recovering), waived, oracle=covered())["verdict"] == "PASSED"


# -- when the control's data cannot stand for a target -----------------------------------------------------------
def test_a_control_that_ran_fewer_faults_can_fail_but_cannot_pass(tmp_path):
    spec = spec_of(tmp_path, naive="    faults: [0]\n" + NAIVE)
    passes = discriminate(history(tmp_path, metrics=recovering), spec, oracle=covered())
    assert passes["status"] == "inconclusive"
    assert set(verdicts(passes).values()) == {"NODATA"}
    assert message(passes, "progress").startswith(
        "not judged on the control's data: the control ran faults 0, the hardened arm 0, 1: passing fewer faults "
        "proves nothing (measured PASSED: batches completed in every phase, steadily before the faults and at the end)")
    fails = discriminate(history(tmp_path, metrics=dead_after_fault), spec, oracle=covered())
    assert fails["status"] == "discriminating"
    assert message(fails, "progress").endswith("(with fewer faults: the control ran faults 0, the hardened arm 0, 1)")


def test_a_control_that_ran_a_fault_the_hardened_arm_never_did_is_not_judged(tmp_path):
    spec = spec_of(tmp_path, hardened="    faults: [0]\n" + HARDENED, naive="    faults: [1]\n" + NAIVE)
    result = discriminate(history(tmp_path, metrics=dead_after_fault), spec, oracle=covered())
    assert result["status"] == "inconclusive" and set(verdicts(result).values()) == {"NODATA"}
    assert "the control ran faults 1, the hardened arm 0: one the hardened arm never faced" in \
        message(result, "recovery")


def test_a_control_that_stopped_early_is_not_judged_on_what_it_did_not_reach(tmp_path):
    """A control stopped once it showed its incident (chaos/run.py ends_early): its history ends in the inject
    phase, unhealed and undrained."""
    spec = spec_of(tmp_path, hardened="    targets: {progress: true, "
                                      "recovery: {within: 10s, lag_below: 1000, grouped: true}, "
                                      "lost: 0, logs: {forbidden: [boom]}}")
    records = history(tmp_path, metrics=recovering, end=30.0, faults=[("network.down", "kafka", 25.0, None)],
                      extra=[_log(27, "boom", "ERROR boom: state lost")])
    result = discriminate(records, spec, oracle=covered(lost=7))
    assert_checks(result["checks"], {"progress": "NODATA", "recovery": "NODATA", "lost": "NODATA",
                                     "logs": "FAILED"})
    # a log line is a mechanism, not an outcome: it is listed, never counted (and said so)
    assert result["status"] == "inconclusive" and result["failed"] == []
    assert result["message"].endswith("(logs FAILED: not an outcome, not counted)")
    assert "the control's history ends (t=29.5s) before its inject/recover phases ended" in message(result, "progress")
    assert "its output was not drained and read back to the end" in message(result, "lost")  # 7 lost: undrained
    assert "network.down on kafka was injected but never healed" in message(result, "recovery")
    # the same history without the forbidden line: nothing failed, nothing passed
    quiet = discriminate(history(tmp_path, metrics=recovering, end=30.0,
                                 faults=[("network.down", "kafka", 25.0, None)]), spec, oracle=covered())
    assert quiet["status"] == "inconclusive"


def test_a_phase_stuck_from_start_to_end_fails_even_when_the_history_stops_later(tmp_path):
    def stuck_in_steady(t):
        return {**healthy(t), "batch_id": 5}
    spec = spec_of(tmp_path, hardened="    targets: {progress: true}")
    result = discriminate(history(tmp_path, metrics=stuck_in_steady, end=30.0), spec)
    assert_checks(result["checks"], {"progress": "FAILED"})
    assert message(result, "progress").startswith("no batch completed during steady")


def test_not_recovered_counts_only_when_the_control_was_watched_past_the_bound(tmp_path):
    def never(t):
        return {**recovering(t), "lag": 5000}
    spec = spec_of(tmp_path, hardened="    targets: {recovery: {within: 10s, lag_below: 1000, grouped: true}}")
    watched = discriminate(history(tmp_path, metrics=never), spec)  # healed at 35, samples to 59.5
    assert_checks(watched["checks"], {"recovery": "FAILED"})
    short = discriminate(history(tmp_path, metrics=never, faults=[("network.down", "kafka", 25.0, 39.0)],
                                 end=51.0), spec)
    # healed at 39, the recover phase never ended, samples to 50.5: only 2 after the bound (49)
    assert_checks(short["checks"], {"recovery": "NODATA"})
    assert "the control was watched 11.5 s after its last heal, not the 10 s bound and 3 samples more" in \
        message(short, "recovery")
    enough = discriminate(history(tmp_path, metrics=never, faults=[("network.down", "kafka", 25.0, 39.0)],
                                  end=52.0), spec)
    assert_checks(enough["checks"], {"recovery": "FAILED"})  # 49.5, 50.5, 51.5: a recovery in time would have shown


def test_a_bound_in_sessions_is_not_judged_on_a_count_of_events(tmp_path):
    spec = spec_of(tmp_path, hardened="    targets: {lost: 2, duplicated: 0}")
    result = discriminate(history(tmp_path, metrics=recovering), spec, oracle=covered(lost=1))
    assert_checks(result["checks"], {"lost": "NODATA", "duplicated": "PASSED"})
    assert "the hardened bound (2) counts sessions, the control's oracle counts acknowledged events" in \
        message(result, "lost")
    sessions = discriminate(history(tmp_path, metrics=recovering), spec, oracle=clean_oracle())
    assert_checks(sessions["checks"], {"lost": "PASSED", "duplicated": "PASSED"})  # same units: judged as for the arm


def test_log_lines_the_control_never_watched_are_not_judged(tmp_path):
    spec = spec_of(tmp_path, hardened="    targets: {logs: {expected: ['integrity: state version'], "
                                      "forbidden: [boom, 'CANNOT_LOAD']}}")
    result = discriminate(history(tmp_path), spec)  # the control watched only 'boom' and it never matched
    assert_checks(result["checks"], {"logs": "NODATA"})
    assert "the control's logs were not watched for 'integrity: state version', 'CANNOT_LOAD'" in \
        message(result, "logs")
    seen = discriminate(history(tmp_path, extra=[_log(30, "boom", "ERROR boom")]), spec)
    assert_checks(seen["checks"], {"logs": "FAILED"})
    assert message(seen, "logs").startswith("forbidden 'boom' matched")


def test_a_state_bound_exceeded_stands_where_a_trend_needs_its_whole_window(tmp_path):
    def grows(t):
        return {**healthy(t), "state_rows": int(100 + 50 * max(0.0, t - 20))}
    bounded = spec_of(tmp_path, hardened="    targets: {state: {trend: plateau, during: [inject, recover], "
                                         "max_rows: 400}}")
    result = discriminate(history(tmp_path, metrics=grows, end=35.0), bounded)
    assert_checks(result["checks"], {"state": "FAILED"})
    assert "max state rows 825 > 400" in message(result, "state")
    trend = spec_of(tmp_path, hardened="    targets: {state: {trend: plateau, during: [inject, recover]}}")
    assert_checks(discriminate(history(tmp_path, metrics=grows, end=35.0), trend)["checks"], {"state": "NODATA"})
    assert_checks(discriminate(history(tmp_path, metrics=grows), trend)["checks"], {"state": "FAILED"})
    assert_checks(discriminate(history(tmp_path), trend)["checks"], {"state": "PASSED"})


# -- spec and suite fields -------------------------------------------------------------------------------------
def test_the_new_fields_round_trip_and_older_spec_json_files_load(tmp_path):
    spec = dataclasses.replace(spec_of(tmp_path, top="cannot_discriminate: no counterpart"),
                               require_discrimination=True)
    stored = json.loads(json.dumps(spec.to_dict()))
    assert (stored["cannot_discriminate"], stored["require_discrimination"]) == ("no counterpart", True)
    assert ExperimentSpec.from_dict(stored) == spec
    for key in ("cannot_discriminate", "require_discrimination"):
        del stored[key]
    older = ExperimentSpec.from_dict(stored)
    assert (older.cannot_discriminate, older.require_discrimination) == (None, False)
    for name in (RUN_A, RUN_B):  # spec.json files of real runs, written before these fields existed
        for path in (FIXTURES / name).glob("*/spec.json"):
            assert ExperimentSpec.from_dict(json.loads(path.read_text())).cannot_discriminate is None


@pytest.mark.parametrize("top, error", [
    ("cannot_discriminate: ''", "cannot_discriminate: '' is not valid; allowed: a non-empty string"),
    ("cannot_discriminate: [a]", "cannot_discriminate: ['a'] is not valid; allowed: a non-empty string"),
    ("require_discrimination: true", "require_discrimination: unknown field; allowed: name, description"),
])
def test_a_bad_waiver_is_one_line(tmp_path, top, error):
    with pytest.raises(SpecError) as caught:
        spec_of(tmp_path, top=top)
    assert str(caught.value).startswith(f"{tmp_path / 't-disc.yaml'}: {error}") and "\n" not in str(caught.value)


def test_a_suite_requires_discrimination_of_every_entry(tmp_path):
    spec_of(tmp_path)
    suite = tmp_path / "suite.yaml"
    suite.write_text("name: s\nrequire_discrimination: true\nexperiments: [{path: t-disc.yaml}]\n")
    loaded = load_suite(suite)
    assert loaded.require_discrimination and loaded.entries[0].spec.require_discrimination
    assert ExperimentSpec.from_dict(loaded.entries[0].spec.to_dict()).require_discrimination  # in spec.json
    suite.write_text("name: s\nexperiments: [{path: t-disc.yaml}]\n")
    assert not load_suite(suite).entries[0].spec.require_discrimination
    suite.write_text("name: s\nrequire_discrimination: 'yes'\nexperiments: [{path: t-disc.yaml}]\n")
    with pytest.raises(SpecError, match=r"suite.yaml: require_discrimination: 'yes' is not valid; allowed: true \| "
                                        r"false$"):
        load_suite(suite)


def test_nightly_and_pre_release_require_discrimination_and_smoke_does_not():
    suites = ROOT / "experiments" / "suites"
    assert load_suite(suites / "nightly.yaml").require_discrimination
    assert load_suite(suites / "pre-release.yaml").require_discrimination
    assert not load_suite(suites / "smoke.yaml").require_discrimination
    nightly = {e.spec.name: e.spec for e in load_suite(suites / "nightly.yaml").entries}
    assert all(spec.require_discrimination for spec in nightly.values())
    assert sorted(name for name, spec in nightly.items() if spec.cannot_discriminate) == [
        "checkpoint-commit-failures", "cluster-leader-move", "cluster-rolling-restart", "cluster-worker-partition",
        "crash-anywhere", "driver-latency", "kafka-broker-disconnect", "kafka-retention-passed", "lifecycle-kills",
        "process-crash", "slow-s3-put"]


def test_the_nightly_leaves_out_only_waived_controls_and_pre_release_runs_every_control():
    """A control that can show its incident runs every night; one that cannot (waived) runs in pre-release."""
    suites = ROOT / "experiments" / "suites"
    nightly = {e.spec.name: e.spec for e in load_suite(suites / "nightly.yaml").entries}
    pre_release = {e.spec.name: e.spec for e in load_suite(suites / "pre-release.yaml").entries}
    assert set(pre_release) == set(nightly)
    for name, spec in pre_release.items():  # every arm its experiment has (one has no control at all)
        own = load_experiment(ROOT / "experiments" / f"{name}.yaml")
        assert [arm.profile for arm in spec.arms] == [arm.profile for arm in own.arms], name
    left_out = sorted(name for name, spec in nightly.items()
                      if [arm.profile for arm in spec.arms] != [arm.profile for arm in pre_release[name].arms])
    assert left_out == sorted(name for name, spec in nightly.items() if spec.cannot_discriminate)
    assert all([arm.profile for arm in nightly[name].arms] == ["hardened"] for name in left_out)


def test_the_smoke_runs_no_waived_control_and_one_control_per_incident_family():
    """The smoke is a gate chosen by what it catches (experiments/suites/smoke.yaml): a control that can only survive
    (waived) shows nothing there, and one cheap discriminating control per incident family is enough (001's,
    corrupted-sst's, faces another damage than the hardened arm, so the swap test cannot judge it: nightly)."""
    suites = ROOT / "experiments" / "suites"
    smoke = {e.spec.name: e.spec for e in load_suite(suites / "smoke.yaml").entries}
    with_control = [spec for spec in smoke.values() if "naive" in [arm.profile for arm in spec.arms]]
    assert not [spec.name for spec in with_control if spec.cannot_discriminate]
    families = [spec.incident.file[:3] for spec in with_control]
    assert sorted(families) == sorted(set(families)) == ["000"]  # 001, 003: smoke.yaml says why not


def test_every_smoke_entry_says_why_it_is_there():
    text = (ROOT / "experiments" / "suites" / "smoke.yaml").read_text()
    entries = text.split("  - path: ")[1:]
    assert len(entries) == len(load_suite(ROOT / "experiments" / "suites" / "smoke.yaml").entries)
    for entry in entries:
        assert "# Why: " in entry, entry.splitlines()[0]


# -- whole runs: chaos check and the exit code -------------------------------------------------------------------
def make_run(tmp_path: Path, spec: ExperimentSpec, naive: Story | None, naive_oracle: dict | None = None) -> Path:
    run_dir = tmp_path / "run"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"suite": "t", "status": "completed", "experiments": [spec.name]}))
    experiment = run_dir / spec.name
    experiment.mkdir()
    (experiment / "spec.json").write_text(json.dumps(spec.to_dict()))
    (experiment / "hardened").mkdir()
    write_history(experiment / "hardened" / "history.jsonl", Story(metrics=recovering))
    (experiment / "hardened" / "oracle.json").write_text(json.dumps(clean_oracle()))
    if naive is not None:
        (experiment / "naive").mkdir()
        write_history(experiment / "naive" / "history.jsonl", naive)
        if naive_oracle is not None:
            (experiment / "naive" / "oracle.json").write_text(json.dumps(naive_oracle))
    return run_dir


def test_the_suite_flag_changes_the_exit_code_and_chaos_check_agrees_with_the_run(tmp_path, capsys):
    control = Story(metrics=recovering, extra=[_log(30, "boom", "ERROR boom")])
    spec = spec_of(tmp_path)
    reported = make_run(tmp_path / "a", spec, control, covered())
    assert cli.check(reported) == 0
    results = json.loads((reported / "results.json").read_text())
    [experiment] = results["experiments"]
    assert experiment["discrimination"]["status"] == "not_discriminating" and experiment["verdict"] == "PASSED"
    out = capsys.readouterr().out
    assert "NOT DISCRIMINATING  t-disc: a job without the hardening passes every hardened target (reported only" in out

    required = make_run(tmp_path / "b", dataclasses.replace(spec, require_discrimination=True), control, covered())
    assert cli.check(required) == 1
    results = json.loads((required / "results.json").read_text())
    [experiment] = results["experiments"]
    assert (results["verdict"], experiment["verdict"]) == ("FAILED", "FAILED")
    assert [a["verdict"] for a in experiment["arms"]] == ["PASSED", "PASSED"]  # the arms keep their verdicts
    assert experiment["discrimination"]["verdict"] == "FAILED"
    assert "(required by this suite: FAILED)" in capsys.readouterr().out

    waived = make_run(tmp_path / "c", dataclasses.replace(spec, require_discrimination=True,
                                                          cannot_discriminate="no counterpart"), control, covered())
    assert cli.check(waived) == 0
    inconclusive = make_run(tmp_path / "d", dataclasses.replace(spec, require_discrimination=True), control)
    assert cli.check(inconclusive) == 1  # no oracle: inconclusive, and a required discrimination not shown fails
    out = capsys.readouterr().out
    assert "INCONCLUSIVE        t-disc: inconclusive: a job without the hardening failed no hardened outcome " \
           "target, but lost could not be judged" in out and out.count("(required by this suite: FAILED)") == 1
    case = next(c for c in ET.parse(write_junit(inconclusive)).getroot().iter("testcase")
                if c.get("name") == "t-disc/discrimination")
    assert case.find("failure") is not None and case.find("failure").get("type") == "INCONCLUSIVE"
    assert "(required by this suite: the experiment fails)" in case.find("failure").text


def test_without_a_control_arm_it_is_not_run(tmp_path):
    run_dir = make_run(tmp_path, spec_of(tmp_path), None)
    discrimination = judge_run(run_dir)["experiments"][0]["discrimination"]
    assert (discrimination["status"], discrimination["message"]) == (
        "not_run", "a job without the hardening: not run (the control (naive) arm was not run)")
    path = tmp_path / "only.yaml"
    path.write_text(SPEC.format(hardened=HARDENED, naive=NAIVE, top="").split("  naive:")[0])
    discrimination = judge_run(make_run(tmp_path / "x", load_experiment(path), None))["experiments"][0]
    assert discrimination["discrimination"]["message"].endswith("(the experiment has no control (naive) arm in "
                                                                "this run)")


def test_a_waived_experiment_without_its_control_stays_waived_and_says_the_control_did_not_run(tmp_path):
    spec = dataclasses.replace(spec_of(tmp_path), cannot_discriminate="the naive job survives it too",
                               require_discrimination=True)
    discrimination = judge_run(make_run(tmp_path, spec, None))["experiments"][0]["discrimination"]
    assert (discrimination["status"], discrimination["verdict"], discrimination["measured"]) == (
        "waived", "PASSED", "not_run")
    assert discrimination["message"] == ("waived: the naive job survives it too (measured: not run: the control "
                                         "(naive) arm was not run)")


def test_an_unreadable_control_history_is_inconclusive(tmp_path):
    run_dir = make_run(tmp_path, spec_of(tmp_path), Story())
    (run_dir / "t-disc" / "naive" / "history.jsonl").unlink()
    discrimination = judge_run(run_dir)["experiments"][0]["discrimination"]
    assert discrimination["status"] == "inconclusive"
    assert discrimination["checks"][0]["verdict"] == "UNKNOWN"


# -- the stored real runs ----------------------------------------------------------------------------------------
@pytest.fixture
def runs(tmp_path) -> Path:
    target = tmp_path / "runs"
    shutil.copytree(FIXTURES, target, symlinks=True)
    return target


def discriminations(run_dir: Path) -> dict[str, dict]:
    results = json.loads((run_dir / "results.json").read_text())
    return {e["name"]: e["discrimination"] for e in results["experiments"]}


def failed_on(discrimination: dict) -> list[str]:
    return [f["name"] for f in discrimination["failed"]]


def test_chaos_check_writes_the_discrimination_of_the_stored_runs(runs):
    """The numbers of docs/lab-notes.md, "Discrimination on the stored runs"."""
    assert cli.check(runs / RUN_A) == 1  # the arms' verdicts, as before: smoke does not require discrimination
    a = discriminations(runs / RUN_A)
    assert {name: d["status"] for name, d in a.items()} == {
        "kafka-broker-disconnect": "not_run", "slow-s3-put": "discriminating", "driver-latency": "discriminating",
        "corrupted-sst": "discriminating", "process-crash": "not_run"}
    # corrupted-sst: the naive job dies on the damaged SST (the incident) and stays dead
    assert failed_on(a["corrupted-sst"]) == ["progress", "recovery", "lost"]  # its log line is listed, not counted
    sst = {c["name"]: c for c in a["corrupted-sst"]["checks"]}
    assert sst["logs"]["message"].startswith("forbidden 'Bad table magic number' matched "
                                             "logs/job-naive-d8d3dc58-2.log:48")
    assert sst["lost"]["measured"] == "22156" and sst["recovery"]["measured"] == "not recovered"
    assert (sst["duplicated"]["verdict"], sst["lineage"]["verdict"]) == ("NODATA", "NODATA")  # passed, on 1 of 3
    assert "passing fewer faults proves nothing" in sst["lineage"]["message"]
    # driver-latency in this run: batches every 2-3 s after the pause, never 3 healthy samples in a row
    assert failed_on(a["driver-latency"]) == ["recovery"]
    # slow-s3-put: batches every ~3 s after the heal; its third healthy sample in a row came only in the drain, after
    # the recover phase (28.5 s once, when the drain's samples counted): not recovered while the workload ran
    assert_checks(a["slow-s3-put"]["checks"], {"progress": ("PASSED", "steady: +3, inject: +1, recover: +14"),
                                               "recovery": ("FAILED", "not recovered"), "lost": ("PASSED", "0"),
                                               "duplicated": ("PASSED", "0")}, "verdict,measured")
    assert "before the recover phase ended at t=88.3s (the drain after it is not judged)" in message(
        a["slow-s3-put"], "recovery")

    assert cli.check(runs / RUN_B) == 1  # FAILED since issue 36 (tests/fixtures/runs/README.md)
    b = discriminations(runs / RUN_B)
    # In this run's specs a heal is followed by the next fault 1.2 s (kafka) and 2.0 s (driver-latency) later, and no
    # recovery is `grouped`: the controls fail recovery on the schedule alone, as the hardened arms do.
    assert {name: d["status"] for name, d in b.items()} == {
        "kafka-broker-disconnect": "discriminating", "slow-s3-put": "not_run",
        "driver-latency": "discriminating", "process-crash": "not_run"}
    assert failed_on(b["kafka-broker-disconnect"]) == failed_on(b["driver-latency"]) == ["recovery"]
    # With the group declared, as experiments/*.yaml now do (tests/unit/fixture_runs.py), they do not discriminate
    grouped = discriminations(passed_copy(runs / RUN_B))
    assert_checks(grouped["kafka-broker-disconnect"]["checks"], {
        "progress": "steady: +2, inject: +3, recover: +5", "recovery": "6.3s", "lost": "0", "duplicated": "0",
        "probe:processed_rate": "1/7 outside (14%)"}, "measured")
    assert {c["name"]: c["measured"] for c in grouped["driver-latency"]["checks"]}["recovery"] == "9.3s"
    # Its control completed one batch in 5 s in the steady phase, but that batch took 4.6 s: the naive list state is
    # slow on two cores, not stuck, so it passes the steady rule (busy, not idle). The experiment is waived in the
    # suites.
    assert failed_on(grouped["driver-latency"]) == failed_on(grouped["kafka-broker-disconnect"]) == []


def _require(run_dir: Path, waive: str | None = None) -> None:
    """What the nightly suite writes: require_discrimination in every spec.json (and a waiver in one)."""
    for path in run_dir.glob("*/spec.json"):
        spec = json.loads(path.read_text())
        spec["require_discrimination"] = True
        if waive and path.parent.name == waive:
            spec["cannot_discriminate"] = "Spark has no checkpoint acknowledgement that can time out"
        path.write_text(json.dumps(spec))


def test_a_stored_run_judged_as_a_nightly_fails_on_its_non_discriminating_experiments(runs, capsys):
    passed_copy(runs / RUN_B)  # run B made to pass (tests/unit/fixture_runs.py)
    _require(runs / RUN_B)
    assert cli.check(runs / RUN_B) == 1  # every arm PASSED; two experiments do not discriminate
    results = json.loads((runs / RUN_B / "results.json").read_text())
    assert results["verdict"] == "FAILED"
    assert {e["name"]: e["verdict"] for e in results["experiments"]} == {
        "kafka-broker-disconnect": "FAILED", "slow-s3-put": "PASSED", "driver-latency": "FAILED"}
    out = capsys.readouterr().out
    assert "NOT DISCRIMINATING  kafka-broker-disconnect: a job without the hardening passes every hardened target " \
           "(required by this suite: FAILED)" in out
    assert "discrimination (the control judged by the hardened targets): 2 not discriminating, 1 not run" in out

    _require(runs / RUN_B, waive="driver-latency")
    cli.check(runs / RUN_B)
    b = discriminations(runs / RUN_B)
    assert (b["driver-latency"]["status"], b["driver-latency"]["verdict"]) == ("waived", "PASSED")
    assert b["kafka-broker-disconnect"]["verdict"] == "FAILED"


def page(run_dir: Path) -> str:
    """index.html's text without the plots (they take ~0.2 s each and show nothing of the discrimination)."""
    return render_report(load_run(run_dir, with_timelines=False))


def test_the_report_shows_one_line_per_experiment_and_junit_one_case(runs):
    cli.check(runs / RUN_A)
    text = page(runs / RUN_A)
    sst = text[text.index('<section id="corrupted-sst">'):]
    sst = sst[:sst.index('<div class="arm"')]
    assert '<p class="disc disc-discriminating" data-status="discriminating">a job without the hardening: FAILED on ' \
           "progress (no batch completed during recover" in sst
    assert "FAILED on logs" not in sst  # a log line is no outcome: not among what discriminates
    slow = text[text.index('<section id="slow-s3-put">'):]
    assert '<p class="disc disc-discriminating" data-status="discriminating">a job without the hardening: FAILED on ' \
           "recovery" in slow[:slow.index('<div class="arm"')]
    assert '<table class="discrimination">' in text and text.count('<td class="disc disc-') == 5

    suite = ET.parse(write_junit(runs / RUN_A)).getroot().find("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert suite.get("tests") == str(6 + 5) and suite.get("failures") == "3" and suite.get("skipped") == "2"
    passed = cases["driver-latency/discrimination"]
    assert [c.tag for c in passed] == ["properties", "system-out"]
    assert passed.get("classname") == "driver-latency"
    props = {p.get("name"): p.get("value") for p in passed.find("properties")}
    assert props == {"status": "discriminating", "required": "false", "measured": "discriminating",
                     "control": "naive", "failed_on": "recovery"}
    assert "FAILED recovery: expected <= 30s, measured not recovered." in passed.find("system-out").text
    assert cases["slow-s3-put/discrimination"].find("skipped") is None

    # a control that passes every hardened target: run B made to pass (tests/unit/fixture_runs.py)
    passed_copy(runs / RUN_B)
    cli.check(runs / RUN_B)
    text = page(runs / RUN_B)
    kafka = text[text.index('<section id="kafka-broker-disconnect">'):]
    assert '<p class="disc disc-not_discriminating" data-status="not_discriminating">NOT DISCRIMINATING: a job ' \
           "without the hardening passes every hardened target (reported only: this suite does not require " \
           "discrimination)</p>" in kafka[:kafka.index('<div class="arm"')]
    suite = ET.parse(write_junit(runs / RUN_B)).getroot().find("testsuite")
    assert suite.find("testcase[@name='kafka-broker-disconnect/discrimination']/skipped").get("message").startswith(
        "NOT DISCRIMINATING")
    _require(runs / RUN_B)
    cli.check(runs / RUN_B)
    suite = ET.parse(write_junit(runs / RUN_B)).getroot().find("testsuite")
    failure = suite.find("testcase[@name='kafka-broker-disconnect/discrimination']/failure")
    assert failure.get("message") == NOT_DISCRIMINATING and failure.get("type") == "NOT_DISCRIMINATING"
    text = page(runs / RUN_B)
    assert "passes every hardened target (required by this suite: the experiment fails)</p>" in text


def test_an_older_results_json_has_no_discrimination_and_reports_as_before(runs):
    results = json.loads((FIXTURES / RUN_A / "results.json").read_text())
    assert all("discrimination" not in e for e in results["experiments"])
    text = page(runs / RUN_A)
    assert 'class="disc' not in text and '<table class="discrimination">' not in text
    names = [c.get("name") for c in ET.parse(write_junit(runs / RUN_A)).getroot().iter("testcase")]
    assert not [n for n in names if n.endswith("/discrimination")]


@pytest.mark.parametrize("mechanism", ["logs", "refused_within", "exit_code", "signature_ratio"])
def test_only_outcomes_discriminate_a_mechanism_alone_never_does(tmp_path, mechanism):
    """A job without the hardening has no lease to refuse with, no exit code of its own and no repair line: a failed
    mechanism shows that it lacks the hardening, not that its users would see anything go wrong."""
    spec = spec_of(tmp_path)
    outcomes = [Check(name, "PASSED", "", "", "fine") for name in ("progress", "lost", "duplicated")]
    mechanism_failed = Check(mechanism, "FAILED", "", "", "no such line")
    result = discrimination_result(spec, [*outcomes, mechanism_failed])
    assert (result["status"], result["failed"]) == ("not_discriminating", [])
    result = discrimination_result(spec, [Check("lost", "NODATA", "", "", "undrained"), mechanism_failed])
    assert result["status"] == "inconclusive" and result["message"].endswith(f"({mechanism} FAILED: not an outcome, "
                                                                              "not counted)")
    lost = Check("lost", "FAILED", "", "", "7 sessions lost")
    assert discrimination_result(spec, [lost, mechanism_failed])["failed"] == [
        {"name": "lost", "verdict": "FAILED", "message": "7 sessions lost"}]
