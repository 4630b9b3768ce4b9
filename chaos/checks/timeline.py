"""The parsed history every check reads (`Timeline`), the result every check returns (`Check`), and the small
helpers they share to read samples and to write numbers and times the same way.

The report (chaos/report/model.py) draws from this same Timeline: where a phase starts and ends, which faults were
injected and healed when, and the samples, so a plot and a verdict cannot disagree on them."""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from ..history import PHASES


@dataclass(frozen=True)
class Check:
    """One check's result: a line of results.json's `checks`."""

    name: str
    verdict: str
    expected: str
    measured: str
    message: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "verdict": self.verdict, "expected": self.expected, "measured": self.measured,
                "message": self.message}


@dataclass
class FaultWindow:
    """One fault's window as the report shows it: from its injection (its `injected` record, else `injecting`) to its
    heal; `index` counts faults from 1 in history order."""

    index: int
    name: str
    target: str
    params: dict
    start: float
    end: float | None      # None: never healed in the history
    injected: bool = True  # False: only "injecting" was recorded
    start_wall: str | None = None  # the records' `wall` (UTC, ISO 8601): to match the page against the logs
    end_wall: str | None = None


def _wall(record: Mapping[str, object]) -> str | None:
    wall = record.get("wall")
    return wall if isinstance(wall, str) else None


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
    marks: tuple[Mapping[str, object], ...] = ()  # the phase records (start and end boundaries), in history order
    first_wall: str | None = None  # `wall` of the first record: when the arm started (UTC)
    records: int = 0  # how many records the history holds
    schedule: tuple[Mapping[str, object], ...] = ()  # a compact schedule's steps: a window opened or ended early
    watches: tuple[Mapping[str, object], ...] = ()  # the log scanner's `watch` records: patterns, and logs it read
    measures: tuple[Mapping[str, object], ...] = ()  # what the harness measured of the stack (S3 read throughput)

    def window(self, phase: str) -> tuple[float, float] | None:
        for name, start, end in self.windows:
            if name == phase:
                return start, end
        return None

    def samples_in(self, phases: Iterable[str]) -> list[Mapping[str, object]]:
        spans = [w for w in (self.window(p) for p in phases) if w is not None]
        return [s for s in self.samples if any(start <= time_of(s) < end for start, end in spans)]

    def first_injection(self) -> Mapping[str, object] | None:
        return next((f for f in self.faults if f.get("state") in ("injecting", "injected")), None)

    def last_heal(self) -> Mapping[str, object] | None:
        healed = [f for f in self.faults if f.get("state") == "healed"]
        return healed[-1] if healed else None

    @cached_property
    def fault_windows(self) -> tuple[FaultWindow, ...]:
        """Each fault's injection paired with its heal, by (name, target)."""
        windows: list[FaultWindow] = []
        open_windows: dict[tuple[str, str], FaultWindow] = {}
        for record in self.faults:
            key, state, t = (str(record.get("name")), str(record.get("target"))), record.get("state"), time_of(record)
            window = open_windows.get(key)
            if state in ("injecting", "injected"):
                if window is None:
                    params = record.get("params")
                    window = FaultWindow(len(windows) + 1, key[0], key[1], dict(params) if isinstance(params, Mapping)
                                         else {}, t, None, state == "injected", _wall(record))
                    open_windows[key] = window
                    windows.append(window)
                elif state == "injected" and not window.injected:
                    window.start, window.injected, window.start_wall = t, True, _wall(record)  # injected -> healed
            elif state == "healed" and window is not None:
                window.end, window.end_wall = t, _wall(record)
                del open_windows[key]
        return tuple(windows)

    def phase_walls(self) -> dict[str, str]:
        """Phase name -> `wall` of its first start."""
        walls: dict[str, str] = {}
        for record in self.marks:
            wall = _wall(record)
            if record.get("boundary") == "start" and wall:
                walls.setdefault(str(record.get("name")), wall)
        return walls


def timeline(records: Sequence[Mapping[str, object]]) -> Timeline:
    """Index history records (chaos.history.read_history) by type. A phase that started but never ended (an
    interrupted arm) runs to the last record."""
    by_type: dict[str, list[Mapping[str, object]]] = {kind: [] for kind in
                                                      ("sample", "phase", "fault", "job", "log", "error",
                                                       "schedule", "watch", "measure")}
    for record in records:
        by_type.setdefault(str(record.get("type")), []).append(record)
    # A measure is taken after judging's reads, long after the arm: it does not extend what the checks watch.
    end = max((time_of(r) for r in records if r.get("type") != "measure"), default=0.0)
    windows = []
    for name in PHASES:
        starts = [time_of(r) for r in by_type["phase"] if r.get("name") == name and r.get("boundary") == "start"]
        if not starts:
            continue
        ends = [time_of(r) for r in by_type["phase"] if r.get("name") == name and r.get("boundary") == "end"
                and time_of(r) >= starts[0]]
        windows.append((name, starts[0], ends[0] if ends else end))
    windows.sort(key=lambda w: w[1])
    return Timeline(samples=tuple(by_type["sample"]), windows=tuple(windows), faults=tuple(by_type["fault"]),
                    jobs=tuple(by_type["job"]), logs=tuple(by_type["log"]), errors=tuple(by_type["error"]),
                    end=end, marks=tuple(by_type["phase"]),
                    first_wall=next((w for r in records if (w := _wall(r))), None),
                    records=len(records), schedule=tuple(by_type["schedule"]), watches=tuple(by_type["watch"]),
                    measures=tuple(by_type["measure"]))


def time_of(record: Mapping[str, object]) -> float:
    return float(record["t"])  # type: ignore[arg-type]


def metric(sample: Mapping[str, object], name: str) -> float | None:
    value = sample.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value


def num(value: float) -> str:
    return f"{value:g}"


def secs(seconds: float) -> str:
    return f"{seconds:.1f}s"


def at_time(record: Mapping[str, object]) -> str:
    return f"t={time_of(record):.1f}s"

