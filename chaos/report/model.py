"""Reading a run directory: run.json, results.json, spec.json and each arm's history.jsonl (docs/run-store.md)."""
from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..checks.timeline import FaultWindow, time_of, timeline
from ..checks.timeline import Timeline as CheckTimeline
from ..history import HistoryError, read_history
from ..verdicts import DISPLAY_ORDER

# Worst first (docs/run-store.md, chaos/verdicts.py); INTERRUPTED is a run cut short, SKIPPED an arm not run.
VERDICT_ORDER = DISPLAY_ORDER
VERDICT_COLOURS = {"PASSED": "#1a7f37", "FAILED": "#cf222e", "UNKNOWN": "#8250df", "HANG": "#bc4c00",
                   "NODATA": "#6e7781", "INTERRUPTED": "#9a6700", "SKIPPED": "#0969da"}


class ReportError(Exception):
    """A directory that cannot be reported on (not a run, unreadable results)."""


# -- reading a run ---------------------------------------------------------------------------------------------
@dataclass
class Timeline:
    """What the plots and the trend need from one arm's history: the checks' Timeline (chaos/checks/timeline.py: its
    phase windows, fault windows and samples are the ones the verdicts were judged on) and why it is empty, if so."""
    history: CheckTimeline = field(default_factory=lambda: timeline([]))
    problem: str | None = None  # why the history is missing or unreadable

    @property
    def samples(self) -> Sequence[Mapping[str, Any]]:
        return self.history.samples

    @property
    def faults(self) -> Sequence[FaultWindow]:
        return self.history.fault_windows

    @property
    def phases(self) -> list[tuple[str, str, float]]:
        """(name, boundary, t) of every phase record, in history order."""
        return [(str(r.get("name")), str(r.get("boundary")), time_of(r)) for r in self.history.marks]

    @property
    def jobs(self) -> Sequence[Mapping[str, Any]]:
        return self.history.jobs

    @property
    def logs(self) -> Sequence[Mapping[str, Any]]:
        return self.history.logs

    @property
    def errors(self) -> Sequence[Mapping[str, Any]]:
        return self.history.errors

    @property
    def schedule(self) -> Sequence[Mapping[str, Any]]:
        return self.history.schedule

    @property
    def last_t(self) -> float | None:
        """The last record of any type (None: no record)."""
        return self.history.end if self.history.records else None

    @property
    def first_wall(self) -> str | None:
        return self.history.first_wall

    @property
    def phase_walls(self) -> dict[str, str]:
        return self.history.phase_walls()

    @property
    def span(self) -> tuple[float, float] | None:
        """What the plots show: from the first sample, phase or fault (not the job start, before warm-up) to the
        last record (so a fault never healed is shaded up to where the history ends)."""
        ts = [float(s["t"]) for s in self.samples] + [t for _, _, t in self.phases]
        ts += [f.start for f in self.faults] + [f.end for f in self.faults if f.end is not None]
        if not ts:
            return None
        return min(ts), max(ts + ([self.last_t] if self.last_t is not None else []))

    def last_heal(self) -> float | None:
        ends = [f.end for f in self.faults if f.end is not None]
        return max(ends) if ends else None

    def phase_window(self, name: str) -> tuple[float, float] | None:
        """The checks' window of a phase: a phase that never ended runs to the history's last record."""
        return self.history.window(name)

    def values(self, key: str) -> list[float | None]:
        return [_number(s.get(key)) for s in self.samples]


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def load_timeline(path: Path) -> Timeline:
    if not path.is_file():
        return Timeline(problem=f"no history recorded ({path.name} is missing)")
    try:
        records = read_history(path)
    except (HistoryError, OSError) as exc:
        return Timeline(problem=f"history unreadable: {exc}")
    return Timeline(timeline(records))


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
    def skipped(self) -> str | None:
        """Why a SKIPPED arm was not run (result.json `skipped`); None for an arm that ran."""
        if self.verdict != "SKIPPED":
            return None
        reason = self.data.get("skipped")
        return str(reason) if reason else "no reason recorded"

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
        raise ReportError(f"{path}: {what} is not readable JSON ({exc}); "
                          "re-judge it with: chaos check RUN_DIR") from None
    if not isinstance(value, dict):
        raise ReportError(f"{path}: {what} is not a JSON object; re-judge it with: chaos check RUN_DIR")
    return value


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


