"""The run store (chaos/store.py) keeps docs/run-store.md's format; the arm's phase clock (chaos/arm_steps.py) marks
the phases in order without a stack."""
from __future__ import annotations

import json
import time
from types import SimpleNamespace

from chaos.arm_steps import FaultSchedule, PhaseClock
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


def test_the_phase_clock_marks_every_boundary_at_its_time():
    marks: list[tuple[str, str]] = []
    targets = SimpleNamespace(recovery=None, logs=None, state=None, probes=())
    ctx = SimpleNamespace(
        phases=_Phases(), profile="hardened", say=lambda message: None, sampler=None, last_start=None,
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
    targets = SimpleNamespace(recovery=None, logs=None, state=None, probes=(), extra=extra)
    ctx = SimpleNamespace(
        phases=_Phases(), profile="hardened", say=lambda message: None, sampler=None, last_start=None,
        spec=SimpleNamespace(arm=lambda profile: SimpleNamespace(role="subject", targets=targets)))
    clock = PhaseClock(ctx, FaultSchedule(ctx))  # type: ignore[arg-type]
    clock.t0 = time.monotonic() - 100.0  # the recover phase began long enough ago to end early
    clock.phase = ("recover", 0.0, 200.0)
    clock._recovered = lambda: True  # type: ignore[method-assign]  # recovery seen from the first look
    return clock


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


def test_a_job_is_warm_once_a_batch_after_its_first_is_fast():
    """chaos.arm_steps.is_warm: the first batch never counts (it carries the start-up), a later one must take at most
    the bound; the durations are those measured on a fresh cluster stack (7.7 s, 3.1 s, 4.7 s, then warm)."""
    from chaos.arm_steps import is_warm

    def batch(ms: int | None) -> dict:
        return {"durationMs": {"triggerExecution": ms}} if ms is not None else {"durationMs": {}}

    assert not is_warm([], 2000)
    assert not is_warm([batch(900)], 2000)  # only the first: not yet
    assert not is_warm([batch(7691), batch(3069), batch(4707)], 2000)
    assert not is_warm([batch(7691), batch(None)], 2000)
    assert is_warm([batch(7691), batch(3069), batch(4707), batch(640)], 2000)
    assert is_warm([batch(7691), batch(2000)], 2000)
