"""Lifecycle triggers: a fault that fires on an event of the job instead of at a time (`on:` in a spec).

A fault with `on:` is armed at its `at` (from the start of the inject phase) and fires when the event happens,
within its window (`at` + `start_jitter` + `duration`); `process.kill` fires `count` times, each on an event of its
own. The events are detected from what the job really does: its driver starting (the harness starts it) and its
requests to S3 as the s3proxy sees them (infra/s3proxy.py), which the harness holds at the event's moment, so a
fault lands exactly there: a request held *before* it reaches MinIO was never stored; one held *after* MinIO
answered was stored, and its answer is what the job waits for. After the fault acts, the held request is released:
dropped when the fault killed the process that sent it (the answer never arrives), forwarded otherwise.

    on: {event: commit_written, batch: 3}          # once commits/3 is stored, before the driver hears so
    on: {event: job_started, after: 12s}           # 12 s after the driver process started (its launch)
    on: {event: [first_batch, offsets_written, state_put_started], skip: [0, 2]}
                                                   # each firing draws an event, and lets 0..2 matches pass first
    on: {event: state_reached, bytes: 1GiB}        # once the job's state store reports 1 GiB of RocksDB SST

Fields: `event` (a name below, or a list to draw from per firing, with the experiment's seed), `batch` (a batch
id, one event only, where the event has one), `skip` (matches let pass before firing: a number or `[lo, hi]`),
`after` (job_started only: a duration or `[lo, hi]`), `state_kind` (state_put_* only: changelog | zip | sst), `bytes`
(state_reached only, required there: a size such as 1GiB or 512MiB, or bytes), and `for` (faults that heal: how long
the fault stays injected once fired; default: until its window ends).

`state_reached` is read from the job's own progress, not from S3: it fires once a completed batch of the running
driver reports at least `bytes` of RocksDB SST summed over its state operators (`rocksdbSstFileSize`), the measure
an arm records as the state it held (chaos/state_held.py). A fault at scale then lands at a state size, not at a
time that a slower machine would reach with a smaller state.

This module is pure: the event table, the typed trigger, its validation and the seeded draws. chaos/arm/lifecycle.py
realises them against a running stack.
"""
from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

# How a key relative to a deployment's root (`<deployment>/`) is named, per event. The batch group, where there is
# one, gives the batch id (a state version v belongs to batch v - 1).
_CK = r"checkpoint/"
_TMP = r"[^/]*\.tmp"


@dataclass(frozen=True)
class EventType:
    name: str
    summary: str
    ops: tuple[str, ...] = ()     # s3proxy operations; () for job_started
    key: str = ""                 # regex over the key relative to the deployment root
    phase: str = ""               # before: held before MinIO sees it; after: stored, the answer held
    batch_of: Callable[[re.Match], int | None] = lambda match: None
    hardened_only: bool = False   # the naive profile never makes such a request


def _group_batch(match: re.Match) -> int | None:
    value = match.groupdict().get("batch")
    return None if value is None else int(value)


def _state_batch(match: re.Match) -> int | None:
    value = match.groupdict().get("version")
    return None if value is None else int(value) - 1


EVENTS: Mapping[str, EventType] = {e.name: e for e in (
    EventType("job_started", "the job's driver process was started (a launch or a restart); `after` waits"),
    EventType("state_reached", "a completed batch reports at least `bytes` of RocksDB SST in the state store"),
    EventType("first_batch", "the first batch of a started driver begins: its offsets entry is being written",
              ("PUT",), _CK + r"offsets/\.(?P<batch>\d+)\." + _TMP + "$", "before", _group_batch),
    EventType("offsets_written", "offsets/N is stored, and commits/N is not yet written",
              ("COPY",), _CK + r"offsets/(?P<batch>\d+)$", "after", _group_batch),
    EventType("commit_written", "commits/N is stored; the driver has not heard so yet",
              ("COPY",), _CK + r"commits/(?P<batch>\d+)$", "after", _group_batch),
    EventType("state_put_started", "a state file's upload (changelog, snapshot zip, SST) starts",
              ("PUT",), "<state>", "before", _state_batch),
    EventType("state_put_done", "a state file is stored under its final name (the upload's rename, or an SST)",
              ("COPY", "PUT"), "<state>", "after", _state_batch),
    EventType("output_put_started", "the batch's output object is being written",
              ("PUT",), r"output/batch-(?P<batch>\d+)\.jsonl$", "before", _group_batch),
    EventType("output_written", "the batch's output object is stored; the driver has not heard so yet",
              ("PUT",), r"output/batch-(?P<batch>\d+)\.jsonl$", "after", _group_batch),
    EventType("lease_renewed", "the checkpoint's lease was renewed (stored, answer held)",
              ("PUT",), _CK + r"_lease$", "after", hardened_only=True),
    EventType("manifest_written", "an integrity manifest is stored (inside the batch, before its commit)",
              ("PUT",), _CK + r"_integrity/manifests/(?P<version>\d+)\.json$", "after", _state_batch,
              hardened_only=True),
)}
STATE_KINDS = ("changelog", "zip", "sst")
LAUNCH_EVENTS = ("job_started", "first_batch")  # only while a started driver has not begun its first batch
BATCH_EVENTS = tuple(name for name, e in EVENTS.items()
                     if name not in ("job_started", "state_reached", "lease_renewed"))
_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "KB": 10**3, "MB": 10**6, "GB": 10**9}
SIZE_RE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(" + "|".join(_UNITS) + r")?\s*")  # `bytes`: 1GiB, 512 MiB, 1.5GB


@dataclass(frozen=True)
class Trigger:
    events: tuple[str, ...]       # one, or several to draw from per firing
    batch: int | None = None
    skip: tuple[int, int] = (0, 0)
    after: tuple[float, float] = (0.0, 0.0)  # seconds, job_started only
    state_kind: str | None = None
    hold_for: float | None = None  # seconds the fault stays injected once fired (`for`); None: until its window ends
    state_bytes: int | None = None  # state_reached only: RocksDB SST bytes the state store must report


@dataclass(frozen=True)
class Draw:
    """One firing's realised choices (recorded in the history, so a run can be re-read and re-drawn by seed)."""

    event: str
    skip: int
    after: float

    def to_dict(self) -> dict:
        return {"event": self.event, "skip": self.skip, "after": round(self.after, 3)}


def draw(trigger: Trigger, rng: random.Random) -> Draw:
    event = trigger.events[0] if len(trigger.events) == 1 else rng.choice(trigger.events)
    skip = rng.randint(*trigger.skip)
    after = rng.uniform(*trigger.after) if event == "job_started" else 0.0
    return Draw(event, skip, after)


def _state_pattern(started: bool, kind: str | None, version: str) -> str:
    """A state file as its upload starts (a temporary name; SSTs go straight to theirs) or once it is stored."""
    kinds = [k for k in ("changelog", "zip") if kind in (None, k)]
    options = []
    if kinds:
        named = f"(?P<version>{version})\\.(?P<kind>{'|'.join(kinds)})"
        options.append(f"\\.{named}\\.{_TMP}" if started else named)
    if kind in (None, "sst") and version == r"\d+":  # an SST belongs to no version
        options.append(r"SSTs/(?P<sst>[^/]+\.sst)")
    return _CK + r"state/\d+/\d+/(?:" + "|".join(options) + ")$"


def key_pattern(event: EventType, deployment: str, trigger: Trigger) -> str:
    """The s3proxy key regex for this event in one deployment, narrowed to a batch or a state kind."""
    if event.key == "<state>":
        version = r"\d+" if trigger.batch is None else str(trigger.batch + 1)
        pattern = _state_pattern(event.name == "state_put_started", trigger.state_kind, version)
    else:
        pattern = event.key
        if trigger.batch is not None:
            # Output objects and manifests are named with zero-padded numbers (batch-000000000003.jsonl).
            pattern = pattern.replace(r"(?P<batch>\d+)", f"(?P<batch>0*{trigger.batch})")
            pattern = pattern.replace(r"(?P<version>\d+)", f"(?P<version>0*{trigger.batch + 1})")
    return "^" + re.escape(deployment + "/") + pattern


# -- validation ----------------------------------------------------------------------------------------------
Invalid = Callable[[tuple, str, str], Exception]  # (path, what is wrong, what is allowed) -> the spec's error
_FIELDS = ("event", "batch", "skip", "after", "state_kind", "bytes", "for")


def parse(raw: object, path: tuple, parse_duration: Callable[[object, tuple], float], scale: float,
          invalid: Invalid) -> Trigger:
    """The `on:` section of a fault, validated; `parse_duration` is the spec's (a value and the path of its field ->
    seconds, raising on bad input with that path)."""
    if not isinstance(raw, dict):
        raise invalid(path, f"{raw!r} is not a mapping", "{event: NAME, ...}")
    unknown = [k for k in raw if k not in _FIELDS]
    if unknown:
        raise invalid(path + (str(unknown[0]),), "unknown field", ", ".join(_FIELDS))
    if "event" not in raw:
        raise invalid(path + ("event",), "missing", " | ".join(EVENTS))
    names = raw["event"] if isinstance(raw["event"], list) else [raw["event"]]
    if not names or len(set(map(str, names))) != len(names):
        raise invalid(path + ("event",), f"{raw['event']!r} is not valid (empty, or an event twice)",
                      "an event name or a list of distinct ones")
    for index, name in enumerate(names):
        if not isinstance(name, str) or name not in EVENTS:
            where = path + ("event",) + ((str(index),) if isinstance(raw["event"], list) else ())
            raise invalid(where, f"unknown event {name!r}", " | ".join(EVENTS))
    batch = raw.get("batch")
    if batch is not None:
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 0:
            raise invalid(path + ("batch",), f"{batch!r} is not valid", "an integer >= 0")
        if len(names) != 1 or names[0] not in BATCH_EVENTS:
            raise invalid(path + ("batch",), "needs one event that belongs to a batch", " | ".join(BATCH_EVENTS))
    skip = _range(raw.get("skip", 0), path + ("skip",), invalid, lambda v, p: _count(v, p, invalid))
    after = _range(raw.get("after", 0), path + ("after",), invalid, parse_duration)
    if after != (0.0, 0.0) and "job_started" not in names:
        raise invalid(path + ("after",), "only applies to job_started", "no after without job_started")
    state_kind = raw.get("state_kind")
    if state_kind is not None:
        if state_kind not in STATE_KINDS:
            raise invalid(path + ("state_kind",), f"{state_kind!r} is not valid", " | ".join(STATE_KINDS))
        if any(not name.startswith("state_put") for name in names):
            raise invalid(path + ("state_kind",), "only applies to state_put_started / state_put_done",
                          "state events only")
        if state_kind == "sst" and batch is not None:
            raise invalid(path + ("batch",), "an SST belongs to no batch", "no batch with state_kind sst")
    state_bytes = None
    if "bytes" in raw:
        if names != ["state_reached"]:
            raise invalid(path + ("bytes",), "only applies to state_reached, alone", "no bytes without state_reached")
        state_bytes = parse_size(raw["bytes"])
        if state_bytes is None:
            raise invalid(path + ("bytes",), f"{raw['bytes']!r} is not valid",
                          "bytes > 0: an integer, or a number with " + " | ".join(_UNITS))
    elif "state_reached" in names:
        raise invalid(path + ("bytes",), "missing: state_reached needs the size it waits for", "e.g. bytes: 1GiB")
    hold_for = None
    if "for" in raw:
        hold_for = parse_duration(raw["for"], path + ("for",)) * scale
        if hold_for <= 0:
            raise invalid(path + ("for",), f"{raw['for']!r} is not valid", "a duration > 0")
    return Trigger(events=tuple(names), batch=batch, skip=skip, after=after, state_kind=state_kind,
                   hold_for=hold_for, state_bytes=state_bytes)


def parse_size(value: object) -> int | None:
    """Bytes from an integer or a text such as '1GiB', '512 MiB', '1.5GB'; None when not a size > 0."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if not isinstance(value, str):
        return None
    match = SIZE_RE.fullmatch(value)
    if match is None:
        return None
    amount = int(float(match.group(1)) * _UNITS[match.group(2) or "B"])
    return amount if amount > 0 else None


def _count(value: object, path: tuple, invalid: Invalid) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1000:
        raise invalid(path, f"{value!r} is not valid", "an integer 0..1000")
    return value


def _range(value: object, path: tuple, invalid: Invalid, one: Callable[[object, tuple], float]) -> tuple:
    if isinstance(value, list):
        if len(value) != 2:
            raise invalid(path, f"{value!r} is not valid", "a value, or [low, high]")
        low, high = one(value[0], path + ("0",)), one(value[1], path + ("1",))
        if low > high:
            raise invalid(path, f"{value!r}: low is above high", "[low, high] with low <= high")
        return (low, high)
    single = one(value, path)
    return (single, single)


def to_plain(trigger: Trigger | None) -> dict | None:
    if trigger is None:
        return None
    return {"events": list(trigger.events), "batch": trigger.batch, "skip": list(trigger.skip),
            "after": list(trigger.after), "state_kind": trigger.state_kind, "hold_for": trigger.hold_for,
            "state_bytes": trigger.state_bytes}


def from_plain(raw: Mapping | None) -> Trigger | None:
    if raw is None:
        return None
    return Trigger(events=tuple(raw["events"]), batch=raw["batch"], skip=tuple(raw["skip"]),
                   after=tuple(raw["after"]), state_kind=raw["state_kind"], hold_for=raw["hold_for"],
                   state_bytes=raw.get("state_bytes"))
