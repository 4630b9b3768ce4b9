"""The checkers: judge one recorded run offline, from its run store alone (docs/run-store.md).

Every check is a pure function over parsed records (a `Timeline` of history.jsonl) or parsed outputs (oracle.json,
lineage.json) and a typed target from the spec (chaos.spec.Targets), returning one `Check`. Only the loaders at the
bottom (`judge_arm`, `judge_run`) read files, and only `judge_run` writes (each arm's result.json); `chaos run` and
`chaos check RUN_DIR` store what judge_run returns as results.json. Judging the same directory twice gives the same
JSON: nothing here depends on the clock, the machine or the order a directory is listed in.

Verdicts, worst first: FAILED > UNKNOWN > HANG > NODATA > PASSED; a combined verdict is the worst of its parts
(`worst`). UNKNOWN is the environment failing (an `error` record): never reported as a job failure, but a FAILED
check still wins. HANG is a job that made no progress at all after the first fault. NODATA is a check with nothing
to judge: never PASSED. A run whose run.json says `interrupted` is INTERRUPTED as a whole; its arms keep their own
verdicts.

Checks (one per target the arm's spec sets):

    progress        batch_id advances within every phase window; stuck from the first fault to the end: HANG
    recovery        seconds from the last `healed` fault record to the first of `healthy_samples` consecutive
                    samples with lag < lag_below and progress (batch_id advanced since the previous sample, or
                    processed_rate > 0); PASSED if <= within
    max_lag         the largest lag of the inject and recover samples
    lost            oracle.json: lost sessions (compare) or acknowledged events (coverage); sessions emitted with
                    wrong fields (compare `wrong`, coverage `wrong_counts`) fail it too
    duplicated      oracle.json: duplicated sessions / events; output nobody sent (compare `unexpected`, coverage
                    `unknown`) fails it too
    state           trend (plateau | growth): least-squares slope of state_rows (state_bytes as secondary
                    evidence) over the `during` phases after the leading `warmup` fraction, as the relative change
                    of the fitted line across the window vs `threshold`; bounds max_rows_per_key and max_rows
    logs            each expected pattern has a `log` record, no forbidden one has
    lineage         lineage.json: metadata, contiguous offsets/commits, at most one batch in flight, and the state
                    version the job loads next is loadable in every partition
    refused_within  every second deployment is refused (or exits non-zero) within the bound of its start
    probe:<metric>  the spec's steady-state probes: the fraction of measured samples outside [min, max] in the
                    probe's phases is <= tolerance

An arm with `error` records gets an `environment` check (UNKNOWN). A control arm (naive) gets a `control` check:
expect=incident needs a signature (a matched expected log line, else state growth, else the job's failure line
from arm.json), expect=survives says why it survived too.

Discrimination (`discriminate`, per experiment): the control's history and outputs are judged again, by the
hardened arm's targets, with the same checks. A job without the hardening must fail at least one of them, or the
experiment cannot tell the hardening from its absence. Where the control's data cannot stand for what a check
judges (another fault schedule, a history that stops before its phases ended, an oracle in other units, log lines
it never watched), that check is NODATA with the reason, never PASSED; a failure stands when more data could not
undo it. See docs/experiments.md, "Discrimination".
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from .errors import SpecError
from .history import PHASES, HistoryError, read_history
from .spec import ExperimentSpec, Logs, Probe, Recovery, StateTarget

# -- verdicts ----------------------------------------------------------------------------------------------------
VERDICTS = ("FAILED", "UNKNOWN", "HANG", "NODATA", "PASSED")  # worst first
INTERRUPTED = "INTERRUPTED"  # a whole run cut short; never an arm's or a check's verdict
_RANK = {verdict: rank for rank, verdict in enumerate(VERDICTS)}

SIGNATURE_CHARS = 120
MIN_STATE_SAMPLES = 5


def worst(verdicts: Iterable[str], default: str = "NODATA") -> str:
    """The worst verdict (FAILED > UNKNOWN > HANG > NODATA > PASSED); `default` when there is none."""
    found = list(verdicts)
    for verdict in found:
        if verdict not in _RANK:
            raise ValueError(f"verdict {verdict!r} is not one of {', '.join(VERDICTS)}")
    return min(found, key=_RANK.__getitem__) if found else default


@dataclass(frozen=True)
class Check:
    name: str
    verdict: str
    expected: str
    measured: str
    message: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "verdict": self.verdict, "expected": self.expected, "measured": self.measured,
                "message": self.message}


# -- the parsed history -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Timeline:
    """A history's records, indexed for the checks. Build it with `timeline(records)`."""

    samples: tuple[Mapping[str, object], ...]
    windows: tuple[tuple[str, float, float], ...]  # (phase, start, end) in history seconds, in start order
    faults: tuple[Mapping[str, object], ...]
    jobs: tuple[Mapping[str, object], ...]
    logs: tuple[Mapping[str, object], ...]
    errors: tuple[Mapping[str, object], ...]
    end: float  # t of the last record

    def window(self, phase: str) -> tuple[float, float] | None:
        for name, start, end in self.windows:
            if name == phase:
                return start, end
        return None

    def samples_in(self, phases: Iterable[str]) -> list[Mapping[str, object]]:
        spans = [w for w in (self.window(p) for p in phases) if w is not None]
        return [s for s in self.samples if any(start <= _t(s) < end for start, end in spans)]

    def first_injection(self) -> Mapping[str, object] | None:
        return next((f for f in self.faults if f.get("state") in ("injecting", "injected")), None)

    def last_heal(self) -> Mapping[str, object] | None:
        healed = [f for f in self.faults if f.get("state") == "healed"]
        return healed[-1] if healed else None


def timeline(records: Sequence[Mapping[str, object]]) -> Timeline:
    """Index history records (chaos.history.read_history) by type. A phase that started but never ended (an
    interrupted arm) runs to the last record."""
    by_type: dict[str, list[Mapping[str, object]]] = {kind: [] for kind in
                                                      ("sample", "phase", "fault", "job", "log", "error")}
    for record in records:
        by_type.setdefault(str(record.get("type")), []).append(record)
    end = max((_t(r) for r in records), default=0.0)
    windows = []
    for name in PHASES:
        starts = [_t(r) for r in by_type["phase"] if r.get("name") == name and r.get("boundary") == "start"]
        if not starts:
            continue
        ends = [_t(r) for r in by_type["phase"] if r.get("name") == name and r.get("boundary") == "end"
                and _t(r) >= starts[0]]
        windows.append((name, starts[0], ends[0] if ends else end))
    windows.sort(key=lambda w: w[1])
    return Timeline(samples=tuple(by_type["sample"]), windows=tuple(windows), faults=tuple(by_type["fault"]),
                    jobs=tuple(by_type["job"]), logs=tuple(by_type["log"]), errors=tuple(by_type["error"]),
                    end=end)


def _t(record: Mapping[str, object]) -> float:
    return float(record["t"])  # type: ignore[arg-type]


def _metric(sample: Mapping[str, object], name: str) -> float | None:
    value = sample.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value


def _g(value: float) -> str:
    return f"{value:g}"


def _s(seconds: float) -> str:
    return f"{seconds:.1f}s"


def _at(record: Mapping[str, object]) -> str:
    return f"t={_t(record):.1f}s"


# -- progress ----------------------------------------------------------------------------------------------------
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
    ids = [(_t(s), _metric(s, "batch_id")) for s in tl.samples]
    ids = [(t, b) for t, b in ids if b is not None]

    fault = tl.first_injection()
    if fault is not None:
        t_fault = _t(fault)
        before = [b for t, b in ids if t < t_fault]
        after = [b for t, b in ids if t >= t_fault]
        if after and (before or len(after) >= 2):
            base = before[-1] if before else after[0]
            if max(after) <= base:
                return Check("progress", "HANG", expected, f"stuck at batch {_g(base)} after the first fault",
                             f"batch_id stayed at {_g(base)} from the first fault injection ({fault.get('name')} on "
                             f"{fault.get('target')} at {_at(fault)}) to the end of the history (t={tl.end:.1f}s): "
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
        if max(inside) > base:
            parts.append(f"{name}: +{_g(max(inside) - base)}")
        else:
            parts.append(f"{name}: stuck at {_g(base)}")
            stuck.append((name, base, start, end))
    measured = ", ".join(parts)
    if stuck:
        name, base, start, end = stuck[0]
        return Check("progress", "FAILED", expected, measured,
                     f"no batch completed during {name} (t={start:.1f}s to {end:.1f}s): batch_id stayed at {_g(base)}")
    if unmeasured:
        return Check("progress", "NODATA", expected, measured,
                     f"no batch_id measured in {', '.join(unmeasured)}: progress there cannot be judged")
    # Before the faults and at the end, a healthy job completes batches steadily, not one per phase.
    for name, start, end in _steady_windows(tl):
        inside = [(t, b) for t, b in ids if start <= t < end]
        if len(inside) < 4:
            continue
        advanced = sum(1 for (_, before), (_, after) in zip(inside, inside[1:]) if after > before)
        share = advanced / (len(inside) - 1)
        if share < STEADY_PROGRESS_SHARE:
            return Check("progress", "FAILED", expected, measured + f"; {name}: {share:.0%} of samples advanced",
                         f"batches did not complete steadily during {name} (t={start:.1f}s to {end:.1f}s): the "
                         f"batch id advanced in {advanced} of {len(inside) - 1} sample intervals (< "
                         f"{STEADY_PROGRESS_SHARE:.0%})")
    return Check("progress", "PASSED", expected, measured, "batches completed in every phase, steadily before the "
                 "faults and at the end")


# Share of sample intervals in which the batch id must advance in the steady phase and in the last
# STEADY_END_S of the recover phase: a batch at least every ~3 s (measured: a 1 s trigger on a loaded 2-core machine
# advanced in 50-100 % of them; "one batch per phase" advances in a few).
STEADY_PROGRESS_SHARE = 0.3
STEADY_END_S = 10.0


def _steady_windows(tl: Timeline) -> list[tuple[str, float, float]]:
    windows = []
    for name, start, end in tl.windows:
        if name == "steady":
            windows.append(("steady", start, end))
        elif name == "recover":
            windows.append(("the end of recover", max(start, end - STEADY_END_S), end))
    return windows


# -- recovery ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RecoveryTime:
    seconds: float | None  # None: not recovered (or nothing to measure, see verdict)
    verdict: str  # PASSED/FAILED against the target, or NODATA
    heal: Mapping[str, object] | None
    why: str


# Faults whose effect is over as they act (a kill, a damaged file: the job restarts at once) or that only reshape the
# workload: recovery is measured from the restarts they cause, and their windows do not hold other recoveries back.
MOMENTARY_FAULTS = ("process.kill", "checkpoint.corrupt", "data.hot_key", "data.key_rotation")


def _lasting_windows(tl: Timeline) -> list[tuple[float, float]]:
    """(injected, healed) of each fault whose effect lasts while it is injected (a proxy down, a toxic, a pause, an S3
    rule, a second deployment); a window never healed runs to the end of the history."""
    windows, open_at = [], {}
    for record in tl.faults:
        if record.get("name") in MOMENTARY_FAULTS:
            continue
        key, state = (record.get("name"), record.get("target")), record.get("state")
        if state == "injecting":
            open_at.setdefault(key, _t(record))
        elif state == "healed" and key in open_at:
            windows.append((open_at.pop(key), _t(record)))
    windows += [(start, tl.end) for start in open_at.values()]
    return windows


def disruptions(tl: Timeline) -> list[Mapping[str, object]]:
    """What recovery is measured from: every heal of a fault and every restart of the job's driver (after a kill, or on
    a checkpoint just damaged, where the fault's heal does nothing for the job), when no lasting fault is still
    acting right after it (recovery under another fault's effect is measured from that fault's heal)."""
    found = [f for f in tl.faults if f.get("state") == "healed"]
    found += [j for j in tl.jobs if j.get("event") == "restarted" and j.get("process") == "job-driver"]
    windows = _lasting_windows(tl)
    return sorted((r for r in found if not any(start < _t(r) < end for start, end in windows)), key=_t)


def _what(record: Mapping[str, object]) -> str:
    if record.get("type") == "job":
        return f"the restart of the job ({'on a damaged checkpoint' if record.get('corrupted') else 'after it ended'}" \
               f" at {_at(record)})"
    return f"the heal of {record.get('name')} on {record.get('target')} at {_at(record)}"


def _lag_text(target: Recovery) -> str:
    seconds = getattr(target, "lag_below_s", None)
    return f"{_g(target.lag_below)}" + (f" ({_g(seconds)} s of input)" if seconds else "")


def _recovery_after(tl: Timeline, target: Recovery, start: Mapping[str, object], until: float | None
                    ) -> RecoveryTime:
    """Recovery from one disruption: the first `healthy_samples` healthy samples in a row after it (and, when
    another disruption follows at `until`, starting before that)."""
    t_start = _t(start)
    after = [i for i, s in enumerate(tl.samples) if _t(s) > t_start and (until is None or _t(s) <= until)]
    if not after:
        return RecoveryTime(None, "NODATA", start, f"no sample after {_what(start)}")
    if all(_metric(tl.samples[i], "lag") is None for i in after):
        return RecoveryTime(None, "NODATA", start, f"lag was not measured after {_what(start)}")
    run = 0
    for i in after:
        previous = tl.samples[i - 1] if i > 0 else None
        if healthy_sample(tl.samples[i], previous, target.lag_below):
            run += 1
            if run == target.healthy_samples:
                first = tl.samples[i - target.healthy_samples + 1]
                seconds = round(_t(first) - t_start, 1)
                return RecoveryTime(seconds, "PASSED" if seconds <= target.within else "FAILED", start,
                                    f"lag below {_lag_text(target)} with progress for {target.healthy_samples} "
                                    f"samples from {seconds:.1f} s after {_what(start)}")
        else:
            run = 0
    last_lag = next((_metric(tl.samples[i], "lag") for i in reversed(after)
                     if _metric(tl.samples[i], "lag") is not None), None)
    window = (until if until is not None else tl.end) - t_start
    if until is not None and window <= target.within + target.healthy_samples:
        # Something new hit the job before this one's bound ran out: recovery is measured from its own disruption.
        return RecoveryTime(None, "SUPERSEDED", start, f"the next fault came {window:.1f} s after {_what(start)}")
    return RecoveryTime(None, "FAILED", start,
                        f"never {target.healthy_samples} healthy samples in a row (lag below {_lag_text(target)} "
                        f"with progress) in the {window:.1f} s after {_what(start)}"
                        + (" (before the next fault)" if until is not None else "") + f"; last lag {last_lag}")


def _interruptions(tl: Timeline) -> list[float]:
    """When something new hits the job: a fault begins (workload reshaping aside), or its driver is killed or stopped."""
    times = [_t(f) for f in tl.faults if f.get("state") == "injecting" and not str(f.get("name")).startswith("data.")]
    # An exit with a cause was done to it (a kill, a stop to damage its checkpoint); the arm's final stop has none.
    times += [_t(j) for j in tl.jobs if j.get("event") == "exited" and j.get("process") == "job-driver"
              and j.get("cause")]
    return sorted(times)


def measure_recoveries(tl: Timeline, target: Recovery) -> list[RecoveryTime]:
    """Recovery from each disruption in turn (`disruptions`), each watched until the next thing hits the job."""
    hits = _interruptions(tl)
    return [_recovery_after(tl, target, record, next((t for t in hits if t > _t(record)), None))
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
        worst_one = unrecovered[0] if unrecovered else max(failed, key=lambda r: r.seconds)
    else:
        measured = [r for r in results if r.seconds is not None]
        if not measured:
            return results[-1] if results else RecoveryTime(None, "NODATA", None, "every disruption was followed by "
                                                            "another fault before its bound ran out")
        worst_one = max(measured, key=lambda r: r.seconds)
    if len(results) > 1:
        seconds = [f"{r.seconds:g}" for r in results if r.seconds is not None]
        worst_one = dataclasses.replace(worst_one, why=f"{worst_one.why} (the slowest of {len(results)} "
                                                        f"disruptions: {', '.join(seconds) or 'none measured'} s)")
    return worst_one


def healthy_sample(sample: Mapping[str, object], previous: Mapping[str, object] | None, lag_below: float) -> bool:
    """Lag under the bound and progress (the batch id advanced, or rows were processed): one healthy sample."""
    lag = _metric(sample, "lag")
    if lag is None or lag >= lag_below:
        return False
    batch, before = _metric(sample, "batch_id"), _metric(previous, "batch_id") if previous is not None else None
    advanced = batch is not None and before is not None and batch > before
    return advanced or (_metric(sample, "processed_rate") or 0) > 0


def check_recovery(tl: Timeline, target: Recovery) -> Check:
    result = measure_recovery(tl, target)
    measured = (_s(result.seconds) if result.seconds is not None
                else "not recovered" if result.verdict == "FAILED" else "no data")
    return Check("recovery", result.verdict, f"<= {_g(target.within)}s", measured, result.why)


# -- lag ---------------------------------------------------------------------------------------------------------
def check_max_lag(tl: Timeline, limit: int) -> Check:
    lags = [(lag, s) for s in tl.samples_in(("inject", "recover")) if (lag := _metric(s, "lag")) is not None]
    expected = f"<= {limit}"
    if not lags:
        return Check("max_lag", "NODATA", expected, "no data", "no lag measured in the inject and recover phases")
    top, sample = max(lags, key=lambda item: item[0])
    verdict = "PASSED" if top <= limit else "FAILED"
    return Check("max_lag", verdict, expected, _g(top),
                 f"largest lag of {len(lags)} inject+recover samples: {_g(top)} records at {_at(sample)}")


# -- the oracle --------------------------------------------------------------------------------------------------
def _count(oracle: Mapping[str, object], key: str) -> int | None:
    value = oracle.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _oracle_kind(oracle: Mapping[str, object]) -> str:
    """compare (event-time profiles: sessions) or coverage (processing time: acknowledged events)."""
    return "coverage" if "acked" in oracle or "wrong_counts" in oracle else "compare"


def check_lost(oracle: Mapping[str, object] | None, limit: int, missing: str = "no oracle.json") -> Check:
    return _oracle_check("lost", oracle, limit, missing)


def check_duplicated(oracle: Mapping[str, object] | None, limit: int, missing: str = "no oracle.json") -> Check:
    return _oracle_check("duplicated", oracle, limit, missing)


# The oracle's other findings, and the check they fail: output with wrong fields means events of it were lost
# (or counted twice into it); output nobody sent is extra, like a duplicate.
_EXTRA = {("lost", "compare"): (("wrong", "emitted with wrong fields"),),
          ("lost", "coverage"): (("wrong_counts", "with a count that does not match the ledger"),),
          ("duplicated", "compare"): (("unexpected", "emitted that no event made"),),
          ("duplicated", "coverage"): (("unknown", "events covered that the ledger never acknowledged"),)}


def _oracle_check(name: str, oracle: Mapping[str, object] | None, limit: int, missing: str) -> Check:
    expected = f"<= {limit}"
    if oracle is None:
        return Check(name, "NODATA", expected, "no data", f"{missing}: the job's output was not judged")
    value = _count(oracle, name)
    if value is None:
        return Check(name, "NODATA", expected, "no data", f"oracle.json has no {name} count")
    kind = _oracle_kind(oracle)
    unit = "sessions" if kind == "compare" else "acknowledged events"
    extras = [(n, key, what) for key, what in _EXTRA[(name, kind)] if (n := _count(oracle, key))]
    measured = _g(value) + "".join(f" (+{n} {key})" for n, key, _ in extras)
    drained = "" if oracle.get("drained") is not False else "; the drain did not finish (sessions still open count " \
                                                          "as lost)"
    if value > limit:
        return Check(name, "FAILED", expected, measured, f"{value} {unit} {name} (oracle.json){drained}")
    if extras:
        said = ", ".join(f"{n} {what}" if key == "unknown" else f"{n} sessions {what}" for n, key, what in extras)
        return Check(name, "FAILED", expected, measured, f"{value} {unit} {name}, but {said} (oracle.json)")
    return Check(name, "PASSED", expected, measured, f"{value} {unit} {name} (oracle.json){drained}")


# -- state -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Trend:
    series: str  # rows | bytes
    samples: int
    slope: float  # per second
    relative: float  # change of the fitted line across the window, relative to its start
    start: float  # fitted value at the first sample
    end: float


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
    return Trend(series, n, slope, (end - start) / base, start, end)


def _after_warmup(tl: Timeline, during: Sequence[str], warmup: float) -> list[Mapping[str, object]]:
    """Samples of the `during` windows, without the leading `warmup` fraction of their total time."""
    spans = sorted(w for w in (tl.window(p) for p in during) if w is not None)
    skip = warmup * sum(end - start for start, end in spans)
    kept = []
    for start, end in spans:
        cut = start + min(skip, end - start)
        skip -= cut - start
        kept += [s for s in tl.samples if cut <= _t(s) < end]
    return kept


def _describe(trend: Trend, during: Sequence[str]) -> str:
    unit = "" if trend.series == "rows" else " B"
    return f"state {trend.series} grow {trend.slope:+.1f}{unit}/s ({trend.relative:+.0%} over {'+'.join(during)})"


def state_trends(tl: Timeline, target: StateTarget) -> tuple[Trend | None, Trend | None]:
    """(rows, bytes) trends over the target's window after warmup."""
    kept = _after_warmup(tl, target.during, target.warmup)
    rows = [(_t(s), v) for s in kept if (v := _metric(s, "state_rows")) is not None]
    size = [(_t(s), v) for s in kept if (v := _metric(s, "state_bytes")) is not None]
    return fit_trend(rows, "rows"), fit_trend(size, "bytes")


def growth_signature(tl: Timeline, target: StateTarget) -> str | None:
    """What shows a leak: the first of rows/bytes whose fitted line grows by more than the threshold."""
    for trend in state_trends(tl, target):
        if trend is not None and trend.relative > target.threshold:
            return _describe(trend, target.during)
    return None


def check_state(tl: Timeline, target: StateTarget, live_keys: int | None) -> Check:
    during = "+".join(target.during)
    expected_parts = []
    if target.trend:
        expected_parts.append(f"{target.trend} (fitted change {'<=' if target.trend == 'plateau' else '>'} "
                              f"{target.threshold:.0%} rows, {target.bytes_threshold:.0%} bytes over {during} after "
                              f"{target.warmup:.0%} warm-up)")
    if target.max_rows_per_key is not None:
        expected_parts.append(f"<= {_g(target.max_rows_per_key)} rows/key")
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
            measured.append(", ".join(f"{f.series} {f.slope:+.1f}/s ({f.relative:+.0%})" for f in fits))
            if target.trend == "growth":
                grown = next((f for f in fits if f.relative > (target.threshold if f is rows
                                                                 else target.bytes_threshold)), None)
                verdicts.append("PASSED" if grown else "FAILED")
                messages.append(_describe(grown, target.during) if grown else
                                f"state did not grow: {', '.join(_describe(f, target.during) for f in fits)}"
                                .replace(" grow ", " change "))
            else:
                # Rows and bytes both: the incident's list state held a flat 2 rows per key while its bytes grew.
                grown = [f for f in fits if f.relative > (target.threshold if f is rows else target.bytes_threshold)]
                verdicts.append("FAILED" if grown else "PASSED")
                messages.append(("state grows: " if grown else "state plateaus: ")
                                + ", ".join(_describe(f, target.during).replace(" grow ", " change ")
                                            for f in (grown or fits)))
    if target.max_rows is not None or target.max_rows_per_key is not None:
        values = [v for s in tl.samples_in(target.during) if (v := _metric(s, "state_rows")) is not None]
        if len(values) < MIN_STATE_SAMPLES:
            verdicts.append("NODATA")
            measured.append("rows: no data")
            messages.append(f"fewer than {MIN_STATE_SAMPLES} samples with state_rows in {during}")
        else:
            top = max(values)
            measured.append(f"max {_g(top)} rows")
            if target.max_rows is not None:
                ok = top <= target.max_rows
                verdicts.append("PASSED" if ok else "FAILED")
                messages.append(f"max state rows {_g(top)} {'<=' if ok else '>'} {target.max_rows}")
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
                                    f"{'<=' if ok else '>'} {_g(target.max_rows_per_key)}")
    return Check("state", worst(verdicts), expected, "; ".join(measured), "; ".join(messages))


# -- logs --------------------------------------------------------------------------------------------------------
def check_logs(tl: Timeline, target: Logs) -> Check:
    expected = "; ".join([f"expected: {' , '.join(target.expected)}"] * bool(target.expected)
                         + [f"forbidden: {' , '.join(target.forbidden)}"] * bool(target.forbidden))
    # An expected signature is evidence of a fault's effect, so only lines from the inject phase on count (a first
    # micro-batch of 15-20 s "falls behind" in every warm-up); a forbidden one counts wherever it shows.
    since = evidence_start(tl)
    counts = {pattern: match_count(tl.logs, pattern, since) for pattern in target.expected}
    counts.update({pattern: match_count(tl.logs, pattern) for pattern in target.forbidden})
    missing = [p for p in target.expected if counts[p] < target.min_matches]
    present = [p for p in target.forbidden if counts[p]]
    measured = "; ".join(
        [f"expected matched {len(target.expected) - len(missing)}/{len(target.expected)} "
         f"({sum(counts[p] for p in target.expected)} lines)"] * bool(target.expected)
        + [f"forbidden matched {len(present)}/{len(target.forbidden)}"] * bool(target.forbidden))
    if present:
        first = next(r for r in tl.logs if r.get("signature") in present)
        return Check("logs", "FAILED", expected, measured,
                     f"forbidden {first.get('signature')!r} matched {first.get('source')}:{first.get('line')}: "
                     f"{_trim(str(first.get('text', '')), str(first.get('signature')))}")
    if not tl.logs and not any(j.get("event") == "started" for j in tl.jobs):
        return Check("logs", "NODATA", expected, "no data", "no job log was watched: the job never started")
    if missing:
        if counts[missing[0]]:
            return Check("logs", "FAILED", expected, measured, f"expected {missing[0]!r} matched {counts[missing[0]]} "
                         f"line(s), fewer than {target.min_matches}")
        return Check("logs", "FAILED", expected, measured, f"no log line matched expected {missing[0]!r}")
    return Check("logs", "PASSED", expected, measured,
                 "every expected signature matched" + (" and no forbidden one" if target.forbidden else "")
                 if target.expected else "no forbidden signature matched")


def evidence_start(tl: Timeline) -> float:
    """History time from which an expected log signature counts: the start of the inject phase (never, if the arm
    did not get there)."""
    window = tl.window("inject")
    return window[0] if window is not None else math.inf


def match_count(logs: Sequence[Mapping[str, object]], pattern: str, since: float | None = None) -> int:
    """Lines that matched `pattern`, over every source: each record's `count` is its source's running total (the
    first matches are recorded one by one, later ones as tallies); records without one count one line each.
    With `since`, only lines recorded at or after that history time: a source's running total then minus its
    total before."""
    per_source: dict[str, int] = {}
    before: dict[str, int] = {}
    for record in logs:
        if record.get("signature") != pattern:
            continue
        source = str(record.get("source"))
        count = record.get("count")
        running = count if isinstance(count, int) and not isinstance(count, bool) else per_source.get(source, 0) + 1
        per_source[source] = max(per_source.get(source, 0), running)
        if since is not None and _t(record) < since:
            before[source] = per_source[source]
    return sum(total - before.get(source, 0) for source, total in per_source.items())


def _trim(text: str, pattern: str | None = None, limit: int = SIGNATURE_CHARS) -> str:
    """One line of at most ~limit characters; a long one is cut around the pattern's match."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    start, keep = 0, 0
    if pattern:
        try:
            match = re.search(pattern, text)
        except re.error:
            match = None
        if match:
            start = max(0, min(match.start() - limit // 4, len(text) - limit))
            keep = match.start()
    if start > 0:  # begin at a word, unless that would cut into the match
        space = text.find(" ", start, keep)
        start = space + 1 if space >= 0 else start
    end = min(len(text), start + limit)
    if end < len(text):
        space = text.rfind(" ", start + limit // 2, end + 1)
        end = space if space > 0 else end
    return ("…" if start > 0 else "") + text[start:end] + ("…" if end < len(text) else "")


# -- lineage -----------------------------------------------------------------------------------------------------
def _contiguous(ids: Sequence[int]) -> bool:
    return not ids or list(ids) == list(range(min(ids), max(ids) + 1))


def _loadable(version: int, snapshots: set[int], changelogs: set[int]) -> bool:
    if version in snapshots:
        return True
    bases = [s for s in snapshots if s <= version]
    if bases:
        return any(all(v in changelogs for v in range(s + 1, version + 1)) for s in bases)
    return not snapshots and all(v in changelogs for v in range(1, version + 1))


def check_lineage(lineage: Mapping[str, object] | None, missing: str = "no lineage.json") -> Check:
    """The checkpoint a restart would use: metadata; commits ⊆ offsets; both contiguous; at most one batch in
    flight; in every state partition, version max(commits) + 1 loadable (a snapshot at it, or a snapshot at or
    below it with a changelog for every later version up to it, or changelogs from 1 when there is no snapshot)."""
    expected = ("metadata, contiguous offsets/commits, <= 1 batch in flight, next state version loadable, and what a "
                "restart reads intact")
    if lineage is None:
        return Check("lineage", "NODATA", expected, "no data", f"{missing}: the checkpoint was not listed")

    def ids(key: str) -> list[int]:
        value = lineage.get(key) or []
        return sorted(int(v) for v in value) if isinstance(value, list) else []

    offsets, commits = ids("offsets"), ids("commits")
    state = lineage.get("state") if isinstance(lineage.get("state"), Mapping) else {}
    measured = (f"offsets {_span(offsets)}, commits {_span(commits)}, {len(state)} state partitions"
                + (f", {len(lineage['rollbacks'])} rollbacks" if isinstance(lineage.get("rollbacks"), list)
                   and lineage["rollbacks"] else ""))

    def broken(rule: str) -> Check:
        return Check("lineage", "FAILED", expected, measured, rule)

    if not lineage.get("metadata"):
        return broken("metadata: the checkpoint has no metadata file")
    if not offsets and not commits:
        return Check("lineage", "NODATA", expected, measured, "the checkpoint holds no batch: nothing to judge")
    stray = sorted(set(commits) - set(offsets))
    if stray:
        return broken(f"commits ⊆ offsets: commit {stray[0]} has no offset file")
    if not _contiguous(offsets):
        return broken(f"offsets contiguous: gap after batch {_first_gap(offsets)}")
    if not _contiguous(commits):
        return broken(f"commits contiguous: gap after batch {_first_gap(commits)}")
    last_commit = commits[-1] if commits else -1
    in_flight = offsets[-1] - last_commit
    if in_flight not in (0, 1):
        return broken(f"at most one batch in flight: offsets end at {offsets[-1]}, commits at {last_commit}")
    if commits:
        version = last_commit + 1
        if not state:
            return broken(f"state version {version} loadable: the checkpoint has no state partition")
        for name in sorted(state):
            partition = state[name] if isinstance(state[name], Mapping) else {}
            snapshots = {int(v) for v in partition.get("snapshots") or []}
            changelogs = {int(v) for v in partition.get("changelogs") or []}
            if not _loadable(version, snapshots, changelogs):
                return broken(f"state version {version} loadable: partition {name} has snapshots "
                              f"{_span(sorted(snapshots))} and changelogs {_span(sorted(changelogs))}")
    content = lineage.get("content") if isinstance(lineage.get("content"), Mapping) else None
    if content is not None and content.get("problems"):
        problems = [str(p) for p in content["problems"]]
        return broken(f"what a restart reads loads: {len(problems)} problem(s): {'; '.join(problems[:3])}")
    read = f" ({content.get('files_read')} files a restart reads, read back and intact)" if content else ""
    return Check("lineage", "PASSED", expected, measured,
                 (f"next state version {last_commit + 1} loadable in every partition" if commits
                  else "no batch committed yet; one in flight") + read)


def _span(ids: Sequence[int]) -> str:
    if not ids:
        return "none"
    return f"{ids[0]}..{ids[-1]}" if _contiguous(ids) and len(ids) > 1 else ",".join(map(str, ids[-6:]))


def _first_gap(ids: Sequence[int]) -> int:
    return next(a for a, b in zip(ids, ids[1:]) if b != a + 1)


# -- a second deployment -----------------------------------------------------------------------------------------
SECOND = "second-deployment"


def check_refused(tl: Timeline, within: float) -> Check:
    """Every `started` second deployment ends with `refused`, or `exited` non-zero, within `within` seconds."""
    expected = f"refused within {_g(within)}s"
    events = [j for j in tl.jobs if j.get("process") == SECOND]
    starts = [i for i, j in enumerate(events) if j.get("event") == "started"]
    if not starts:
        return Check("refused_within", "NODATA", expected, "no data", "no second deployment started")
    outcomes, failures = [], []
    for n, i in enumerate(starts):
        start = events[i]
        stop = starts[n + 1] if n + 1 < len(starts) else len(events)
        end = next((j for j in events[i + 1:stop] if j.get("event") in ("refused", "exited")), None)
        if end is None:
            outcomes.append("not refused")
            failures.append(f"the second deployment started at {_at(start)} was never refused")
            continue
        delay = _t(end) - _t(start)
        code = end.get("code")
        refused = end.get("event") == "refused"  # exit 3 with its one line (a crash is no refusal)
        if not refused:
            outcomes.append(f"exited {code} after {_s(delay)}")
            failures.append(f"the second deployment started at {_at(start)} exited with code {code} after "
                            f"{_s(delay)}: it was not refused (a refusal is exit 3, before Spark starts)")
        else:
            outcomes.append(_s(delay))
            if delay > within:
                failures.append(f"the second deployment started at {_at(start)} was refused only after "
                                f"{_s(delay)}")
    measured = ", ".join(outcomes)
    if failures:
        return Check("refused_within", "FAILED", expected, measured, failures[0])
    return Check("refused_within", "PASSED", expected, measured,
                 f"{len(starts)} second deployment(s) refused within {_s(within)}")


# -- how the job ended ------------------------------------------------------------------------------------------
EXIT_MEANINGS = {0: "stopped on request", 1: "failed, not restarted", 3: "refused", 4: "failure budget exceeded",
                 5: "no retained state verifies", 6: "lost its lease", 7: "a failure repeated on every restart"}


def check_exit_code(tl: Timeline, expected_code: int) -> Check:
    """The job's driver ended with this code: the last exit of the job-driver the history recorded (0 when the arm
    stopped it at its end; its own code when it ended by itself)."""
    expected = f"exit {expected_code} ({EXIT_MEANINGS.get(expected_code, '?')})"
    exits = [j for j in tl.jobs if j.get("process") == "job-driver" and j.get("event") == "exited"
             and j.get("code") is not None]
    if not exits:
        return Check("exit_code", "NODATA", expected, "running", "no exit code of the job's driver was recorded")
    code = exits[-1].get("code")
    own = [j for j in exits if j.get("code") not in (0, -15, 143, None) and not j.get("cause")]
    ended = own[0] if own else exits[-1]
    meaning = EXIT_MEANINGS.get(ended.get("code"), "killed" if isinstance(ended.get("code"), int)
                                and ended["code"] < 0 else "?")
    measured = f"exit {ended.get('code')} ({meaning})"
    if ended.get("code") == expected_code:
        return Check("exit_code", "PASSED", expected, measured, f"the job's driver ended with {measured} at "
                     f"{_at(ended)}")
    return Check("exit_code", "FAILED", expected, measured, f"the job's driver ended with {measured} at "
                 f"{_at(ended)}, not {expected}" + (f" (last recorded exit: {code})" if ended is not exits[-1] else ""))


# -- probes ------------------------------------------------------------------------------------------------------
def check_probe(tl: Timeline, probe: Probe, name: str | None = None) -> Check:
    name = name or f"probe:{probe.metric}"
    bounds = (f"[{_g(probe.minimum) if probe.minimum is not None else '-inf'}, "
              f"{_g(probe.maximum) if probe.maximum is not None else 'inf'}]")
    phases = "+".join(probe.phases)
    expected = f"{probe.metric} in {bounds} in {phases}, <= {probe.tolerance:.0%} outside"
    values = [(v, s) for s in tl.samples_in(probe.phases) if (v := _metric(s, probe.metric)) is not None]
    if not values:
        return Check(name, "NODATA", expected, "no data", f"{probe.metric} was not measured in {phases}")
    outside = [(v, s) for v, s in values if (probe.minimum is not None and v < probe.minimum)
               or (probe.maximum is not None and v > probe.maximum)]
    fraction = len(outside) / len(values)
    verdict = "PASSED" if fraction <= probe.tolerance + 1e-12 else "FAILED"
    message = f"{len(outside)} of {len(values)} measured {phases} samples outside {bounds}"
    if outside:
        message += f"; first {_g(outside[0][0])} at {_at(outside[0][1])}"
    return Check(name, verdict, expected, f"{len(outside)}/{len(values)} outside ({fraction:.0%})", message)


# -- environment -------------------------------------------------------------------------------------------------
def check_environment(tl: Timeline) -> Check | None:
    if not tl.errors:
        return None
    first = tl.errors[0]
    more = f" (and {len(tl.errors) - 1} more)" if len(tl.errors) > 1 else ""
    return Check("environment", "UNKNOWN", "no environment error", f"{len(tl.errors)} error record(s)",
                 f"the environment failed at {_at(first)}: {first.get('message')}{more}")


# -- one arm -----------------------------------------------------------------------------------------------------
def judge_records(records: Sequence[Mapping[str, object]], spec: ExperimentSpec, profile: str,
                  oracle: Mapping[str, object] | None = None, lineage: Mapping[str, object] | None = None,
                  summary: Mapping[str, object] | None = None, missing: Mapping[str, str] | None = None) -> dict:
    """An arm's result (the shape of result.json) from its parsed files. `missing` says why oracle/lineage are
    None (keys "oracle", "lineage"), for the checks' messages."""
    arm = spec.arm(profile)
    targets = arm.targets
    missing = missing or {}
    tl = timeline(records)
    checks: list[Check] = []
    environment = check_environment(tl)
    if environment is not None:
        checks.append(environment)
    if targets.progress:
        checks.append(check_progress(tl))
    recovery = None
    if targets.recovery is not None:
        recovery = measure_recovery(tl, targets.recovery)
        checks.append(check_recovery(tl, targets.recovery))
    if targets.max_lag is not None:
        checks.append(check_max_lag(tl, targets.max_lag))
    if targets.lost is not None:
        checks.append(check_lost(oracle, targets.lost, missing.get("oracle", "no oracle.json")))
    if targets.duplicated is not None:
        checks.append(check_duplicated(oracle, targets.duplicated, missing.get("oracle", "no oracle.json")))
    if targets.state is not None:
        checks.append(check_state(tl, targets.state, spec.workload.live_keys))
    if targets.logs is not None:
        checks.append(check_logs(tl, targets.logs))
    if targets.lineage:
        checks.append(check_lineage(lineage, missing.get("lineage", "no lineage.json")))
    if targets.refused_within is not None:
        checks.append(check_refused(tl, targets.refused_within))
    if targets.exit_code is not None:
        checks.append(check_exit_code(tl, targets.exit_code))
    names = [f"probe:{p.metric}" for p in targets.probes]
    for i, probe in enumerate(targets.probes):
        name = names[i] if names.count(names[i]) == 1 else f"{names[i]}#{names[:i + 1].count(names[i])}"
        checks.append(check_probe(tl, probe, name))

    signature = None
    if arm.role == "control":
        others = worst((c.verdict for c in checks), default="PASSED")
        if arm.expect == "survives":
            failed = [c.name for c in checks if c.verdict == "FAILED"]
            checks.append(Check("control", "FAILED" if failed else "PASSED", "survives", "did not survive"
                                if failed else "survived",
                                f"the control was expected to survive ({arm.note}) but failed {', '.join(failed)}"
                                if failed else f"control survived too: {arm.note}"))
        else:
            signature = control_signature(tl, targets, summary)
            if signature is not None:
                checks.append(Check("control", "PASSED", "reproduces the incident", "reproduced",
                                    f"control reproduced the incident: {signature}"))
            elif others == "PASSED":
                checks.append(Check("control", "FAILED", "reproduces the incident", "no signature",
                                    "control did not reproduce the incident: no expected log line matched, state did "
                                    "not grow and the job did not fail"))

    def count(key: str) -> int | None:
        return _count(oracle, key) if oracle is not None else None

    return {"profile": profile, "verdict": worst(c.verdict for c in checks), "role": arm.role,
            "recovery_s": recovery.seconds if recovery is not None else None,
            "lost": count("lost"), "duplicated": count("duplicated"), "signature": signature,
            "checks": [c.to_dict() for c in checks]}


def control_signature(tl: Timeline, targets, summary: Mapping[str, object] | None) -> str | None:
    """What shows the incident in a control arm: the first log line matching an expected pattern, else the state's
    growth, else the job's failure line (arm.json job_error)."""
    if targets.logs is not None and targets.logs.expected:
        since = evidence_start(tl)
        first = next((r for r in tl.logs if r.get("signature") in targets.logs.expected and _t(r) >= since), None)
        if first is not None:
            line = _trim(str(first.get("text") or ""), str(first.get("signature"))) or str(first.get("signature"))
            if targets.logs.min_matches > 1:  # a loop: how often it repeated is the evidence
                return f"{match_count(tl.logs, str(first.get('signature')), since)} lines like {line}"
            return line
    if targets.state is not None:
        growth = growth_signature(tl, targets.state)
        if growth is not None:
            return growth
    error = (summary or {}).get("job_error")
    if isinstance(error, str) and error.strip():
        return _trim(error)
    return None


# -- discrimination ----------------------------------------------------------------------------------------------
SUBJECT, CONTROL = "hardened", "naive"
DISCRIMINATION_STATUSES = ("discriminating", "not_discriminating", "inconclusive", "waived", "not_run")
NOT_DISCRIMINATING = "not discriminating: a job without the hardening passes every hardened target"
_LINE_MESSAGE_CHARS = 160  # each check's message in the one-line summary (the full messages are in `checks`)


@dataclass(frozen=True)
class _ControlData:
    """What decides whether a check of the control's history can stand for the hardened arm's target."""

    tl: Timeline
    subject_faults: tuple[int, ...]  # indices into spec.faults each arm runs
    control_faults: tuple[int, ...]
    ended: frozenset[str]  # phases whose end the control's history recorded
    unhealed: tuple[str, ...]  # faults injected and never healed in the control's history

    @property
    def relation(self) -> str:
        """same (the hardened arm's schedule), fewer (a subset of it) or other (a fault the hardened arm never ran)."""
        if self.control_faults == self.subject_faults:
            return "same"
        return "fewer" if set(self.control_faults) < set(self.subject_faults) else "other"

    @property
    def complete(self) -> bool:
        return all(phase in self.ended for phase in PHASES)

    @property
    def schedule_done(self) -> bool:
        """Every fault of the control's schedule ran and healed: its last heal is the schedule's last heal."""
        return "inject" in self.ended and not self.unhealed

    def schedule(self) -> str:
        return (f"the control ran faults {_indices(self.control_faults)}, the hardened arm "
                f"{_indices(self.subject_faults)}")

    def incomplete(self, phases: Iterable[str] = PHASES) -> str:
        missing = [p for p in phases if p not in self.ended]
        return (f"the control's history ends (t={self.tl.end:.1f}s) before its {'/'.join(missing)} phase"
                f"{'s' if len(missing) > 1 else ''} ended: the control stopped once it showed its incident, or the "
                "run was cut short")

    def not_done(self) -> str:
        if self.unhealed:
            return f"in the control's history {', '.join(self.unhealed)} never healed: no last heal to measure from"
        return self.incomplete(("inject",))


def _indices(ids: Sequence[int]) -> str:
    return ", ".join(map(str, ids)) if ids else "none"


def _fault_indices(spec: ExperimentSpec, profile: str) -> tuple[int, ...]:
    chosen = spec.arm(profile).faults
    return tuple(range(len(spec.faults))) if chosen is None else tuple(sorted(chosen))


def _ended_phases(records: Sequence[Mapping[str, object]]) -> frozenset[str]:
    started, ended = set(), set()
    for record in records:
        if record.get("type") != "phase":
            continue
        if record.get("boundary") == "start":
            started.add(record.get("name"))
        elif record.get("boundary") == "end" and record.get("name") in started:
            ended.add(record.get("name"))
    return frozenset(str(p) for p in ended)


def _unhealed(tl: Timeline) -> tuple[str, ...]:
    last: dict[tuple[str, str], object] = {}
    for record in tl.faults:
        last[(str(record.get("name")), str(record.get("target")))] = record.get("state")
    return tuple(f"{name} on {target}" for (name, target), state in last.items() if state != "healed")


def _unjudged(check: Check, why: str) -> Check:
    """A check whose measurement on the control's data cannot stand for the hardened target: NODATA, with the
    reason and what was measured."""
    return Check(check.name, "NODATA", check.expected, check.measured,
                 f"not judged on the control's data: {why} (measured {check.verdict}: {check.message})")


def _settle(check: Check, data: _ControlData, *, pass_unless: str | None = None, fail_unless: str | None = None,
            schedule_matters: bool = True) -> Check:
    """The control's verdict of one check, kept only where its data stands for the target: a PASS needs the
    hardened arm's schedule (and `pass_unless` None: what it judges was observed to the end), a FAILED/HANG needs
    `fail_unless` None (more data could not undo it) and no fault the hardened arm never ran; failing on fewer
    faults stands (a job without the hardening failed on less) and says so."""
    if check.verdict not in ("PASSED", "FAILED", "HANG"):
        return check
    if schedule_matters and data.relation == "other":
        return _unjudged(check, f"{data.schedule()}: one the hardened arm never faced")
    if check.verdict == "PASSED":
        if schedule_matters and data.relation == "fewer":
            return _unjudged(check, f"{data.schedule()}: passing fewer faults proves nothing")
        return check if pass_unless is None else _unjudged(check, pass_unless)
    if fail_unless is not None:
        return _unjudged(check, fail_unless)
    if schedule_matters and data.relation == "fewer":
        return dataclasses.replace(check, message=f"{check.message} (with fewer faults: {data.schedule()})")
    return check


def _control_progress(data: _ControlData) -> Check:
    if data.complete:
        return _settle(check_progress(data.tl), data)
    # Judged on the phases that ended only: a phase stuck from start to end failed whatever came after (a hang,
    # "no progress from the first fault to the end of the history", is not final on a history that stopped).
    ended = check_progress(dataclasses.replace(data.tl, faults=(), windows=tuple(w for w in data.tl.windows
                                                                                 if w[0] in data.ended)))
    if ended.verdict == "FAILED":
        return _settle(ended, data)
    return _settle(check_progress(data.tl), data, pass_unless=data.incomplete(), fail_unless=data.incomplete())


def _control_recovery(data: _ControlData, target: Recovery) -> Check:
    check = check_recovery(data.tl, target)
    if not data.schedule_done:
        return _settle(check, data, pass_unless=data.not_done(), fail_unless=data.not_done())
    result = measure_recovery(data.tl, target)
    fail_unless = None
    if check.verdict == "FAILED" and result.seconds is None and result.heal is not None:
        # Not recovered: final only if the control was watched long enough after the last heal that a recovery
        # within the bound would have been seen (healthy_samples samples after heal + within).
        bound = _t(result.heal) + target.within
        after = sum(1 for s in data.tl.samples if _t(s) > bound)
        if after < target.healthy_samples:
            fail_unless = (f"the control was watched {data.tl.end - _t(result.heal):.1f} s after its last heal, "
                           f"not the {_g(target.within)} s bound and {target.healthy_samples} samples more that "
                           "\"not recovered\" needs")
    return _settle(check, data, fail_unless=fail_unless)


def _control_oracle(name: str, data: _ControlData, oracle: Mapping[str, object] | None, limit: int, missing: str,
                    subject_kind: str) -> Check:
    check = _oracle_check(name, oracle, limit, missing)
    if oracle is not None and check.verdict != "NODATA" and _oracle_kind(oracle) != subject_kind:
        units = {"compare": "sessions", "coverage": "acknowledged events"}
        if limit > 0:
            return _unjudged(check, f"the hardened bound ({limit}) counts {units[subject_kind]}, the control's "
                                    f"oracle counts {units[_oracle_kind(oracle)]}: only a bound of 0 means the same "
                                    "in both")
        check = dataclasses.replace(check, message=f"{check.message}; the control's oracle counts "
                                                   f"{units[_oracle_kind(oracle)]}, not {units[subject_kind]}: a "
                                                   "bound of 0 means the same for both")
    why = None if data.complete else f"{data.incomplete()}; its output was not drained and read back to the end"
    return _settle(check, data, pass_unless=why, fail_unless=why)


def _control_state(data: _ControlData, target: StateTarget, live_keys: int | None) -> Check:
    check = check_state(data.tl, target, live_keys)
    if all(phase in data.ended for phase in target.during):
        return _settle(check, data)
    why = data.incomplete(target.during)
    if target.max_rows is not None or target.max_rows_per_key is not None:
        bounds = check_state(data.tl, dataclasses.replace(target, trend=None), live_keys)
        if bounds.verdict == "FAILED":  # a bound exceeded stays exceeded; a trend needs its whole window
            return _settle(dataclasses.replace(check, verdict="FAILED", measured=bounds.measured,
                                               message=bounds.message), data)
    return _settle(check, data, pass_unless=why, fail_unless=why)


def _control_logs(data: _ControlData, target: Logs, watched: set[str]) -> Check:
    """Only the patterns the control's own log scanner watched have records in its history (its own targets'
    expected and forbidden); the others were never looked for."""
    unwatched = [p for p in target.expected + target.forbidden if p not in watched]
    expected = tuple(p for p in target.expected if p in watched)
    forbidden = tuple(p for p in target.forbidden if p in watched)
    full = check_logs(data.tl, target)
    if forbidden and any(match_count(data.tl.logs, p) for p in forbidden):  # a line seen stays seen
        seen = check_logs(data.tl, Logs((), forbidden))
        return _settle(dataclasses.replace(seen, expected=full.expected), data)
    why = None if data.complete else data.incomplete()
    not_watched = "the control's logs were not watched for " + ", ".join(repr(p) for p in unwatched)
    if unwatched and expected and why is None:  # the patterns it did watch can still fail
        part = check_logs(data.tl, Logs(expected, forbidden, target.min_matches))
        if part.verdict == "FAILED":
            return _settle(dataclasses.replace(part, expected=full.expected,
                                               message=f"{part.message} ({not_watched})"), data)
    if unwatched:
        return _unjudged(full, not_watched)
    return _settle(full, data, pass_unless=why, fail_unless=why)


def _control_refused(data: _ControlData, within: float) -> Check:
    check = check_refused(data.tl, within)
    why = None if data.complete else data.incomplete()
    never = why if "not refused" in check.measured else None  # it might still have been refused later
    return _settle(check, data, pass_unless=why, fail_unless=never)


def _control_probe(data: _ControlData, probe: Probe, name: str) -> Check:
    check = check_probe(data.tl, probe, name)
    why = None if all(p in data.ended for p in probe.phases) else data.incomplete(probe.phases)
    return _settle(check, data, pass_unless=why, fail_unless=why, schedule_matters=probe.phases != ("steady",))


def discriminate(records: Sequence[Mapping[str, object]], spec: ExperimentSpec,
                 oracle: Mapping[str, object] | None = None, lineage: Mapping[str, object] | None = None,
                 missing: Mapping[str, str] | None = None, subject_kind: str = "compare") -> dict:
    """The control's (naive) history and outputs judged by the hardened arm's targets: the experiment's
    `discrimination` object of results.json. `subject_kind` is the hardened arm's oracle kind (compare: sessions)."""
    targets = spec.arm(SUBJECT).targets
    missing = missing or {}
    tl = timeline(records)
    data = _ControlData(tl, _fault_indices(spec, SUBJECT), _fault_indices(spec, CONTROL), _ended_phases(records),
                        _unhealed(tl))
    control_logs = spec.arm(CONTROL).targets.logs
    watched = set(control_logs.expected + control_logs.forbidden) if control_logs is not None else set()
    checks: list[Check] = []
    environment = check_environment(tl)
    if environment is not None:
        checks.append(environment)
    if targets.progress:
        checks.append(_control_progress(data))
    if targets.recovery is not None:
        checks.append(_control_recovery(data, targets.recovery))
    if targets.max_lag is not None:
        why = None if data.complete else data.incomplete(("inject", "recover"))
        checks.append(_settle(check_max_lag(tl, targets.max_lag), data, pass_unless=why))  # a peak stays a peak
    for name, limit in (("lost", targets.lost), ("duplicated", targets.duplicated)):
        if limit is not None:
            checks.append(_control_oracle(name, data, oracle, limit, missing.get("oracle", "no oracle.json"),
                                          subject_kind))
    if targets.state is not None:
        checks.append(_control_state(data, targets.state, spec.workload.live_keys))
    if targets.logs is not None:
        checks.append(_control_logs(data, targets.logs, watched))
    if targets.lineage:
        why = None if data.complete else data.incomplete()
        checks.append(_settle(check_lineage(lineage, missing.get("lineage", "no lineage.json")), data,
                              pass_unless=why))  # a broken checkpoint stays broken
    if targets.refused_within is not None:
        checks.append(_control_refused(data, targets.refused_within))
    if targets.exit_code is not None:  # an ended job stays ended; a running one might still end otherwise
        check = check_exit_code(tl, targets.exit_code)
        checks.append(_settle(check, data, pass_unless=None if data.complete else data.incomplete(),
                              fail_unless=None if data.complete or check.measured != "running" else
                              data.incomplete()))
    names = [f"probe:{p.metric}" for p in targets.probes]
    for i, probe in enumerate(targets.probes):
        name = names[i] if names.count(names[i]) == 1 else f"{names[i]}#{names[:i + 1].count(names[i])}"
        checks.append(_control_probe(data, probe, name))
    return discrimination_result(spec, checks)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _LINE_MESSAGE_CHARS else text[:_LINE_MESSAGE_CHARS - 1].rstrip() + "…"


def discrimination_result(spec: ExperimentSpec | None, checks: Sequence[Check], not_run: str | None = None) -> dict:
    """status, what it adds to the experiment's verdict, the one line the report shows, and the checks.

    discriminating: a check FAILED or HANG on the control's data; not_discriminating: every check PASSED;
    inconclusive: neither (NODATA/UNKNOWN, or no check); waived: the spec's `cannot_discriminate` says why it
    cannot, and nothing failed; not_run: no control (or no hardened targets) in this run. `verdict` is FAILED only
    for not_discriminating under a suite's require_discrimination."""
    required = bool(spec is not None and spec.require_discrimination)
    waiver = spec.cannot_discriminate if spec is not None else None
    failed = [c for c in checks if c.verdict in ("FAILED", "HANG")]
    if not_run is not None:
        measured = "not_run"
    elif failed:
        measured = "discriminating"
    elif checks and all(c.verdict == "PASSED" for c in checks):
        measured = "not_discriminating"
    else:
        measured = "inconclusive"
    status = "waived" if waiver and measured in ("not_discriminating", "inconclusive") else measured
    if status == "discriminating":
        line = "a job without the hardening: " + "; ".join(f"{c.verdict} on {c.name} ({_short(c.message)})"
                                                           for c in failed)
        if waiver:
            line += f" (though the spec says it cannot discriminate: {_short(waiver)})"
    elif status == "not_discriminating":
        line = NOT_DISCRIMINATING
    elif status == "inconclusive":
        unjudged = [c for c in checks if c.verdict != "PASSED"]
        line = ("inconclusive: a job without the hardening failed no hardened target, but "
                + ("; ".join(f"{c.name} could not be judged on its data ({_short(c.message)})" for c in unjudged)
                   if unjudged else "the hardened arm sets no target to judge it by"))
    elif status == "waived":
        line = f"waived: {' '.join(str(waiver).split())} (measured: {measured.replace('_', ' ')})"
    else:
        line = f"a job without the hardening: not run ({not_run})"
    return {"status": status, "required": required,
            "verdict": "FAILED" if required and status == "not_discriminating" else "PASSED",
            "message": line, "measured": measured, "waiver": waiver, "control": CONTROL, "targets": SUBJECT,
            "failed": [{"name": c.name, "verdict": c.verdict, "message": c.message} for c in failed],
            "checks": [c.to_dict() for c in checks]}


# -- loaders (the only I/O) --------------------------------------------------------------------------------------
def _read_json(path: Path) -> tuple[object | None, str]:
    """(value, why it is None)."""
    try:
        return json.loads(path.read_text(encoding="utf-8")), ""
    except FileNotFoundError:
        return None, f"no {path.name}"
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return None, f"{path.name} unreadable ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"


def _unknown_arm(profile: str, role: str, name: str, message: str) -> dict:
    return {"profile": profile, "verdict": "UNKNOWN", "role": role, "recovery_s": None, "lost": None,
            "duplicated": None, "signature": None,
            "checks": [Check(name, "UNKNOWN", "a readable record of the arm", "unreadable", message).to_dict()]}


@dataclass(frozen=True)
class _ArmFiles:
    records: list
    oracle: Mapping[str, object] | None
    lineage: Mapping[str, object] | None
    summary: Mapping[str, object] | None
    missing: Mapping[str, str]


def _read_arm(arm_dir: Path) -> _ArmFiles | str:
    """An arm directory's parsed files, or why its history cannot be read."""
    history = arm_dir / "history.jsonl"
    if not history.is_file():
        return f"no {history.name}: the arm recorded nothing"
    try:
        records = read_history(history)
    except (HistoryError, OSError) as exc:
        return f"history unreadable: {exc}"
    oracle, oracle_why = _read_json(arm_dir / "oracle.json")
    lineage, lineage_why = _read_json(arm_dir / "lineage.json")
    summary, _ = _read_json(arm_dir / "arm.json")
    if oracle is not None and not isinstance(oracle, Mapping):
        oracle, oracle_why = None, "oracle.json is not an object"
    if lineage is not None and not isinstance(lineage, Mapping):
        lineage, lineage_why = None, "lineage.json is not an object"
    return _ArmFiles(records, oracle, lineage, summary if isinstance(summary, Mapping) else None,
                     {"oracle": oracle_why, "lineage": lineage_why})


def judge_arm(arm_dir: str | Path, spec: ExperimentSpec, profile: str) -> dict:
    """Read one arm directory (history.jsonl, oracle.json, lineage.json, arm.json) and judge it."""
    files = _read_arm(Path(arm_dir))
    if isinstance(files, str):
        return _unknown_arm(profile, spec.arm(profile).role, "history", files)
    return judge_records(files.records, spec, profile, oracle=files.oracle, lineage=files.lineage,
                         summary=files.summary, missing=files.missing)


def judge_discrimination(experiment_dir: str | Path, spec: ExperimentSpec) -> dict:
    """Read the control arm's files of one experiment and judge them by the hardened arm's targets
    (`discriminate`); not_run where the run has no control, or the spec no hardened targets."""
    experiment_dir = Path(experiment_dir)
    profiles = [arm.profile for arm in spec.arms]
    if CONTROL not in profiles:
        return discrimination_result(spec, [], not_run="the experiment has no control (naive) arm in this run")
    if SUBJECT not in profiles:
        return discrimination_result(spec, [], not_run="the experiment has no hardened arm: no targets to judge "
                                                       "the control by")
    if not (experiment_dir / CONTROL).is_dir():
        return discrimination_result(spec, [], not_run="the control (naive) arm was not run")
    files = _read_arm(experiment_dir / CONTROL)
    if isinstance(files, str):
        return discrimination_result(spec, [Check("history", "UNKNOWN", "a readable record of the control",
                                                  "unreadable", files)])
    subject_oracle, _ = _read_json(experiment_dir / SUBJECT / "oracle.json")
    subject_kind = _oracle_kind(subject_oracle) if isinstance(subject_oracle, Mapping) else "compare"
    return discriminate(files.records, spec, oracle=files.oracle, lineage=files.lineage, missing=files.missing,
                        subject_kind=subject_kind)


def _experiment_dirs(run_dir: Path, listed: object) -> list[Path]:
    """Experiments in run.json order, then any other directory with a spec.json (sorted); never reached: left out."""
    names = [n for n in listed if isinstance(n, str)] if isinstance(listed, list) else []
    found = [run_dir / n for n in dict.fromkeys(names) if n and "/" not in n and (run_dir / n).is_dir()]
    extra = sorted(p for p in run_dir.iterdir() if p.is_dir() and (p / "spec.json").is_file() and p not in found) \
        if run_dir.is_dir() else []
    return found + extra


def _write_json(path: Path, value: object) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, indent=2) + "\n")
    tmp.replace(path)


def judge_run(run_dir: str | Path) -> dict:
    """Judge every arm of a stored run; write each arm's result.json; return results.json's content."""
    run_dir = Path(run_dir)
    run, _ = _read_json(run_dir / "run.json")
    run = run if isinstance(run, Mapping) else {}
    status = run.get("status") if isinstance(run.get("status"), str) else "unknown"
    experiments = []
    for experiment_dir in _experiment_dirs(run_dir, run.get("experiments")):
        raw, why = _read_json(experiment_dir / "spec.json")
        try:
            if raw is None:
                raise SpecError(f"{experiment_dir.name}/spec.json: (file): {why}; allowed: the spec.json a run "
                                "writes")
            spec = ExperimentSpec.from_dict(raw, where=f"{experiment_dir.name}/spec.json")
        except SpecError as exc:
            arms = [_unknown_arm(p.name, "control" if p.name == "naive" else "subject", "spec", str(exc))
                    for p in sorted(experiment_dir.iterdir()) if p.is_dir()]
            incident = raw.get("incident") if isinstance(raw, Mapping) else None
            discrimination = (discrimination_result(None, [Check("spec", "UNKNOWN", "a readable spec.json",
                                                                 "unreadable", str(exc))])
                              if (experiment_dir / CONTROL).is_dir() else
                              discrimination_result(None, [], not_run="the control (naive) arm was not run"))
        else:
            arms = [judge_arm(experiment_dir / arm.profile, spec, arm.profile)
                    for arm in spec.arms if (experiment_dir / arm.profile).is_dir()]
            incident = {"file": spec.incident.file, "error": spec.incident.error}
            discrimination = judge_discrimination(experiment_dir, spec)
        for arm in arms:
            _write_json(experiment_dir / arm["profile"] / "result.json", arm)
        # A required discrimination that fails (not_discriminating, not waived) fails the experiment, and so the
        # run: its verdict is the worst of the arms' and the discrimination's.
        verdicts = [a["verdict"] for a in arms] + ["FAILED"] * (discrimination["verdict"] == "FAILED")
        experiments.append({"name": experiment_dir.name, "incident": incident, "verdict": worst(verdicts),
                            "arms": arms, "discrimination": discrimination})
    verdict = worst(e["verdict"] for e in experiments)
    flaky = flaky_arms(experiments)
    if status == "interrupted":
        verdict = INTERRUPTED
    elif status != "completed":  # error, or a harness that never finished (running): the environment broke
        verdict = worst([verdict, "UNKNOWN"])
    results = {"verdict": verdict, "status": status, "experiments": experiments, "flaky": flaky}
    rows = mutate_plan(run_dir)
    if rows is not None:  # a mutate run: its mutants are meant to fail; the run passes when every switch is killed
        from .mutate import matrix

        results["mutation"] = matrix(results, rows)
        if status == "completed":
            switches = results["mutation"]["switches"].values()
            results["verdict"] = ("FAILED" if any(s["status"] == "survived" for s in switches)
                                  else "UNKNOWN" if any(s["status"] == "unknown" for s in switches) else "PASSED")
    return results


def mutate_plan(run_dir: Path) -> list[dict] | None:
    from .mutate import read_plan

    return read_plan(run_dir)


_REPEAT = re.compile(r"\.r(\d+)$")


def flaky_arms(experiments: Sequence[Mapping[str, object]]) -> list[dict]:
    """Arms of repeated experiments (directories <name>.r1, <name>.r2, ...) whose verdicts differ between repeats."""
    seen: dict[tuple[str, str], list[str]] = {}
    for experiment in experiments:
        name = str(experiment["name"])
        if not _REPEAT.search(name):
            continue
        for arm in experiment["arms"]:
            seen.setdefault((_REPEAT.sub("", name), str(arm["profile"])), []).append(str(arm["verdict"]))
    return [{"experiment": name, "profile": profile, "verdicts": verdicts}
            for (name, profile), verdicts in sorted(seen.items()) if len(set(verdicts)) > 1]
