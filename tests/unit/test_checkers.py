"""The checks (chaos/checks/), pure and offline: synthetic histories written through HistoryWriter with a fake
clock cover every check and every verdict (HANG, NODATA, UNKNOWN and INTERRUPTED included); judge_run on the
checked-in fixture runs agrees with their hand-written results.json, and judging twice gives the same bytes."""
from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from chaos import cli
from chaos.checks.arm import judge_records
from chaos.checks.base import ArmData
from chaos.checks.deployment import check_refused
from chaos.checks.exactly_once import check_duplicated, check_lost
from chaos.checks.judge import flaky_arms, judge_run
from chaos.checks.lineage import check_lineage
from chaos.checks.logs import check_logs, match_count
from chaos.checks.progress import check_progress
from chaos.checks.recovery import check_max_lag, check_recovery, healthy_sample, measure_recovery
from chaos.checks.state import check_state, fit_trend
from chaos.checks.steady_state import check_probe
from chaos.checks.timeline import Check, timeline
from chaos.history import HistoryWriter, read_history
from chaos.oracle import Session, compare, coverage
from chaos.spec import ExperimentSpec, Logs, Probe, Recovery, StateTarget, load_experiment
from chaos.verdicts import VERDICTS, worst
from chaos.workload import Event
from tests.unit.check_lists import assert_checks, assert_recorded

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
RUNS = ("20261123T081854-smoke-13866", "20261123T085731-smoke-464")  # cuts of real runs (tests/fixtures/make_runs.py)


# -- synthetic histories -----------------------------------------------------------------------------------------
class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    epoch = datetime(2026, 11, 20, tzinfo=UTC)

    def wall(self) -> datetime:
        return self.epoch + timedelta(seconds=self.t)


def healthy(t: float) -> dict:
    return {"input_rate": 100.0, "processed_rate": 100.0, "lag": 10, "batch_duration_ms": 500, "state_rows": 300,
            "state_bytes": 1_000_000, "checkpoint_bytes": 5000, "batch_id": int(t)}


@dataclass
class Story:
    """An arm's history: job start, phases steady [10, 20), inject [20, 40), recover [40, 60), faults, a sample at
    every x.5 s from 10.5 to 59.5 (metrics(t) -> fields, or None for no sample) and extra records."""

    metrics: Callable[[float], dict | None] = healthy
    faults: list[tuple[str, str, float, float | None]] = field(default_factory=lambda: [("network.down", "kafka",
                                                                                         25.0, 35.0)])
    extra: list[tuple[float, str, tuple, dict]] = field(default_factory=list)
    phases: bool = True
    end: float = 60.0

    def events(self) -> list[tuple[float, str, tuple, dict]]:
        events = [(0.5, "job", ("started", "job-driver"), {"pid": 1, "log": "logs/job-1.log"})]
        if self.phases:
            for name, start, stop in (("steady", 10.0, 20.0), ("inject", 20.0, 40.0), ("recover", 40.0, 60.0)):
                if start < self.end:
                    events.append((start, "phase", (name, "start"), {}))
                if stop <= self.end:
                    events.append((stop, "phase", (name, "end"), {}))
        for name, target, injected, healed in self.faults:
            events.append((injected, "fault", (name, target, "injecting", {}), {}))
            events.append((injected, "fault", (name, target, "injected", {}), {}))
            if healed is not None:
                events.append((healed, "fault", (name, target, "healing", {}), {}))
                events.append((healed, "fault", (name, target, "healed", {}), {}))
        t = 10.5
        while t < self.end:
            sample = self.metrics(t)
            if sample is not None:
                events.append((t, "sample", (), sample))
            t += 1.0
        return sorted(events + self.extra, key=lambda e: e[0])


def write_history(path: Path, story: Story) -> list[dict]:
    clock = FakeClock()
    with HistoryWriter(path, clock=clock, wall_clock=clock.wall) as history:
        for t, method, args, kwargs in story.events():
            clock.t = t
            getattr(history, method)(*args, **kwargs)
    return read_history(path)


@pytest.fixture
def story(tmp_path):
    counter = iter(range(10_000))

    def make(**changes) -> list[dict]:
        return write_history(tmp_path / f"history-{next(counter)}.jsonl", Story(**changes))
    return make


def started(t: float) -> str:
    """A sample's `batch_started`: its last completed batch started half a second before it (the fake wall clock)."""
    return (FakeClock.epoch + timedelta(seconds=t - 0.5)).isoformat(timespec="milliseconds")


def recovering(t: float) -> dict:
    """Down at 25..35 (no batches, lag climbs), then catching up: lag 5000 - 500/s, below 1000 from t=43."""
    sample = healthy(t)
    if 25 <= t < 35:
        sample.update(batch_id=25, processed_rate=0.0, lag=int(100 * (t - 25)) + 10)
    elif t >= 35:
        sample.update(batch_id=int(t) - 10, lag=max(5, int(5000 - 500 * (t - 35))))
    return sample


# -- verdicts ----------------------------------------------------------------------------------------------------
def test_worst_orders_failed_unknown_hang_nodata_passed():
    assert VERDICTS == ("FAILED", "UNKNOWN", "HANG", "NODATA", "SKIPPED", "PASSED")
    assert worst(["PASSED", "NODATA", "HANG"]) == "HANG"
    assert worst(["PASSED", "HANG", "UNKNOWN"]) == "UNKNOWN"
    assert worst(["UNKNOWN", "FAILED", "PASSED"]) == "FAILED"
    assert worst(["PASSED"]) == "PASSED"
    assert worst([]) == "NODATA" and worst([], default="PASSED") == "PASSED"
    # an arm cut short by an interrupt: below every verdict that says something is broken, above SKIPPED and PASSED
    assert worst(["PASSED", "INTERRUPTED"]) == "INTERRUPTED" and worst(["INTERRUPTED", "FAILED"]) == "FAILED"
    assert worst(["SKIPPED", "INTERRUPTED"]) == "INTERRUPTED" and worst(["INTERRUPTED", "NODATA"]) == "NODATA"
    with pytest.raises(ValueError):
        worst(["CUT"])


# -- progress ----------------------------------------------------------------------------------------------------
def test_progress_passes_when_every_phase_advances(story):
    check = check_progress(timeline(story(metrics=recovering)))
    assert check.verdict == "PASSED", check
    assert check.measured == "steady: +9, inject: +10, recover: +20"


def test_progress_fails_when_one_phase_is_stuck(story):
    def stuck_in_recover(t):
        return {**healthy(t), "batch_id": min(int(t), 39)}
    check = check_progress(timeline(story(metrics=stuck_in_recover)))
    assert check.verdict == "FAILED"
    assert "recover: stuck at 39" in check.measured
    assert check.message.startswith("no batch completed during recover (t=40.0s to 60.0s)")


def test_progress_counts_batches_rerun_under_lower_ids_after_a_rollback(story):
    # Restarted at t=42 on a checkpoint rolled back from batch 39 to 30 (a damaged snapshot set aside): the job runs
    # 31, 32, ... again and, with no batch cap, catches up in fewer batches than it rolled back (recovery-size-256mib,
    # 2026-11-29: ids stayed under the last before the damage for the whole of a recover phase that ended recovered).
    def rolled_back(t):
        batch = min(int(t), 39) if t < 42 else 30 + (int(t) - 42) // 3
        return {**healthy(t), "batch_id": batch, "run_id": "first" if t < 42 else "second",
                "batch_started": str(batch) + ("" if t < 42 else "again")}
    check = check_progress(timeline(story(metrics=rolled_back)))
    assert check.verdict == "PASSED", check
    assert "recover: 6 batches completed, the last 35 (rolled back from 39)" in check.measured

    # ... but a job that completes nothing after the restart is stuck, whatever ids it reported before
    def stuck_after_the_restart(t):
        return {**rolled_back(t), "batch_id": min(int(t), 39), "run_id": "first", "batch_started": str(min(int(t), 39))}
    assert "recover: stuck at 39" in check_progress(timeline(story(metrics=stuck_after_the_restart))).measured


def test_progress_needs_a_steady_rate_before_the_faults_and_at_the_end_not_one_batch(story):
    def one_batch_per_phase(t):
        return {**healthy(t), "batch_id": 1 if t < 19 else 2 if t < 39 else 3 if t < 59 else 4}
    check = check_progress(timeline(story(metrics=one_batch_per_phase)))
    assert check.verdict == "FAILED" and "did not complete steadily during steady" in check.message

    def every_third_second(t):
        return {**healthy(t), "batch_id": int(t) // 3}
    assert check_progress(timeline(story(metrics=every_third_second))).verdict == "PASSED"


def test_steady_progress_excuses_a_slow_batch_but_not_an_idle_job(story):
    # A slow target: every batch takes 6 s and the next starts at once. Busy, not stuck.
    def slow_batches(t):
        return {**healthy(t), "batch_id": int(t) // 6, "batch_duration_ms": 6000 if int(t) % 6 == 0 else None}
    assert check_progress(timeline(story(metrics=slow_batches))).verdict == "PASSED"

    # The same rate from 0.5 s batches: the job sat idle 5.5 s between them.
    def idle_between(t):
        return {**slow_batches(t), "batch_duration_ms": 500 if int(t) % 6 == 0 else None}
    check = check_progress(timeline(story(metrics=idle_between)))
    assert check.verdict == "FAILED", check
    assert "no batch completed or ran for 5.5s up to t=18.5s (> 5s)" in check.message
    assert check.measured.endswith("; steady: idle 5.5s")

    # Stuck at the end of recover: idle from the last batch to the end, less that batch's duration.
    def stalls_at_the_end(t):
        return {**healthy(t), "batch_id": min(int(t), 52)}
    check = check_progress(timeline(story(metrics=stalls_at_the_end)))
    assert check.verdict == "FAILED" and "during the end of recover" in check.message, check

    # A job restarted on a rolled-back checkpoint reports lower batch ids again: each change is a batch completed
    # (a clean-clone CI's corrupted-sst arm, 2026-11-26: ids 9, 8, 9, 10 at the end of recover).
    def rolled_back_at_the_end(t):
        batch = min(int(t), 49) if t < 52 else 42 + (int(t) - 50) // 2  # 49, 49, then 43, 44, 45, 46
        return {**healthy(t), "batch_id": batch, "batch_duration_ms": 1500}
    assert check_progress(timeline(story(metrics=rolled_back_at_the_end))).verdict == "PASSED"

    # A job restarted at the end of recover re-runs the batch it had not committed under the same id: that re-run
    # completing (a new run_id and start) is a batch completed (the smoke's corrupted-sst arm, 2026-11-28: batch 28
    # re-run for 14.6 s, then 29 after 2.0 s, judged idle 5.1 s while batch ids alone were the measure).
    def rerun_at_the_end(t):
        rerun = t >= 48
        return {**healthy(t), "batch_id": min(int(t), 48) if t < 56 else int(t) - 7,
                "batch_duration_ms": 7000 if int(t) == 55 else 500 if t >= 56 or t < 48 else None,
                "run_id": "second" if rerun and t >= 55 else "first",
                "batch_started": "b" if rerun and t >= 55 else "a" if t >= 48 else str(int(t))}
    assert check_progress(timeline(story(metrics=rerun_at_the_end))).verdict == "PASSED"
    # ... which the batch id alone does not show
    def same_id_and_run(t):
        return {**rerun_at_the_end(t), "run_id": "first", "batch_started": "a" if t >= 48 else str(int(t))}
    assert check_progress(timeline(story(metrics=same_id_and_run))).verdict == "FAILED"

    # One slow batch early in that window does not excuse the stop after the last, quick one.
    def one_slow_batch_then_stuck(t):
        return {**stalls_at_the_end(t), "batch_duration_ms": 9000 if int(t) == 51 else 500}
    check = check_progress(timeline(story(metrics=one_slow_batch_then_stuck)))
    assert check.verdict == "FAILED" and "during the end of recover" in check.message, check


def test_progress_is_hang_when_nothing_advances_after_the_first_fault(story):
    def dead(t):
        return {**healthy(t), "batch_id": min(int(t), 24)}
    check = check_progress(timeline(story(metrics=dead)))
    assert check.verdict == "HANG"
    assert check.measured == "stuck at batch 24 after the first fault"
    assert "first fault injection (network.down on kafka at t=25.0s)" in check.message


def test_progress_without_data_is_nodata_never_passed(story):
    def unmeasured(t):
        return {**healthy(t), "batch_id": None}
    assert check_progress(timeline(story(metrics=unmeasured))).verdict == "NODATA"
    no_phases = check_progress(timeline(story(phases=False)))
    assert no_phases.verdict == "NODATA" and no_phases.measured == "no phase recorded"
    # one phase without samples: that phase cannot be judged
    check = check_progress(timeline(story(metrics=lambda t: healthy(t) if t < 40 else None)))
    assert check.verdict == "NODATA" and "recover: no data" in check.measured


# -- recovery ----------------------------------------------------------------------------------------------------
def test_recovery_measures_from_the_last_heal_to_the_first_healthy_run(story):
    tl = timeline(story(metrics=recovering))
    check = check_recovery(tl, Recovery(within=10.0, healthy_samples=3, lag_below=1000))
    assert (check.verdict, check.expected, check.measured) == ("PASSED", "<= 10s", "8.5s")
    assert "network.down on kafka at t=35.0s" in check.message
    late = check_recovery(tl, Recovery(within=5.0, healthy_samples=3, lag_below=1000))
    assert (late.verdict, late.measured) == ("FAILED", "8.5s")


def test_recovery_is_judged_while_the_workload_runs_never_in_the_drain(story):
    """After the recover phase the input stops and the lag falls whether or not the job caught up: a job that is
    still behind at the phase's end has not recovered, however healthy the drain's samples look."""
    def behind_until_the_drain(t):
        sample = recovering(t)
        if t >= 35:
            sample.update(lag=3000 if t < 60 else 5)
        return sample
    tl = timeline(story(metrics=behind_until_the_drain, end=70.0))
    assert tl.window("recover") == (40.0, 60.0) and tl.samples[-1]["t"] > 69
    check = check_recovery(tl, Recovery(within=30.0, healthy_samples=3, lag_below=1000))
    assert (check.verdict, check.measured) == ("FAILED", "not recovered")
    assert "before the recover phase ended at t=60.0s (the drain after it is not judged)" in check.message


def test_recovery_counts_the_last_heal_and_needs_consecutive_samples(story):
    def blip(t):
        sample = recovering(t)
        if 44 <= t < 45:
            sample["lag"] = None  # an unmeasured sample breaks the run
        return sample
    faults = [("network.down", "kafka", 22.0, 24.0), ("network.latency", "s3", 25.0, 35.0)]
    check = check_recovery(timeline(story(metrics=blip, faults=faults)),
                           Recovery(within=20.0, healthy_samples=3, lag_below=1000, grouped=True))
    # from the first heal (24) to 45.5 (43.5 healthy, 44.5 unmeasured), less the 10 s the latency was in place
    assert check.measured == "11.5s" and "network.latency on s3" in check.message


def test_progress_by_processed_rate_alone_counts_as_healthy(story):
    def same_batch(t):  # batches keep starting (batch_started) while the batch id is not read: rows processed show it
        return {**recovering(t), "batch_id": 7, "batch_started": started(t)}
    check = check_recovery(timeline(story(metrics=same_batch)), Recovery(10.0, 3, 1000))
    assert check.measured == "8.5s"

    def idle(t):
        return {**recovering(t), "batch_id": 7, "processed_rate": 0.0, "batch_started": started(t)}
    never = check_recovery(timeline(story(metrics=idle)), Recovery(10.0, 3, 1000))
    assert (never.verdict, never.measured) == ("FAILED", "not recovered")


def test_recovery_is_measured_from_each_disruption_a_restart_on_a_damaged_checkpoint_included(story):
    """A corruption's heal does nothing for the job: the restart on the damaged checkpoint is what it recovers from
    (the last heal alone read ~0.1 s). Kills: each restart is measured, and the slowest counts."""
    def after_restart(t):  # restarted at 25: no batches until 33, then caught up by 38
        sample = healthy(t)
        if 25 <= t < 33:
            sample.update(batch_id=24, processed_rate=0.0, lag=int(300 * (t - 25)) + 10)
        elif 33 <= t < 38:
            sample.update(lag=2400 - 500 * (t - 33))
        return sample
    corrupt = [(25.0, "job", ("exited", "job-driver"), {"cause": "stopped to corrupt its checkpoint"}),
               (25.0, "job", ("restarted", "job-driver"), {"pid": 2, "corrupted": {"file": "state/0/1/5.changelog"}})]
    tl = timeline(story(metrics=after_restart, faults=[("checkpoint.corrupt", "checkpoint", 25.0, 36.0)],
                        extra=corrupt))
    check = check_recovery(tl, Recovery(within=30.0, healthy_samples=3, lag_below=1000))
    assert check.measured == "11.5s" and "restart of the job (on a damaged checkpoint" in check.message
    # its heal at 36 does nothing for the job: not a disruption (it read ~0.5 s, as if recovered at once)
    assert "the worst of" not in check.message and "first batch that started after it completed 8.5 s" in check.message

    def two_kills(t):  # restarted at 22 (healthy from 26) and 45 (healthy from 55)
        sample = healthy(t)
        if 22 <= t < 26 or 45 <= t < 55:
            sample.update(lag=5000)
        return sample
    kills = [(22.0, "job", ("exited", "job-driver"), {"cause": "signal 9"}),
             (22.0, "job", ("restarted", "job-driver"), {"pid": 2}),
             (45.0, "job", ("exited", "job-driver"), {"cause": "signal 9"}),
             (45.0, "job", ("restarted", "job-driver"), {"pid": 3})]
    slow = check_recovery(timeline(story(metrics=two_kills, faults=[("process.kill", "job-driver", 21.0, 46.0)],
                                         extra=kills)), Recovery(within=8.0, healthy_samples=3, lag_below=1000))
    assert (slow.verdict, slow.measured) == ("FAILED", "10.5s") and "t=45.0s" in slow.message


def test_a_heal_followed_at_once_by_the_next_fault_fails_unless_the_spec_groups_them(story):
    """Issue 36: no disruption is dropped. A heal followed 1 s later by the next fault was left out (SUPERSEDED); now
    it fails, unless the recovery is `grouped`: then from that heal to the healthy run after the later one (43.5),
    less the 10 s the later fault was in place."""
    faults = [("network.down", "kafka", 22.0, 24.0), ("network.latency", "s3", 25.0, 35.0)]
    tl = timeline(story(metrics=recovering, faults=faults))
    alone = check_recovery(tl, Recovery(within=20.0, healthy_samples=3, lag_below=1000))
    assert (alone.verdict, alone.measured) == ("FAILED", "not recovered")
    assert alone.message.startswith("not recovered before the next fault at t=25.0s") and "t=24.0s" in alone.message
    grouped = check_recovery(tl, Recovery(within=20.0, healthy_samples=3, lag_below=1000, grouped=True))
    assert (grouped.verdict, grouped.measured) == ("PASSED", "9.5s"), grouped
    assert "the last of a group from the heal of network.down on kafka at t=24.0s" in grouped.message
    assert "not counting 10.0 s under faults" in grouped.message


# -- recovery from evidence (issue 36) ---------------------------------------------------------------------------
def kills(*times: float) -> list[tuple[float, str, tuple, dict]]:
    """The driver killed and restarted at once at each time."""
    return [record for n, t in enumerate(times) for record in
            ((t, "job", ("exited", "job-driver"), {"cause": "signal 9"}),
             (t, "job", ("restarted", "job-driver"), {"pid": n + 2}))]


def restarted(killed: float, new_from: float, caught_up_from: float) -> Callable[[float], dict]:
    """The driver killed at `killed`: until `new_from` the samples still show its last batch (started before the
    kill), with the rate window still holding its rows and the lag measured against its offsets, both looking fine;
    the new driver's batches from `new_from`, behind (lag 3000) until `caught_up_from`."""
    def metrics(t: float) -> dict:
        sample = {**healthy(t), "batch_started": started(t), "run_id": "first"}
        if killed <= t < new_from:
            sample.update(batch_id=int(killed) - 1, batch_started=started(killed - 0.1), processed_rate=100.0,
                          lag=10 + int(50 * (t - killed)))
        elif t >= new_from:
            sample.update(run_id="second", lag=3000 if t < caught_up_from else 10)
        return sample
    return metrics


def test_a_restart_is_not_healthy_until_a_batch_that_started_after_it_completes(story):
    """The old rule read the killed driver's rows still in the rate window, and its lag against its own offsets, as
    health: 0.5 s after the restart. A sample is healthy after it only once a batch that started after it has
    completed: 8.5 s."""
    tl = timeline(story(metrics=restarted(25.0, 33.0, 33.0), faults=[("process.kill", "job-driver", 24.0, 40.0)],
                        extra=kills(25.0)))
    stale = next(s for s in tl.samples if s["t"] == 25.5)
    assert healthy_sample(stale, None, 1000)  # by its own figures, what the old rule accepted
    result = measure_recovery(tl, Recovery(within=30.0, healthy_samples=3, lag_below=1000))
    assert (result.seconds, result.first_batch_s, result.verdict) == (8.5, 8.5, "PASSED")
    check = check_recovery(tl, Recovery(within=5.0, healthy_samples=3, lag_below=1000))
    assert (check.verdict, check.measured) == ("FAILED", "8.5s")
    assert "the first batch that started after it completed 8.5 s after" in check.message


def test_recovery_from_a_restart_is_never_shorter_than_its_first_new_batch(story):
    tl = timeline(story(metrics=restarted(25.0, 30.0, 36.0), faults=[("process.kill", "job-driver", 24.0, 40.0)],
                        extra=kills(25.0)))
    result = measure_recovery(tl, Recovery(within=30.0, healthy_samples=3, lag_below=1000))
    assert (result.first_batch_s, result.seconds) == (5.5, 11.5)
    assert result.summary == "t=25.0s: first new batch 5.5 s, recovered 11.5 s"


def four_damages(t: float) -> dict:
    """Restarts at 21, 29, 37 and 45: no new driver completes a batch before the next (the last batch, and the rows
    and offsets the samples show, are from before 21), then new batches from 48, caught up at once."""
    if 21 <= t < 48:
        return {**healthy(t), "batch_id": 20, "batch_started": started(20.9), "lag": 10 + int(20 * (t - 21))}
    return {**healthy(t), "batch_started": started(t)}


def test_three_of_four_disruptions_never_recovered_before_the_next_fail(story):
    """Issue 36: with three of four restarts unrecovered for 8 s each, the old rule left them out (the next came
    before within + healthy_samples) and read PASSED. Each unrecovered one now fails."""
    tl = timeline(story(metrics=four_damages, faults=[("checkpoint.corrupt", "checkpoint", 20.0, 46.0)],
                        extra=kills(21.0, 29.0, 37.0, 45.0)))
    check = check_recovery(tl, Recovery(within=60.0, healthy_samples=3, lag_below=1000))
    assert (check.verdict, check.measured) == ("FAILED", "not recovered")
    assert check.message.startswith("not recovered before the next fault at t=29.0s"), check.message
    assert "the worst of 4 disruptions: t=21.0s: no new batch, not recovered before t=29.0s; " in check.message
    assert check.message.endswith("t=45.0s: first new batch 3.5 s, recovered 3.5 s")


def test_a_grouped_recovery_is_measured_from_the_first_disruption_to_the_healthy_run_after_the_last(story):
    tl = timeline(story(metrics=four_damages, faults=[("checkpoint.corrupt", "checkpoint", 20.0, 46.0)],
                        extra=kills(21.0, 29.0, 37.0, 45.0)))
    grouped = check_recovery(tl, Recovery(within=60.0, healthy_samples=3, lag_below=1000, grouped=True))
    assert (grouped.verdict, grouped.measured) == ("PASSED", "27.5s")  # 21 -> 48.5
    assert "the restart of the job (after it ended at t=45.0s), the last of a group from the restart of the job " \
           "(after it ended at t=21.0s)" in grouped.message
    result = measure_recovery(tl, Recovery(within=20.0, healthy_samples=3, lag_below=1000, grouped=True))
    assert (result.verdict, result.seconds, result.first_batch_s) == ("FAILED", 27.5, 27.5)


def test_the_report_draws_the_worst_disruptions_recovery_not_the_last_heals(story):
    """The recovery interval in result.json is the one the check judged: the first unrecovered restart (t=21, cut by
    the next at t=29), not an interval hung after the last heal; grouped, from the group's first to healthy again."""
    from chaos.checks.arm import _recovery
    from chaos.report.plots import _recovery_interval

    def Targets(recovery):  # _recovery reads the recovery target alone
        return SimpleNamespace(recovery=recovery)

    tl = timeline(story(metrics=four_damages, faults=[("checkpoint.corrupt", "checkpoint", 20.0, 46.0)],
                        extra=kills(21.0, 29.0, 37.0, 45.0)))
    alone = Targets(recovery=Recovery(within=60.0, healthy_samples=3, lag_below=1000))
    assert _recovery(tl, alone) == (None, [21.0, 29.0])
    assert _recovery_interval(tl, {"recovery_s": None, "recovery_window": [21.0, 29.0]}, 60.0) == (21.0, 29.0, False)
    grouped = Targets(recovery=Recovery(within=60.0, healthy_samples=3, lag_below=1000, grouped=True))
    seconds, window = _recovery(tl, grouped)
    assert (seconds, window) == (27.5, [21.0, 48.5])
    assert _recovery_interval(tl, {"recovery_s": seconds, "recovery_window": window}, 60.0) == (21.0, 48.5, True)


def test_a_history_without_batch_started_falls_back_to_the_batch_id(story):
    """A history stored before samples had batch_started: a batch id past the highest one sampled up to the first
    sample after the disruption. That sample's batch may have completed before the kill (here batch 25 at 25.5), so
    it is no evidence."""
    def old(t: float) -> dict:
        sample = restarted(25.0, 33.0, 33.0)(t)
        if 25 <= t < 33:
            sample["batch_id"] = 25
        elif t >= 33:
            sample["batch_id"] = int(t) - 7
        return sample
    records = [{k: v for k, v in r.items() if k not in ("batch_started", "run_id")}
               for r in story(metrics=old, faults=[("process.kill", "job-driver", 24.0, 40.0)], extra=kills(25.0))]
    assert not any("batch_started" in r for r in records)
    result = measure_recovery(timeline(records), Recovery(within=30.0, healthy_samples=3, lag_below=1000))
    assert (result.seconds, result.first_batch_s) == (8.5, 8.5)


def test_recovery_without_a_heal_or_samples_is_nodata(story):
    unhealed = check_recovery(timeline(story(faults=[("network.down", "kafka", 25.0, None)])), Recovery(10, 3, 1000))
    assert unhealed.verdict == "NODATA" and "network.down on kafka was injected but never healed" in unhealed.message
    no_samples = check_recovery(timeline(story(metrics=lambda t: healthy(t) if t < 35 else None)),
                                Recovery(10, 3, 1000))
    assert no_samples.verdict == "NODATA" and no_samples.measured == "no data"


# -- max lag -----------------------------------------------------------------------------------------------------
def test_max_lag_over_inject_and_recover(story):
    tl = timeline(story(metrics=recovering))
    assert check_max_lag(tl, 5000).verdict == "PASSED"
    failed = check_max_lag(tl, 4000)
    assert (failed.verdict, failed.measured) == ("FAILED", "4750")
    assert check_max_lag(timeline(story(metrics=lambda t: {**healthy(t), "lag": None})), 10).verdict == "NODATA"


# -- lost / duplicated -------------------------------------------------------------------------------------------
def _session(key: str, first: int, last: int, count: int | None = None) -> Session:
    return Session(key=key, session_id=f"{key}-{first}", first_seq=first, last_seq=last,
                   start_ms=first * 1000, end_ms=last * 1000, count=count if count is not None else last - first + 1)


def test_lost_and_duplicated_from_a_compare_report():
    expected = [_session("a", 0, 2), _session("b", 0, 1), _session("c", 0, 0)]
    emitted = [_session("a", 0, 2), _session("a", 0, 2), _session("b", 0, 1, count=5)]
    oracle = {**compare(expected, emitted).to_dict(), "drained": True}
    lost = check_lost(oracle, 0)
    assert (lost.verdict, lost.measured) == ("FAILED", "1 (+1 wrong)")
    assert check_lost(oracle, 1).verdict == "FAILED"  # within the bound, but a session has wrong fields
    assert "1 sessions emitted with wrong fields" in check_lost(oracle, 1).message
    duplicated = check_duplicated(oracle, 0)
    assert (duplicated.verdict, duplicated.measured) == ("FAILED", "1")
    assert check_duplicated(oracle, 1).verdict == "PASSED"
    clean = {**compare(expected, expected).to_dict(), "drained": True}
    assert check_lost(clean, 0).verdict == check_duplicated(clean, 0).verdict == "PASSED"


def test_lost_and_duplicated_from_a_coverage_report():
    acked = [Event("a", seq, 1000 * seq, "") for seq in range(6)]
    emitted = [{"key": "a", "first_seq": 0, "last_seq": 3, "count": 4},
               {"key": "a", "first_seq": 3, "last_seq": 3, "count": 1}]
    oracle = {**coverage(acked, [], emitted).to_dict(), "drained": False}
    lost = check_lost(oracle, 0)
    assert (lost.verdict, lost.measured) == ("FAILED", "2")
    assert "2 acknowledged events lost" in lost.message and "the drain did not finish" in lost.message
    duplicated = check_duplicated(oracle, 0)
    assert (duplicated.verdict, duplicated.measured) == ("FAILED", "1")


def test_lost_and_duplicated_say_what_judging_cost():
    """oracle.json's `judging` (chaos/judging.py) in both checks' messages; an oracle.json without it says nothing."""
    sessions = [_session("a", 0, 2)]
    judging = {"events": 3_600_000, "sessions": 40_000, "partitions": 20, "seconds": 41.5, "peak_rss_mb": 180.2}
    oracle = {**compare(sessions, sessions).to_dict(), "drained": True, "judging": judging}
    for check in (check_lost(oracle, 0), check_duplicated(oracle, 0)):
        assert check.verdict == "PASSED"
        assert check.message.endswith("; judged 3,600,000 events in 41.5 s, peak 180.2 MB resident")
    whole = {**oracle, "judging": {**judging, "peak_rss_of": "process"}}
    assert check_lost(whole, 0).message.endswith("peak 180.2 MB resident (the process's)")
    before = {**compare(sessions, sessions).to_dict(), "drained": True}
    assert check_lost(before, 0).message == "0 sessions lost (oracle.json)"


def test_a_failed_lost_says_how_many_rows_the_job_dropped_behind_its_watermark(story):
    """The late rows the sampler recorded (numRowsDroppedByWatermark, running) explain a lost count; a pass, or a
    history with none, says nothing of them."""
    from chaos.checks.exactly_once import LOST

    spec = load_experiment(Path("experiments/kafka-broker-disconnect.yaml"))
    lost_one = {**compare([_session("a", 0, 2), _session("b", 0, 1)], [_session("a", 0, 2)]).to_dict(),
                "drained": True}

    def judged(late: Callable[[float], int | None], oracle: dict) -> Check:
        records = story(metrics=lambda t: {**healthy(t), "late_rows": late(t)})
        check = LOST.judge(ArmData(timeline(records), spec, "hardened", oracle), 0)
        assert isinstance(check, Check)
        return check

    failed = judged(lambda t: None if t < 30 else 40 if t < 45 else 471, lost_one)
    assert failed.verdict == "FAILED"
    assert "the job dropped 471 input rows behind its watermark of 20 s" in failed.message
    assert "behind its watermark" not in judged(lambda t: None, lost_one).message
    clean = {**compare([_session("a", 0, 2)], [_session("a", 0, 2)]).to_dict(), "drained": True}
    passed = judged(lambda t: 471, clean)
    assert passed.verdict == "PASSED" and "watermark" not in passed.message


def test_without_an_oracle_lost_and_duplicated_are_nodata():
    for check in (check_lost(None, 0), check_duplicated(None, 0, missing="oracle.json unreadable (x)"),
                  check_lost({"lost": None, "duplicated": None, "drained": False}, 0)):
        assert check.verdict == "NODATA" and check.measured == "no data"


# -- state -------------------------------------------------------------------------------------------------------
INJECT = ("inject",)


def test_state_plateau_and_growth_by_the_fitted_slope(story):
    flat = timeline(story())
    assert check_state(flat, StateTarget("plateau", INJECT, 0.25, 0.2, None, None), 20).verdict == "PASSED"
    assert check_state(flat, StateTarget("growth", INJECT, 0.25, 0.2, None, None), 20).verdict == "FAILED"

    grows = timeline(story(metrics=lambda t: {**healthy(t), "state_rows": int(100 + 50 * (t - 20))}))
    growth = check_state(grows, StateTarget("growth", INJECT, 0.25, 0.2, None, None), 20)
    assert growth.verdict == "PASSED", growth
    assert growth.message == "state rows grow +50.0/s (+187% over inject, peak +87%)"
    plateau = check_state(grows, StateTarget("plateau", INJECT, 0.25, 0.2, None, None), 20)
    assert plateau.verdict == "FAILED" and plateau.message.startswith("state grows: ")


def test_a_plateau_needs_flat_rows_and_flat_bytes(story):
    """The incident's shape: the naive list state holds a flat 2 rows per key while its bytes grow. Rows alone
    passed that as a plateau (issue 17); bytes growing is growth."""
    tl = timeline(story(metrics=lambda t: {**healthy(t), "state_bytes": int(100_000 + 10_000 * (t - 20))}))
    growth = check_state(tl, StateTarget("growth", INJECT, 0.25, 0.2, None, None), 20)
    assert growth.verdict == "PASSED" and growth.message.startswith("state bytes grow +10000.0 B/s")
    plateau = check_state(tl, StateTarget("plateau", INJECT, 0.25, 0.2, None, None), 20)
    assert plateau.verdict == "FAILED" and plateau.message.startswith("state grows: state bytes change +")
    flat = check_state(timeline(story()), StateTarget("plateau", INJECT, 0.25, 0.2, None, None), 20)
    assert flat.verdict == "PASSED" and "rows" in flat.message and "bytes" in flat.message



def test_bytes_grow_only_by_more_than_a_few_bytes_per_input_event(story):
    """A bounded state's SST bytes saw-tooth with compaction: on a small base a fitted +81 % is noise (CI, hardened
    hot-key-session-growth: +820 B/s at 200 events/s = 4 B per event). A state that keeps events gains at least
    their size for each (the naive list state: 32-47 B per event). The floor is per input event, so it scales."""
    def bytes_at(per_s: float):
        return lambda t: {**healthy(t), "input_rate": 200.0, "state_bytes": int(10_000 + per_s * (t - 20))}
    noise = timeline(story(metrics=bytes_at(820)))
    plateau = check_state(noise, StateTarget("plateau", INJECT, 0.25, 0.2, None, None), 20)
    assert plateau.verdict == "PASSED", plateau
    assert "+4.1 B per input event" in plateau.message
    assert check_state(noise, StateTarget("growth", INJECT, 0.25, 0.2, None, None), 20).verdict == "FAILED"

    kept = timeline(story(metrics=bytes_at(6_500)))
    assert check_state(kept, StateTarget("plateau", INJECT, 0.25, 0.2, None, None), 20).verdict == "FAILED"
    growth = check_state(kept, StateTarget("growth", INJECT, 0.25, 0.2, None, None), 20)
    assert growth.verdict == "PASSED" and "+32.5 B per input event" in growth.message
    # the floor is the spec's: lowered to 0, the relative change alone decides again
    strict = StateTarget("plateau", INJECT, 0.25, 0.2, None, None, bytes_per_event=0.0)
    assert check_state(noise, strict, 20).verdict == "FAILED", check_state(noise, strict, 20)

def test_rows_grow_only_when_their_peaks_rise_too(story):
    """Sessions that open and close together make bounded rows saw-tooth between two levels: CI saw a hardened
    hot-key arm at 110..199 rows whose fitted line tilted +23 % by where the low samples fell, while its peaks stayed
    at 199. A leak raises the peaks with the line."""
    def saw(t: float) -> dict:  # low samples early, high ones late: the line tilts, the peaks do not
        second = int(t)
        high = second in (21, 27) if 20 <= second < 30 else second % 4 != 1
        return {**healthy(t), "state_rows": 195 if high else 110}
    tilted = timeline(story(metrics=saw))
    plateau = check_state(tilted, StateTarget("plateau", INJECT, 0.25, 0.2, None, None), 20)
    assert plateau.verdict == "PASSED", plateau
    assert "peak +0%" in plateau.measured and int(re.search(r"rows \S+ \(\+(\d+)%", plateau.measured)[1]) > 20
    assert check_state(tilted, StateTarget("growth", INJECT, 0.25, 0.2, None, None), 20).verdict == "FAILED"

    def leak(t: float) -> dict:  # the same saw-tooth on a base that keeps rising
        return {**healthy(t), "state_rows": saw(t)["state_rows"] + int(20 * max(0.0, t - 20))}
    leaking = timeline(story(metrics=leak))
    assert check_state(leaking, StateTarget("plateau", INJECT, 0.25, 0.2, None, None), 20).verdict == "FAILED"
    assert check_state(leaking, StateTarget("growth", INJECT, 0.25, 0.2, None, None), 20).verdict == "PASSED"


def test_state_warmup_leaves_out_the_leading_ramp(story):
    def ramp(t):
        return {**healthy(t), "state_rows": int(min(300, 33 * (t - 20))) if t >= 20 else 0}  # 300 from t = 29.1
    tl = timeline(story(metrics=ramp))
    assert check_state(tl, StateTarget("plateau", INJECT, 0.25, 0.2, None, None), 20).verdict == "PASSED"
    assert check_state(tl, StateTarget("plateau", INJECT, 0.0, 0.2, None, None), 20).verdict == "FAILED"


def test_state_bounds_per_key_and_total(story):
    tl = timeline(story())  # 300 rows, 20 live keys: 15 per key
    assert check_state(tl, StateTarget(None, INJECT, 0.25, 0.2, 20, 300), 20).verdict == "PASSED"
    per_key = check_state(tl, StateTarget(None, INJECT, 0.25, 0.2, 10, None), 20)
    assert per_key.verdict == "FAILED" and per_key.measured == "max 300 rows (15.00/key)"
    assert check_state(tl, StateTarget(None, INJECT, 0.25, 0.2, None, 250), 20).verdict == "FAILED"


def test_state_with_too_few_samples_is_nodata(story):
    sparse = timeline(story(metrics=lambda t: {**healthy(t), "state_rows": 300 if 30 <= t < 34 else None,
                                               "state_bytes": None}))
    check = check_state(sparse, StateTarget("plateau", INJECT, 0.25, 0.2, None, 1000), 20)
    assert check.verdict == "NODATA" and check.measured == "trend: no data; rows: no data"
    assert fit_trend([(0, 1), (1, 2), (2, 3), (3, 4)], "rows") is None


# -- logs --------------------------------------------------------------------------------------------------------
def _log(t: float, signature: str, text: str, line: int = 7) -> tuple:
    return (t, "log", (signature, "logs/job-1.log", line, text), {})


def test_logs_expected_and_forbidden(story):
    tl = timeline(story(extra=[_log(30, "boom", "ERROR boom: the thing broke"), _log(31, "bad", "bad news")]))
    assert check_logs(tl, Logs(("boom",), ())).verdict == "PASSED"
    missing = check_logs(tl, Logs(("boom", "never"), ()))
    assert missing.verdict == "FAILED" and missing.message == "no log line matched expected 'never'"
    assert missing.measured == "expected matched 1/2 (1 lines)"
    forbidden = check_logs(tl, Logs(("boom",), ("bad",)))
    assert forbidden.verdict == "FAILED" and forbidden.message == "forbidden 'bad' matched logs/job-1.log:7: bad news"


def test_a_loop_is_judged_by_its_count_over_line_records_and_tallies(story):
    loop = "Connection to node 1 could not be established"
    records = [(30 + i, "log", ("reconnect", "logs/job-1.log", 10 + i, loop), {"count": i + 1}) for i in range(5)]
    records += [(45, "log", ("reconnect", "logs/job-1.log", 99, loop), {"count": 37}),  # a tally of the same file
                (46, "log", ("reconnect", "logs/job-2.log", 5, loop), {"count": 1})]  # and another file
    tl = timeline(story(extra=records))
    assert match_count(tl.logs, "reconnect") == 38
    assert check_logs(tl, Logs(("reconnect",), (), min_matches=38)).verdict == "PASSED"
    short = check_logs(tl, Logs(("reconnect",), (), min_matches=40))
    assert short.verdict == "FAILED" and short.message == "expected 'reconnect' matched 38 line(s), fewer than 40"


def test_an_expected_signature_counts_only_from_the_inject_phase_on(story):
    # The slow-s3-put control once "reproduced" its incident in warm-up: every first micro-batch falls behind.
    early = timeline(story(extra=[_log(10, "behind", "Current batch is falling behind ... spent 20282 ms")]))
    check = check_logs(early, Logs(("behind",), ()))
    assert check.verdict == "FAILED" and check.message == "no log line matched expected 'behind'"
    assert check_logs(early, Logs((), ("behind",))).verdict == "FAILED"  # a forbidden one counts anywhere
    loop = "could not be established"
    records = [(18 + i, "log", ("reconnect", "logs/job-1.log", 10 + i, loop), {"count": i + 1}) for i in range(5)]
    tl = timeline(story(extra=records + [(40, "log", ("reconnect", "logs/job-1.log", 99, loop), {"count": 30})]))
    assert match_count(tl.logs, "reconnect") == 30
    assert match_count(tl.logs, "reconnect", since=20) == 28  # the two lines of t=18 and t=19 came before
    assert check_logs(tl, Logs(("reconnect",), (), min_matches=28)).verdict == "PASSED"
    assert check_logs(tl, Logs(("reconnect",), (), min_matches=29)).verdict == "FAILED"


def test_logs_of_a_job_that_never_started_are_nodata(tmp_path):
    records = write_history(tmp_path / "h.jsonl", Story())
    records = [r for r in records if r["type"] != "job"]
    assert check_logs(timeline(records), Logs(("boom",), ())).verdict == "NODATA"


def test_a_log_never_read_is_nodata_not_a_pass(story):
    """The scanner skips a log that is not there: a check with only forbidden lines once passed on no line read."""
    watch = (0.1, "watch", (["bad"],), {})
    never_read = timeline(story(extra=[watch]))
    check = check_logs(never_read, Logs((), ("bad",)))
    assert (check.verdict, check.measured) == ("NODATA", "forbidden matched 0/1; 1 job log(s) never read")
    assert check.message.startswith("the log of a started driver was never read (logs/job-1.log)")
    assert check_logs(never_read, Logs(("boom",), ())).verdict == "NODATA"  # the expected line could be in it
    read = timeline(story(extra=[watch, (0.6, "log_read", ("logs/job-1.log",), {})]))
    assert check_logs(read, Logs((), ("bad",))).verdict == "PASSED"
    # the second driver's log, never read: a forbidden line could be in it
    restarted = timeline(story(extra=[watch, (0.6, "log_read", ("logs/job-1.log",), {}),
                                      (30, "job", ("started", "job-driver"), {"pid": 2, "log": "logs/job-2.log"})]))
    assert check_logs(restarted, Logs((), ("bad",))).verdict == "NODATA"
    # every expected line matched and nothing is forbidden: what was read suffices
    seen = timeline(story(extra=[watch, _log(30, "boom", "ERROR boom"),
                                 (30, "job", ("started", "job-driver"), {"pid": 2, "log": "logs/job-2.log"})]))
    assert check_logs(seen, Logs(("boom",), ())).verdict == "PASSED"
    # a forbidden line seen stays seen, read or not
    assert check_logs(timeline(story(extra=[watch, _log(30, "bad", "bad news")])), Logs((), ("bad",))).verdict == \
        "FAILED"


def test_a_history_from_before_reads_were_recorded_keeps_its_judgement(story):
    """No watch record with records_reads (the stored fixture runs): every started log is taken as read, as then."""
    assert check_logs(timeline(story()), Logs((), ("bad",))).verdict == "PASSED"
    old_watch = {"t": 0.1, "wall": "2026-11-20T00:00:00.100+00:00", "type": "watch", "patterns": ["bad"]}
    assert check_logs(timeline([old_watch, *story()]), Logs((), ("bad",))).verdict == "PASSED"


def test_the_scanner_records_each_log_it_reads_once(tmp_path):
    from chaos.arm.sampler import LogScanner

    (tmp_path / "logs").mkdir()
    with HistoryWriter(tmp_path / "h.jsonl") as history:
        history.watch(["bad"])
        scanner = LogScanner(["bad"], history, tmp_path)
        scanner.watch(tmp_path / "logs" / "job-1.log")
        scanner.watch(tmp_path / "logs" / "job-2.log")
        scanner.scan()  # neither exists yet: nothing read
        (tmp_path / "logs" / "job-1.log").write_text("fine\nbad news\n")
        scanner.scan()
        scanner.scan()
    records = read_history(tmp_path / "h.jsonl")
    watches = [r for r in records if r["type"] == "watch"]
    assert [w.get("read") for w in watches] == [None, "logs/job-1.log"] and watches[0]["records_reads"] is True
    [line] = [r for r in records if r["type"] == "log"]
    assert (line["signature"], line["source"], line["line"], line["text"]) == ("bad", "logs/job-1.log", 2, "bad news")


# -- lineage -----------------------------------------------------------------------------------------------------
def lineage(**changes) -> dict:
    base = {"metadata": True, "offsets": [3, 4, 5, 6], "commits": [3, 4, 5],
            "state": {"0/0": {"snapshots": [4], "changelogs": [5, 6]}, "0/1": {"snapshots": [6], "changelogs": []}},
            "rollbacks": []}
    return {**base, **changes}


@pytest.mark.parametrize("changes", [
    {},
    {"offsets": [3, 4, 5], "commits": [3, 4, 5]},  # nothing in flight
    {"state": {"0/0": {"snapshots": [], "changelogs": [1, 2, 3, 4, 5, 6]}}},  # changelogs only, from 1
    {"state": {"0/0": {"snapshots": [2, 6], "changelogs": []}}},
])
def test_a_loadable_lineage_passes(changes):
    check = check_lineage(lineage(**changes))
    assert check.verdict == "PASSED", check
    assert "next state version 6 loadable" in check.message


@pytest.mark.parametrize("changes, rule", [
    ({"metadata": False}, "metadata: the checkpoint has no metadata file"),
    ({"commits": [3, 4, 5, 9]}, "commits ⊆ offsets: commit 9 has no offset file"),
    ({"offsets": [3, 4, 6, 7], "commits": [3, 4, 6]}, "offsets contiguous: gap after batch 4"),
    ({"commits": [3, 5]}, "commits contiguous: gap after batch 3"),
    ({"commits": [3, 4]}, "at most one batch in flight: offsets end at 6, commits at 4"),
    ({"state": {"0/0": {"snapshots": [4], "changelogs": [6]}}},
     "state version 6 loadable: partition 0/0 has snapshots 4 and changelogs 6"),
    ({"state": {"0/0": {"snapshots": [], "changelogs": [2, 3, 4, 5, 6]}}},
     "state version 6 loadable: partition 0/0 has snapshots none and changelogs 2..6"),
    ({"state": {}}, "state version 6 loadable: the checkpoint has no state partition"),
])
def test_the_first_broken_lineage_rule_is_named(changes, rule):
    check = check_lineage(lineage(**changes))
    assert (check.verdict, check.message) == ("FAILED", rule)


def test_lineage_by_content_names_what_the_readers_found_and_says_when_they_did_not_run():
    read = {"files_read": 9, "problems": [], "readers": "4 SSTs and changelogs read whole (RocksDB, Spark)"}
    check = check_lineage(lineage(content=read))
    assert check.verdict == "PASSED" and check.message.endswith(
        "(9 files a restart reads, read back and intact; 4 SSTs and changelogs read whole (RocksDB, Spark))")
    damaged = {**read, "problems": ["state/0/0/SSTs/a.sst: RocksDBException: block checksum mismatch"]}
    assert check_lineage(lineage(content=damaged)).message == (
        "what a restart reads loads: 1 problem(s): state/0/0/SSTs/a.sst: RocksDBException: block checksum mismatch")
    unread = {"files_read": 9, "problems": [], "readers_failed": "InfraError: javac was not found"}
    check = check_lineage(lineage(content=unread))
    assert check.verdict == "NODATA" and "(InfraError: javac was not found)" in check.message
    # a lineage.json from before the readers keeps its judgement, and says what it rests on
    old = check_lineage(lineage(content={"files_read": 9, "problems": []}))
    assert old.verdict == "PASSED" and old.message.endswith("; SSTs by size and footer only)")


def test_lineage_missing_or_empty_is_nodata():
    assert check_lineage(None).verdict == "NODATA"
    assert check_lineage(lineage(offsets=[], commits=[], state={})).verdict == "NODATA"


# -- a second deployment -----------------------------------------------------------------------------------------
def _job(t: float, event: str, **fields) -> tuple:
    return (t, "job", (event, "second-deployment"), fields)


@pytest.mark.parametrize("extra, verdict, measured", [
    ([_job(21, "started"), _job(23.5, "refused", code=3), _job(30, "started"), _job(31, "refused", code=3)],
     "PASSED", "2.5s, 1.0s"),
    # a crash of the second deployment is no refusal (issue 17: any non-zero exit used to count as one)
    ([_job(21, "started"), _job(23.5, "refused", code=3), _job(30, "started"), _job(31, "exited", code=1)],
     "FAILED", "2.5s, exited 1 after 1.0s"),
    ([_job(21, "started"), _job(28, "refused", code=3)], "FAILED", "7.0s"),
    ([_job(21, "started"), _job(22, "exited", code=0)], "FAILED", "exited 0 after 1.0s"),
    ([_job(21, "started"), _job(22, "refused", code=3), _job(30, "started")], "FAILED", "1.0s, not refused"),
    ([], "NODATA", "no data"),
])
def test_a_second_deployment_must_be_refused_in_time(story, extra, verdict, measured):
    check = check_refused(timeline(story(extra=extra)), 5.0)
    assert (check.verdict, check.measured, check.expected) == (verdict, measured, "refused within 5s")


# -- how the job ended ------------------------------------------------------------------------------------------
def _driver(t: float, event: str, **fields) -> tuple:
    return (t, "job", (event, "job-driver"), fields)


def test_the_exit_code_is_how_the_driver_ended_by_itself_not_the_arms_final_stop(story):
    from chaos.checks.deployment import check_exit_code

    died = story(extra=[_driver(30, "exited", code=1), _driver(59, "exited", code=1)])
    assert check_exit_code(timeline(died), 0).verdict == "FAILED"
    assert check_exit_code(timeline(died), 1).measured == "exit 1 (failed, not restarted)"
    budget = story(extra=[_driver(30, "exited", code=4), _driver(59, "exited", code=4)])
    assert check_exit_code(timeline(budget), 4).verdict == "PASSED"
    killed_then_fine = story(extra=[_driver(30, "exited", cause="signal 9"), _driver(59, "exited", code=0)])
    assert check_exit_code(timeline(killed_then_fine), 0).verdict == "PASSED"
    assert check_exit_code(timeline(story()), 0).verdict == "NODATA"


# -- probes ------------------------------------------------------------------------------------------------------
def test_probes_allow_a_tolerated_fraction_outside_and_skip_nulls(story):
    def dips(t):
        return {**healthy(t), "processed_rate": 0.0 if t < 13 else None if t < 15 else 100.0}
    tl = timeline(story(metrics=dips))  # steady samples 10.5..19.5: 3 at 0, 2 null, 5 at 100
    tolerated = check_probe(tl, Probe("processed_rate", 1, None, ("steady",), 0.5))
    assert (tolerated.verdict, tolerated.measured) == ("PASSED", "3/8 outside (38%)")  # 0.375 <= 0.5
    assert tolerated.expected == "processed_rate in [1, inf] in steady, <= 50% outside"
    failed = check_probe(tl, Probe("processed_rate", 1, None, ("steady",), 0.3))
    assert failed.verdict == "FAILED" and failed.message == ("3 of 8 measured steady samples outside [1, inf]; "
                                                             "first 0 at t=10.5s")
    strict = check_probe(tl, Probe("processed_rate", 1, None, ("steady",), 0.0), name="probe:x")
    assert (strict.name, strict.verdict) == ("probe:x", "FAILED")
    none = check_probe(tl, Probe("checkpoint_bytes", None, 1, ("steady",), 0.0))
    assert none.verdict == "FAILED"
    assert check_probe(timeline(story(metrics=lambda t: {**healthy(t), "lag": None})),
                       Probe("lag", None, 5, ("steady", "inject"), 0.0)).verdict == "NODATA"


# -- one arm -----------------------------------------------------------------------------------------------------
SPEC = """
name: t-judge
description: test
incident: {{file: 001-x.txt, error: boom}}
seed: 1
workload: {{shape: uniform, keys: 20, rate: 50, partitions: 2}}
phases: {{steady: 10s, inject: 20s, recover: 20s}}
faults:
  - {{fault: network.down, target: kafka, at: 5s, duration: 10s}}
probes:
  - {{metric: processed_rate, min: 1, phases: [steady], tolerance: 0.2}}
arms:
  hardened:
    targets: {hardened}
  naive:
{naive}
"""


def make_spec(tmp_path: Path, hardened: str = "{progress: true, recovery: {within: 10s, lag_below: 1000}, "
              "lost: 0, duplicated: 0}", naive: str = "    targets: {logs: {expected: [boom]}}") -> ExperimentSpec:
    path = tmp_path / "t-judge.yaml"
    path.write_text(SPEC.format(hardened=hardened, naive=naive))
    return load_experiment(path)


def clean_oracle() -> dict:
    return {**compare([_session("a", 0, 1)], [_session("a", 0, 1)]).to_dict(), "drained": True}


def test_a_hardened_arm_that_holds_every_target_passes(tmp_path, story):
    result = judge_records(story(metrics=recovering), make_spec(tmp_path), "hardened", oracle=clean_oracle())
    assert result["verdict"] == "PASSED", result
    assert (result["role"], result["recovery_s"], result["lost"], result["duplicated"], result["signature"]) == \
        ("subject", 8.5, 0, 0, None)
    assert_checks(result["checks"], {"progress": "PASSED", "recovery": "PASSED", "lost": "PASSED",
                                     "duplicated": "PASSED", "probe:processed_rate": "PASSED"})
    assert list(result) == ["profile", "verdict", "role", "recovery_s", "recovery_window", "lost", "duplicated",
                            "signature", "checks", "state_held"]
    # the peaks of the samples (healthy(): 300 rows, 1 MB state, 5000 B checkpoint; no SST or memory recorded)
    assert result["state_held"] == {"rows": 300, "sst_bytes": None, "memory_bytes": None, "checkpoint_bytes": 5000}
    start, end = result["recovery_window"]  # where the report draws the recovery: its disruption to healthy again
    assert end - start == pytest.approx(8.5)
    assert all(list(c) == ["name", "verdict", "expected", "measured", "message"] for c in result["checks"])


def test_an_environment_error_makes_the_arm_unknown_but_a_failure_still_wins(tmp_path, story):
    error = [(36.0, "error", ("toxiproxy: reset failed",), {})]
    spec = make_spec(tmp_path)
    unknown = judge_records(story(metrics=recovering, extra=error), spec, "hardened", oracle=clean_oracle())
    assert unknown["verdict"] == "UNKNOWN"
    assert unknown["checks"][0] == {"name": "environment", "verdict": "UNKNOWN", "expected": "no environment error",
                                    "measured": "1 error record(s)",
                                    "message": "the environment failed at t=36.0s: toxiproxy: reset failed"}
    lossy = {**clean_oracle(), "lost": 3}
    assert judge_records(story(metrics=recovering, extra=error), spec, "hardened", oracle=lossy)["verdict"] == \
        "FAILED"
    hung = judge_records(story(metrics=dead_after_fault, extra=error), make_spec(tmp_path, hardened="{progress: true}"),
                         "hardened", oracle=clean_oracle())
    assert hung["verdict"] == "UNKNOWN"  # a broken environment is not reported as a hung job


def dead_after_fault(t: float) -> dict:
    return {**healthy(t), "batch_id": min(int(t), 24), "processed_rate": 100.0 if t < 25 else 0.0}


def test_a_hung_arm_and_an_arm_that_measured_nothing(tmp_path, story):
    spec = make_spec(tmp_path)
    hung = judge_records(story(metrics=dead_after_fault), spec, "hardened", oracle=clean_oracle())
    assert hung["verdict"] == "FAILED"  # it never recovered either: FAILED > HANG
    assert {c["name"]: c["verdict"] for c in hung["checks"]}["progress"] == "HANG"
    spec = make_spec(tmp_path, hardened="{progress: true}")
    hung = judge_records(story(metrics=dead_after_fault), spec, "hardened")
    assert hung["verdict"] == "HANG"
    nothing = judge_records(story(phases=False), make_spec(tmp_path, hardened="{progress: true, lost: 0}"),
                            "hardened")
    assert nothing["verdict"] == "NODATA" and nothing["lost"] is None


def test_a_control_reproduces_the_incident_with_a_log_signature(tmp_path, story):
    long_line = "26/11/20 02:17:09 ERROR MicroBatchExecution: Query failed after many retries and a long story: " \
                "boom: Timed out waiting for a node assignment. Call: describeTopics and then some more text"
    result = judge_records(story(extra=[_log(30, "boom", long_line)]), make_spec(tmp_path), "naive")
    assert result["verdict"] == "PASSED" and result["role"] == "control"
    assert "boom" in result["signature"] and len(result["signature"]) <= 122
    assert result["checks"][-1]["name"] == "control" and result["checks"][-1]["verdict"] == "PASSED"


def test_a_control_signature_from_state_growth_or_the_jobs_failure(tmp_path, story):
    spec = make_spec(tmp_path, naive="    targets: {state: {trend: growth, during: [inject]}}")
    grows = story(metrics=lambda t: {**healthy(t), "state_rows": int(100 + 50 * (t - 20))})
    result = judge_records(grows, spec, "naive")
    assert (result["verdict"], result["signature"]) == (
        "PASSED", "state rows grow +50.0/s (+187% over inject, peak +87%)")

    spec = make_spec(tmp_path, naive="    targets: {recovery: {within: 10s, lag_below: 1000}}")
    failed = judge_records(story(metrics=recovering), spec, "naive",
                           summary={"job_error": "TimeoutException: Timed out waiting for a node assignment"})
    assert (failed["verdict"], failed["signature"]) == ("PASSED", "TimeoutException: Timed out waiting for a node "
                                                                  "assignment")


def test_a_control_that_shows_nothing_did_not_reproduce_the_incident(tmp_path, story):
    spec = make_spec(tmp_path, naive="    targets: {recovery: {within: 10s, lag_below: 1000}}")
    result = judge_records(story(metrics=recovering), spec, "naive", summary={"job_error": None})
    assert result["verdict"] == "FAILED" and result["signature"] is None
    assert result["checks"][-1] == {"name": "control", "verdict": "FAILED", "expected": "reproduces the incident",
                                    "measured": "no signature",
                                    "message": "control did not reproduce the incident: no expected log line "
                                               "matched, state did not grow, the job did not stall as long as its "
                                               "target asks and did not fail"}
    # ... but a control whose environment broke is UNKNOWN, not FAILED
    broken = judge_records(story(metrics=recovering, extra=[(30.0, "error", ("broker gone",), {})]), spec, "naive")
    assert broken["verdict"] == "UNKNOWN" and all(c["name"] != "control" for c in broken["checks"])


def test_a_control_expected_to_survive_says_why(tmp_path, story):
    spec = make_spec(tmp_path, naive="    expect: survives\n    note: the naive job keeps no event-time state here\n"
                                     "    targets: {recovery: {within: 10s, lag_below: 1000}}")
    result = judge_records(story(metrics=recovering, extra=[_log(30, "boom", "boom")]), spec, "naive")
    assert (result["verdict"], result["signature"]) == ("PASSED", None)
    assert result["checks"][-1] == {"name": "control", "verdict": "PASSED", "expected": "survives",
                                    "measured": "survived",
                                    "message": "control survived too: the naive job keeps no event-time state here"}
    slow = judge_records(story(metrics=lambda t: {**recovering(t), "processed_rate": 0.0, "batch_id": 3}), spec,
                         "naive")
    assert slow["verdict"] == "FAILED" and slow["checks"][-1]["verdict"] == "FAILED"


# -- whole runs --------------------------------------------------------------------------------------------------
def make_run(tmp_path: Path, status: str = "completed", spec: ExperimentSpec | None = None,
             arms: dict | None = None) -> Path:
    """A run directory: run.json, <experiment>/spec.json, and per arm history.jsonl (+ oracle.json)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    spec = spec or make_spec(tmp_path)
    (run_dir / "run.json").write_text(json.dumps({"suite": "t", "status": status, "experiments": [spec.name]}))
    experiment = run_dir / spec.name
    experiment.mkdir()
    (experiment / "spec.json").write_text(json.dumps(spec.to_dict(), indent=2))
    arms = arms if arms is not None else {
        "hardened": (Story(metrics=recovering), clean_oracle()),
        "naive": (Story(extra=[_log(30, "boom", "ERROR boom")]), None)}
    for profile, (arm_story, oracle) in arms.items():
        (experiment / profile).mkdir()
        if arm_story is not None:
            write_history(experiment / profile / "history.jsonl", arm_story)
        if oracle is not None:
            (experiment / profile / "oracle.json").write_text(json.dumps(oracle))
    return run_dir


def test_judge_run_writes_every_arm_result_and_is_deterministic(tmp_path):
    run_dir = make_run(tmp_path)
    first = judge_run(run_dir)
    assert list(first) == ["verdict", "status", "experiments", "flaky"]
    assert first["verdict"] == "PASSED" and first["status"] == "completed"
    [experiment] = first["experiments"]
    assert experiment["name"] == "t-judge" and experiment["incident"] == {"file": "001-x.txt", "error": "boom"}
    assert [a["profile"] for a in experiment["arms"]] == ["hardened", "naive"]
    results = {p: (run_dir / "t-judge" / p / "result.json").read_bytes() for p in ("hardened", "naive")}
    assert json.loads(results["hardened"]) == experiment["arms"][0]
    second = judge_run(run_dir)
    assert json.dumps(second) == json.dumps(first)
    assert results == {p: (run_dir / "t-judge" / p / "result.json").read_bytes() for p in ("hardened", "naive")}


def test_an_interrupted_run_is_interrupted_and_only_its_arms_cut_short_are(tmp_path):
    # an arm that stopped its job (its final stop recorded) keeps its verdict; the one running at the interrupt,
    # whose driver never exited, is INTERRUPTED, never PASSED (issue 36)
    stopped = (59.5, "job", ("exited", "job-driver"), {"code": 0, "stop": "at the arm's end"})
    arms = {"hardened": (Story(metrics=recovering, extra=[stopped]), clean_oracle()),
            "naive": (Story(extra=[_log(30, "boom", "ERROR boom")]), None)}
    results = judge_run(make_run(tmp_path, status="interrupted", arms=arms))
    assert results["verdict"] == "INTERRUPTED" and results["status"] == "interrupted"
    assert [a["verdict"] for a in results["experiments"][0]["arms"]] == ["PASSED", "INTERRUPTED"]


def test_a_run_whose_harness_failed_is_unknown_at_least(tmp_path):
    assert judge_run(make_run(tmp_path, status="error"))["verdict"] == "UNKNOWN"
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "run.json").write_text(json.dumps({"status": "completed", "experiments": []}))
    assert judge_run(empty) == {"verdict": "NODATA", "status": "completed", "experiments": [], "flaky": []}


def test_missing_files_are_unknown_or_nodata_never_a_crash(tmp_path):
    run_dir = make_run(tmp_path, arms={"hardened": (None, None), "naive": (Story(), None)})
    arms = judge_run(run_dir)["experiments"][0]["arms"]
    assert arms[0]["verdict"] == "UNKNOWN" and arms[0]["checks"][0]["name"] == "history"
    (run_dir / "t-judge" / "naive" / "oracle.json").write_text("{not json")
    (run_dir / "t-judge" / "spec.json").write_text(json.dumps({"name": "t-judge"}))
    results = judge_run(run_dir)
    assert results["verdict"] == "UNKNOWN"
    assert all(a["checks"][0]["name"] == "spec" for a in results["experiments"][0]["arms"])
    (run_dir / "t-judge" / "spec.json").unlink()
    assert judge_run(run_dir)["experiments"][0]["arms"][0]["verdict"] == "UNKNOWN"


def test_an_unreadable_oracle_is_nodata_with_the_reason(tmp_path):
    run_dir = make_run(tmp_path)
    (run_dir / "t-judge" / "hardened" / "oracle.json").write_text("{not json")
    hardened = judge_run(run_dir)["experiments"][0]["arms"][0]
    lost = next(c for c in hardened["checks"] if c["name"] == "lost")
    assert lost["verdict"] == "NODATA" and lost["message"].startswith("oracle.json unreadable (JSONDecodeError")


def test_an_arm_that_was_not_run_is_left_out(tmp_path):
    run_dir = make_run(tmp_path, arms={"hardened": (Story(metrics=recovering), clean_oracle())})
    assert [a["profile"] for a in judge_run(run_dir)["experiments"][0]["arms"]] == ["hardened"]


# -- the checked-in fixture runs ---------------------------------------------------------------------------------
# tests/fixtures/runs holds cuts of real smoke runs whose results.json make_runs.py wrote with judge_run over the kept
# files, after checking every kept arm judges as the real run judged it (verdicts, figures, check verdicts).
@pytest.fixture
def fixture_runs(tmp_path) -> Path:
    target = tmp_path / "runs"
    shutil.copytree(FIXTURES, target, symlinks=True)
    return target


@pytest.mark.parametrize("name", RUNS)
def test_the_fixture_runs_judge_as_their_results_say(fixture_runs, name):
    run_dir = fixture_runs / name
    want = json.loads((run_dir / "results.json").read_text())
    got = judge_run(run_dir)
    assert (got["verdict"], got["status"]) == (want["verdict"], want["status"])
    assert [e["name"] for e in got["experiments"]] == [e["name"] for e in want["experiments"]]
    for experiment, expected in zip(got["experiments"], want["experiments"]):
        assert experiment["verdict"] == expected["verdict"], experiment["name"]
        assert [a["profile"] for a in experiment["arms"]] == [a["profile"] for a in expected["arms"]]
        for arm, recorded in zip(experiment["arms"], expected["arms"]):
            where = f"{name}/{experiment['name']}/{arm['profile']}"
            for key in ("verdict", "role", "recovery_s", "lost", "duplicated"):
                assert arm[key] == recorded[key], (where, key)
            assert (arm["signature"] is None) == (recorded["signature"] is None), where
            assert_recorded(arm["checks"], recorded["checks"], where)


def test_rejudging_a_fixture_run_is_idempotent_and_check_exits_with_the_verdict(fixture_runs, capsys):
    run_dir = fixture_runs / RUNS[0]
    assert cli.check(run_dir) == 1  # FAILED
    first = (run_dir / "results.json").read_bytes()
    arm_results = sorted(run_dir.glob("*/*/result.json"))
    before = [p.read_bytes() for p in arm_results]
    assert cli.check(run_dir) == 1
    assert (run_dir / "results.json").read_bytes() == first
    assert [p.read_bytes() for p in arm_results] == before
    assert "FAILED" in capsys.readouterr().out
    assert cli.check(fixture_runs / RUNS[1]) == 1  # FAILED since issue 36 (tests/fixtures/runs/README.md)


def test_check_is_a_plain_dataclass_with_the_result_keys():
    assert Check("x", "PASSED", "e", "m").to_dict() == {"name": "x", "verdict": "PASSED", "expected": "e",
                                                        "measured": "m", "message": ""}


def test_repeats_whose_verdicts_differ_are_reported_as_flaky():
    def experiment(name, hardened, naive):
        return {"name": name, "arms": [{"profile": "hardened", "verdict": hardened},
                                       {"profile": "naive", "verdict": naive}]}

    runs = [experiment("kafka.r1", "PASSED", "PASSED"), experiment("kafka.r2", "FAILED", "PASSED"),
            experiment("kafka.r3", "PASSED", "PASSED"), experiment("other", "FAILED", "PASSED")]
    assert flaky_arms(runs) == [{"experiment": "kafka", "profile": "hardened",
                                 "verdicts": ["PASSED", "FAILED", "PASSED"]}]
    assert flaky_arms(runs[:1] + runs[3:]) == []
