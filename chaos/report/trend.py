"""The trend page over many runs: recovery, throughput and state per arm, regressions marked."""
from __future__ import annotations

import math
import os
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import quote

from ..store import RunStore, is_run_dir
from .markup import _badge, _e, _page
from .model import Arm, ReportError, Run, Timeline, _anchor, _number, _write_atomic, load_run
from .plots import _figure, _style_axes, _svg


# -- trends ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrendMetric:
    key: str
    title: str
    unit: str
    higher_is_better: bool


TREND_METRICS = (
    TrendMetric("recovery_s", "recovery time", "s", False),
    TrendMetric("throughput", "throughput (events processed / steady-phase duration)", "events/s", True),
    TrendMetric("max_state_rows", "max state rows", "rows", False),
)
NOT_RECOVERED = math.inf  # a failed recovery check with no recovery time: worse than any time


def steady_throughput(timeline: Timeline) -> float | None:
    """Events processed in the steady phase over its duration (events/s). processed_rate is a rolling rate over
    the last few seconds of completed batches, so its integral over the phase (trapezoids between samples) is the
    events processed in it; a median of the samples reads 0 when batches complete less often than the window.
    None without a steady phase or with fewer than two measured samples in it."""
    steady = timeline.phase_window("steady")
    if steady is None or steady[1] <= steady[0]:
        return None
    points = [(float(s["t"]), rate) for s in timeline.samples
              if steady[0] <= float(s["t"]) <= steady[1] and (rate := _number(s.get("processed_rate"))) is not None]
    if len(points) < 2:
        return None
    events = sum((t1 - t0) * (r0 + r1) / 2 for (t0, r0), (t1, r1) in zip(points, points[1:]))
    return events / (points[-1][0] - points[0][0]) if points[-1][0] > points[0][0] else None


def arm_figures(arm: Arm) -> dict[str, float | None]:
    """The trend figures of one arm: recovery_s, throughput (events processed over the steady phase's duration,
    steady_throughput), max_state_rows. None when not measured."""
    recovery = _number(arm.data.get("recovery_s"))
    if recovery is None and any(isinstance(c, dict) and c.get("name") == "recovery" and c.get("verdict") == "FAILED"
                                for c in arm.data.get("checks") or []):
        recovery = NOT_RECOVERED
    timeline = arm.timeline
    rows = [v for v in timeline.values("state_rows") if v is not None]
    return {"recovery_s": recovery, "throughput": steady_throughput(timeline),
            "max_state_rows": max(rows) if rows else None}


def find_regressions(values: Sequence[float | None], margin: float, higher_is_better: bool) -> list[bool]:
    """values in time order -> True where a value is worse than the median of the previous measured values by
    more than margin (a fraction: 0.2 = 20 %). The first measured value has nothing to regress from."""
    flags = []
    previous: list[float] = []
    for value in values:
        flag = False
        finite = [p for p in previous if math.isfinite(p)]
        if value is not None and finite:
            median = statistics.median(finite)
            if higher_is_better:
                flag = value < median * (1 - margin)
            else:
                flag = value > median * (1 + margin) if median > 0 else value > 0
        flags.append(flag)
        if value is not None:
            previous.append(value)
    return flags


@dataclass
class TrendRow:
    run: Run
    figures: dict[tuple[str, str], dict[str, float | None]]  # (experiment, profile) -> figures
    verdicts: dict[tuple[str, str], str]


def _run_order(run_dir: Path, meta: dict) -> tuple[str, str]:
    return (str(meta.get("started") or ""), run_dir.name)


def collect_runs(runs_dir: Path) -> list[TrendRow]:
    rows = []
    for candidate in sorted(Path(runs_dir).iterdir()):
        if candidate.name == "latest" or candidate.is_symlink() or not is_run_dir(candidate):
            continue
        if not RunStore(candidate).results_file.is_file():
            continue  # not judged (yet): a run still running, or one to judge with chaos check
        try:
            run = load_run(candidate)
        except ReportError as exc:
            print(f"chaos report: skipping {candidate.name}: {exc}", file=sys.stderr)
            continue
        if not run.experiments:
            continue  # smoke and bench runs have no experiments to trend
        figures, verdicts = {}, {}
        for name, arms in run.arms.items():
            for arm in arms:
                figures[(name, arm.profile)] = arm_figures(arm)
                verdicts[(name, arm.profile)] = arm.verdict
        rows.append(TrendRow(run, figures, verdicts))
    rows.sort(key=lambda row: _run_order(row.run.dir, row.run.meta))
    return rows


def _trend_value(value: float | None, unit: str) -> str:
    if value is None:
        return "–"
    if value == NOT_RECOVERED:
        return "not recovered"
    if unit == "s":
        return f"{value:.1f} s"
    return f"{value:,.0f}"


def _trend_plot(metric: TrendMetric, labels: list[str], series: dict[str, list[float | None]],
                flags: dict[str, list[bool]], salt: str) -> str | None:
    if not any(v is not None and math.isfinite(v) for values in series.values() for v in values):
        return None
    fig = _figure(4.6, 2.4)
    fig.subplots_adjust(bottom=0.3)
    ax = fig.add_subplot()
    _style_axes(ax, f"{metric.title} ({metric.unit})")
    xs = list(range(len(labels)))
    for index, (profile, values) in enumerate(series.items()):
        colour = ("#0969da", "#1f883d", "#8250df", "#bc4c00")[index % 4]
        ys = [v if v is not None and math.isfinite(v) else math.nan for v in values]
        ax.plot(xs, ys, marker="o", markersize=3, linewidth=1.1, color=colour, label=profile,
                gid=f"series-{_anchor(profile)}")
        bad = [(x, y) for x, y, flag in zip(xs, ys, flags[profile]) if flag and not math.isnan(y)]
        if bad:
            ax.plot([x for x, _ in bad], [y for _, y in bad], linestyle="none", marker="x", markersize=8,
                    markeredgewidth=2, color="#cf222e", label=f"{profile}: regression")
        for x, value, flag in zip(xs, values, flags[profile]):
            if value == NOT_RECOVERED:
                ax.text(x, 1.0, "not recovered", transform=ax.get_xaxis_transform(), fontsize=6,
                        color="#cf222e" if flag else "#57606a", ha="center", va="top", rotation=90)
    ax.set_xticks(xs, labels, fontsize=6, rotation=30, ha="right")
    ax.set_xlim(-0.5, len(xs) - 0.5)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=6, frameon=False, loc="best")
    return _svg(fig, salt)


def _short_time(run: Run) -> str:
    try:
        return datetime.fromisoformat(run.started).strftime("%m-%d %H:%M")
    except ValueError:
        return run.dir.name[:15]


def render_trend(rows: list[TrendRow], out: Path, margin: float) -> str:
    experiments: dict[str, list[str]] = {}
    for row in rows:
        for name, profile in row.figures:
            profiles = experiments.setdefault(name, [])
            if profile not in profiles:
                profiles.append(profile)
    body = [f'<div class="banner" style="background:#24292f"><h1>trends</h1><span>{len(rows)} runs</span>'
            f'<span class="meta">regression: worse than the median of the previous runs by more than '
            f"{margin:.0%}</span></div>"]
    if not rows:
        body.append('<p class="small">No run with experiments and a results.json was found.</p>')
    total_regressions = 0
    for name in sorted(experiments):
        profiles = experiments[name]
        runs = [row for row in rows if any(key[0] == name for key in row.figures)]  # runs that had it, in order
        labels = [_short_time(row.run) for row in runs]
        body.append(f'<section id="{_e(_anchor(name))}"><h2>{_e(name)}</h2><div class="plots">')
        flags_by_metric: dict[str, dict[str, list[bool]]] = {}
        values_by_metric: dict[str, dict[str, list[float | None]]] = {}
        for metric in TREND_METRICS:
            series = {p: [row.figures.get((name, p), {}).get(metric.key) for row in runs] for p in profiles}
            flags = {p: find_regressions(v, margin, metric.higher_is_better) for p, v in series.items()}
            values_by_metric[metric.key], flags_by_metric[metric.key] = series, flags
            svg = _trend_plot(metric, labels, series, flags, salt=f"trend-{_anchor(name)}-{metric.key}")
            body.append(f'<div class="plot" data-panel="{metric.key}">{svg}</div>' if svg else
                        f'<div class="plot nodata" data-panel="{metric.key}"><div class="title">{_e(metric.title)}'
                        "</div><div>no data</div></div>")
        body.append("</div>")
        head = "".join(f"<th>{_e(p)}: {_e(m.title.split(' (')[0])}</th>" for p in profiles for m in TREND_METRICS)
        table = [f"<table class=\"trend\"><thead><tr><th>run</th><th>verdicts</th>{head}</tr></thead><tbody>"]
        for index, row in enumerate(runs):
            link = os.path.relpath(row.run.dir / "index.html", out.parent)
            verdicts = " ".join(f'<span class="small">{_e(p)}</span> {_badge(row.verdicts[(name, p)])}'
                                for p in profiles if (name, p) in row.verdicts)
            cells = []
            for profile in profiles:
                for metric in TREND_METRICS:
                    value = values_by_metric[metric.key][profile][index]
                    flagged = flags_by_metric[metric.key][profile][index]
                    total_regressions += flagged
                    text = _e(_trend_value(value, metric.unit))
                    cells.append(f'<td class="num regression" style="background:#ffebe9;color:#cf222e">'
                                 f"<b>{text} ▲ regression</b></td>" if flagged else f'<td class="num">{text}</td>')
            body_row = (f'<tr><td><a href="{_e(quote(link))}">{_e(row.run.dir.name)}</a></td><td>{verdicts}</td>'
                        f"{''.join(cells)}</tr>")
            table.append(body_row)
        table.append("</tbody></table>")
        body.append("".join(table) + "</section>")
    body.insert(1, f'<p>{total_regressions} regression{"s" if total_regressions != 1 else ""} marked.</p>')
    return _page("chaos trends", "".join(body))


def write_trend(runs_dir: Path, out: Path | None = None, margin: float = 0.2) -> Path:
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        raise ReportError(f"{runs_dir} is not a directory; give the run store, e.g. reports/runs")
    out = Path(out) if out is not None else runs_dir / "trend.html"
    rows = collect_runs(runs_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(out, render_trend(rows, out.resolve(), margin))
    return out


