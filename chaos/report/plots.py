"""The time-series plots of an arm: inline SVG drawn by matplotlib (no script, no network)."""
from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .model import Arm, FaultWindow, Timeline, _number


@dataclass(frozen=True)
class Metric:
    key: str          # a sample field (chaos/history.py SAMPLE_METRICS)
    label: str
    unit: str
    scale: float = 1.0
    points: bool = False  # sparse by nature (null when no batch ended): markers, not a line


@dataclass(frozen=True)
class Panel:
    slug: str
    title: str
    metrics: tuple[Metric, ...]


PANELS = (
    Panel("rates", "input and processed rate (events/s)",
          (Metric("input_rate", "input", "events/s"), Metric("processed_rate", "processed", "events/s"))),
    Panel("lag", "Kafka lag (records)", (Metric("lag", "lag", "records"),)),
    Panel("batch", "batch duration (s)", (Metric("batch_duration_ms", "batch", "s", 0.001, points=True),)),
    Panel("state-rows", "state rows", (Metric("state_rows", "state rows", "rows"),)),
    # One measure: RocksDB's SST files on disk. The sample's state_bytes falls back to in-memory bytes while no SST
    # exists, so plotting it mixed two measures (a 4 MB memory spike between KB of SST); histories recorded before
    # state_sst_bytes existed show "no data" with why (LEGACY_STATE_BYTES).
    Panel("state-bytes", "state on disk (RocksDB SST bytes)", (Metric("state_sst_bytes", "SST on disk", "B"),)),
    Panel("checkpoint", "checkpoint size (bytes)", (Metric("checkpoint_bytes", "checkpoint", "B"),)),
)
LEGACY_STATE_BYTES = ("not recorded: this history predates state_sst_bytes; its state_bytes mixes on-disk SST and "
                      "in-memory bytes, so it is not plotted")
FAULT_COLOURS = ("#d62728", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")


# -- plots -----------------------------------------------------------------------------------------------------
_SVG_ID = re.compile(r'\bid="([^"]+)"')
_SVG_URL_REF = re.compile(r"url\(#([^)]+)\)")
_SVG_HREF_REF = re.compile(r'\b((?:xlink:)?href)="#([^"]+)"')


def _svg(fig, salt: str) -> str:
    """One figure as an inline <svg> element. The salt keeps matplotlib's element ids unique across the page."""
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    text = buffer.getvalue()
    text = text[text.index("<svg"):]  # drop the XML prolog and doctype: not allowed inside HTML
    # Every plot names its groups figure_1, axes_1, ...: prefix ids (and references) so the page's ids are unique.
    text = _SVG_ID.sub(lambda m: f'id="{salt}-{m.group(1)}"', text)
    text = _SVG_URL_REF.sub(lambda m: f"url(#{salt}-{m.group(1)})", text)
    return _SVG_HREF_REF.sub(lambda m: f'{m.group(1)}="#{salt}-{m.group(2)}"', text)


def _figure(width: float = 4.6, height: float = 2.3):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(left=0.14, right=0.98, top=0.80, bottom=0.2)
    return fig


def _style_axes(ax, title: str) -> None:
    ax.set_title(title, fontsize=8.5, loc="left", pad=14)
    ax.tick_params(labelsize=7)
    ax.grid(True, linewidth=0.4, alpha=0.5)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _fault_colour(window: FaultWindow) -> str:
    return FAULT_COLOURS[(window.index - 1) % len(FAULT_COLOURS)]


def _decorate(ax, timeline: Timeline, x_end: float, arm: dict) -> None:
    """Fault windows shaded and labelled, phase boundaries, the recovery interval."""
    from matplotlib.transforms import blended_transform_factory

    top = blended_transform_factory(ax.transData, ax.transAxes)
    for window in timeline.faults:
        end = window.end if window.end is not None else x_end
        colour = _fault_colour(window)
        ax.axvspan(window.start, end, color=colour, alpha=0.13, linewidth=0,
                   hatch=None if window.end is not None else "//")
        row = (window.index - 1) % 3
        label = f"F{window.index} {window.name}" + ("" if window.end is not None else " (not healed)")
        ax.text(window.start, 1.0 - 0.085 * row, label, transform=top, fontsize=6, color=colour,
                va="top", ha="left", clip_on=True, parse_math=False)
    for name, boundary, t in timeline.phases:
        if boundary != "start":
            continue
        ax.axvline(t, color="#57606a", linewidth=0.7, linestyle="--")
        ax.text(t, 1.01, name, transform=top, fontsize=6, color="#57606a", va="bottom", ha="left",
                parse_math=False)
    recovery = _recovery_interval(timeline, arm, x_end)
    if recovery is not None:
        start, end, recovered = recovery
        colour = "#1a7f37" if recovered else "#cf222e"
        ax.axvspan(start, end, ymin=0, ymax=0.06, color=colour, alpha=0.8, linewidth=0)
        text = f"recovery {end - start:.1f} s" if recovered else "not recovered"
        ax.text(end if recovered else start, 0.08, text, transform=top, fontsize=6, color=colour,
                ha="right" if recovered else "left", va="bottom", parse_math=False)
    for job in timeline.jobs:
        if job.get("event") in ("exited", "restarted", "refused"):
            ax.axvline(float(job["t"]), color="#cf222e", linewidth=0.8, linestyle=":")


def _recovery_interval(timeline: Timeline, arm: dict, x_end: float) -> tuple[float, float, bool] | None:
    """The worst disruption's recovery as the judge measured it (the arm's `recovery_window`: from the disruption,
    or a group's first, to the start of the healthy run; not recovered: to the next fault, or to the end). A result
    written before that field: from the last heal to heal + recovery_s."""
    window = arm.get("recovery_window")
    if isinstance(window, list) and len(window) == 2 and _number(window[0]) is not None:
        start, end = float(window[0]), _number(window[1])
        recovered = _number(arm.get("recovery_s")) is not None
        return start, float(end) if end is not None else max(x_end, start), recovered
    heal = timeline.last_heal()
    if heal is None:
        return None
    recovery_s = _number(arm.get("recovery_s"))
    if recovery_s is not None:
        return heal, heal + recovery_s, True
    checks = [c for c in arm.get("checks") or [] if isinstance(c, dict) and c.get("name") == "recovery"]
    if checks and checks[0].get("verdict") == "FAILED":
        return heal, max(x_end, heal), False
    return None


def _format_axis(ax, metric: Metric) -> None:
    from matplotlib.ticker import EngFormatter

    if metric.unit == "B":
        ax.yaxis.set_major_formatter(EngFormatter(unit="B", sep=""))
    elif metric.unit in ("records", "rows", "events/s"):
        ax.yaxis.set_major_formatter(EngFormatter(sep=""))


@dataclass(frozen=True)
class Threshold:
    """A bound from the spec drawn on a plot: a horizontal line at `value` over [start, end] (None: the whole x)."""
    metric: str      # the sample field it bounds
    value: float
    label: str       # "{value}" is replaced by the value in the plot's unit (batch duration: s, not ms)
    slug: str        # in the SVG group id: threshold-<slug>
    start: float | None = None
    end: float | None = None
    colour: str = "#9a6700"


def _finite(value: object) -> float | None:
    number = _number(value)
    return number if number is not None and math.isfinite(number) else None


def _dict(value: object) -> dict:
    """value when it is a JSON object, else {} (a missing or malformed section of spec.json)."""
    return value if isinstance(value, dict) else {}


def thresholds(arm: Arm) -> list[Threshold]:
    """The bounds of an arm's spec.json that have a line on a plot: each steady-state probe's minimum and maximum
    over its phases; the recovery target's lag_below from the last heal on; max_lag; state max_rows and
    max_rows_per_key x live keys."""
    spec, targets, timeline = arm.spec, arm.targets, arm.timeline
    lines: list[Threshold] = []
    for probe in spec.get("probes") or []:
        if not isinstance(probe, dict):
            continue
        metric = str(probe.get("metric"))
        phases = [str(p) for p in probe.get("phases") or []]
        windows: list[tuple[float | None, float | None]] = [
            w for w in (timeline.phase_window(p) for p in phases) if w is not None] or [(None, None)]
        for bound, sign in (("minimum", "≥"), ("maximum", "≤")):
            value = _finite(probe.get(bound))
            if value is None:
                continue
            for start, end in windows:
                lines.append(Threshold(metric, value, f"probe {sign} {{value}} ({', '.join(phases)})",
                                       f"probe-{metric}-{bound}", start, end))
    recovery = _dict(targets.get("recovery"))
    lag_below = _finite(recovery.get("lag_below"))
    if lag_below is not None:
        heal = timeline.last_heal()
        if heal is None:
            heal = next((t for n, b, t in timeline.phases if n == "recover" and b == "start"), None)
        lines.append(Threshold("lag", lag_below, "recovery: lag < {value} within "
                               f"{_finite(recovery.get('within')) or 0:g} s", "recovery-lag_below", heal, None,
                               "#1a7f37"))
    max_lag = _finite(targets.get("max_lag"))
    if max_lag is not None:
        lines.append(Threshold("lag", max_lag, "max lag {value}", "max_lag", colour="#cf222e"))
    state = _dict(targets.get("state"))
    max_rows = _finite(state.get("max_rows"))
    if max_rows is not None:
        lines.append(Threshold("state_rows", max_rows, "max rows {value}", "state-max_rows", colour="#cf222e"))
    per_key = _finite(state.get("max_rows_per_key"))
    workload = _dict(spec.get("workload"))
    live_keys = _finite(workload.get("rotation_live_actors") if workload.get("shape") == "rotating"
                        else workload.get("keys"))
    if per_key is not None and live_keys:
        lines.append(Threshold("state_rows", per_key * live_keys,
                               f"max {per_key:g} rows/key x {live_keys:g} keys", "state-max_rows_per_key",
                               colour="#cf222e"))
    return lines


def _draw_thresholds(ax, metric: Metric, lines: Sequence[Threshold], x_start: float, x_end: float) -> None:
    from matplotlib.transforms import blended_transform_factory

    transform = blended_transform_factory(ax.transData, ax.transData)
    for line in lines:
        if line.metric != metric.key:
            continue
        start = line.start if line.start is not None else x_start
        end = line.end if line.end is not None else x_end
        y = line.value * metric.scale
        ax.hlines(y, start, end, colors=line.colour, linestyles="--", linewidth=1.0, gid=f"threshold-{line.slug}")
        ax.text(start, y, " " + line.label.replace("{value}", f"{y:g}"), transform=transform, fontsize=5.5,
                color=line.colour, va="bottom", ha="left", clip_on=True, parse_math=False)


def plot_panel(panel: Panel, timeline: Timeline, arm: dict, salt: str,
               limits: Sequence[Threshold] = ()) -> str | None:
    """An inline <svg> of one panel, or None when every metric of it is null in every sample. `limits`: the spec's
    bounds (thresholds(arm)) drawn on the panels of their metrics."""
    series = [(m, timeline.values(m.key)) for m in panel.metrics]
    if not any(v is not None for _, values in series for v in values):
        return None
    span = timeline.span
    assert span is not None  # there is at least one sample
    ts = [float(s["t"]) for s in timeline.samples]
    fig = _figure()
    ax = fig.add_subplot()
    _style_axes(ax, panel.title)
    for index, (metric, values) in enumerate(series):
        ys = [v * metric.scale if v is not None else math.nan for v in values]
        colour = ("#0969da", "#1f883d")[index % 2]
        if metric.points:
            ax.plot(ts, ys, linestyle="none", marker="o", markersize=2.2, color=colour, label=metric.label,
                    gid=f"series-{metric.key}")
        else:
            ax.plot(ts, ys, linewidth=1.1, color=colour, label=metric.label, gid=f"series-{metric.key}")
    _format_axis(ax, panel.metrics[0])
    ax.set_xlim(span[0], max(span[1], span[0] + 1))
    for metric in panel.metrics:
        _draw_thresholds(ax, metric, limits, span[0], span[1])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("seconds since the arm started", fontsize=7)
    _decorate(ax, timeline, span[1], arm)
    if len(series) > 1:
        ax.legend(fontsize=6, loc="upper right", frameon=False, ncols=len(series), bbox_to_anchor=(1, 1.2))
    return _svg(fig, salt)


