"""`chaos bench recovery-size RUN_DIR...`: recovery against the state the job held, from stored runs (issue 37 item 5).

Pure over the runs' files. Every disruption of every arm (a driver killed and restarted, a snapshot damaged and the
job restarted on it, a broker lost and restarted, ...) becomes one point: the RocksDB SST bytes the job's last
completed batch reported before it (the state a restart must load), the seconds to the first batch that started after
it, and to recovery as the recovery check measures it (chaos/checks/recovery.py, each disruption alone). Both arms are
measured by the same definition: the arm's own recovery target, or, for a control with none, its subject's (the
definition the discrimination check judges controls by). Beside each point, the floor: that state's bytes over the S3
read throughput the arm measured on the job's own path (a `measure` record, chaos/restore_floor.py) -- no restart
that loads the state from S3 can be faster.

Written as a Markdown table and an SVG plot (state on the x axis, seconds on the y axis, both logarithmic): what
docs/experiments.md "Recovery against state size" shows, and what a run's report shows for its own arms.
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..checks.recovery import measure_recoveries
from ..checks.timeline import Timeline, metric, time_of, timeline
from ..errors import SpecError
from ..history import HistoryError, read_history
from ..restore_floor import floor_s
from ..spec.model import ExperimentSpec, Recovery
from ..state_held import size
from ..store import SPEC_FILE

SUBJECT = "hardened"
# A job slower than its input before the fault (the naive job's list state at scale) never meets a bound on lag
# after it either: the lag of this window before the disruption is what "back to where it was" compares with.
LAG_BEFORE_S = 60.0


@dataclass(frozen=True)
class Point:
    run: str            # the run directory's name
    experiment: str
    profile: str
    fault: str          # what hit the job: driver crash, damaged snapshot, broker loss, ...
    at_s: float         # the disruption, seconds into the arm
    state_bytes: int | None  # RocksDB SST of the last completed batch before it
    first_batch_s: float | None
    recovered_s: float | None  # None: not recovered within watched_s
    watched_s: float    # how long the arm was watched after it (to the next hit, or the recover phase's end)
    lag_before: float | None  # the largest lag (records) in the LAG_BEFORE_S before it
    lag_below: float    # the target's bound on lag (records): what recovered_s waits for
    back_s: float | None  # to the same healthy run with the lag back under 1.1 x lag_before (if above lag_below)
    floor_s: float | None
    read_bytes_per_s: int | None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def fault_of(record: Mapping[str, object]) -> str:
    """What a disruption was, in the table's words."""
    if record.get("type") == "job":
        event, process = record.get("event"), record.get("process")
        if process == "job-driver":
            return "damaged snapshot" if record.get("corrupted") else "driver crash"
        if event == "restarted":
            return {"broker": "broker loss", "minio": "S3 server loss"}.get(str(process), f"{process} restarted")
        if event == "leaders_moved":
            return "leaders moved"
        return "executor loss"
    return f"{record.get('name')} healed"


def state_before(tl: Timeline, t: float) -> int | None:
    """The SST bytes of the last sample at or before `t` that measured them."""
    value = None
    for sample in tl.samples:
        if time_of(sample) > t:
            break
        sst = sample.get("state_sst_bytes")
        if isinstance(sst, (int, float)) and not isinstance(sst, bool):
            value = int(sst)
    return value


def lag_before(tl: Timeline, t: float) -> float | None:
    lags = [lag for s in tl.samples if t - LAG_BEFORE_S <= time_of(s) < t and (lag := metric(s, "lag")) is not None]
    return max(lags) if lags else None


def read_rate(tl: Timeline) -> int | None:
    rates = [m.get("bytes_per_s") for m in tl.measures if m.get("name") == "s3_read"]
    rate = rates[-1] if rates else None
    return int(rate) if isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0 else None


def target_for(spec: ExperimentSpec, profile: str) -> Recovery | None:
    """The arm's own recovery target, else its subject's; None when neither has one."""
    for name in (profile, SUBJECT):
        arm = next((a for a in spec.arms if a.profile == name), None)
        if arm is not None and arm.targets.recovery is not None:
            return arm.targets.recovery
    return None


def arm_points(run: str, experiment: str, profile: str, tl: Timeline, target: Recovery) -> list[Point]:
    rate = read_rate(tl)
    recover = tl.window("recover")
    alone = dataclasses.replace(target, grouped=False)
    points = []
    for result in measure_recoveries(tl, alone):
        if result.heal is None:
            continue
        at = time_of(result.heal)
        until = result.cut_at if result.cut_at is not None else (recover[1] if recover is not None else tl.end)
        state, before = state_before(tl, at), lag_before(tl, at)
        back = result.seconds
        if before is not None and before * 1.1 > target.lag_below:
            own = dataclasses.replace(alone, lag_below=before * 1.1, lag_below_s=None)
            back = next((r.seconds for r in measure_recoveries(tl, own) if r.heal is not None
                         and time_of(r.heal) == at), None)
        points.append(Point(run, experiment, profile, fault_of(result.heal), round(at, 1), state,
                            result.first_batch_s, result.seconds, round(max(until - at, 0.0), 1), before,
                            target.lag_below, back, floor_s(state, rate), rate))
    return points


def run_points(run_dir: Path) -> list[Point]:
    """Every disruption of every arm in a run directory whose spec gives it a recovery definition."""
    points: list[Point] = []
    for spec_path in sorted(Path(run_dir).glob(f"*/{SPEC_FILE}")):
        try:
            spec = ExperimentSpec.from_dict(json.loads(spec_path.read_text()), str(spec_path))
        except (OSError, ValueError, SpecError):  # not a spec this version reads: no points, never a crash
            continue
        for arm in spec.arms:
            history = spec_path.parent / arm.profile / "history.jsonl"
            target = target_for(spec, arm.profile)
            if target is None or not history.is_file():
                continue
            try:
                tl = timeline(read_history(history))
            except (HistoryError, OSError):
                continue
            points += arm_points(Path(run_dir).name, spec_path.parent.name, arm.profile, tl, target)
    return points


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def recovered_text(point: Point) -> str:
    return _s(point.recovered_s) if point.recovered_s is not None else f"not in {point.watched_s:.0f} s"


def lag_text(point: Point) -> str:
    """The lag before the disruption, and whether it was already over the bound recovery waits for."""
    if point.lag_before is None:
        return "-"
    return f"{point.lag_before:,.0f}" + (" (over the bound)" if point.lag_before >= point.lag_below else "")


def back_text(point: Point) -> str:
    """Back to the lag it had before: the same as recovered when that lag was under the bound."""
    if point.back_s is None:
        return f"not in {point.watched_s:.0f} s"
    return "(as recovered)" if point.back_s == point.recovered_s else _s(point.back_s)


def markdown(points: Sequence[Point]) -> str:
    """One row per disruption: by fault, then state, then arm."""
    rows = ["| fault | state (SST) | arm | first new batch | recovered | lag before | back to it | floor | S3 read "
            "| experiment, run |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for p in sorted(points, key=lambda p: (p.fault, p.state_bytes or 0, p.profile)):
        rate = f"{p.read_bytes_per_s / 2**20:.0f} MiB/s" if p.read_bytes_per_s else "-"
        rows.append(f"| {p.fault} | {size(p.state_bytes)} | {p.profile} | {_s(p.first_batch_s)} | "
                    f"{recovered_text(p)} | {lag_text(p)} | {back_text(p)} | {_s(p.floor_s)} | {rate} | "
                    f"{p.experiment}, {p.run} |")
    return "\n".join(rows) + "\n"


X_TICKS_MIB = (1, 4, 16, 64, 256, 1024, 4096, 16384)
Y_TICKS_S = (0.1, 0.3, 1, 3, 10, 30, 100, 300, 1000, 3000)


def _plain_ticks():
    """Tick labels as plain numbers (16, 256, 1024), not matplotlib's log-axis powers."""
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _pos: f"{value:g}")


MARKERS = {"driver crash": "o", "damaged snapshot": "s", "broker loss": "^"}
COLOURS = {"hardened": "#1f77b4", "naive": "#ff7f0e"}


def plot_svg(points: Sequence[Point], salt: str = "recovery-size") -> str | None:
    """Seconds against state bytes, one marker per disruption (filled: recovered under the bound; hollow: back to
    the lag it had before, which was over the bound already; hollow with an arrow: neither, drawn at how long it was
    watched), the floor as a grey dash beside each; None when no point has a state."""
    from ..report.plots import _figure, _style_axes, _svg

    shown = [p for p in points if p.state_bytes]
    if not shown:
        return None
    fig = _figure(6.4, 3.6)
    fig.subplots_adjust(left=0.1, right=0.72, top=0.88, bottom=0.14)
    ax = fig.add_subplot(1, 1, 1)
    _style_axes(ax, "recovery against state size (seconds from the disruption)")
    labelled: set[tuple[str, str]] = set()
    for p in shown:
        x = (p.state_bytes or 0) / 2**20
        colour, marker = COLOURS.get(p.profile, "#555555"), MARKERS.get(p.fault, "D")
        label = f"{p.profile}: {p.fault}" if (p.profile, p.fault) not in labelled else None
        labelled.add((p.profile, p.fault))
        if p.recovered_s is not None:
            ax.scatter([x], [max(p.recovered_s, 0.1)], c=colour, marker=marker, s=30, label=label, zorder=3)
        elif p.back_s is not None:  # over the bound before the fault too: back to where it was
            ax.scatter([x], [max(p.back_s, 0.1)], facecolors="none", edgecolors=colour, marker=marker, s=30,
                       label=label, zorder=3)
        else:
            ax.scatter([x], [max(p.watched_s, 0.1)], facecolors="none", edgecolors=colour, marker=marker, s=30,
                       label=label, zorder=3)
            ax.annotate("", xy=(x, p.watched_s * 1.6), xytext=(x, p.watched_s),
                        arrowprops={"arrowstyle": "->", "color": colour, "lw": 0.8})
        if p.floor_s is not None:
            ax.scatter([x], [max(p.floor_s, 0.1)], c="#777777", marker="_", s=60,
                       label="floor (state / S3 read)" if ("floor", "") not in labelled else None, zorder=2)
            labelled.add(("floor", ""))
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    xs = [(p.state_bytes or 0) / 2**20 for p in shown]
    ys = [v for p in shown for v in (p.recovered_s, p.back_s, p.floor_s,
                                     p.watched_s * 1.8 if p.recovered_s is None and p.back_s is None else None) if v]
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(min(8.0, min(xs) / 1.5), max(2048.0, max(xs) * 1.5))
    ax.set_ylim(min(1.0, min(ys) / 1.5), max(300.0, max(ys) * 1.3))
    for axis, ticks in ((ax.xaxis, X_TICKS_MIB), (ax.yaxis, Y_TICKS_S)):
        axis.set_major_locator(FixedLocator(ticks))
        axis.set_major_formatter(_plain_ticks())
        axis.set_minor_locator(NullLocator())
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("state: RocksDB SST (MiB)", fontsize=7.5)
    ax.set_ylabel("seconds", fontsize=7.5)
    ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return _svg(fig, salt)


def main(run_dirs: Sequence[Path], markdown_out: Path | None, svg_out: Path | None, as_json: bool) -> list[Point]:
    points = [p for run_dir in run_dirs for p in run_points(run_dir)]
    if as_json:
        print(json.dumps([p.to_dict() for p in points]))
    else:
        print(markdown(points), end="")
    if markdown_out is not None:
        markdown_out.write_text(markdown(points))
    if svg_out is not None:
        svg = plot_svg(points)
        if svg is not None:
            svg_out.write_text(svg + "\n")
    return points
