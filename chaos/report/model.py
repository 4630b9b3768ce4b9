"""Reading a run directory: run.json, results.json, spec.json and each arm's history.jsonl (docs/run-store.md)."""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..history import HistoryError, read_history

# Worst first (docs/run-store.md); INTERRUPTED is a run cut short.
VERDICT_ORDER = ("FAILED", "UNKNOWN", "HANG", "NODATA", "INTERRUPTED", "PASSED")
VERDICT_COLOURS = {"PASSED": "#1a7f37", "FAILED": "#cf222e", "UNKNOWN": "#8250df", "HANG": "#bc4c00",
                   "NODATA": "#6e7781", "INTERRUPTED": "#9a6700"}


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
    start_wall: str | None = None  # the records' `wall` (UTC, ISO 8601): to match the page against the logs
    end_wall: str | None = None


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
    first_wall: str | None = None  # `wall` of the first record: when the arm started (UTC)
    phase_walls: dict[str, str] = field(default_factory=dict)  # phase name -> `wall` of its start

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
        kind, t = record["type"], float(record["t"])
        timeline.last_t = t
        wall = record.get("wall") if isinstance(record.get("wall"), str) else None
        if timeline.first_wall is None:
            timeline.first_wall = wall
        if kind == "sample":
            timeline.samples.append(record)
        elif kind == "phase":
            timeline.phases.append((str(record.get("name")), str(record.get("boundary")), t))
            if record.get("boundary") == "start" and wall:
                timeline.phase_walls.setdefault(str(record.get("name")), wall)
        elif kind == "fault":
            key = (str(record.get("name")), str(record.get("target")))
            state = record.get("state")
            window = open_windows.get(key)
            if state in ("injecting", "injected"):
                if window is None:
                    window = FaultWindow(len(timeline.faults) + 1, key[0], key[1],
                                         dict(record.get("params") or {}), t, None, state == "injected", wall)
                    open_windows[key] = window
                    timeline.faults.append(window)
                elif state == "injected" and not window.injected:
                    window.start, window.injected, window.start_wall = t, True, wall  # injected -> healed
            elif state == "healed" and window is not None:
                window.end, window.end_wall = t, wall
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
    spec: dict = field(default_factory=dict)  # the experiment's spec.json ({} when missing)

    @property
    def targets(self) -> dict:
        """This arm's targets in spec.json ({} when the spec is missing)."""
        for arm in self.spec.get("arms") or []:
            if isinstance(arm, dict) and arm.get("profile") == self.profile:
                targets = arm.get("targets")
                return targets if isinstance(targets, dict) else {}
        return {}

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
    experiments: list[dict] = []
    arms: dict[str, list[Arm]] = {}
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
            arms[name].append(Arm(name, arm, arm_dir, timeline, spec))
    return Run(run_dir, meta, results, experiments, arms)



def _write_atomic(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)


