"""recovery: seconds from each disruption (a heal, a restart of the driver) to the first of `healthy_samples`
consecutive healthy samples (lag < lag_below and progress), the worst of them, vs `within`; max_lag: the largest lag
of the inject and recover samples; still_healthy: the last samples of the recover phase all healthy (recovered, and
stayed so to the end)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping, cast

from ..spec import ExperimentSpec, Recovery
from .base import CheckDef, ControlData, settle
from .timeline import Check, Timeline, at_time, metric, num, secs, time_of


@dataclass(frozen=True)
class RecoveryTime:
    seconds: float | None  # None: not recovered (or nothing to measure, see verdict)
    verdict: str  # PASSED/FAILED against the target, or NODATA
    heal: Mapping[str, object] | None
    why: str


# Faults whose effect is over as they act (a kill, a damaged file: the job restarts at once) or that only reshape the
# workload: recovery is measured from the restarts they cause, and their windows do not hold other recoveries back.
MOMENTARY_FAULTS = ("process.kill", "broker.leader_move", "checkpoint.corrupt", "data.hot_key", "data.key_rotation")


def _lasting_windows(tl: Timeline) -> list[tuple[float, float]]:
    """(injected, healed) of each fault whose effect lasts while it is injected (a proxy down, a toxic, a pause, an S3
    rule, a second deployment); a window never healed runs to the end of the history."""
    windows: list[tuple[float, float]] = []
    open_at: dict[tuple[object, object], float] = {}
    for record in tl.faults:
        if record.get("name") in MOMENTARY_FAULTS:
            continue
        key, state = (record.get("name"), record.get("target")), record.get("state")
        if state == "injecting":
            open_at.setdefault(key, time_of(record))
        elif state == "healed" and key in open_at:
            windows.append((open_at.pop(key), time_of(record)))
    windows += [(start, tl.end) for start in open_at.values()]
    return windows


def disruptions(tl: Timeline) -> list[Mapping[str, object]]:
    """What recovery is measured from: every heal of a fault and every restart of the job's driver (after a kill, or on
    a checkpoint just damaged, where the fault's heal does nothing for the job), when no lasting fault is still
    acting right after it (recovery under another fault's effect is measured from that fault's heal)."""
    found = [f for f in tl.faults if f.get("state") == "healed"]
    found += [j for j in tl.jobs if j.get("event") == "restarted" and j.get("process") == "job-driver"]
    windows = _lasting_windows(tl)
    return sorted((r for r in found if not any(start < time_of(r) < end for start, end in windows)), key=time_of)


def _what(record: Mapping[str, object]) -> str:
    if record.get("type") == "job":
        return f"the restart of the job ({'on a damaged checkpoint' if record.get('corrupted') else 'after it ended'}" \
               f" at {at_time(record)})"
    return f"the heal of {record.get('name')} on {record.get('target')} at {at_time(record)}"


def _lag_text(target: Recovery) -> str:
    seconds = getattr(target, "lag_below_s", None)
    return f"{num(target.lag_below)}" + (f" ({num(seconds)} s of input)" if seconds else "")


def _recovery_after(tl: Timeline, target: Recovery, start: Mapping[str, object], until: float | None
                    ) -> RecoveryTime:
    """Recovery from one disruption: the first `healthy_samples` healthy samples in a row after it (and, when
    another disruption follows at `until`, starting before that)."""
    t_start = time_of(start)
    after = [i for i, s in enumerate(tl.samples) if time_of(s) > t_start and (until is None or time_of(s) <= until)]
    if not after:
        return RecoveryTime(None, "NODATA", start, f"no sample after {_what(start)}")
    if all(metric(tl.samples[i], "lag") is None for i in after):
        return RecoveryTime(None, "NODATA", start, f"lag was not measured after {_what(start)}")
    run = 0
    for i in after:
        previous = tl.samples[i - 1] if i > 0 else None
        if healthy_sample(tl.samples[i], previous, target.lag_below):
            run += 1
            if run == target.healthy_samples:
                first = tl.samples[i - target.healthy_samples + 1]
                seconds = round(time_of(first) - t_start, 1)
                return RecoveryTime(seconds, "PASSED" if seconds <= target.within else "FAILED", start,
                                    f"lag below {_lag_text(target)} with progress for {target.healthy_samples} "
                                    f"samples from {seconds:.1f} s after {_what(start)}")
        else:
            run = 0
    last_lag = next((metric(tl.samples[i], "lag") for i in reversed(after)
                     if metric(tl.samples[i], "lag") is not None), None)
    window = (until if until is not None else tl.end) - t_start
    if until is not None and window <= target.within + target.healthy_samples:
        # Something new hit the job before this one's bound ran out: recovery is measured from its own disruption.
        return RecoveryTime(None, "SUPERSEDED", start, f"the next fault came {window:.1f} s after {_what(start)}")
    return RecoveryTime(None, "FAILED", start,
                        f"never {target.healthy_samples} healthy samples in a row (lag below {_lag_text(target)} "
                        f"with progress) in the {window:.1f} s after {_what(start)}"
                        + (" (before the next fault)" if until is not None else "") + f"; last lag {last_lag}")


def _interruptions(tl: Timeline) -> list[float]:
    """When something new hits the job: a fault begins (workload reshaping aside), or its driver is killed or
    stopped."""
    times = [time_of(f) for f in tl.faults
             if f.get("state") == "injecting" and not str(f.get("name")).startswith("data.")]
    # An exit with a cause was done to it (a kill, a stop to damage its checkpoint); the arm's final stop has none.
    times += [time_of(j) for j in tl.jobs if j.get("event") == "exited" and j.get("process") == "job-driver"
              and j.get("cause")]
    return sorted(times)


def measure_recoveries(tl: Timeline, target: Recovery) -> list[RecoveryTime]:
    """Recovery from each disruption in turn (`disruptions`), each watched until the next thing hits the job."""
    hits = _interruptions(tl)
    return [_recovery_after(tl, target, record, next((t for t in hits if t > time_of(record)), None))
            for record in disruptions(tl)]


def measure_recovery(tl: Timeline, target: Recovery) -> RecoveryTime:
    """The arm's recovery: the worst over its disruptions (every heal, every restart of the driver). Seconds (rounded
    to 0.1) from a disruption to the first of `healthy_samples` consecutive healthy samples: lag < lag_below and
    progress since the previous sample (batch_id advanced, or processed_rate > 0); a sample with lag unmeasured is
    not healthy. A disruption followed by another before its bound ran out is judged from the later one; the last
    one must be recovered from."""
    if not disruptions(tl):
        injected = tl.first_injection()
        why = (f"{injected.get('name')} on {injected.get('target')} was injected but never healed"
               if injected is not None else "no fault was injected")
        return RecoveryTime(None, "NODATA", None, f"no healed fault record: {why}")
    results = [r for r in measure_recoveries(tl, target) if r.verdict != "SUPERSEDED"]
    failed = [r for r in results if r.verdict == "FAILED"]
    if failed:
        unrecovered = [r for r in failed if r.seconds is None]
        worst_one = unrecovered[0] if unrecovered else max(failed, key=lambda r: r.seconds or 0.0)
    else:
        measured = [r for r in results if r.seconds is not None]
        if not measured:
            return results[-1] if results else RecoveryTime(None, "NODATA", None, "every disruption was followed by "
                                                            "another fault before its bound ran out")
        worst_one = max(measured, key=lambda r: r.seconds or 0.0)
    if len(results) > 1:
        seconds = [f"{r.seconds:g}" for r in results if r.seconds is not None]
        worst_one = dataclasses.replace(worst_one, why=f"{worst_one.why} (the slowest of {len(results)} "
                                                        f"disruptions: {', '.join(seconds) or 'none measured'} s)")
    return worst_one


def healthy_sample(sample: Mapping[str, object], previous: Mapping[str, object] | None, lag_below: float) -> bool:
    """Lag under the bound and progress (the batch id advanced, or rows were processed): one healthy sample."""
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
    if check.verdict == "FAILED" and result.seconds is None and result.heal is not None:
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
