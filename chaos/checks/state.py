"""state: the trend (plateau | growth) of state rows and bytes over the target's phases after warm-up, and the
bounds on rows and rows per live key."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..spec import StateTarget
from ..verdicts import worst
from .base import CheckDef, ControlData, settle
from .timeline import Check, Timeline, metric, num, time_of

MIN_STATE_SAMPLES = 5


@dataclass(frozen=True)
class Trend:
    series: str  # rows | bytes
    samples: int
    slope: float  # per second
    relative: float  # change of the fitted line across the window, relative to its start
    start: float  # fitted value at the first sample
    end: float
    per_event: float | None = None  # slope / mean input rate: bytes gained per input event (None: no input rate)
    peak_change: float = 0.0  # max of the window's last third against the max of its first third, relative


def _peak_change(points: Sequence[tuple[float, float]]) -> float:
    """How much the peak rose: max over the last third of the window against max over the first third. Sessions
    that open and close together make a bounded state saw-tooth between two levels, which tilts a fitted line
    (measured +23 % on a hardened arm whose peaks stayed at 199 rows); a leak raises the peaks as well."""
    first_t, last_t = points[0][0], points[-1][0]
    third = (last_t - first_t) / 3
    early = max(v for t, v in points if t <= first_t + third)
    late = max(v for t, v in points if t >= last_t - third)
    return (late - early) / max(early, 1.0)


def fit_trend(points: Sequence[tuple[float, float]], series: str) -> Trend | None:
    """Least-squares line through (t, value); None with fewer than MIN_STATE_SAMPLES points. The relative change
    is (fit(last t) - fit(first t)) / fit(first t), the start guarded from ~0 by a tenth of the mean (and 1)."""
    if len(points) < MIN_STATE_SAMPLES:
        return None
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    sxx = sum((t - mean_t) ** 2 for t, _ in points)
    slope = sum((t - mean_t) * (v - mean_v) for t, v in points) / sxx if sxx > 0 else 0.0
    start = mean_v + slope * (points[0][0] - mean_t)
    end = mean_v + slope * (points[-1][0] - mean_t)
    base = max(start, 0.1 * abs(mean_v), 1.0)
    return Trend(series, n, slope, (end - start) / base, start, end, peak_change=_peak_change(points))


def _after_warmup(tl: Timeline, during: Sequence[str], warmup: float) -> list[Mapping[str, object]]:
    """Samples of the `during` windows, without the leading `warmup` fraction of their total time."""
    spans = sorted(w for w in (tl.window(p) for p in during) if w is not None)
    skip = warmup * sum(end - start for start, end in spans)
    kept = []
    for start, end in spans:
        cut = start + min(skip, end - start)
        skip -= cut - start
        kept += [s for s in tl.samples if cut <= time_of(s) < end]
    return kept


def _describe(trend: Trend, during: Sequence[str]) -> str:
    unit = "" if trend.series == "rows" else " B"
    per_event = (f", peak {trend.peak_change:+.0%}" if trend.series == "rows" else
                 "" if trend.per_event is None else f", {trend.per_event:+.1f} B per input event")
    return (f"state {trend.series} grow {trend.slope:+.1f}{unit}/s ({trend.relative:+.0%} over {'+'.join(during)}"
            f"{per_event})")


def state_trends(tl: Timeline, target: StateTarget) -> tuple[Trend | None, Trend | None]:
    """(rows, bytes) trends over the target's window after warmup."""
    kept = _after_warmup(tl, target.during, target.warmup)
    rows = [(time_of(s), v) for s in kept if (v := metric(s, "state_rows")) is not None]
    size = [(time_of(s), v) for s in kept if (v := metric(s, "state_bytes")) is not None]
    rates = [v for s in kept if (v := metric(s, "input_rate")) is not None]
    size_trend = fit_trend(size, "bytes")
    if size_trend is not None and rates and (mean_rate := sum(rates) / len(rates)) > 0:
        size_trend = dataclasses.replace(size_trend, per_event=size_trend.slope / mean_rate)
    return fit_trend(rows, "rows"), size_trend


def grew(trend: Trend, target: StateTarget) -> bool:
    """Rows grow when both their fitted line and their peak rise beyond `threshold` (a saw-tooth tilts the line
    only); bytes beyond `bytes_threshold` and by more than `bytes_per_event` per input event (a relative change alone
    is noise on a small bounded state: its base is a few compacted SST files, whose peaks move with compaction)."""
    if trend.series == "rows":
        return trend.relative > target.threshold and trend.peak_change > target.threshold
    return trend.relative > target.bytes_threshold and (trend.per_event is None
                                                          or trend.per_event > target.bytes_per_event)


def growth_signature(tl: Timeline, target: StateTarget) -> str | None:
    """What shows a leak: the first of rows/bytes whose fitted line grows as `grew` says."""
    for trend in state_trends(tl, target):
        if trend is not None and grew(trend, target):
            return _describe(trend, target.during)
    return None


def check_state(tl: Timeline, target: StateTarget, live_keys: int | None) -> Check:
    during = "+".join(target.during)
    expected_parts = []
    if target.trend:
        expected_parts.append(f"{target.trend} (fitted change {'<=' if target.trend == 'plateau' else '>'} "
                              f"{target.threshold:.0%} rows (line and peak), {target.bytes_threshold:.0%} and "
                              f"{num(target.bytes_per_event)} B/event bytes over {during} after "
                              f"{target.warmup:.0%} warm-up)")
    if target.max_rows_per_key is not None:
        expected_parts.append(f"<= {num(target.max_rows_per_key)} rows/key")
    if target.max_rows is not None:
        expected_parts.append(f"<= {target.max_rows} rows")
    expected = "; ".join(expected_parts)

    verdicts, measured, messages = [], [], []
    if target.trend:
        rows, size = state_trends(tl, target)
        if rows is None and size is None:
            verdicts.append("NODATA")
            measured.append("trend: no data")
            messages.append(f"fewer than {MIN_STATE_SAMPLES} samples with state in {during} after warm-up")
        else:
            fits = [f for f in (rows, size) if f is not None]
            measured.append(", ".join(f"{f.series} {f.slope:+.1f}/s ({f.relative:+.0%}"
                                      + (f", peak {f.peak_change:+.0%}" if f.series == "rows" else
                                         "" if f.per_event is None else f", {f.per_event:+.1f} B/event") + ")"
                                      for f in fits))
            if target.trend == "growth":
                grown = next((f for f in fits if grew(f, target)), None)
                verdicts.append("PASSED" if grown else "FAILED")
                messages.append(_describe(grown, target.during) if grown else
                                f"state did not grow: {', '.join(_describe(f, target.during) for f in fits)}"
                                .replace(" grow ", " change "))
            else:
                # Rows and bytes both: the incident's list state held a flat 2 rows per key while its bytes grew.
                grown_fits = [f for f in fits if grew(f, target)]
                verdicts.append("FAILED" if grown_fits else "PASSED")
                messages.append(("state grows: " if grown_fits else "state plateaus: ")
                                + ", ".join(_describe(f, target.during).replace(" grow ", " change ")
                                            for f in (grown_fits or fits)))
    if target.max_rows is not None or target.max_rows_per_key is not None:
        values = [v for s in tl.samples_in(target.during) if (v := metric(s, "state_rows")) is not None]
        if len(values) < MIN_STATE_SAMPLES:
            verdicts.append("NODATA")
            measured.append("rows: no data")
            messages.append(f"fewer than {MIN_STATE_SAMPLES} samples with state_rows in {during}")
        else:
            top = max(values)
            measured.append(f"max {num(top)} rows")
            if target.max_rows is not None:
                ok = top <= target.max_rows
                verdicts.append("PASSED" if ok else "FAILED")
                messages.append(f"max state rows {num(top)} {'<=' if ok else '>'} {target.max_rows}")
            if target.max_rows_per_key is not None:
                if not live_keys:
                    verdicts.append("NODATA")
                    messages.append("the workload has no live key count to divide by")
                else:
                    per_key = top / live_keys
                    ok = per_key <= target.max_rows_per_key
                    verdicts.append("PASSED" if ok else "FAILED")
                    measured[-1] += f" ({per_key:.2f}/key)"
                    messages.append(f"{per_key:.2f} rows per live key ({live_keys}) "
                                    f"{'<=' if ok else '>'} {num(target.max_rows_per_key)}")
    return Check("state", worst(verdicts), expected, "; ".join(measured), "; ".join(messages))


def control_state(data: ControlData, target: StateTarget, live_keys: int | None) -> Check:
    check = check_state(data.tl, target, live_keys)
    if all(phase in data.ended for phase in target.during):
        return settle(check, data)
    why = data.incomplete(target.during)
    if target.max_rows is not None or target.max_rows_per_key is not None:
        bounds = check_state(data.tl, dataclasses.replace(target, trend=None), live_keys)
        if bounds.verdict == "FAILED":  # a bound exceeded stays exceeded; a trend needs its whole window
            return settle(dataclasses.replace(check, verdict="FAILED", measured=bounds.measured,
                                               message=bounds.message), data)
    return settle(check, data, pass_unless=why, fail_unless=why)


STATE = CheckDef("state", "state", lambda arm, target: check_state(arm.tl, target, arm.spec.workload.live_keys),
                 lambda data, target: control_state(data, target, data.spec.workload.live_keys if data.spec else None))
