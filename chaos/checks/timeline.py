"""The parsed history every check reads (`Timeline`), the result every check returns (`Check`), and the small
helpers they share to read samples and to write numbers and times the same way."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

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
        return [s for s in self.samples if any(start <= time_of(s) < end for start, end in spans)]

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
    end = max((time_of(r) for r in records), default=0.0)
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
                    end=end)


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

