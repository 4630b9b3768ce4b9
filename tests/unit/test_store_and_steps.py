"""The run store (chaos/store.py) keeps docs/run-store.md's format; the arm's phase clock (chaos/arm/schedule.py) marks
the phases in order without a stack."""
from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from chaos.arm.sampler import Sampler
from chaos.arm.schedule import FaultSchedule, PhaseClock, recovered_since
from chaos.spec.model import Recovery
from chaos.store import RunRecord, RunStore, new_run_dir


def test_a_new_run_directory_is_named_and_latest_points_at_it(tmp_path):
    first = new_run_dir("smoke", tmp_path)
    second = new_run_dir("other", tmp_path)
    assert first.name.endswith("-smoke-" + first.name.rsplit("-", 1)[1]) and second.is_dir()
    assert (tmp_path / "latest").resolve() == second.resolve()


def test_run_json_keeps_its_keys_in_the_documented_order_and_a_killed_run_keeps_the_rest(tmp_path):
    store = RunStore(tmp_path)
    store.write_run(RunRecord(suite="smoke", backend="local", scale=1.0, argv=["run"], commit=None, pid=1,
                              started="s", ended=None, status="running", lanes=1, repeat=1, experiments=["e"]))
    assert list(json.loads(store.run_file.read_text())) == [
        "suite", "backend", "scale", "argv", "commit", "pid", "started", "ended", "status", "lanes", "repeat",
        "experiments"]
    assert store.close_killed("stopped 2 processes")
    meta = json.loads(store.run_file.read_text())
    assert meta["status"] == "interrupted" and meta["killed"] is True and meta["argv"] == ["run"]
    assert list(meta)[-2:] == ["killed", "cleaned_up"] and not store.close_killed("again")
    store.write_results({"verdict": "PASSED"})
    assert store.results_file.read_text() == '{\n  "verdict": "PASSED"\n}\n'


class _Phases:
    steady, total = 0.2, 0.6

    def windows(self):
        return [("steady", 0.0, 0.2), ("inject", 0.2, 0.4), ("recover", 0.4, 0.6)]


class _SlowPhases:
    """_Phases five times longer, for a test whose marks must be told apart on a loaded machine."""
    steady, total = 1.0, 3.0

    def windows(self):
        return [("steady", 0.0, 1.0), ("inject", 1.0, 2.0), ("recover", 2.0, 3.0)]


def test_the_phase_clock_marks_every_boundary_at_its_time():
    marks: list[tuple[str, str]] = []
    targets = SimpleNamespace(recovery=None, logs=None, state=None, probes=(), exit_code=None)
    ctx = SimpleNamespace(
        phases=_Phases(), profile="hardened", say=lambda message: None, sampler=None, last_start=None,
        record_own_exit=lambda: None,
        spec=SimpleNamespace(arm=lambda profile: SimpleNamespace(role="subject", targets=targets)),
        history=SimpleNamespace(phase=lambda name, boundary: marks.append((name, boundary))),
        logs=SimpleNamespace(mark=lambda: marks.append(("logs", "mark"))))
    clock = PhaseClock(ctx, FaultSchedule(ctx))  # type: ignore[arg-type]
    started = time.monotonic()
    clock.run(started)
    # at a shared time a phase's start is recorded before the previous one's end (as always)
    assert marks == [("steady", "start"), ("logs", "mark"), ("inject", "start"), ("steady", "end"),
                     ("recover", "start"), ("inject", "end"), ("recover", "end")]
    assert 0.55 <= time.monotonic() - started < 3 and not clock.ended_early and not clock.recovered_early


def _recovering_clock(extra: dict) -> PhaseClock:
    targets = SimpleNamespace(recovery=None, logs=None, state=None, probes=(), extra=extra, exit_code=None)
    ctx = SimpleNamespace(
        phases=_Phases(), profile="hardened", say=lambda message: None, sampler=None, last_start=None,
        record_own_exit=lambda: None,
        spec=SimpleNamespace(arm=lambda profile: SimpleNamespace(role="subject", targets=targets)))
    clock = PhaseClock(ctx, FaultSchedule(ctx))  # type: ignore[arg-type]
    clock.t0 = time.monotonic() - 100.0  # the recover phase began long enough ago to end early
    clock.phase = ("recover", 0.0, 200.0)
    clock._recovered = lambda: True  # type: ignore[method-assign]  # recovery seen from the first look
    return clock


def test_the_arm_stops_once_its_job_ended_by_itself_with_the_exit_its_targets_expect_and_not_otherwise():
    """A failure budget's stop (exit 4, the arm's exit_code) leaves nothing to watch: the phases end there and the
    faults are stopped. Any other exit goes on to the phases' end, where the exits check judges it; so does a control
    whose expected exit is its incident (cluster-executor-lost's exit 1): it is drained and judged like its subject."""
    def clock_for(code: int, expected: int | None, role: str = "subject") -> tuple[PhaseClock, list]:
        job = SimpleNamespace(returncode=code)
        targets = SimpleNamespace(recovery=None, logs=None, state=None, probes=(), exit_code=expected, extra={})
        stopped: list = []
        ctx = SimpleNamespace(
            phases=_SlowPhases(), profile="hardened", say=lambda message: None, sampler=None, last_start=None,
            record_own_exit=lambda: None, driver_ended_by_itself=lambda: True, arm=SimpleNamespace(job=job),
            spec=SimpleNamespace(arm=lambda profile: SimpleNamespace(role=role, expect="incident", targets=targets)),
            history=SimpleNamespace(phase=lambda name, boundary: None), logs=SimpleNamespace(mark=lambda: None))
        schedule = FaultSchedule(ctx)  # type: ignore[arg-type]
        schedule.stop = lambda: stopped.append(True)  # type: ignore[method-assign]
        return PhaseClock(ctx, schedule), stopped  # type: ignore[arg-type]

    expected, stopped = clock_for(4, 4)
    started = time.monotonic()
    expected.run(started)
    assert expected.exited_as_expected and stopped == [True] and time.monotonic() - started < 1.5
    for code, target, role in ((7, 4, "subject"), (4, None, "subject"), (1, 1, "control")):
        other, stopped = clock_for(code, target, role)
        started = time.monotonic()
        other.run(started)
        assert not other.exited_as_expected and not stopped and time.monotonic() - started >= 2.9, (code, target, role)


def test_an_arm_with_still_healthy_watches_its_samples_after_recovery_before_the_phase_ends():
    """still_healthy must judge samples taken after recovery ended the wait, or it passes by construction."""
    plain, watched = _recovering_clock({}), _recovering_clock({"still_healthy": {"samples": 1}})
    started = time.monotonic()
    assert plain._watch_until(started + 30) == "recovered"
    plain_s = time.monotonic() - started
    started = time.monotonic()
    assert watched._watch_until(started + 30) == "recovered"
    watched_s = time.monotonic() - started
    assert plain_s < 1.5 and watched_s >= 2.0 and watched.recovered_at is not None, (plain_s, watched_s)


def test_a_job_is_warm_once_a_batch_after_its_first_is_fast_or_three_have_settled():
    """chaos.arm.steps.is_warm: the first batch never counts (it carries the start-up), a later one must take at most
    the bound, or three after the first must be done; the durations are those measured on a fresh cluster stack
    (7.7 s, 3.1 s, 4.7 s, then warm) and in a smoke's naive arm on two busy lanes (38.4 s, then 3.5-4.5 s)."""
    from chaos.arm.steps import is_warm

    def batch(ms: int | None) -> dict:
        return {"durationMs": {"triggerExecution": ms}} if ms is not None else {"durationMs": {}}

    assert not is_warm([], 2000)
    assert not is_warm([batch(900)], 2000)  # only the first: not yet
    assert not is_warm([batch(7691), batch(3069), batch(4707)], 2000)
    assert not is_warm([batch(7691), batch(None)], 2000)
    assert is_warm([batch(7691), batch(3069), batch(4707), batch(640)], 2000)
    assert is_warm([batch(7691), batch(2000)], 2000)
    assert not is_warm([batch(38375), batch(4171), batch(3613)], 2000)  # two slow ones after the first: not yet
    assert not is_warm([batch(38375), batch(4171), batch(None), batch(3613)], 2000)  # an unfinished one counts not
    assert is_warm([batch(38375), batch(4171), batch(3613), batch(4523)], 2000)  # three done: the job's own pace


class _Fault:
    """A fault as the schedule sees it: fires at once when run triggered (the test's stand-in for its events)."""

    def __init__(self, name: str):
        self.fault = SimpleNamespace(fault="process.kill", target=name)
        self.stop = threading.Event()
        self.healed_at: float | None = None
        self.window: tuple[float, float] | None = None


def _compact_schedule(recovered: threading.Event, windows: list[tuple[float, float]], inject: float = 3.0):
    """Three triggered faults planned at 0-1 s, 1-2 s and 2-3 s of the inject phase (steady 0.2 s, inject `inject`
    s), under a compact schedule; each fires as its window opens; `recovered` says whether the job's samples show
    recovery."""
    from chaos.arm import schedule as arm_schedule

    records: list[dict] = []
    spec = SimpleNamespace(schedule="compact", faults=[SimpleNamespace(at=float(i), duration=1.0, on=object())
                                                       for i in range(3)])
    ctx = SimpleNamespace(spec=spec, phases=SimpleNamespace(steady=0.2, inject=inject), last_start=None,
                          say=lambda message: None,
                          history=SimpleNamespace(schedule=lambda fault, **fields: records.append(fields)))
    schedule = FaultSchedule(ctx)  # type: ignore[arg-type]

    def run_triggered(fault, start, end, index):
        arm_schedule.sleep_until(start)
        fault.window = (start, end)
        windows.append((start, end))
        fault.healed_at = time.monotonic()

    schedule._run_triggered = run_triggered  # type: ignore[method-assign]
    original = arm_schedule.recovered_since
    arm_schedule.recovered_since = lambda ctx, since: recovered.is_set()  # type: ignore[assignment]
    return schedule, records, lambda: setattr(arm_schedule, "recovered_since", original)


def test_a_compact_schedule_opens_the_next_window_once_the_job_has_recovered():
    for recovered_at_once in (True, False):
        recovered, windows = threading.Event(), []
        if recovered_at_once:
            recovered.set()
        schedule, records, restore = _compact_schedule(recovered, windows)
        try:
            t0 = time.monotonic()
            schedule.start(t0, [(i, _Fault(f"f{i}")) for i in range(3)], {0: 0.0, 1: 0.0, 2: 0.0})
            schedule.join(timeout=10)
        finally:
            restore()
        starts = [start - t0 for start, _end in windows]
        lengths = [end - start for start, end in windows]
        # a loaded machine wakes threads late: times are read to within 0.25 s, never rounded (rounding 0.95 and
        # 0.94 lands on different sides)
        assert lengths == pytest.approx([1.0, 1.0, 1.0], abs=1e-6)  # a window moved up keeps its length
        if recovered_at_once:
            # each fault fired as its window opened: the next opened at once, and the inject phase ends after the
            # last (all three windows' time saved)
            assert starts == pytest.approx([0.2, 0.2, 0.2], abs=0.25), starts
            assert schedule.saved_s == pytest.approx(3.0, abs=0.25), schedule.saved_s
            assert [r["total_saved_s"] for r in records] == pytest.approx([1.0, 2.0, 3.0], abs=0.25)
        else:
            # no recovery seen: every window at its planned time; only the last one's rest is saved
            assert starts == pytest.approx([0.2, 1.2, 2.2], abs=0.25), starts
            assert schedule.saved_s == pytest.approx(1.0, abs=0.25), schedule.saved_s


def test_after_a_compact_schedule_s_last_fault_the_inject_phase_ends_even_when_planned_longer():
    """An inject phase planned longer than its faults' windows (a suite that shortened the windows) does not idle
    on after the last fault: what is left of it is saved too."""
    recovered, windows = threading.Event(), []
    schedule, records, restore = _compact_schedule(recovered, windows, inject=5.0)
    try:
        t0 = time.monotonic()
        schedule.start(t0, [(i, _Fault(f"f{i}")) for i in range(3)], {0: 0.0, 1: 0.0, 2: 0.0})
        schedule.join(timeout=10)
    finally:
        restore()
    # no recovery seen: the windows at their planned times, then the last one's rest and the 2 s after it saved
    assert schedule.saved_s == pytest.approx(3.0, abs=0.25), schedule.saved_s


def test_the_phase_marks_after_the_inject_start_move_up_by_what_the_schedule_saved():
    marks: list[tuple[str, str, float]] = []
    targets = SimpleNamespace(recovery=None, logs=None, state=None, probes=(), exit_code=None)
    ctx = SimpleNamespace(
        phases=_SlowPhases(), profile="hardened", say=lambda message: None, sampler=None, last_start=None,
        record_own_exit=lambda: None,
        spec=SimpleNamespace(arm=lambda profile: SimpleNamespace(role="subject", targets=targets)),
        history=SimpleNamespace(phase=lambda name, boundary: marks.append((name, boundary, time.monotonic()))),
        logs=SimpleNamespace(mark=lambda: None))
    schedule = FaultSchedule(ctx)  # type: ignore[arg-type]
    schedule.saved_s = 0.75  # as if the faults were done 0.75 s before the inject phase's planned end
    clock = PhaseClock(ctx, schedule)  # type: ignore[arg-type]
    started = time.monotonic()
    clock.run(started)
    at = {(name, boundary): t - started for name, boundary, t in marks}
    # the bounds leave a loaded machine 0.35 s to wake the clock late, and still tell moved from planned times
    assert 1.0 <= at[("inject", "start")] < 1.35, at  # not moved
    assert 1.25 <= at[("inject", "end")] < 1.6 and 2.25 <= at[("recover", "end")] < 2.6, at  # planned: 2.0 and 3.0
    # the recover phase is known to run where it was moved (its early end counts from its real start)
    name, start, end = clock.phase
    assert name == "recover" and round(start, 2) == 1.25 and round(end, 2) == 2.25


def _timed_fault_run(schedule_kind: str) -> tuple[list[str], float]:
    calls: list[str] = []
    fault = SimpleNamespace(stop=threading.Event(), spent=False, run_inject=lambda: calls.append("inject"),
                            run_heal=lambda: calls.append("heal"))
    schedule = FaultSchedule(SimpleNamespace(spec=SimpleNamespace(schedule=schedule_kind)))  # type: ignore[arg-type]
    threading.Timer(0.3, lambda: setattr(fault, "spent", True)).start()
    started = time.monotonic()
    schedule._run_fault(fault, started, started + 1.5)
    return calls, time.monotonic() - started


def test_under_a_compact_schedule_a_timed_fault_that_is_spent_heals_before_its_window_ends():
    """A second deployment refused and gone has nothing in place: its window ends then, not at its planned end."""
    for schedule_kind, expect_s in (("compact", 0.3), ("fixed", 1.5)):
        calls, took = _timed_fault_run(schedule_kind)
        assert calls == ["inject", "heal"] and expect_s <= took < expect_s + 0.8, (schedule_kind, took)


# -- recovery seen while the arm runs (issue 36) -----------------------------------------------------------------
def _recent(since: float, started_before: float | None) -> SimpleNamespace:
    """A context whose sampler's recent samples, taken after `since` (monotonic), look healthy by their own
    figures; their last batch started `started_before` seconds before `since` (None: after it)."""
    wall_since = datetime.now(UTC) - timedelta(seconds=time.monotonic() - since)
    samples = []
    for n in range(6):
        started = wall_since + timedelta(seconds=0.5 + n if started_before is None else -started_before)
        samples.append((since + 1 + n, {"lag": 10, "batch_id": 100 if started_before is not None else 100 + n,
                                        "processed_rate": 50.0, "batch_started": started.isoformat()}))
    target = Recovery(within=30.0, healthy_samples=3, lag_below=1000)
    spec = SimpleNamespace(arm=lambda profile: SimpleNamespace(targets=SimpleNamespace(recovery=target)))
    return SimpleNamespace(spec=spec, profile="hardened", sampler=SimpleNamespace(recent=samples))


def test_the_harness_sees_recovery_only_in_batches_that_started_after_the_disruption():
    """The compact schedule's next window and the recover phase's early end wait for the checkers' evidence: a
    restarted driver whose samples still show the killed one's last batch (and its rows, and its offsets) has not
    recovered."""
    since = time.monotonic() - 10
    assert recovered_since(_recent(since, started_before=None), since)  # type: ignore[arg-type]
    assert not recovered_since(_recent(since, started_before=2.0), since)  # type: ignore[arg-type]


def _progress(run: str, batch: int, rows: int) -> dict:
    return {"event": "progress", "progress": {"runId": run, "batchId": batch, "numInputRows": rows,
                                              "timestamp": "2026-11-20T00:00:00.000Z"}}


def test_processed_rate_counts_only_the_current_driver_s_batches():
    """The rate window empties at a driver start, and when the query starts again (a new runId): a killed driver's
    batches, even those read after its successor started, are no progress of the new one."""
    sampler = Sampler(None, "t", "", None, "b", "p", Path("progress.jsonl"), dict, lambda: 0, None)  # type: ignore[arg-type]
    assert sampler._window_rows(sampler._current_run([{"event": "started", "run_id": "a"}, _progress("a", 0, 500)]),
                                100.0) == 500
    sampler.driver_started()
    assert sampler._window_rows(sampler._current_run([_progress("a", 1, 400)]), 101.0) == 0  # read late
    assert sampler._window_rows(sampler._current_run([{"event": "started", "run_id": "b"}, _progress("b", 2, 300)]),
                                102.0) == 300
    assert sampler._window_rows(sampler._current_run([{"event": "started", "run_id": "c"}]), 103.0) == 0
    assert sampler._window_rows(sampler._current_run([_progress("c", 3, 200)]), 104.0) == 200


def test_the_phase_clock_asks_the_hardened_arm_whether_its_control_may_end_early(tmp_path):
    from chaos.spec import load_experiment

    def clock_of(hardened: str) -> PhaseClock:
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
  hardened: {{targets: {hardened}}}
  naive: {{targets: {{logs: {{expected: [boom]}}}}}}
""")
        ctx = SimpleNamespace(phases=_Phases(), profile="naive", spec=load_experiment(path))
        return PhaseClock(ctx, FaultSchedule(ctx))  # type: ignore[arg-type]

    assert not clock_of("{lost: 0}").early  # drained and judged on what it lost
    assert clock_of("{logs: {expected: [ok]}}").early  # nothing but a log line to judge it by
