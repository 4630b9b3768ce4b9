"""`chaos mutate` (chaos/mutate.py, chaos/switches.py): the mutants it plans and how it judges them, pure."""
from __future__ import annotations

import json

from chaos.mutate import matrix, mutant, mutant_status, plan
from chaos.spec import load_experiment
from chaos.switches import SWITCHES
from job.settings import FACTORIES

from .test_spec import ROOT


def spec(name: str):
    return load_experiment(ROOT / "experiments" / f"{name}.yaml")


def settings_of(mutated):
    return mutated.apply_settings("hardened", FACTORIES["hardened"]("t", "d", "p"))


def test_each_mutant_turns_exactly_one_switch_off():
    base = settings_of(spec("kafka-broker-disconnect"))
    for switch in SWITCHES:
        mutated = settings_of(mutant(spec("kafka-broker-disconnect"), switch))
        changed = {f for f in base.__dataclass_fields__ if getattr(base, f) != getattr(mutated, f)}
        expected = set(SWITCHES[switch].off) | ({"max_session_ms"} if SWITCHES[switch].job_off else set())
        assert changed and changed <= expected, (switch, changed)  # a switch may clear fields already clear
    assert settings_of(mutant(spec("kafka-broker-disconnect"), "kafka_options")).kafka_options == {}
    assert settings_of(mutant(spec("slow-s3-put"), "s3a_options")).s3a_options == {}
    assert settings_of(mutant(spec("hot-key-session-growth"), "max_session")).max_session_ms is None


def test_the_plan_runs_the_hardened_arm_alone_once_per_claimed_switch():
    specs = [spec("corrupted-sst"), spec("checkpoint-collision"), spec("driver-latency")]
    rows = plan(specs)
    assert [(r["experiment"], r["switch"]) for r in rows] == [
        ("corrupted-sst", "verify_state"), ("checkpoint-collision", "lease")]
    assert all([a.profile for a in r["mutant"].arms] == ["hardened"] for r in rows)
    assert rows[0]["mutant"].name == "corrupted-sst--verify_state" and not rows[0]["mutant"].claims
    assert [r["switch"] for r in plan(specs, ["lease"])] == ["lease"]


def _arm(verdict, *checks):
    return {"profile": "hardened", "verdict": verdict,
            "checks": [{"name": name, "verdict": v, "message": f"{name} {v}"} for name, v in checks]}


def test_a_mutant_is_killed_only_by_an_outcome_never_by_a_log_line():
    assert mutant_status(_arm("FAILED", ("lost", "FAILED"), ("logs", "PASSED")))[0] == "killed"
    assert mutant_status(_arm("HANG", ("progress", "HANG")))[0] == "killed"
    assert mutant_status(_arm("FAILED", ("probe:lag", "FAILED")))[0] == "killed"
    survived, why = mutant_status(_arm("FAILED", ("lost", "PASSED"), ("logs", "FAILED")))
    assert survived == "survived" and "logs" in why
    assert mutant_status(_arm("PASSED", ("lost", "PASSED")))[0] == "survived"
    assert mutant_status(_arm("UNKNOWN", ("environment", "UNKNOWN")))[0] == "unknown"
    assert mutant_status(None)[0] == "unknown"


def test_the_matrix_kills_a_switch_when_any_experiment_kills_it():
    rows = [{"experiment": "a", "switch": "lease", "mutant": "a--lease"},
            {"experiment": "b", "switch": "lease", "mutant": "b--lease"},
            {"experiment": "a", "switch": "supervise", "mutant": "a--supervise"}]
    results = {"experiments": [
        {"name": "a--lease", "arms": [_arm("PASSED", ("lost", "PASSED"))]},
        {"name": "b--lease", "arms": [_arm("FAILED", ("lost", "FAILED"))]},
        {"name": "a--supervise", "arms": [_arm("PASSED", ("lost", "PASSED"))]}]}
    result = matrix(results, rows)
    assert result["switches"]["lease"]["status"] == "killed" and result["switches"]["lease"]["killed_by"] == ["b"]
    assert result["survivors"] == ["supervise"] and result["claimed_kill_rate"] == 0.5
    assert "max_session" in result["not_run"]


def test_the_kill_rate_counts_every_switch_and_an_unclaimed_one_as_not_killed():
    rows = [{"experiment": "a", "switch": "lease", "mutant": "a--lease"}]
    result = matrix({"experiments": [{"name": "a--lease", "arms": [_arm("FAILED", ("lost", "FAILED"))]}]}, rows)
    assert (result["killed"], result["total"], result["claimed"]) == (1, len(SWITCHES), 1)
    assert result["kill_rate"] == round(1 / len(SWITCHES), 3)
    assert set(result["not_run"]) == set(SWITCHES) - {"lease"}
    assert all(result["switches"][name]["status"] == "not claimed" for name in result["not_run"])


def test_the_claimed_subset_figure_says_every_claimed_switch_was_killed():
    from chaos.mutate import headline

    rows = [{"experiment": "a", "switch": "lease", "mutant": "a--lease"},
            {"experiment": "b", "switch": "supervise", "mutant": "b--supervise"}]
    killed = {"experiments": [{"name": "a--lease", "arms": [_arm("FAILED", ("lost", "FAILED"))]},
                              {"name": "b--supervise", "arms": [_arm("FAILED", ("progress", "FAILED"))]}]}
    result = matrix(killed, rows)
    assert (result["claimed"], result["claimed_kill_rate"]) == (2, 1.0)
    line = headline(result, "the smoke")
    assert line.startswith(f"mutation kill rate 2 of {len(SWITCHES)} switches (")
    assert "every switch the smoke claims was killed (2 of 2)" in line
    one = matrix({"experiments": [killed["experiments"][0],
                                  {"name": "b--supervise", "arms": [_arm("PASSED", ("lost", "PASSED"))]}]}, rows)
    assert "of the 2 the smoke claims: 1 killed" in headline(one, "the smoke")
    assert "survivors: supervise" in headline(one, "the smoke")


def test_exit_code_or_refused_within_alone_do_not_kill():
    for mechanism in ("exit_code", "refused_within"):
        status, why = mutant_status(_arm("FAILED", (mechanism, "FAILED"), ("lost", "PASSED")))
        assert status == "survived" and mechanism in why, mechanism
    assert mutant_status(_arm("FAILED", ("exit_code", "FAILED"), ("lost", "FAILED")))[0] == "killed"
    assert mutant_status(_arm("FAILED", ("outage_reported", "FAILED")))[0] == "killed"
    assert mutant_status(_arm("FAILED", ("emitted_within", "FAILED")))[0] == "killed"


def test_judge_run_writes_the_matrix_of_a_stored_mutate_run(tmp_path):
    from chaos.checks.judge import judge_run

    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"status": "completed", "experiments": []}))
    (run / "mutation.json").write_text(json.dumps([{"experiment": "x", "switch": "lease", "mutant": "x--lease"}]))
    results = judge_run(run)
    assert results["mutation"]["switches"]["lease"]["status"] == "unknown"  # the mutant never ran
    assert results["verdict"] == "UNKNOWN"


def test_a_mutant_without_max_session_is_judged_by_its_own_rules_and_on_its_withheld_output():
    """The oracle expects the sessions the mutant's own rules make (a session it merely did not cut is no loss: every
    event is still written once); what a user sees is the output a key that never pauses withholds: emitted_within."""
    from chaos.run import arm_config
    from job.settings import from_args

    mutated = mutant(spec("hot-key-session-growth"), "max_session")
    config = arm_config(mutated, "hardened")
    assert config.max_session_ms is None  # the oracle's rules: the mutant's own
    job = from_args(["--profile", "hardened", "--topic", "t", "--deployment", "d", "--progress-file", "p",
                     *config.job_args()])
    assert job.max_session_ms is None  # what the job runs with: the switch off
    assert arm_config(spec("hot-key-session-growth"), "hardened").max_session_ms == 20_000
    assert "emitted_within" in mutated.arm("hardened").targets.extra


def test_an_explained_survivor_is_a_survivor_and_counts_in_the_denominator():
    from chaos.mutate import headline

    assert SWITCHES["kafka_options"].explained and not SWITCHES["lease"].explained
    rows = [{"experiment": "a", "switch": "kafka_options", "mutant": "a--kafka_options"},
            {"experiment": "b", "switch": "lease", "mutant": "b--lease"}]
    results = {"experiments": [{"name": "a--kafka_options", "arms": [_arm("PASSED", ("lost", "PASSED"))]},
                               {"name": "b--lease", "arms": [_arm("FAILED", ("lost", "FAILED"))]}]}
    result = matrix(results, rows)
    assert result["switches"]["kafka_options"]["status"] == "survived"
    assert result["switches"]["kafka_options"]["explained"] == SWITCHES["kafka_options"].explained
    assert result["survivors"] == ["kafka_options"]
    assert list(result["explained"]) == ["kafka_options"]
    assert (result["claimed_kill_rate"], result["killed"], result["claimed"]) == (0.5, 1, 2)
    assert "survivors: kafka_options (explained: docs/job.md)" in headline(result)


def test_the_new_switches_give_the_job_their_off_settings():
    from chaos.run import arm_config
    from job.settings import from_args

    for experiment, switch, field in (("hot-key-session-growth", "aggregate_state", "aggregate_state"),
                                      ("key-rotation-state-leak", "aggregate_state", "aggregate_state"),
                                      ("checkpoint-commit-budget", "stop_on_repeat", "stop_on_repeat"),
                                      ("checkpoint-collision", "stop_on_takeover", "stop_on_takeover")):
        assert getattr(settings_of(spec(experiment)), field) is True, field  # the hardened job has it on
        mutated = mutant(spec(experiment), switch)
        assert getattr(settings_of(mutated), field) is False, field
        job = from_args(["--profile", "hardened", "--topic", "t", "--deployment", "d", "--progress-file", "p",
                         *arm_config(mutated, "hardened").job_args()])
        assert getattr(job, field) is False, field  # what the job's driver is started with
    assert "aggregate_state" in spec("hot-key-session-growth").claims
    assert "aggregate_state" in spec("key-rotation-state-leak").claims


def test_with_aggregate_state_off_the_job_buffers_events_but_cuts_the_same_sessions():
    from job.sessions import fold_session, run_aggregate, split_runs

    events = [(0, 0), (1_000, 1), (9_000, 2), (9_500, 3), (12_500, 4), (21_000, 5)]  # gap 3 s, buckets of 10 s
    runs = split_runs(list(reversed(events)), 3_000, 10_000)
    assert runs == [[(0, 0), (1_000, 1)], [(9_000, 2), (9_500, 3)], [(12_500, 4)], [(21_000, 5)]]
    state, closed = fold_session(None, events, 3_000, 10_000)
    assert [run_aggregate(run) for run in runs] == closed + [state]  # the aggregates the hardened job emits
    assert len(split_runs(events, 3_000, None)) == 3  # without a maximum length only the gaps cut
