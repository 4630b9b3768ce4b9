"""Issue 36, items 3 and 4: the invariants every subject arm carries (lost, duplicated, its job's exits; waived only
with a reason), an interrupted arm is INTERRUPTED, and the harness restarts only what it killed."""
from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType

import pytest

from chaos.checks.arm import judge_records
from chaos.checks.deployment import check_exits
from chaos.checks.environment import check_environment
from chaos.checks.judge import judge_run
from chaos.checks.timeline import timeline
from chaos.faults.base import FaultContext
from chaos.faults.checkpoint import CorruptCheckpoint, SecondDeployment
from chaos.faults.process import Kill
from chaos.history import HistoryWriter, read_history
from chaos.spec import SpecError, load_experiment
from chaos.spec.model import Fault
from tests.unit.test_checkers import Story, clean_oracle, recovering, write_history

REPEATED = ("job: stopped: the same failure 3 times in a row with no batch in between, after one verification of the "
            "checkpoint: SparkException: boom")


def _driver(t: float, event: str, **fields) -> tuple:
    return (t, "job", (event, "job-driver"), fields)


# The arm's final stop as chaos.run.ArmRun records it now, and as it was recorded before (no `stop`, code 0).
FINAL_STOP = _driver(59.5, "exited", code=0, stop="at the arm's end")
OLD_FINAL_STOP = _driver(59.5, "exited", code=0)


def _history(tmp_path: Path, extra: list, name: str = "history.jsonl") -> list[dict]:
    return write_history(tmp_path / name, Story(metrics=recovering, extra=extra))


def _spec(tmp_path: Path, hardened: str, naive: str = "    targets: {logs: {expected: [boom]}}"):
    path = tmp_path / "t-exits.yaml"
    path.write_text(f"""
name: t-exits
description: test
incident: {{file: 001-x.txt, error: boom}}
seed: 1
workload: {{shape: uniform, keys: 20, rate: 50, partitions: 2}}
phases: {{steady: 10s, inject: 20s, recover: 20s}}
faults:
  - {{fault: network.down, target: kafka, at: 5s, duration: 10s}}
arms:
  hardened:
{hardened}
  naive:
{naive}
""")
    return load_experiment(path)


def _checks(result: dict) -> dict[str, dict]:
    return {c["name"]: c for c in result["checks"]}


# -- the exits check -----------------------------------------------------------------------------------------------
def test_a_job_that_exits_7_mid_arm_and_was_restarted_by_the_harness_fails_naming_the_code_and_its_line(tmp_path):
    # what the harness once did: the heal found the driver down and started it again, and nothing failed
    records = _history(tmp_path, [_driver(30, "exited", code=7, line=REPEATED),
                                  _driver(35, "started", pid=2, log="logs/job-2.log"),
                                  _driver(35, "restarted", pid=2), FINAL_STOP])
    check = check_exits(timeline(records), None, "subject")
    assert check.verdict == "FAILED"
    assert check.measured == "exit 7 at t=30.0s"
    assert check.message == ("the job's driver exited 7 (a failure repeated on every restart) at t=30.0s, which the "
                             f"harness did not cause; its last line: {REPEATED}")
    spec = _spec(tmp_path, "    targets: {progress: true}")
    result = judge_records(records, spec, "hardened", oracle=clean_oracle())
    assert result["verdict"] == "FAILED" and _checks(result)["exits"]["verdict"] == "FAILED"


@pytest.mark.parametrize("final", [FINAL_STOP, OLD_FINAL_STOP], ids=["stop", "before-stop-was-recorded"])
def test_the_harness_kills_stops_and_final_stop_are_not_unexpected_exits(tmp_path, final):
    extra = [_driver(22, "exited", cause="signal 9"), _driver(22.1, "restarted", pid=2),
             _driver(28, "exited", cause="stopped to corrupt its checkpoint"), _driver(28.5, "restarted", pid=3),
             _driver(33, "exited", cause="killed at a lifecycle event to corrupt its checkpoint"), final]
    check = check_exits(timeline(_history(tmp_path, extra)), None, "subject")
    assert (check.verdict, check.measured) == ("PASSED", "none")


def test_an_exit_during_start_up_is_the_jobs_own(tmp_path):
    records = _history(tmp_path, [_driver(5, "exited", code=5, cause="during start-up", line="job: cannot start: x")])
    check = check_exits(timeline(records), None, "subject")
    assert check.verdict == "FAILED" and "exited 5 (no retained state verifies)" in check.message
    assert check.message.endswith("its last line: job: cannot start: x")


def test_an_exit_the_arms_exit_code_target_names_is_allowed(tmp_path):
    budget = "job: stopped: failure budget exceeded: 3 failures within 40 s (budget 2); last causes: x"
    records = _history(tmp_path, [_driver(40, "exited", code=4, line=budget)])
    check = check_exits(timeline(records), 4, "subject")
    assert check.verdict == "PASSED" and check.expected == "no exit the harness did not cause (exit 4 allowed)"
    assert "the arm's exit_code target allows it" in check.message
    assert check_exits(timeline(records), 0, "subject").verdict == "FAILED"  # another code is still judged
    spec = _spec(tmp_path, "    targets: {exit_code: 4}")
    assert _checks(judge_records(records, spec, "hardened", oracle=clean_oracle()))["exits"]["verdict"] == "PASSED"


def test_a_controls_own_exit_is_recorded_as_evidence_and_never_fails_it(tmp_path):
    records = _history(tmp_path, [_driver(30, "exited", code=1, line="job: query failed: boom"),
                                  (31, "log", ("boom", "logs/job-1.log", 7, "ERROR boom"), {})])
    spec = _spec(tmp_path, "    targets: {progress: true}")
    result = judge_records(records, spec, "naive")
    exits = _checks(result)["exits"]
    assert exits["verdict"] == "PASSED" and exits["message"].startswith("not judged on a control")
    assert "exited 1 (failed, not restarted)" in exits["message"] and "job: query failed: boom" in exits["message"]
    assert result["verdict"] == "PASSED"


def test_a_trigger_missed_while_the_driver_was_down_by_itself_is_the_jobs_failure_not_the_environments(tmp_path):
    missed = (45, "error", ("process.kill on job-driver: trigger first_batch (firing 2 of 3) did not happen within "
                            "the fault's window",), {})
    down = _history(tmp_path, [_driver(30, "exited", code=7, line=REPEATED), missed], "down.jsonl")
    assert check_environment(timeline(down)) is None
    assert check_exits(timeline(down), None, "subject").verdict == "FAILED"
    # the same error while the driver ran (or after the harness's own kill) stays the environment's
    running = _history(tmp_path, [missed], "running.jsonl")
    killed = _history(tmp_path, [_driver(30, "exited", cause="signal 9"), missed], "killed.jsonl")
    assert check_environment(timeline(running)).verdict == "UNKNOWN"  # type: ignore[union-attr]
    assert check_environment(timeline(killed)).verdict == "UNKNOWN"  # type: ignore[union-attr]


# -- invariants and their waivers ----------------------------------------------------------------------------------
def test_a_hardened_arm_that_names_no_lost_or_duplicated_is_judged_on_them_anyway(tmp_path):
    spec = _spec(tmp_path, "    targets: {progress: true}")
    assert (spec.arm("hardened").targets.lost, spec.arm("hardened").judged_targets.lost) == (None, 0)
    assert spec.arm("naive").judged_targets is spec.arm("naive").targets  # a control carries no invariants
    oracle = {**clean_oracle(), "lost": 2_096_561}
    result = judge_records(_history(tmp_path, [FINAL_STOP]), spec, "hardened", oracle=oracle)
    checks = _checks(result)
    assert (checks["lost"]["verdict"], checks["lost"]["expected"]) == ("FAILED", "<= 0")
    assert checks["duplicated"]["verdict"] == "PASSED" and result["verdict"] == "FAILED"
    assert "lost" not in _checks(judge_records(_history(tmp_path, [FINAL_STOP], "n.jsonl"), spec, "naive",
                                               oracle=oracle))


def test_a_waiver_with_its_reason_is_honoured_and_shown(tmp_path):
    spec = _spec(tmp_path, "    waive: {lost: 'the job stops on its budget by design', exits: 'measured: x'}\n"
                           "    targets: {progress: true}")
    assert spec.arm("hardened").judged_targets.lost is None
    records = _history(tmp_path, [_driver(30, "exited", code=7, line=REPEATED), FINAL_STOP])
    result = judge_records(records, spec, "hardened", oracle={**clean_oracle(), "lost": 1617})
    checks = _checks(result)
    assert "lost" not in checks and "exits" not in checks and checks["duplicated"]["verdict"] == "PASSED"
    assert result["waived"] == {"lost": "the job stops on its budget by design", "exits": "measured: x"}
    assert result["verdict"] == "PASSED"
    from chaos.report.page import _checks_cell

    assert "waived lost: the job stops on its budget by design" in _checks_cell(result)  # shown in the report
    stored = type(spec).from_dict(json.loads(json.dumps(spec.to_dict())))
    assert stored.arm("hardened").waive == spec.arm("hardened").waive


@pytest.mark.parametrize("hardened, naive, error", [
    ("    waive: {lost: why}\n    targets: {lost: 0}", None,
     r"arms\.hardened\.waive\.lost: waives lost, which the arm's targets set; allowed: either targets\.lost or its "
     r"waiver, not both$"),
    ("    waive: {state: why}\n    targets: {progress: true}", None,
     r"arms\.hardened\.waive\.state: unknown field; allowed: lost, duplicated, exits$"),
    ("    waive: {lost: ''}\n    targets: {progress: true}", None,
     r"arms\.hardened\.waive\.lost: '' is not valid; allowed: a non-empty string$"),
    ("    waive: {}\n    targets: {progress: true}", None, r"arms\.hardened\.waive: waives nothing"),
    ("    targets: {progress: true}", "    waive: {lost: why}\n    targets: {logs: {expected: [boom]}}",
     r"arms\.naive\.waive: only a subject arm carries invariants to waive"),
])
def test_a_waiver_is_validated(tmp_path, hardened, naive, error):
    with pytest.raises(SpecError, match=error):
        _spec(tmp_path, hardened, *([naive] if naive else []))


def test_every_hardened_arm_is_judged_on_lost_and_duplicated_or_says_why_not():
    root = Path(__file__).resolve().parents[2]
    for path in sorted((root / "experiments").glob("*.yaml")):
        arm = load_experiment(path).arm("hardened")
        for name in ("lost", "duplicated"):
            judged = getattr(arm.judged_targets, name) is not None
            assert judged or arm.waive.get(name), f"{path.name}: {name} neither judged nor waived"
    budget = load_experiment(root / "experiments" / "checkpoint-commit-budget.yaml").arm("hardened")
    assert set(budget.waive) == {"lost"} and "exit 4" in budget.waive["lost"]


# -- an interrupted arm ------------------------------------------------------------------------------------------
def test_an_arm_cut_short_by_an_interrupt_is_interrupted_never_passed(tmp_path):
    spec = _spec(tmp_path, "    targets: {progress: true}")
    records = _history(tmp_path, [(50, "interrupted", ("the run was interrupted (Ctrl-C or SIGTERM) while this arm "
                                                       "ran",), {})])
    result = judge_records(records, spec, "hardened", oracle={**clean_oracle(), "lost": 2_096_561, "drained": False})
    assert result["verdict"] == "INTERRUPTED"
    assert result["interrupted"] == "the run was interrupted (Ctrl-C or SIGTERM) while this arm ran"
    assert _checks(result)["lost"]["verdict"] == "FAILED"  # still measured and shown


def test_in_an_interrupted_run_an_arm_that_never_stopped_its_job_is_interrupted(tmp_path):
    spec = _spec(tmp_path, "    targets: {progress: true}")
    run_dir = tmp_path / "run"
    (run_dir / spec.name).mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"status": "interrupted", "experiments": [spec.name]}))
    (run_dir / spec.name / "spec.json").write_text(json.dumps(spec.to_dict()))
    for profile, extra in (("hardened", [FINAL_STOP]), ("naive", [])):  # the naive arm was running at the interrupt
        (run_dir / spec.name / profile).mkdir()
        write_history(run_dir / spec.name / profile / "history.jsonl", Story(metrics=recovering, extra=extra))
        (run_dir / spec.name / profile / "oracle.json").write_text(json.dumps(clean_oracle()))
    results = judge_run(run_dir)
    hardened, naive = results["experiments"][0]["arms"]
    assert (hardened["verdict"], naive["verdict"], results["verdict"]) == ("PASSED", "INTERRUPTED", "INTERRUPTED")
    assert naive["interrupted"] == "the run was interrupted before this arm stopped its job"
    assert results["experiments"][0]["verdict"] == "INTERRUPTED"
    assert json.loads((run_dir / spec.name / "naive" / "result.json").read_text())["verdict"] == "INTERRUPTED"


# -- the faults restart only what they stopped ---------------------------------------------------------------------
class FakeJob:
    def __init__(self, pid: int, log_path: Path):
        self.pid, self.log_path, self.code, self.signalled_to_end = pid, log_path, None, False

    def alive(self) -> bool:
        return self.code is None

    @property
    def returncode(self) -> int | None:
        return self.code

    def signal(self, signum: int) -> None:
        if self.code is None:
            self.signalled_to_end, self.code = True, -signum

    signal_leader = signal

    def wait(self, timeout: float | None = None) -> int | None:
        return self.code

    def end_by_itself(self, code: int) -> None:
        self.code = code


class FakeArm:
    """chaos.faults.base.ArmControl over fake drivers; its own-exit record as chaos/arm/steps.py writes it."""

    def __init__(self, history: HistoryWriter, log_path: Path):
        self.history, self.log_path = history, log_path
        self.job = FakeJob(1, log_path)
        self.starts: list[FakeJob] = []
        self.recorded: list[FakeJob] = []
        self.second = None

    def start_job(self) -> FakeJob:
        self.job = FakeJob(len(self.starts) + 2, self.log_path)
        self.starts.append(self.job)
        return self.job

    def stop_job(self, timeout: float = 60.0) -> int | None:
        self.job.signal_leader(15)
        return self.job.code

    def record_own_exit(self) -> None:
        if self.job not in self.recorded and not self.job.alive() and not self.job.signalled_to_end:
            self.recorded.append(self.job)
            self.history.job("exited", "job-driver", code=self.job.code, line=REPEATED)


def _fault(cls, name: str, target: str, tmp_path: Path, **params):
    history = HistoryWriter(tmp_path / "history.jsonl")
    log = tmp_path / "job.log"
    log.write_text(REPEATED + "\n")
    arm = FakeArm(history, log)
    fault = Fault(fault=name, target=target, at=0.0, duration=10.0, start_jitter=0.0,
                  params=MappingProxyType(params))
    ctx = FaultContext(stack=None, arm=arm, history=history, say=lambda _line: None)  # type: ignore[arg-type]
    return cls(fault, ctx), arm, history


KILL = {"signal": 9, "count": 1, "interval": None, "restart": "at_once", "broker": "leader", "executors": "all"}


def _records(history: HistoryWriter) -> list[dict]:
    history.close()
    return read_history(history.path)


def test_a_killed_driver_comes_back_at_once(tmp_path):
    kill, arm, history = _fault(Kill, "process.kill", "job-driver", tmp_path, **KILL)
    first = arm.job
    kill.run_inject()
    kill.run_heal()
    assert first.code == -9 and [j.pid for j in arm.starts] == [2] and arm.job.alive()
    jobs = [(r["event"], r.get("cause")) for r in _records(history) if r["type"] == "job"]
    assert jobs == [("exited", "signal 9"), ("restarted", None)]


def test_a_driver_that_ended_by_itself_before_the_kill_is_neither_killed_nor_restarted(tmp_path):
    kill, arm, history = _fault(Kill, "process.kill", "job-driver", tmp_path, **KILL)
    arm.job.end_by_itself(7)
    kill.run_inject()
    kill.run_heal()
    records = _records(history)
    assert arm.starts == [] and not arm.job.alive()
    assert [(r["event"], r.get("code")) for r in records if r["type"] == "job"] == [("exited", 7)]
    assert not [r for r in records if r["type"] == "error"]  # the job failed, not the environment
    assert check_exits(timeline(records), None, "subject").verdict == "FAILED"


def test_a_restarted_driver_that_then_ends_by_itself_stays_down_at_the_heal(tmp_path):
    kill, arm, history = _fault(Kill, "process.kill", "job-driver", tmp_path, **KILL)
    kill.run_inject()
    kill._thread.join(5)
    [restarted] = arm.starts
    restarted.end_by_itself(5)  # e.g. no version of its state verifies
    kill.run_heal()
    assert arm.starts == [restarted] and arm.recorded == [restarted]
    exits = [r for r in _records(history) if r["type"] == "job" and r["event"] == "exited"]
    assert [(r.get("cause"), r.get("code")) for r in exits] == [("signal 9", None), (None, 5)]


@pytest.mark.parametrize("cls, kind, params", [
    (CorruptCheckpoint, "checkpoint.corrupt", {"kind": "sst", "version": "newest", "method": "bit_flip"}),
    (SecondDeployment, "checkpoint.second_deployment", {"mode": "staggered", "stagger": 5.0}),
])
def test_a_checkpoint_faults_heal_brings_back_only_the_driver_it_stopped(tmp_path, cls, kind, params):
    fault, arm, history = _fault(cls, kind, "checkpoint", tmp_path, **params)
    fault.injected = True
    arm.job.end_by_itself(7)  # the job ended by itself during the fault: left down, recorded
    fault.run_heal()
    assert arm.starts == [] and len(arm.recorded) == 1
    again = tmp_path / "again"
    again.mkdir()
    fault, arm, history = _fault(cls, kind, "checkpoint", again, **params)
    fault.injected = True
    assert fault.stop_job("stopped for this test")  # the fault stopped it: its heal brings it back
    fault.run_heal()
    assert [j.pid for j in arm.starts] == [2] and arm.recorded == []
