"""progress: batch_id advances within every phase window; stuck from the first fault to the end of the history: HANG.
stalled: a control's signature, the longest stretch of the inject and recover phases with no batch completed, or a
driver that ended by itself after its last batch (a stall without end)."""
from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping, Sequence

from .base import CheckDef, ControlData, settle
from .timeline import Check, Timeline, at_time, metric, num, time_of


def check_progress(tl: Timeline) -> Check:
    """batch_id advances within every phase window; if it never advances from the first fault injection to the
    end of the history, HANG. A window without two measured samples (or one after an earlier measured one) has
    nothing to judge: NODATA."""
    expected = "batch_id advances in every phase"
    if not tl.windows:
        started_exit = next((j for j in tl.jobs if j.get("event") == "exited"), None)
        why = (f"; the job exited before it ({started_exit.get('cause') or 'code ' + str(started_exit.get('code'))})"
               if started_exit is not None else "")
        return Check("progress", "NODATA", expected, "no phase recorded", f"the history has no phase record{why}")
    ids = [(time_of(s), b) for s in tl.samples if (b := metric(s, "batch_id")) is not None]

    fault = tl.first_injection()
    if fault is not None:
        t_fault = time_of(fault)
        before = [b for t, b in ids if t < t_fault]
        after = [b for t, b in ids if t >= t_fault]
        if after and (before or len(after) >= 2):
            base = before[-1] if before else after[0]
            if max(after) <= base and not _completed_in(tl, t_fault, float("inf")):
                return Check("progress", "HANG", expected, f"stuck at batch {num(base)} after the first fault",
                             f"batch_id stayed at {num(base)} from the first fault injection ({fault.get('name')} on "
                             f"{fault.get('target')} at {at_time(fault)}) to the end of the history (t={tl.end:.1f}s): "
                             "the job made no progress at all")

    parts, stuck, unmeasured = [], [], []
    for name, start, end in tl.windows:
        inside = [b for t, b in ids if start <= t < end]
        earlier = [b for t, b in ids if t < start]
        if not inside or (not earlier and len(inside) < 2):
            parts.append(f"{name}: no data")
            unmeasured.append(name)
            continue
        base = earlier[-1] if earlier else inside[0]
        completed = _completed_in(tl, start, end)
        if max(inside) > base:
            parts.append(f"{name}: +{num(max(inside) - base)}")
        elif completed:
            # a job restarted on an older checkpoint (a rollback past a damaged snapshot) runs its batches again
            # under lower ids, and with no batch cap catches up in fewer of them than it rolled back
            parts.append(f"{name}: {completed} batches completed, the last {num(inside[-1])} (rolled back from "
                         f"{num(base)})")
        else:
            parts.append(f"{name}: stuck at {num(base)}")
            stuck.append((name, base, start, end))
    measured = ", ".join(parts)
    if stuck:
        name, base, start, end = stuck[0]
        return Check("progress", "FAILED", expected, measured,
                     f"no batch completed during {name} (t={start:.1f}s to {end:.1f}s): batch_id stayed at {num(base)}")
    if unmeasured:
        return Check("progress", "NODATA", expected, measured,
                     f"no batch_id measured in {', '.join(unmeasured)}: progress there cannot be judged")
    # Before the faults and at the end, a healthy job completes batches steadily, not one per phase.
    for name, start, end in _steady_windows(tl):
        # a re-run of a batch completing (batch_key) is progress too
        steady = [(t, batch_key(s, b), metric(s, "batch_duration_ms"))
                  for s in tl.samples if start <= (t := time_of(s)) < end and (b := metric(s, "batch_id")) is not None]
        if len(steady) < 4:
            continue
        idle = _first_idle_stretch(steady)
        if idle is not None:
            at, seconds = idle
            return Check("progress", "FAILED", expected, measured + f"; {name}: idle {seconds:.1f}s",
                         f"batches did not complete steadily during {name} (t={start:.1f}s to {end:.1f}s): no batch "
                         f"completed or ran for {seconds:.1f}s up to t={at:.1f}s (> {STEADY_IDLE_S:.0f}s)")
    return Check("progress", "PASSED", expected, measured, "batches completed in every phase, steadily before the "
                 "faults and at the end")


def batch_key(sample, batch_id: float) -> tuple:
    """A completed batch as a sample shows it: its id, its start and its query run. A restarted job re-runs a batch
    under the id it last reported (or, rolled back, under lower ones): only the start and run tell the runs apart."""
    return batch_id, sample.get("batch_started"), sample.get("run_id")


def _completed_in(tl: Timeline, start: float, end: float) -> int:
    """Batches completed in [start, end): samples whose last completed batch (its id, start and query run) differs
    from the sample before's. A batch id alone does not show a re-run under the same or a lower id; histories before
    batch_started and run_id count changes of the id."""
    count, previous = 0, None
    for sample in tl.samples:
        batch = metric(sample, "batch_id")
        if batch is None:
            continue
        key = batch_key(sample, batch)
        if previous is not None and key != previous and start <= time_of(sample) < end:
            count += 1
        previous = key
    return count


# In the steady phase and the last STEADY_END_S of recover, the job may be idle (no batch completing, none running)
# for at most STEADY_IDLE_S at a time. Idle, not slow: a gap between two completed batches counts less the duration of
# the batch that closed it, because a job busy with a 5 s batch (a cluster target over TLS, measured 2-5 s a batch)
# is working, where one that completes a batch per phase is not. 5 s is a 1 s trigger plus a 1 s sample on either
# side plus slack: passing arms on both stacks measured at most 3.7 s idle (corrupted-sst's end of recover).
STEADY_IDLE_S = 5.0
STEADY_END_S = 10.0


def _first_idle_stretch(steady: Sequence[tuple[float, Hashable, float | None]]) -> tuple[float, float] | None:
    """The first idle stretch longer than STEADY_IDLE_S in (time, batch, batch_duration_ms) samples, as (when it
    ended, its seconds), or None. The time after the last completed batch is idle beyond that batch's duration, as
    the next may be running as long (a window in which none completed is idle throughout). The last batch, not the
    longest: one slow batch early in the window must not excuse a stop at its end."""
    last_t, base = steady[0][0], steady[0][1]
    ran = 0.0
    for t, batch, duration_ms in steady[1:]:
        # a change either way is a completed batch: a job restarted on a rolled-back checkpoint (corrupted-sst's
        # repair) reports ids below the last one it reported before the restart
        if batch != base:
            ran = (duration_ms or 0.0) / 1000
            if t - last_t - ran > STEADY_IDLE_S:
                return t, t - last_t - ran
            last_t, base = t, batch
    t_end = steady[-1][0]
    if t_end - last_t - ran > STEADY_IDLE_S:
        return t_end, t_end - last_t - ran
    return None


def _steady_windows(tl: Timeline) -> list[tuple[str, float, float]]:
    windows = []
    for name, start, end in tl.windows:
        if name == "steady":
            windows.append(("steady", start, end))
        elif name == "recover":
            windows.append(("the end of recover", max(start, end - STEADY_END_S), end))
    return windows


def control_progress(data: ControlData) -> Check:
    if data.complete:
        return settle(check_progress(data.tl), data)
    # Judged on the phases that ended only: a phase stuck from start to end failed whatever came after (a hang,
    # "no progress from the first fault to the end of the history", is not final on a history that stopped).
    ended = check_progress(dataclasses.replace(data.tl, faults=(), windows=tuple(w for w in data.tl.windows
                                                                                 if w[0] in data.ended)))
    if ended.verdict == "FAILED":
        return settle(ended, data)
    return settle(check_progress(data.tl), data, pass_unless=data.incomplete(), fail_unless=data.incomplete())


PROGRESS = CheckDef("progress", "progress", lambda arm, _target: check_progress(arm.tl),
                    lambda data, _target: control_progress(data))


def _stalls(tl: Timeline) -> tuple[tuple[float, float], float] | None:
    """((when the longest stall began, its seconds), when the last one began) over the inject and recover phases'
    samples with a batch_id, or None without two of them. A stretch still open at the end counts to the last sample."""
    spans = [(start, end) for name, start, end in tl.windows if name in ("inject", "recover")]
    if not spans:
        return None
    begin, finish = min(a for a, _ in spans), max(b for _, b in spans)
    ids = [(t, b) for s in tl.samples
           if begin <= (t := time_of(s)) < finish and (b := metric(s, "batch_id")) is not None]
    if len(ids) < 2:
        return None
    longest, since, base = (ids[0][0], 0.0), ids[0][0], ids[0][1]
    for t, batch in ids[1:]:
        if batch != base:
            since, base = t, batch
        if t - since > longest[1]:
            longest = (since, t - since)
    return longest, since


def longest_stall(tl: Timeline) -> tuple[float, float] | None:
    """The longest stretch of the inject and recover phases in which batch_id did not change across the samples, as
    (when it began, its seconds), or None without two samples there. A stretch still open at the end counts to the
    last sample."""
    stalls = _stalls(tl)
    return None if stalls is None else stalls[0]


def _ended_stalled(tl: Timeline, last_began: float) -> Mapping[str, object] | None:
    """The driver's exit if the job's last driver ended by itself (no cause or stop of the harness's) after the last
    stall began: a stall no later batch can end, however short it was watched."""
    drivers = [j for j in tl.jobs if j.get("process") == "job-driver"]
    last = drivers[-1] if drivers else None
    if last is None or last.get("event") != "exited" or last.get("cause") or last.get("stop") \
            or time_of(last) < last_began:
        return None
    return last


def _signature(tl: Timeline, stalls: tuple[tuple[float, float], float] | None, at_least: float) -> str | None:
    if stalls is None:
        return None
    (began, seconds), last_began = stalls
    if seconds >= at_least:
        return f"no batch completed for {seconds:.0f} s from t={began:.1f}s"
    exit_ = _ended_stalled(tl, last_began)
    if exit_ is None:
        return None
    return (f"no batch completed from t={last_began:.1f}s until the job's driver ended by itself at "
            f"t={time_of(exit_):.1f}s (exit {exit_.get('code')}): a stall without end")


def stall_signature(tl: Timeline, at_least: float) -> str | None:
    """What shows a stall of at least `at_least`: the longest, else one the job's own exit left without end."""
    return _signature(tl, _stalls(tl), at_least)


def check_stalled(tl: Timeline, at_least: float) -> Check:
    expected = f"a stall of at least {at_least:g}s (no batch completed) in inject or recover, or a job that ended " \
               "by itself in one"
    stalls = _stalls(tl)
    if stalls is None:
        return Check("stalled", "NODATA", expected, "no batch_id measured", "no two samples in inject and recover")
    (began, seconds), _last_began = stalls
    measured = f"longest stall {seconds:.1f}s from t={began:.1f}s"
    signature = _signature(tl, stalls, at_least)
    if signature is None:
        return Check("stalled", "FAILED", expected, measured, f"batches kept completing: the longest stretch without "
                     f"one was {seconds:.1f}s, under {at_least:g}s")
    if seconds < at_least:
        measured += "; then the job ended by itself"
    return Check("stalled", "PASSED", expected, measured, signature)


STALLED = CheckDef("stalled", "stalled", lambda arm, target: check_stalled(arm.tl, float(target["for"])))
