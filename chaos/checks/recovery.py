"""recovery: seconds from each disruption (a heal, a restart of the driver or of a server, an executor lost, partition
leaders moved) to the first of `healthy_samples` consecutive healthy samples (lag < lag_below and progress, shown by a
batch that started after the disruption), the worst of them, vs `within`; no disruption is left out (one not
recovered before the next fault fails, or with `grouped` is measured on to the healthy run after the next); max_lag:
the largest lag of the inject and recover samples; still_healthy: the last samples of the recover phase all healthy
(recovered, and stayed so to the end)."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import cast

from ..faults import registry as fault_registry  # by module: read as a history is judged
from ..spec import ExperimentSpec, Recovery
from .base import CheckDef, ControlData, settle
from .timeline import Check, Timeline, at_time, metric, num, secs, time_of


@dataclass(frozen=True)
class RecoveryTime:
    seconds: float | None  # None: not recovered (or nothing to measure, see verdict)
    verdict: str  # PASSED/FAILED against the target, or NODATA
    heal: Mapping[str, object] | None  # the disruption measured from (a group's first)
    why: str
    first_batch_s: float | None = None  # seconds from `heal` to the first sample showing a batch that started after
    cut_at: float | None = None  # not recovered: when the next fault came (None: watched to the history's end)
    last: Mapping[str, object] | None = None  # a group's last disruption (None: a disruption on its own)
    healthy_at: float | None = None  # when the healthy run began (the history's time): where the recovery ends

    @property
    def summary(self) -> str:
        """This disruption's two figures: to the first new batch, and to recovery."""
        where = at_time(self.heal) if self.heal is not None else "?"
        if self.last is not None:
            where += f"-{time_of(self.last):.1f}s"
        batch = f"first new batch {self.first_batch_s:g} s" if self.first_batch_s is not None else "no new batch"
        if self.seconds is not None:
            return f"{where}: {batch}, recovered {self.seconds:g} s"
        if self.verdict == "NODATA":
            return f"{where}: no data"
        return f"{where}: {batch}, " + (f"not recovered before t={self.cut_at:.1f}s" if self.cut_at is not None
                                        else "not recovered")



def momentary(record: Mapping[str, object]) -> bool:
    """A fault record of a kind whose effect is over as it acts (a kill, a damaged file, leadership moved) or that
    only reshapes the workload (its kind declares `momentary`): recovery is measured from what it did to the job (the
    restarts it causes, an executor lost, leaders moved), not from its heal, which does nothing for the job; its
    window holds no other recovery back. A name no kind declares counts as lasting."""
    kind = fault_registry.kind_of(record.get("name"))
    return kind is not None and kind.momentary


def shapes_workload(record: Mapping[str, object]) -> bool:
    """A fault record of a kind that only reshapes the workload: its heal (the workload back to normal) is a
    disruption, and its start is neither an outage nor a hit on the job."""
    kind = fault_registry.kind_of(record.get("name"))
    return kind is not None and kind.shapes_workload

# Servers the harness restarts after a kill: the job can recover only once they are back.
RESTARTED_SERVERS = ("job-driver", "broker", "minio")


def _lasting_windows(tl: Timeline) -> list[tuple[float, float]]:
    """(injected, healed) of each fault whose effect lasts while it is injected (a proxy down, a toxic, a pause, an S3
    rule, a second deployment), and (killed, restarted) of each server a kill took down (the job cannot recover
    until the harness has it back); a window never closed runs to the end of the history."""
    windows: list[tuple[float, float]] = []
    open_at: dict[tuple[object, object], float] = {}
    for record in tl.faults:
        if momentary(record):
            continue
        key, state = (record.get("name"), record.get("target")), record.get("state")
        if state == "injecting":
            open_at.setdefault(key, time_of(record))
        elif state == "healed" and key in open_at:
            windows.append((open_at.pop(key), time_of(record)))
    for record in tl.jobs:
        process = record.get("process")
        if process in RESTARTED_SERVERS and process != "job-driver":
            if record.get("event") == "exited" and record.get("cause"):
                open_at.setdefault(("down", process), time_of(record))
            elif record.get("event") == "restarted" and ("down", process) in open_at:
                windows.append((open_at.pop(("down", process)), time_of(record)))
    windows += [(start, tl.end) for start in open_at.values()]
    return windows


def _what_the_job_lost(record: Mapping[str, object]) -> bool:
    """A job record of something a fault did that the job must recover from: a driver or a server restarted, an
    executor killed (its worker relaunches it), partition leadership moved."""
    event, process = record.get("event"), record.get("process")
    return ((event == "restarted" and process in RESTARTED_SERVERS)
            or (event == "exited" and process == "executor" and bool(record.get("cause")))
            or event == "leaders_moved")


def disruptions(tl: Timeline) -> list[Mapping[str, object]]:
    """What recovery is measured from: every heal of a fault that lasts while injected (or only reshapes the
    workload), and everything a momentary fault did to the job (a restart of its driver, after a kill or on a
    checkpoint just damaged; a server restarted; an executor lost; leaders moved), when no lasting fault is still
    acting right after it (recovery under another fault's effect is measured from that fault's heal)."""
    found = [f for f in tl.faults if f.get("state") == "healed"
             and (not momentary(f) or shapes_workload(f))]
    found += [j for j in tl.jobs if _what_the_job_lost(j)]
    windows = _lasting_windows(tl)
    return sorted((r for r in found if not any(start < time_of(r) < end for start, end in windows)), key=time_of)


def _what(record: Mapping[str, object]) -> str:
    if record.get("type") == "job":
        event, process = record.get("event"), record.get("process")
        if process == "job-driver":
            return "the restart of the job (" \
                   f"{'on a damaged checkpoint' if record.get('corrupted') else 'after it ended'}" \
                   f" at {at_time(record)})"
        if event == "restarted":
            return f"the restart of {process} at {at_time(record)}"
        if event == "leaders_moved":
            return f"the move of partition leaders at {at_time(record)}"
        return f"the loss of an executor at {at_time(record)}"
    return f"the heal of {record.get('name')} on {record.get('target')} at {at_time(record)}"


def _lag_text(target: Recovery) -> str:
    seconds = getattr(target, "lag_below_s", None)
    return f"{num(target.lag_below)}" + (f" ({num(seconds)} s of input)" if seconds else "")


def instant(value: object) -> datetime | None:
    """An ISO 8601 time (a record's `wall`, Spark's progress `timestamp`) as an aware datetime;
    None if it is not one."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Since:
    """What shows a batch completed after a disruption. A sample's last completed batch started after `wall` (its
    `batch_started`: that batch ran in the driver running then, and the lag is measured against its offsets); in a
    sample without `batch_started` (a history written before it was recorded), its batch id passed `batch_id`."""

    wall: datetime | None
    batch_id: float | None = None

    def new_batch(self, sample: Mapping[str, object]) -> bool:
        started = instant(sample.get("batch_started"))
        if started is not None:
            return self.wall is not None and started > self.wall
        batch = metric(sample, "batch_id")
        return batch is not None and (self.batch_id is None or batch > self.batch_id)


def since_record(tl: Timeline, record: Mapping[str, object]) -> Since:
    """Since a disruption in the history. Without `batch_started` (older histories) the batch id must pass the
    highest one sampled up to the first sample after the disruption: that sample may show a batch that completed
    just before it (the samples are a second apart), so only a later batch is surely new."""
    t = time_of(record)
    first_after = next((i for i, s in enumerate(tl.samples) if time_of(s) > t), len(tl.samples))
    seen = [b for s in tl.samples[:first_after + 1] if (b := metric(s, "batch_id")) is not None]
    return Since(instant(record.get("wall")), max(seen) if seen else None)


def healthy_after(sample: Mapping[str, object], previous: Mapping[str, object] | None, lag_below: float,
                  since: Since) -> bool:
    """One healthy sample after a disruption: lag under the bound and progress (healthy_sample), in a batch that
    started after the disruption (a killed driver's last batches and offsets are no evidence of the new one)."""
    return since.new_batch(sample) and healthy_sample(sample, previous, lag_below)


def healthy_run(samples: Sequence[Mapping[str, object]], previous: Mapping[str, object] | None, target: Recovery,
                since: Since) -> int | None:
    """The index in `samples` of the first of `target.healthy_samples` healthy samples in a row (healthy_after),
    `previous` being the sample before the first; None if there is no such run."""
    run = 0
    for i, sample in enumerate(samples):
        before = samples[i - 1] if i > 0 else previous
        run = run + 1 if healthy_after(sample, before, target.lag_below, since) else 0
        if run == target.healthy_samples:
            return i - run + 1
    return None


def _under_faults(windows: Sequence[tuple[float, float]], start: float, end: float) -> float:
    """Seconds of [start, end] during which a lasting fault was in place (overlapping windows counted once)."""
    covered, reach = 0.0, start
    for a, b in sorted(windows):
        a, b = max(a, reach), min(b, end)
        if b > a:
            covered += b - a
            reach = b
    return covered


def _recovery_after(tl: Timeline, target: Recovery, start: Mapping[str, object], until: float | None,
                    first: Mapping[str, object], windows: Sequence[tuple[float, float]]) -> RecoveryTime:
    """Recovery from one disruption (`start`): the first `healthy_samples` healthy samples in a row after it (and,
    when another fault follows at `until`, before that); measured from `first` (`start`, or its group's first
    disruption), less the time a lasting fault was in place between them."""
    t_start, t_first = time_of(start), time_of(first)
    grouped = first is not start
    last = start if grouped else None
    # Samples after the recover phase's end are the drain's: the input has stopped, so the lag falls whether or not
    # the job caught up. Recovery is judged while the workload still runs.
    recover = tl.window("recover")
    stop = until if recover is None or (until is not None and until <= recover[1]) else recover[1]
    after = [i for i, s in enumerate(tl.samples) if time_of(s) > t_start and (stop is None or time_of(s) <= stop)]

    def elapsed(t: float) -> float:
        return round(t - t_first - _under_faults(windows, t_first, t), 1)

    what = _what(start) + (f", the last of a group from {_what(first)}" if grouped else "")
    counted = f" (not counting {_under_faults(windows, t_first, t_start):.1f} s under faults)" \
        if grouped and _under_faults(windows, t_first, t_start) > 0 else ""
    if not after:
        return RecoveryTime(None, "NODATA", first, f"no sample after {what}", last=last)
    if all(metric(tl.samples[i], "lag") is None for i in after):
        return RecoveryTime(None, "NODATA", first, f"lag was not measured after {what}", last=last)
    since = since_record(tl, start)
    samples = [tl.samples[i] for i in after]
    new = next((s for s in samples if since.new_batch(s)), None)
    first_batch = elapsed(time_of(new)) if new is not None else None
    batch_text = (f"the first batch that started after it completed {first_batch:.1f} s after" if new is not None
                  else "no batch that started after it completed")
    index = healthy_run(samples, tl.samples[after[0] - 1] if after[0] > 0 else None, target, since)
    if index is not None:
        seconds = elapsed(time_of(samples[index]))
        return RecoveryTime(seconds, "PASSED" if seconds <= target.within else "FAILED", first,
                            f"lag below {_lag_text(target)} with progress in new batches for {target.healthy_samples} "
                            f"samples from {seconds:.1f} s after {what}{counted} ({batch_text})", first_batch,
                            last=last, healthy_at=time_of(samples[index]))
    last_lag = next((metric(s, "lag") for s in reversed(samples) if metric(s, "lag") is not None), None)
    window = (stop if stop is not None else tl.end) - t_start
    before = (f" before the next fault at t={until:.1f}s" if until is not None and stop == until
              else f" before the recover phase ended at t={stop:.1f}s (the drain after it is not judged)"
              if stop is not None and stop < tl.end else "")
    return RecoveryTime(None, "FAILED", first,
                        f"not recovered{before}: never {target.healthy_samples} healthy samples in a row (lag below "
                        f"{_lag_text(target)} with progress in new batches) in the {window:.1f} s after {what}"
                        f" ({batch_text}); last lag {last_lag}",
                        first_batch, cut_at=until, last=last)


def _interruptions(tl: Timeline) -> list[float]:
    """When something new hits the job: a fault begins (workload reshaping aside), or its driver is killed or
    stopped."""
    times = [time_of(f) for f in tl.faults
             if f.get("state") == "injecting" and not shapes_workload(f)]
    # An exit with a cause was done to it (a kill, a stop to damage its checkpoint); the arm's final stop has none.
    times += [time_of(j) for j in tl.jobs if j.get("event") == "exited" and j.get("cause")]
    return sorted(times)


def measure_recoveries(tl: Timeline, target: Recovery) -> list[RecoveryTime]:
    """Recovery from each disruption in turn (`disruptions`), each watched until the next thing hits the job. None
    is left out: one not recovered before the next hit FAILS, unless the target is `grouped` (the spec says its
    faults come faster than a recovery): then it is carried, and the group is measured from its first disruption
    to the healthy run after its last."""
    hits = _interruptions(tl)
    windows = _lasting_windows(tl)
    results: list[RecoveryTime] = []
    first: Mapping[str, object] | None = None  # a group's first disruption, while it is carried
    for record in disruptions(tl):
        until = next((t for t in hits if t > time_of(record)), None)
        result = _recovery_after(tl, target, record, until, first or record, windows)
        if target.grouped and result.verdict == "FAILED" and result.seconds is None and until is not None:
            first = first or record
            continue
        results.append(result)
        first = None
    return results


def measure_recovery(tl: Timeline, target: Recovery) -> RecoveryTime:
    """The arm's recovery: the worst over its disruptions (every heal, every restart, measure_recoveries). Seconds
    (rounded to 0.1) from a disruption to the first of `healthy_samples` consecutive healthy samples: lag < lag_below,
    progress since the previous sample (batch_id advanced, or processed_rate > 0), and a last completed batch that
    started after the disruption; a sample with lag unmeasured is not healthy. So a recovery is never shorter than
    the time to the first batch that started after it."""
    if not disruptions(tl):
        injected = tl.first_injection()
        why = (f"{injected.get('name')} on {injected.get('target')} was injected but never healed"
               if injected is not None else "no fault was injected")
        return RecoveryTime(None, "NODATA", None, f"no healed fault record: {why}")
    results = measure_recoveries(tl, target)
    failed = [r for r in results if r.verdict == "FAILED"]
    if failed:
        unrecovered = [r for r in failed if r.seconds is None]
        worst_one = unrecovered[0] if unrecovered else max(failed, key=lambda r: r.seconds or 0.0)
    else:
        measured = [r for r in results if r.seconds is not None]
        if not measured:
            return results[-1]
        worst_one = max(measured, key=lambda r: r.seconds or 0.0)
    if len(results) > 1:
        worst_one = dataclasses.replace(worst_one, why=f"{worst_one.why}; the worst of {len(results)} disruptions: "
                                                        + "; ".join(r.summary for r in results))
    return worst_one


def healthy_sample(sample: Mapping[str, object], previous: Mapping[str, object] | None, lag_below: float) -> bool:
    """Lag under the bound and progress (the batch id advanced, or rows were processed): one healthy sample, by its
    own figures. After a disruption a sample must also show a new batch (healthy_after)."""
    lag = metric(sample, "lag")
    if lag is None or lag >= lag_below:
        return False
    batch, before = metric(sample, "batch_id"), metric(previous, "batch_id") if previous is not None else None
    advanced = batch is not None and before is not None and batch > before
    return advanced or (metric(sample, "processed_rate") or 0) > 0


def check_recovery(tl: Timeline, target: Recovery) -> Check:
    result = measure_recovery(tl, target)
    measured = (secs(result.seconds) if result.seconds is not None
                else "not recovered" if result.verdict == "FAILED" else "no data")
    return Check("recovery", result.verdict, f"<= {num(target.within)}s", measured, result.why)


def check_recovery_vs_control(subject: Timeline, control: Timeline, target: Recovery) -> Check | None:
    """recovery_vs_control: the hardened arm's recovery against plain Spark's in the same run, the control (naive)
    arm's history measured by the same target over the same faults. Where the control recovered, the hardened arm
    must recover within the control's seconds plus `control_margin`: a bound that follows what a job without the
    hardening measurably does, so a regression of the hardened path shows up. None (no check) where the spec states
    no margin; PASSED with the reason where the control did not recover (nothing to compare: the experiment's
    discrimination judges that)."""
    margin = target.control_margin
    if margin is None:
        return None
    plain = measure_recovery(control, target)
    if plain.seconds is None:
        return Check("recovery_vs_control", "PASSED", f"<= the control's recovery + {num(margin)}s",
                     "control not recovered", f"the control (naive) arm did not recover: {plain.why}")
    bound = round(plain.seconds + margin, 1)
    expected = f"<= {num(bound)}s (the control's {num(plain.seconds)} s + {num(margin)} s)"
    ours = measure_recovery(subject, target)
    if ours.seconds is None:
        return Check("recovery_vs_control", "FAILED", expected, "not recovered",
                     f"the control recovered in {num(plain.seconds)} s; the hardened arm did not: {ours.why}")
    verdict = "PASSED" if ours.seconds <= bound else "FAILED"
    return Check("recovery_vs_control", verdict, expected, secs(ours.seconds),
                 f"hardened {num(ours.seconds)} s against the control's {num(plain.seconds)} s "
                 f"(control: {plain.summary})")


def check_max_lag(tl: Timeline, limit: int) -> Check:
    lags = [(lag, s) for s in tl.samples_in(("inject", "recover")) if (lag := metric(s, "lag")) is not None]
    expected = f"<= {limit}"
    if not lags:
        return Check("max_lag", "NODATA", expected, "no data", "no lag measured in the inject and recover phases")
    top, sample = max(lags, key=lambda item: item[0])
    verdict = "PASSED" if top <= limit else "FAILED"
    return Check("max_lag", verdict, expected, num(top),
                 f"largest lag of {len(lags)} inject+recover samples: {num(top)} records at {at_time(sample)}")


def control_recovery(data: ControlData, target: Recovery) -> Check:
    check = check_recovery(data.tl, target)
    if not data.schedule_done:
        return settle(check, data, pass_unless=data.not_done(), fail_unless=data.not_done())
    result = measure_recovery(data.tl, target)
    fail_unless = None
    if check.verdict == "FAILED" and result.seconds is None and result.heal is not None and result.cut_at is None:
        # Not recovered: final only if the control was watched long enough after the last heal that a recovery
        # within the bound would have been seen (healthy_samples samples after heal + within).
        bound = time_of(result.heal) + target.within
        after = sum(1 for s in data.tl.samples if time_of(s) > bound)
        if after < target.healthy_samples:
            fail_unless = (f"the control was watched {data.tl.end - time_of(result.heal):.1f} s after its last heal, "
                           f"not the {num(target.within)} s bound and {target.healthy_samples} samples more that "
                           "\"not recovered\" needs")
    return settle(check, data, fail_unless=fail_unless)


def control_max_lag(data: ControlData, limit: int) -> Check:
    why = None if data.complete else data.incomplete(("inject", "recover"))
    return settle(check_max_lag(data.tl, limit), data, pass_unless=why)  # a peak stays a peak


RECOVERY = CheckDef("recovery", "recovery", lambda arm, target: check_recovery(arm.tl, target), control_recovery)
MAX_LAG = CheckDef("max_lag", "max_lag", lambda arm, limit: check_max_lag(arm.tl, limit), control_max_lag)


# still_healthy's lag bound when the arm sets no recovery target: seconds of input at the workload's rate (the
# recovery bound every experiment uses, `lag_below: 5s`).
STILL_HEALTHY_LAG_S = 5.0


def still_healthy_bound(spec: ExperimentSpec, profile: str) -> tuple[float, str]:
    """The lag a healthy sample stays below for still_healthy: the arm's recovery lag_below, else
    STILL_HEALTHY_LAG_S of input; and how to say it."""
    recovery = spec.arm(profile).targets.recovery
    if recovery is not None:
        seconds = f", {num(recovery.lag_below_s)} s of input" if recovery.lag_below_s else ""
        return recovery.lag_below, f"{num(recovery.lag_below)} (recovery's lag_below{seconds})"
    records = STILL_HEALTHY_LAG_S * spec.workload.rate
    return records, f"{num(records)} ({num(STILL_HEALTHY_LAG_S)} s of input: no recovery target)"


def check_still_healthy(tl: Timeline, samples: int, lag_below: float, bound: str = "") -> Check:
    """The last `samples` samples of the recover phase all show the job healthy: lag measured and below `lag_below`,
    its driver not down; and progress across them: the batch id advanced past the sample before them, unless nothing
    was pending (lag 0 in every one). Fewer samples than that in the recover phase: NODATA."""
    expected = f"the last {samples} recover samples: lag < {num(lag_below)}, progress"
    bound = bound or num(lag_below)
    if tl.window("recover") is None:
        return Check("still_healthy", "NODATA", expected, "no recover phase", "the history has no recover phase")
    recover = tl.samples_in(("recover",))
    if len(recover) < samples:
        return Check("still_healthy", "NODATA", expected, f"{len(recover)} samples",
                     f"{len(recover)} samples in the recover phase, fewer than the {samples} to judge")
    last = recover[-samples:]
    lags = [metric(s, "lag") for s in last]
    measured = [lag for lag in lags if lag is not None]
    batches = [b for s in last if (b := metric(s, "batch_id")) is not None]
    earlier = [b for s in tl.samples if time_of(s) < time_of(last[0]) and (b := metric(s, "batch_id")) is not None]
    base = earlier[-1] if earlier else (batches[0] if batches else None)
    advanced = 0.0 if base is None or not batches else max(batches) - base
    shown = (f"max lag {num(max(measured))}" if measured else "lag not measured") + f", batch +{num(advanced)}"
    since = f"in the last {samples} samples of the recover phase (from {at_time(last[0])})"
    for sample, lag in zip(last, lags):
        alive = sample.get("alive")
        if isinstance(alive, Mapping) and alive.get("job-driver") is False:
            return Check("still_healthy", "FAILED", expected, shown,
                         f"the job's driver was down at {at_time(sample)}, {since}")
        if lag is None or lag >= lag_below:
            what = "lag was not measured" if lag is None else f"lag {num(lag)} not below {bound}"
            return Check("still_healthy", "FAILED", expected, shown, f"{what} at {at_time(sample)}, {since}")
    if advanced <= 0 and any(lag > 0 for lag in measured):
        stuck = "no batch id measured" if base is None else f"batch_id stayed at {num(base)}"
        return Check("still_healthy", "FAILED", expected, shown,
                     f"no batch completed {since} ({stuck}) while records were pending (max lag "
                     f"{num(max(measured))})")
    return Check("still_healthy", "PASSED", expected, shown,
                 f"lag below {bound} with progress {since}")


def _still_healthy(spec: ExperimentSpec | None, profile: str | None, tl: Timeline, target: Mapping[str, object]
                   ) -> Check:
    samples = cast(int, target["samples"])  # validated by its Param: an int >= 2
    if spec is None or profile is None:
        return Check("still_healthy", "NODATA", f"the last {samples} recover samples healthy", "no spec",
                     "no spec to take the lag bound from")
    lag_below, bound = still_healthy_bound(spec, profile)
    return check_still_healthy(tl, samples, lag_below, bound)


def control_still_healthy(data: ControlData, target: Mapping[str, object]) -> Check:
    """The control's last samples by the hardened arm's bound; only a control that ran to the end of its recover
    phase says how it ended."""
    subject = next((a.profile for a in data.spec.arms if a.role == "subject"), None) if data.spec else None
    why = None if "recover" in data.ended else data.incomplete(("recover",))
    return settle(_still_healthy(data.spec, subject, data.tl, target), data, pass_unless=why, fail_unless=why)


STILL_HEALTHY = CheckDef("still_healthy", "still_healthy",
                         lambda arm, target: _still_healthy(arm.spec, arm.profile, arm.tl, target),
                         control_still_healthy)
