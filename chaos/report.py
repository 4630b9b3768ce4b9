"""The reports of a run: index.html (a picture readable in a minute), junit.xml (for CI) and a trend page.

Everything is rebuilt from the run directory alone (docs/run-store.md): results.json for the verdicts, each arm's
history.jsonl for the timelines, spec.json for descriptions, logs/ for links. The HTML is one self-contained file:
plots are inline SVG rendered by matplotlib (no script, no network), so it opens from disk and from a CI artifact.
Every string that comes from a file is escaped; see docs/reports.md.
"""
from __future__ import annotations

import argparse
import html
import io
import json
import math
import os
import re
import statistics
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable, Iterable, Sequence
from urllib.parse import quote

from .history import HistoryError, read_history

VERDICT_COLOURS = {"PASSED": "#1a7f37", "FAILED": "#cf222e", "UNKNOWN": "#8250df", "HANG": "#bc4c00",
                   "NODATA": "#6e7781", "INTERRUPTED": "#9a6700"}


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
    Panel("state-bytes", "state size (bytes)", (Metric("state_bytes", "state", "B"),)),
    Panel("checkpoint", "checkpoint size (bytes)", (Metric("checkpoint_bytes", "checkpoint", "B"),)),
)
FAULT_COLOURS = ("#d62728", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")


class ReportError(Exception):
    """A directory that cannot be reported on (not a run, unreadable results)."""


# -- reading a run ---------------------------------------------------------------------------------------------
@dataclass
class FaultWindow:
    index: int
    name: str
    target: str
    params: dict
    start: float
    end: float | None      # None: never healed in the history
    injected: bool = True  # False: only "injecting" was recorded


@dataclass
class Timeline:
    """What the plots and the trend need from one arm's history."""
    samples: list[dict] = field(default_factory=list)
    faults: list[FaultWindow] = field(default_factory=list)
    phases: list[tuple[str, str, float]] = field(default_factory=list)  # (name, boundary, t)
    jobs: list[dict] = field(default_factory=list)
    logs: list[dict] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)
    problem: str | None = None  # why the history is missing or unreadable
    last_t: float | None = None  # the last record of any type

    @property
    def span(self) -> tuple[float, float] | None:
        """What the plots show: from the first sample, phase or fault (not the job start, before warm-up) to the
        last record (so a fault never healed is shaded up to where the history ends)."""
        ts = [s["t"] for s in self.samples] + [t for _, _, t in self.phases]
        ts += [f.start for f in self.faults] + [f.end for f in self.faults if f.end is not None]
        if not ts:
            return None
        return min(ts), max(ts + ([self.last_t] if self.last_t is not None else []))

    def last_heal(self) -> float | None:
        ends = [f.end for f in self.faults if f.end is not None]
        return max(ends) if ends else None

    def phase_window(self, name: str) -> tuple[float, float] | None:
        start = next((t for n, b, t in self.phases if n == name and b == "start"), None)
        if start is None:
            return None
        end = next((t for n, b, t in self.phases if n == name and b == "end" and t >= start), None)
        if end is None:
            end = max((s["t"] for s in self.samples), default=start)
        return start, end

    def values(self, key: str) -> list[float | None]:
        return [_number(s.get(key)) for s in self.samples]


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def load_timeline(path: Path) -> Timeline:
    timeline = Timeline()
    if not path.is_file():
        timeline.problem = f"no history recorded ({path.name} is missing)"
        return timeline
    try:
        records = read_history(path)
    except (HistoryError, OSError) as exc:
        timeline.problem = f"history unreadable: {exc}"
        return timeline
    open_windows: dict[tuple[str, str], FaultWindow] = {}
    for record in records:
        kind, t = record["type"], float(record["t"])  # type: ignore[arg-type]
        timeline.last_t = t
        if kind == "sample":
            timeline.samples.append(record)
        elif kind == "phase":
            timeline.phases.append((str(record.get("name")), str(record.get("boundary")), t))
        elif kind == "fault":
            key = (str(record.get("name")), str(record.get("target")))
            state = record.get("state")
            window = open_windows.get(key)
            if state in ("injecting", "injected"):
                if window is None:
                    window = FaultWindow(len(timeline.faults) + 1, key[0], key[1],
                                         dict(record.get("params") or {}), t, None, state == "injected")
                    open_windows[key] = window
                    timeline.faults.append(window)
                elif state == "injected" and not window.injected:
                    window.start, window.injected = t, True  # the window is injected -> healed
            elif state == "healed" and window is not None:
                window.end = t
                del open_windows[key]
        elif kind == "job":
            timeline.jobs.append(record)
        elif kind == "log":
            timeline.logs.append(record)
        elif kind == "error":
            timeline.errors.append(record)
    return timeline


@dataclass
class Arm:
    experiment: str
    data: dict                 # the arm object of results.json
    dir: Path
    timeline: Timeline

    @property
    def profile(self) -> str:
        return str(self.data.get("profile", "?"))

    @property
    def verdict(self) -> str:
        return _verdict(self.data.get("verdict"))

    @property
    def anchor(self) -> str:
        return _anchor(f"{self.experiment}--{self.profile}")


@dataclass
class Run:
    dir: Path
    meta: dict                 # run.json ({} if missing)
    results: dict
    experiments: list[dict]    # results["experiments"] with "spec" (spec.json or {}) added
    arms: dict[str, list[Arm]]

    @property
    def verdict(self) -> str:
        if "verdict" in self.results:
            return _verdict(self.results["verdict"])
        if "ok" in self.results:  # `chaos stack smoke` and `chaos bench` store {"ok": ...}
            return "PASSED" if self.results["ok"] else "FAILED"
        return "UNKNOWN"

    @property
    def status(self) -> str:
        return str(self.results.get("status") or self.meta.get("status") or "?")

    @property
    def started(self) -> str:
        return str(self.meta.get("started") or "")


def _verdict(value: object) -> str:
    return value if isinstance(value, str) and value in VERDICT_COLOURS else "UNKNOWN"


def _anchor(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in text)


def _read_json(path: Path, what: str) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportError(f"{path}: {what} is not readable JSON ({exc}); re-judge it with: chaos check RUN_DIR") from None
    if not isinstance(value, dict):
        raise ReportError(f"{path}: {what} is not a JSON object; re-judge it with: chaos check RUN_DIR")
    return value


def is_run_dir(path: Path) -> bool:
    return path.is_dir() and (path / "results.json").is_file()


def load_run(run_dir: Path, with_timelines: bool = True) -> Run:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ReportError(f"{run_dir} is not a directory; give a run directory such as reports/runs/latest")
    if not (run_dir / "results.json").is_file():
        hint = ("it has run.json but no results.json; judge it first: chaos check " + str(run_dir)
                if (run_dir / "run.json").is_file() else "give reports/runs/<run>")
        raise ReportError(f"{run_dir} is not a run directory (no results.json); {hint}")
    results = _read_json(run_dir / "results.json", "results.json")
    meta = _read_json(run_dir / "run.json", "run.json") if (run_dir / "run.json").is_file() else {}
    experiments, arms = [], {}
    for experiment in results.get("experiments") or []:
        if not isinstance(experiment, dict):
            continue
        name = str(experiment.get("name", "?"))
        spec_path = run_dir / name / "spec.json"
        spec: dict = {}
        if spec_path.is_file():
            try:
                spec = _read_json(spec_path, "spec.json")
            except ReportError:
                spec = {}
        experiments.append({**experiment, "spec": spec})
        arms[name] = []
        for arm in experiment.get("arms") or []:
            if not isinstance(arm, dict):
                continue
            arm_dir = run_dir / name / str(arm.get("profile", "?"))
            timeline = load_timeline(arm_dir / "history.jsonl") if with_timelines else Timeline()
            arms[name].append(Arm(name, arm, arm_dir, timeline))
    return Run(run_dir, meta, results, experiments, arms)


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
    """From the last heal to heal + recovery_s; a failed recovery check with no recovery_s runs to the end."""
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


def plot_panel(panel: Panel, timeline: Timeline, arm: dict, salt: str) -> str | None:
    """An inline <svg> of one panel, or None when every metric of it is null in every sample."""
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
    ax.set_ylim(bottom=0)
    ax.set_xlabel("seconds since the arm started", fontsize=7)
    _decorate(ax, timeline, span[1], arm)
    if len(series) > 1:
        ax.legend(fontsize=6, loc="upper right", frameon=False, ncols=len(series), bbox_to_anchor=(1, 1.2))
    return _svg(fig, salt)


# -- index.html ------------------------------------------------------------------------------------------------
CSS = """
*{box-sizing:border-box}
body{font:13px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1500px;
     padding:12px 18px;color:#1f2328;background:#fff}
h1{font-size:20px;margin:0}h2{font-size:16px;margin:22px 0 6px;border-bottom:1px solid #d0d7de}
h3{font-size:14px;margin:14px 0 4px}
a{color:#0969da}
.banner{padding:10px 14px;border-radius:6px;color:#fff;display:flex;gap:18px;align-items:baseline;flex-wrap:wrap}
.banner .meta{font-size:12px;opacity:.95}
.v{display:inline-block;padding:0 6px;border-radius:3px;color:#fff;font-weight:600;font-size:11px}
table{border-collapse:collapse;margin:6px 0;max-width:100%}
th,td{border:1px solid #d0d7de;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.check{overflow-wrap:anywhere}.check .exp{color:#57606a}
.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(420px,1fr));gap:6px}
.plot{border:1px solid #eaeef2;border-radius:4px;min-height:120px}
.plot svg{width:100%;height:auto;display:block}
.plot.nodata{display:flex;flex-direction:column;justify-content:center;align-items:center;color:#6e7781;
             background:#f6f8fa}
.plot.nodata .title{font-size:11px}
.small{font-size:12px;color:#57606a}
.err{color:#cf222e}
code,.log{font:11px/1.35 ui-monospace,SFMono-Regular,Menlo,monospace}
td.log{max-width:800px;white-space:pre-wrap;word-break:break-all}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px;vertical-align:middle}
.disc{margin:4px 0;overflow-wrap:anywhere}
.disc-not_discriminating{color:#cf222e;font-weight:700;background:#ffebe9;border-left:4px solid #cf222e;
                         padding:3px 8px}
.disc-inconclusive{color:#9a6700;font-weight:600;background:#fff8c5;border-left:4px solid #9a6700;padding:3px 8px}
.disc-waived,.disc-not_run{color:#57606a}
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _badge(verdict: str) -> str:
    return f'<span class="v v-{_e(verdict)}" style="background:{VERDICT_COLOURS.get(verdict, "#6e7781")}">' \
           f"{_e(verdict)}</span>"


def _seconds(value: object) -> str:
    number = _number(value)
    return "–" if number is None else f"{number:.1f} s"


def _count(value: object) -> str:
    number = _number(value)
    return "–" if number is None else str(int(number))


def _link(run_dir: Path, relative: object, text: object | None = None) -> str:
    """A relative link to a file of the run; plain text when the path leaves the run directory."""
    path = str(relative or "")
    label = _e(text if text is not None else path)
    if not path or os.path.isabs(path) or ".." in Path(path).parts:
        return label
    return f'<a href="{_e(quote(path))}">{label}</a>'


def _checks_cell(arm: dict) -> str:
    parts = []
    for check in arm.get("checks") or []:
        if not isinstance(check, dict):
            continue
        verdict = _verdict(check.get("verdict"))
        parts.append(f'<div class="check" title="{_e(check.get("message"))}">{_badge(verdict)} '
                     f'{_e(check.get("name"))}: <span class="exp">expected</span> {_e(check.get("expected"))} '
                     f'<span class="exp">measured</span> {_e(check.get("measured"))}</div>')
    return "".join(parts) or '<span class="small">no checks</span>'


def _survived_note(arm: dict) -> str | None:
    """The checkers' `control` check of a control expected to survive says "control survived too: <note>"."""
    for check in arm.get("checks") or []:
        message = str(check.get("message") or "")
        if check.get("name") == "control" and message.startswith("control survived too"):
            return message
    return None


def _did_not_survive(arm: dict) -> str | None:
    """The failed `control` check of a control that was expected to survive (expected "survives"): its message."""
    for check in arm.get("checks") or []:
        if isinstance(check, dict) and check.get("name") == "control" and check.get("expected") == "survives" \
                and check.get("verdict") == "FAILED":
            return str(check.get("message") or "the control was expected to survive but failed")
    return None


def _signature_cell(arm: dict) -> str:
    signature = arm.get("signature")
    if arm.get("role") == "control":
        if signature:
            return f"control reproduced: <code>{_e(signature)}</code>"
        survived = _survived_note(arm)
        if survived and arm.get("verdict") == "PASSED":
            return f'<span class="small">{_e(survived)}</span>'
        failed = _did_not_survive(arm)
        if failed:  # not an incident to reproduce: the control was expected to survive, and did not
            return f'<span class="err" title="{_e(failed)}">control did not survive (it was expected to)</span>'
        return '<span class="err">control did not reproduce the incident</span>'
    return f"<code>{_e(signature)}</code>" if signature else ""


def _summary_table(run: Run) -> str:
    rows = []
    for experiment in run.experiments:
        name = str(experiment.get("name", "?"))
        for arm in run.arms.get(name, []):
            data = arm.data
            role = f' <span class="small">({_e(data.get("role"))})</span>' if data.get("role") else ""
            rows.append(
                f'<tr><td><a href="#{_e(_anchor(name))}">{_e(name)}</a></td>'
                f'<td><a href="#{_e(arm.anchor)}">{_e(arm.profile)}</a>{role}</td>'
                f"<td>{_badge(arm.verdict)}</td><td>{_checks_cell(data)}</td>"
                f'<td class="num">{_seconds(data.get("recovery_s"))}</td>'
                f'<td class="num">{_count(data.get("lost"))}</td><td class="num">{_count(data.get("duplicated"))}</td>'
                f"<td>{_signature_cell(data)}</td></tr>")
    if not rows:
        return '<p class="small">This run has no experiments (a smoke or bench run); see results.json.</p>'
    return ('<table class="summary"><thead><tr><th>experiment</th><th>arm</th><th>verdict</th>'
            "<th>checks (expected vs measured)</th><th>recovery</th><th>lost</th><th>duplicated</th>"
            f"<th>signature</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")


# -- discrimination: the control judged by the hardened targets (chaos/checkers.py `discriminate`) ---------------
DISCRIMINATION_COLOURS = {"discriminating": "#1a7f37", "not_discriminating": "#cf222e", "inconclusive": "#9a6700",
                          "waived": "#6e7781", "not_run": "#6e7781"}
NOT_DISCRIMINATING_LINE = "NOT DISCRIMINATING: a job without the hardening passes every hardened target"


def _discrimination(experiment: dict) -> dict | None:
    value = experiment.get("discrimination")
    return value if isinstance(value, dict) and value.get("status") in DISCRIMINATION_COLOURS else None


def discrimination_line(discrimination: dict) -> str:
    """The one line an experiment shows (plain text): what a job without the hardening did against its targets."""
    status = discrimination.get("status")
    if status == "not_discriminating":
        return NOT_DISCRIMINATING_LINE + (" (required by this suite: the experiment fails)"
                                          if discrimination.get("verdict") == "FAILED"
                                          else " (reported only: this suite does not require discrimination)")
    if status == "inconclusive":
        return "INCONCLUSIVE: " + str(discrimination.get("message") or "").removeprefix("inconclusive: ")
    return str(discrimination.get("message") or status)


def _discrimination_badge(status: str) -> str:
    return (f'<span class="v" style="background:{DISCRIMINATION_COLOURS.get(status, "#6e7781")}">'
            f"{_e(status.replace('_', ' '))}</span>")


def _discrimination_block(experiment: dict) -> str:
    discrimination = _discrimination(experiment)
    if discrimination is None:
        return ""
    status = str(discrimination["status"])
    checks = [c for c in discrimination.get("checks") or [] if isinstance(c, dict)]
    verdicts = " · ".join(f'<span title="{_e(c.get("message"))}">{_badge(_verdict(c.get("verdict")))} '
                          f'{_e(c.get("name"))}</span>' for c in checks)
    return (f'<p class="disc disc-{_e(status)}" data-status="{_e(status)}">{_e(discrimination_line(discrimination))}'
            "</p>" + (f'<p class="small">the hardened targets on the {_e(discrimination.get("control"))} '
                      f"control's data: {verdicts}</p>" if verdicts else ""))


def _discrimination_table(run: Run) -> str:
    rows = []
    for experiment in run.experiments:
        discrimination = _discrimination(experiment)
        if discrimination is None:
            continue
        name = str(experiment.get("name", "?"))
        status = str(discrimination["status"])
        rows.append(f'<tr><td><a href="#{_e(_anchor(name))}">{_e(name)}</a></td>'
                    f"<td>{_discrimination_badge(status)}</td>"
                    f'<td class="disc disc-{_e(status)}">{_e(discrimination_line(discrimination))}</td></tr>')
    if not rows:
        return ""
    return ('<h2>discrimination</h2><p class="small">Each control\'s history judged by its experiment\'s hardened '
            "targets: a job without the hardening must fail at least one.</p>"
            '<table class="discrimination"><thead><tr><th>experiment</th><th>status</th>'
            f"<th>a job without the hardening</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")


def _fault_table(timeline: Timeline) -> str:
    if not timeline.faults:
        return '<p class="small">No fault was injected in this arm.</p>'
    rows = []
    for window in timeline.faults:
        params = ", ".join(f"{k}={v}" for k, v in window.params.items())
        end = f"{window.end:.1f} s" if window.end is not None else '<span class="err">not healed</span>'
        length = f"{window.end - window.start:.1f} s" if window.end is not None else "–"
        rows.append(f'<tr><td><span class="swatch" style="background:{_fault_colour(window)}"></span>'
                    f"F{window.index}</td><td><code>{_e(window.name)}</code></td><td>{_e(window.target)}</td>"
                    f"<td><code>{_e(params)}</code></td><td class=\"num\">{window.start:.1f} s</td>"
                    f'<td class="num">{end}</td><td class="num">{length}</td></tr>')
    return ('<table class="faults"><thead><tr><th></th><th>fault</th><th>target</th><th>params</th>'
            "<th>injected</th><th>healed</th><th>length</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


def _log_table(run_dir: Path, timeline: Timeline) -> str:
    if not timeline.logs:
        return '<p class="small">No log signature matched.</p>'
    rows = []
    for record in timeline.logs:
        source = record.get("source")
        rows.append(f"<tr><td class=\"num\">{float(record['t']):.1f} s</td><td><code>{_e(record.get('signature'))}"
                    f"</code></td><td>{_link(run_dir, source)}:{_e(record.get('line'))}</td>"
                    f"<td class=\"log\">{_e(record.get('text'))}</td></tr>")
    return ('<table class="logs"><thead><tr><th>t</th><th>signature</th><th>where</th><th>line</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")


def _arm_section(run: Run, arm: Arm) -> str:
    timeline, data = arm.timeline, arm.data
    parts = [f'<div class="arm" id="{_e(arm.anchor)}"><h3>{_e(arm.experiment)} / {_e(arm.profile)} '
             f'{_badge(arm.verdict)} <span class="small">{_e(data.get("role") or "")}</span></h3>']
    facts = [f"recovery {_seconds(data.get('recovery_s'))}", f"lost {_count(data.get('lost'))}",
             f"duplicated {_count(data.get('duplicated'))}"]
    signature = _signature_cell(data)
    parts.append(f'<p class="small">{" · ".join(facts)}{" · " + signature if signature else ""}</p>')
    for error in timeline.errors:
        parts.append(f'<p class="err">environment error at {float(error["t"]):.1f} s: {_e(error.get("message"))}</p>')
    if timeline.problem:
        parts.append(f'<p class="err">{_e(timeline.problem)}</p>')
    parts.append(_fault_table(timeline))
    if timeline.samples:
        plots = []
        for panel in PANELS:
            svg = plot_panel(panel, timeline, data, salt=f"{arm.anchor}-{panel.slug}")
            if svg is None:
                plots.append(f'<div class="plot nodata" data-panel="{panel.slug}"><div class="title">'
                             f"{_e(panel.title)}</div><div>no data</div></div>")
            else:
                plots.append(f'<div class="plot" data-panel="{panel.slug}">{svg}</div>')
        parts.append(f'<div class="plots">{"".join(plots)}</div>')
    elif not timeline.problem:
        parts.append('<p class="small">no samples recorded: no data to plot</p>')
    parts.append("<h4>log signatures</h4>" + _log_table(run.dir, timeline))
    links = []
    for job in timeline.jobs:
        extra = f" code {job.get('code')}" if "code" in job else ""
        extra += f" ({job.get('cause')})" if job.get("cause") else ""
        log = f" — {_link(run.dir, job['log'])}" if job.get("log") else ""
        links.append(f"<li>{float(job['t']):.1f} s: {_e(job.get('process'))} {_e(job.get('event'))}"
                     f"{_e(extra)}{log}</li>")
    if links:
        parts.append(f'<h4>job events</h4><ul class="small">{"".join(links)}</ul>')
    files = [name for name in ("history.jsonl", "result.json", "oracle.json", "lineage.json", "sessions.jsonl")
             if (arm.dir / name).is_file()]
    if files:
        rel = arm.dir.relative_to(run.dir).as_posix()
        parts.append('<p class="small">files: ' + " · ".join(_link(run.dir, f"{rel}/{n}", n) for n in files)
                     + "</p>")
    parts.append("</div>")
    return "".join(parts)


def _experiment_section(run: Run, experiment: dict) -> str:
    name = str(experiment.get("name", "?"))
    spec = experiment.get("spec") or {}
    incident = experiment.get("incident") or spec.get("incident") or {}
    parts = [f'<section id="{_e(_anchor(name))}"><h2>{_e(name)} {_badge(_verdict(experiment.get("verdict")))}</h2>']
    if spec.get("description"):
        parts.append(f'<p>{_e(spec["description"])}</p>')
    if isinstance(incident, dict) and incident:
        parts.append(f'<p class="small">incident <code>{_e(incident.get("file"))}</code>: '
                     f'{_e(incident.get("error"))}</p>')
    parts.append(_discrimination_block(experiment))
    for arm in run.arms.get(name, []):
        parts.append(_arm_section(run, arm))
    parts.append("</section>")
    return "".join(parts)


def _duration(meta: dict) -> str:
    try:
        seconds = (datetime.fromisoformat(meta["ended"]) - datetime.fromisoformat(meta["started"])).total_seconds()
    except (KeyError, TypeError, ValueError):
        return ""
    return f"{int(seconds // 60)} min {int(seconds % 60)} s"


def _page(title: str, body: str) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            '<link rel="icon" href="data:,">'  # no favicon request: the page makes no request at all
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body>{body}</body></html>\n")


def render_report(run: Run) -> str:
    verdict = run.verdict
    meta = run.meta
    facts = [f"suite {meta.get('suite', '?')}", f"backend {meta.get('backend', '?')}",
             f"scale {meta.get('scale', '?')}", f"status {run.status}"]
    if run.started:
        facts.append(f"started {run.started}")
    if _duration(meta):
        facts.append(_duration(meta))
    body = [f'<div class="banner" style="background:{VERDICT_COLOURS[verdict]}"><h1>{_e(verdict)}</h1>'
            f'<span>{_e(run.dir.name)}</span><span class="meta">{_e(" · ".join(facts))}</span></div>',
            *_mutation_section(run.results.get("mutation")),
            "<h2>verdicts</h2>", _summary_table(run), _discrimination_table(run)]
    if run.results.get("error"):
        body.append(f'<p class="err">{_e(run.results["error"])}</p>')
    body += [_experiment_section(run, experiment) for experiment in run.experiments]
    logs = sorted((run.dir / "logs").glob("*.log")) if (run.dir / "logs").is_dir() else []
    if logs:
        items = "".join(f"<li>{_link(run.dir, f'logs/{p.name}', p.name)} "
                        f'<span class="small">{p.stat().st_size:,} B</span></li>' for p in logs)
        body.append(f'<h2>logs</h2><ul class="small">{items}</ul>')
    body.append('<p class="small">Built by <code>chaos report</code> from the files of this run directory '
                "(docs/reports.md). Times are seconds since each arm started.</p>")
    return _page(f"{verdict} · {run.dir.name}", "".join(body))


MUTANT_COLOURS = {"killed": "#2e7d32", "survived": "#c62828", "unknown": "#9e9e9e", "explained": "#ef6c00"}


def _mutation_section(mutation: dict | None) -> list[str]:
    """A mutate run (chaos/mutate.py): the kill rate, then the switch x experiment matrix."""
    if not isinstance(mutation, dict):
        return []
    from .mutate import headline

    cells = [c for c in mutation.get("cells") or [] if isinstance(c, dict)]
    experiments = sorted({str(c.get("experiment")) for c in cells})
    rows = []
    for switch, entry in sorted((mutation.get("switches") or {}).items()):
        row = [f"<td><b>{_e(switch)}</b></td>",
               f'<td style="color:{MUTANT_COLOURS.get(entry.get("status"), "#000")}"><b>'
               f'{_e(entry.get("status"))}</b></td>']
        for experiment in experiments:
            cell = next((c for c in cells if c.get("switch") == switch and c.get("experiment") == experiment), None)
            row.append("<td></td>" if cell is None else
                       f'<td title="{_e(cell.get("why"))}" style="color:{MUTANT_COLOURS.get(cell.get("status"))}">'
                       f'{_e(cell.get("status"))}</td>')
        rows.append(f"<tr>{''.join(row)}</tr>")
    head = "".join(f"<th>{_e(e)}</th>" for e in experiments)
    return [f"<h2>mutation</h2><p><b>{_e(headline(mutation))}</b></p>",
            f'<table><tr><th>switch off</th><th>mutant</th>{head}</tr>{"".join(rows)}</table>',
            '<p class="small">killed: the hardened arm failed an outcome check with the switch off; survived: it '
            "passed (or failed on log lines only); hover a cell for why.</p>"]


def _write_atomic(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)


def write_report(run_dir: Path) -> Path:
    run = load_run(Path(run_dir))
    out = run.dir / "index.html"
    _write_atomic(out, render_report(run))
    return out


# -- junit.xml -------------------------------------------------------------------------------------------------
# FAILED is a failure of the job under test; UNKNOWN (environment), HANG (no progress, so nothing could be judged)
# and NODATA (nothing measured) are errors: the test did not produce a judgement, and must not look green;
# INTERRUPTED is skipped: the run was cut short before the arm could finish.
JUNIT_ERRORS = {"UNKNOWN": "the environment failed (not a job failure)", "HANG": "the job made no progress at all",
                "NODATA": "nothing was measured"}


def _failed_checks(arm: dict, verdicts: Iterable[str]) -> str:
    wanted = set(verdicts)
    lines = [f"{c.get('name')}: expected {c.get('expected')}, measured {c.get('measured')}"
             for c in arm.get("checks") or [] if isinstance(c, dict) and c.get("verdict") in wanted]
    return "; ".join(lines)


def _arm_seconds(timeline: Timeline) -> float:
    span = timeline.span
    return round(span[1] - span[0], 3) if span else 0.0


def _junit_discrimination(suite: ET.Element, name: str, discrimination: dict) -> str | None:
    """The `<experiment>/discrimination` case: a failure when the suite requires discrimination and a job without
    the hardening passes every hardened target; skipped (with why) when not judged, inconclusive, waived or not
    required; passed when the control failed a hardened target. Returns the counter it adds to, if any."""
    case = ET.SubElement(suite, "testcase", classname=name, name=f"{name}/discrimination", time="0.000")
    status = str(discrimination.get("status"))
    failed = [c for c in discrimination.get("failed") or [] if isinstance(c, dict)]
    properties = ET.SubElement(case, "properties")
    for key, value in (("status", status), ("required", str(bool(discrimination.get("required"))).lower()),
                       ("measured", discrimination.get("measured")), ("control", discrimination.get("control")),
                       ("failed_on", ", ".join(str(c.get("name")) for c in failed)),
                       ("waiver", discrimination.get("waiver"))):
        if value not in (None, ""):
            ET.SubElement(properties, "property", name=key, value=str(value))
    line = discrimination_line(discrimination)
    outcome = None
    if status == "not_discriminating" and discrimination.get("verdict") == "FAILED":
        ET.SubElement(case, "failure", message=str(discrimination.get("message") or line),
                      type="NOT_DISCRIMINATING").text = line
        outcome = "failures"
    elif status != "discriminating":
        ET.SubElement(case, "skipped", message=line)
        outcome = "skipped"
    out = [line] + [f"{c.get('verdict')} {c.get('name')}: expected {c.get('expected')}, measured "
                    f"{c.get('measured')}. {c.get('message') or ''}".rstrip()
                    for c in discrimination.get("checks") or [] if isinstance(c, dict)]
    out.append(f"report: index.html#{_anchor(name)}")
    ET.SubElement(case, "system-out").text = "\n".join(out)
    return outcome


def _junit_mutation(suite: ET.Element, mutation: dict, counts: dict[str, int]) -> None:
    from .mutate import headline

    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", name="kill_rate", value=str(mutation.get("kill_rate")))
    ET.SubElement(properties, "property", name="mutation", value=headline(mutation))
    for cell in mutation.get("cells") or []:
        case = ET.SubElement(suite, "testcase", classname=f"mutate.{cell.get('switch')}",
                             name=str(cell.get("experiment")), time="0.000")
        counts["tests"] += 1
        why = str(cell.get("why"))
        if cell.get("status") == "survived":
            counts["failures"] += 1
            ET.SubElement(case, "failure", type="SURVIVED",
                          message=f"{cell.get('experiment')} passes with {cell.get('switch')} off: {why}")
        elif cell.get("status") != "killed":
            counts["errors"] += 1
            ET.SubElement(case, "error", type="UNKNOWN", message=why)
        ET.SubElement(case, "system-out").text = f"{cell.get('status')}: {why}"


def write_junit(run_dir: Path) -> Path:
    run = load_run(Path(run_dir))
    suite_name = str(run.meta.get("suite") or run.dir.name)
    suites = ET.Element("testsuites", name=suite_name)
    suite = ET.SubElement(suites, "testsuite", name=suite_name, timestamp=run.started)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total = 0.0
    mutation = run.results.get("mutation")
    if isinstance(mutation, dict):  # a mutate run: a case per mutant, green when the mutant is killed
        _junit_mutation(suite, mutation, counts)
    for experiment in run.experiments if not isinstance(mutation, dict) else []:
        for arm in run.arms.get(str(experiment.get("name", "?")), []):
            seconds = _arm_seconds(arm.timeline)
            total += seconds
            case = ET.SubElement(suite, "testcase", classname=arm.experiment, name=arm.profile, time=f"{seconds:.3f}")
            counts["tests"] += 1
            verdict, data = arm.verdict, arm.data
            details = "\n".join(f"{c.get('verdict')} {c.get('name')}: expected {c.get('expected')}, measured "
                                f"{c.get('measured')}. {c.get('message') or ''}".rstrip()
                                for c in data.get("checks") or [] if isinstance(c, dict))
            if verdict == "FAILED":
                counts["failures"] += 1
                message = _failed_checks(data, ["FAILED"]) or "FAILED"
                ET.SubElement(case, "failure", message=message, type="FAILED").text = details
            elif verdict in JUNIT_ERRORS:
                counts["errors"] += 1
                message = _failed_checks(data, ["FAILED", "UNKNOWN", "HANG", "NODATA"])
                errors = "; ".join(str(e.get("message")) for e in arm.timeline.errors)
                message = f"{verdict}: {JUNIT_ERRORS[verdict]}" + (f" ({message})" if message else "") + \
                          (f"; {errors}" if errors else "")
                ET.SubElement(case, "error", message=message, type=verdict).text = details
            elif verdict == "INTERRUPTED":
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message="INTERRUPTED: the run was cut short")
            out = [f"verdict {verdict}", f"recovery {_seconds(data.get('recovery_s'))}",
                   f"lost {_count(data.get('lost'))}", f"duplicated {_count(data.get('duplicated'))}"]
            if data.get("signature"):
                out.append(("control reproduced: " if data.get("role") == "control" else "signature: ")
                           + str(data["signature"]))
            elif data.get("role") == "control" and _survived_note(data):
                out.append(str(_survived_note(data)))
            elif data.get("role") == "control" and _did_not_survive(data):
                out.append(str(_did_not_survive(data)))
            out.append(f"report: index.html#{arm.anchor}")
            ET.SubElement(case, "system-out").text = "\n".join(out)
        discrimination = _discrimination(experiment)
        if discrimination is not None:
            outcome = _junit_discrimination(suite, str(experiment.get("name", "?")), discrimination)
            counts["tests"] += 1
            if outcome:
                counts[outcome] += 1
    for element in (suites, suite):
        for key, value in counts.items():
            element.set(key, str(value))
        element.set("time", f"{total:.3f}")
    ET.indent(suites)
    out = run.dir / "junit.xml"
    _write_atomic(out, ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n")
    return out


# -- trends ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrendMetric:
    key: str
    title: str
    unit: str
    higher_is_better: bool


TREND_METRICS = (
    TrendMetric("recovery_s", "recovery time", "s", False),
    TrendMetric("throughput", "throughput (median processed rate, steady phase)", "events/s", True),
    TrendMetric("max_state_rows", "max state rows", "rows", False),
)
NOT_RECOVERED = math.inf  # a failed recovery check with no recovery time: worse than any time


def arm_figures(arm: Arm) -> dict[str, float | None]:
    """The trend figures of one arm: recovery_s, throughput (median processed rate over steady samples),
    max_state_rows. None when not measured."""
    recovery = _number(arm.data.get("recovery_s"))
    if recovery is None and any(isinstance(c, dict) and c.get("name") == "recovery" and c.get("verdict") == "FAILED"
                                for c in arm.data.get("checks") or []):
        recovery = NOT_RECOVERED
    timeline = arm.timeline
    steady = timeline.phase_window("steady")
    rates = [_number(s.get("processed_rate")) for s in timeline.samples
             if steady is not None and steady[0] <= float(s["t"]) <= steady[1]]
    rates = [r for r in rates if r is not None]
    rows = [v for v in timeline.values("state_rows") if v is not None]
    return {"recovery_s": recovery, "throughput": statistics.median(rates) if rates else None,
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


# -- command line ----------------------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse's default prints the usage too)
        raise _UsageError(f"chaos report: {message}; see: chaos report --help")


class _UsageError(Exception):
    pass


def _margin(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--margin {text!r} is not a number") from None
    if not 0 <= value < 10:
        raise argparse.ArgumentTypeError(f"--margin {text!r} must be a fraction such as 0.2 (20 %)")
    return value


def main_report(argv: Sequence[str] | None = None, say: Callable[[str], None] = print) -> int:
    """`chaos report RUN_DIR` or `chaos report --trend RUNS_DIR [--out FILE] [--margin 0.2]`. Exit 0 or 2."""
    parser = _Parser(prog="chaos report", description="Write index.html and junit.xml of a run, or a trend page.")
    parser.add_argument("run_dir", nargs="?", type=Path, help="a run directory (reports/runs/<run>)")
    parser.add_argument("--trend", type=Path, metavar="RUNS_DIR", help="write a trend page over these runs")
    parser.add_argument("--out", type=Path, help="trend page path (default RUNS_DIR/trend.html)")
    parser.add_argument("--margin", type=_margin, default=0.2,
                        help="regression margin: worse than the previous runs' median by more than this (0.2)")
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
        if (args.run_dir is None) == (args.trend is None):
            parser.error("give a RUN_DIR or --trend RUNS_DIR (one of them)")
        if args.run_dir is not None and args.out is not None:
            parser.error("--out is for --trend; a run's report is always RUN_DIR/index.html")
        if args.trend is not None:
            out = write_trend(args.trend, args.out, args.margin)
            say(f"trend: {out}")
        else:
            page = write_report(args.run_dir)
            junit = write_junit(args.run_dir)
            say(f"report: {page}")
            say(f"junit: {junit}")
    except _UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    except ReportError as exc:
        print(f"chaos report: {exc}", file=sys.stderr)
        return 2
    return 0
