"""Experiment specs and suites: YAML in, a validated frozen spec out, or one SpecError line before anything starts.

Every error reads `<file>: <dotted.field.path>: <what is wrong>; allowed: <what is allowed>`. The schema is
documented in experiments/README.md; fault names and their params come from chaos.faults_catalog.

Durations ("500ms", "30s", "2m", "1h", or a plain number of seconds) are resolved to float seconds. The suite's
`scale` multiplies the durations that decide how long the run spends in time (phases; each fault's at, duration
and start_jitter; catalog params marked scaled). It leaves alone what defines the system under test or what it is
judged against (job settings, workload, fault magnitudes, targets, probes): a short CI run is the same job,
hit by the same schedule compressed in time, held to the same targets.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping, TypeGuard, TypeVar, cast

import yaml

from job.settings import STATE_IMPLS, Settings

from . import triggers
from .errors import SpecError
from .faults_catalog import FAULTS, INSTANT, TRIGGERABLE, Param
from .history import PHASES, SAMPLE_METRICS
from .triggers import Trigger

SHAPES = ("uniform", "zipf", "hot_key", "rotating")
ARM_PROFILES = ("hardened", "naive")
CONTROL_PROFILES = ("naive",)  # arms that run the incident's job: controls, judged on reproducing the incident
EXPECTS = ("incident", "survives")  # what a control arm is expected to show
TRENDS = ("plateau", "growth")
DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
MAX_PAYLOAD_BYTES = 4096
MAX_NAME = 64  # experiment and suite names become directory names (run store, deployments, buckets)
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,%d}$" % (MAX_NAME - 1))
_NAME_HELP = f"lowercase letters, digits and dashes, starting with a letter or digit, at most {MAX_NAME} characters"
_GLOB = re.compile(r"^[A-Za-z0-9_./*?-]{1,200}$")
_INCIDENT_FILE = re.compile(r"^\d{3}-[A-Za-z0-9._-]+\.txt$")
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)?$")
_DURATION_HELP = "a duration like 500ms, 30s, 2m, 1h or a number of seconds"
_EPSILON = 1e-9  # float slack when checking that scaled durations fit

# -- what this machine can do --------------------------------------------------------------------------------
# Every number a spec or suite gives is bounded, declared here once by field name (the last named part of its path:
# `keys` bounds workload.keys, `count` a fault's count param). A number past its bound is refused with the usual
# one line before anything starts: `keys: 99999999999999999999999` would otherwise start a stack that cannot hold
# it. A field without an entry gets its kind's default below; a tighter bound in the code (a catalog param's
# maximum, payload_bytes) still applies. The suite runs on one host of a few cores: these are far above what any
# experiment uses (rates of 50-200 events/s, 200 keys, 4 partitions) and far below what would overflow.
MAX_INT = 2**31 - 1  # an int field without its own bound (counts of events, rows, a seed)
MAX_NUMBER = 1e9  # a number field without its own bound, either sign (probe bounds, lag in records)
MAX_DURATION_S = 24 * 3600.0  # any duration after scaling: a phase, a fault's at/duration, a recovery bound
MAX_SCALE = 100.0  # a suite's or --scale's multiplier of every phase and fault time
MAX_ITEMS = 100  # entries of a list: faults, probes, log signatures, a suite's experiments
LIMITS: Mapping[str, float] = MappingProxyType({
    # the workload: what one producer and a 2-core Spark can push and hold
    "rate": 100_000, "keys": 10_000_000, "partitions": 256, "rotation_live_actors": 10_000_000, "zipf_s": 10,
    "seed": MAX_INT,
    # job settings an arm may change
    "max_offsets_per_trigger": 100_000_000, "min_batches_to_retain": 10_000, "failure_budget": 10_000,
    # targets
    "healthy_samples": 10_000, "min_matches": 1_000_000, "max_rows_per_key": 1_000_000, "threshold": 1_000,
    "bytes_threshold": 1_000, "lag_below": 1e9,
    # fault params the catalog leaves open above
    "count": 1_000, "batch": 1_000_000_000, "rate_kbps": 10_000_000, "timeout_ms": 86_400_000, "average_size": 100_000_000,
    "size_variation": 100_000_000, "delay_us": 86_400_000_000, "bytes": 2**40,
    # a suite
    "scale": MAX_SCALE, "repeat": 20,
})


# -- the typed spec ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Incident:
    file: str  # in ../shared/incidents/
    error: str  # the error text the incident showed


@dataclass(frozen=True)
class Workload:
    shape: str
    rate: float  # events/s
    partitions: int
    payload_bytes: int
    keys: int | None  # None for rotating: its key space is unbounded by design
    zipf_s: float | None
    hot_key_share: float | None
    rotation_live_actors: int | None
    rotation_gap: float | None  # seconds of event time between an actor's two events

    @property
    def live_keys(self) -> int | None:
        """Keys holding state at any one time: what a per-key state bound divides by (None only for a Workload
        built without its shape's size, which validation refuses; the state check then skips the per-key bound)."""
        return self.rotation_live_actors if self.shape == "rotating" else self.keys


@dataclass(frozen=True)
class Job:
    """Overrides of the job's profile settings shared by every arm; None = the profile's default."""

    session_gap: float | None
    max_session_length: float | None
    max_session_length_set: bool  # null is a value here (no maximum), so "not given" needs its own flag
    watermark: float | None
    trigger: float | None


@dataclass(frozen=True)
class Phases:
    steady: float
    inject: float
    recover: float

    @property
    def total(self) -> float:
        return self.steady + self.inject + self.recover

    def windows(self) -> tuple[tuple[str, float, float], ...]:
        """(name, start, end) in run seconds."""
        inject_start = self.steady
        recover_start = inject_start + self.inject
        return (("steady", 0.0, inject_start), ("inject", inject_start, recover_start),
                ("recover", recover_start, self.total))


@dataclass(frozen=True)
class Fault:
    fault: str  # a name in chaos.faults_catalog.FAULTS
    target: str
    at: float  # seconds after the start of the inject phase
    duration: float
    start_jitter: float  # the realised start is at + U(0, start_jitter), drawn from the seed
    params: Mapping[str, object]  # every catalog param, defaults filled in, durations in seconds
    # Fires on a lifecycle event within its window instead of at its start (chaos/triggers.py); None: at a time.
    on: Trigger | None = None

    @property
    def latest_end(self) -> float:
        return self.at + self.start_jitter + self.duration


@dataclass(frozen=True)
class Probe:
    """A steady-state metric bound, judged on every arm over the samples of `phases`."""

    metric: str
    minimum: float | None
    maximum: float | None
    phases: tuple[str, ...]
    tolerance: float  # fraction of measured samples allowed outside the bound


@dataclass(frozen=True)
class Recovery:
    within: float  # seconds from the last heal to health
    healthy_samples: int  # consecutive healthy samples that make health
    lag_below: float  # a healthy sample has lag below this (records) and progress
    lag_below_s: float | None = None  # when the spec gave it as seconds of input (lag_below = seconds x rate)


@dataclass(frozen=True)
class StateTarget:
    trend: str | None  # plateau (hardened) | growth (a control arm showing a leak) | None
    during: tuple[str, ...]  # phases whose samples are fitted
    warmup: float  # leading fraction of that window left out of the fit
    threshold: float  # relative change of the fitted line across the window above which state grows
    max_rows_per_key: float | None
    max_rows: int | None
    # The same for state bytes (RocksDB's SST bytes): a bounded state's still grow until compaction (measured +28-29 %
    # over 30 s for the hardened job), a list state's without bound (+118 %).
    bytes_threshold: float = 0.5


@dataclass(frozen=True)
class Logs:
    expected: tuple[str, ...]  # regexes that must each match at least `min_matches` log lines
    forbidden: tuple[str, ...]  # regexes that must match none
    min_matches: int = 1  # a loop is shown by how often it logs (incident 001's reconnect loop)


@dataclass(frozen=True)
class Targets:
    progress: bool
    recovery: Recovery | None
    max_lag: int | None
    lost: int | None
    duplicated: int | None
    state: StateTarget | None
    logs: Logs | None
    lineage: bool
    refused_within: float | None
    probes: tuple[Probe, ...]  # the experiment's steady-state probes: they hold for every arm
    exit_code: int | None = None  # how the job's driver must have ended (job/__main__.py's codes)


@dataclass(frozen=True)
class Arm:
    profile: str
    settings: Mapping[str, object]  # job.settings.Settings field -> value, on top of the profile and `job`
    targets: Targets
    # Control arms only (None for the subject): "incident" (it must reproduce the incident) or "survives" (it
    # honestly survives this fault too; `note` says why).
    expect: str | None = None
    note: str | None = None
    # Indices of the experiment's faults this arm runs (None: all). A control that has shown its incident may
    # stop there, and a fault that cannot apply to a profile (a changelog to damage where the naive job writes
    # none) is left out rather than failing as an environment error.
    faults: tuple[int, ...] | None = None

    @property
    def role(self) -> str:
        return "control" if self.profile in CONTROL_PROFILES else "subject"


@dataclass(frozen=True)
class ExperimentSpec:
    source: str
    scale: float
    name: str
    description: str
    incident: Incident
    seed: int
    workload: Workload
    job: Job
    phases: Phases
    faults: tuple[Fault, ...]
    probes: tuple[Probe, ...]
    arms: tuple[Arm, ...]
    # False: the arm's phases (and faults) start as the job is launched, so a fault can land on its start-up and
    # first batches; True: a warm-up batch first, so start-up is not counted as a fault's effect.
    warm_up: bool = True
    # Why a job without the hardening cannot fail this experiment's hardened targets (None: it must): a waiver of
    # the discrimination check (chaos/checkers.py `discriminate`), shown in its place.
    cannot_discriminate: str | None = None
    # Set by a suite with `require_discrimination: true` (never by the experiment's YAML): a control that passes
    # every hardened target then fails the experiment. Kept in spec.json, so `chaos check` judges as `chaos run` did.
    require_discrimination: bool = False
    # The hardening switches (chaos/switches.py) this experiment exists to need: `chaos mutate` turns each off in
    # turn and the hardened arm must then fail an outcome check.
    claims: tuple[str, ...] = ()

    def arm(self, profile: str) -> Arm:
        for arm in self.arms:
            if arm.profile == profile:
                return arm
        raise KeyError(f"{self.name} has no {profile!r} arm; it has {', '.join(a.profile for a in self.arms)}")

    def phases_of(self, profile: str) -> Phases:
        """The phases one arm runs: an arm that runs a subset of the faults injects only until the last of them
        can have ended, so a control given one long window and a subject given two short ones each take the time
        their own faults need."""
        chosen = self.arm(profile).faults
        if chosen is None:
            return self.phases
        inject = min(self.phases.inject, max(self.faults[i].latest_end for i in chosen))
        return dataclasses.replace(self.phases, inject=inject)

    def apply_settings(self, profile: str, base: Settings, arm_settings: bool = True) -> Settings:
        """The profile's Settings (built by job.settings for this run) with this spec's overrides for that arm.
        kafka_options are merged over the profile's own, so one option does not drop the others."""
        job = self.job
        changes: dict[str, Any] = {}  # Settings field -> value: each checked for its field by _SETTINGS
        for field, seconds in (("gap_ms", job.session_gap), ("watermark_ms", job.watermark),
                               ("trigger_ms", job.trigger)):
            if seconds is not None:
                changes[field] = round(seconds * 1000)
        if job.max_session_length_set:
            length = job.max_session_length
            changes["max_session_ms"] = None if length is None else round(length * 1000)
        for name, value in (self.arm(profile).settings.items() if arm_settings else ()):
            if name in _OPTION_MAPS:  # merged over the profile's own; a None value removes the profile's key
                merged = {**getattr(base, name), **cast(Mapping[str, "str | None"], value)}  # _option_map's
                changes[name] = {key: v for key, v in merged.items() if v is not None}
            else:
                changes[name] = value
        return dataclasses.replace(base, **changes)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready, for the run store."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}  # _plain's dataclass case

    @classmethod
    def from_dict(cls, d: Mapping[str, object], where: str = "spec.json") -> ExperimentSpec:
        """The inverse of to_dict (also after a JSON round trip): the typed spec back from a run store's spec.json,
        without re-reading (or re-validating) the YAML it came from. A dict that is not a to_dict() raises one
        SpecError line naming `where`."""
        try:
            return _spec_from_plain(d)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            what = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc).splitlines()[0]
            raise SpecError(f"{where}: (document): not an ExperimentSpec.to_dict() ({what}); allowed: the spec.json "
                            "a run writes") from None


@dataclass(frozen=True)
class SuiteEntry:
    spec: ExperimentSpec
    overrides: Mapping[str, object]  # as written in the suite, already applied to spec
    scale: float | None = None  # the entry's own scale (kept when the suite's is changed), if it has one


@dataclass(frozen=True)
class Suite:
    source: str
    name: str
    description: str
    scale: float
    entries: tuple[SuiteEntry, ...]
    repeat: int = 1  # pre-release runs the same experiments several times; differing verdicts are flaky
    # Every experiment with a control must discriminate (or state why it cannot): copied into each entry's spec.
    require_discrimination: bool = False


def _known(d: object, cls: type, optional: tuple[str, ...] = ()) -> Mapping:
    """d, if it is a mapping holding exactly cls's fields (those in `optional` may be absent)."""
    if not isinstance(d, Mapping):
        raise TypeError(f"{cls.__name__} must be a mapping, got {type(d).__name__}")
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = [k for k in d if k not in names]
    if unknown:
        raise ValueError(f"unknown field {unknown[0]!r} in {cls.__name__}")
    missing = [n for n in names if n not in d and n not in optional]
    if missing:
        raise ValueError(f"missing field {missing[0]!r} in {cls.__name__}")
    return d


def _probe_from_plain(d: Mapping) -> Probe:
    d = _known(d, Probe)
    return Probe(metric=d["metric"], minimum=d["minimum"], maximum=d["maximum"], phases=tuple(d["phases"]),
                 tolerance=d["tolerance"])


def _targets_from_plain(d: Mapping) -> Targets:
    d = _known(d, Targets, optional=("exit_code",))
    recovery, state, logs = d["recovery"], d["state"], d["logs"]
    return Targets(
        progress=d["progress"],
        recovery=None if recovery is None else Recovery(**_known(recovery, Recovery, optional=("lag_below_s",))),
        max_lag=d["max_lag"], lost=d["lost"], duplicated=d["duplicated"],
        state=None if state is None else StateTarget(**{**_known(state, StateTarget, optional=("bytes_threshold",)),
                                                        "during": tuple(state["during"])}),
        logs=None if logs is None else Logs(expected=tuple(_known(logs, Logs, optional=("min_matches",))["expected"]),
                                            forbidden=tuple(logs["forbidden"]), min_matches=logs.get("min_matches", 1)),
        lineage=d["lineage"], refused_within=d["refused_within"],
        probes=tuple(_probe_from_plain(p) for p in d["probes"]), exit_code=d.get("exit_code"),
    )


def _arm_from_plain(d: Mapping) -> Arm:
    d = _known(d, Arm, optional=("expect", "note", "faults"))
    profile = d["profile"]
    # spec.json files written before expect/note existed: a control expected the incident.
    default_expect = "incident" if profile in CONTROL_PROFILES else None
    return Arm(profile=profile, settings=MappingProxyType(dict(d["settings"])),
               targets=_targets_from_plain(d["targets"]), expect=d.get("expect", default_expect),
               note=d.get("note"), faults=None if d.get("faults") is None else tuple(d["faults"]))


def _spec_from_plain(d: Mapping) -> ExperimentSpec:
    d = _known(d, ExperimentSpec, optional=("warm_up", "cannot_discriminate", "require_discrimination", "claims"))
    faults = [_known(f, Fault, optional=("on",)) for f in d["faults"]]
    return ExperimentSpec(
        source=d["source"], scale=d["scale"], name=d["name"], description=d["description"],
        incident=Incident(**_known(d["incident"], Incident)),
        seed=d["seed"],
        workload=Workload(**_known(d["workload"], Workload)),
        job=Job(**_known(d["job"], Job)),
        phases=Phases(**_known(d["phases"], Phases)),
        faults=tuple(Fault(fault=f["fault"], target=f["target"], at=f["at"], duration=f["duration"],
                           start_jitter=f["start_jitter"], params=MappingProxyType(dict(f["params"])),
                           on=triggers.from_plain(f.get("on")))
                     for f in faults),
        probes=tuple(_probe_from_plain(p) for p in d["probes"]),
        arms=tuple(_arm_from_plain(a) for a in d["arms"]),
        warm_up=d.get("warm_up", True),
        cannot_discriminate=d.get("cannot_discriminate"),
        require_discrimination=d.get("require_discrimination", False),
        claims=tuple(d.get("claims", ())),
    )


def _plain(value: object) -> object:
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


# -- durations -----------------------------------------------------------------------------------------------

def parse_duration(value: object) -> float:
    """"500ms", "30s", "2m", "1h", "1.5s", or a plain non-negative number (seconds) -> seconds."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    if isinstance(value, (int, float)):
        if not _finite(value) or value < 0:
            raise ValueError(f"{value!r} is not a non-negative finite number of seconds")
        return float(value)
    if isinstance(value, str):
        match = _DURATION.match(value.strip())
        if match:
            seconds = float(match.group(1)) * DURATION_UNITS[match.group(2) or "s"]
            if math.isfinite(seconds):  # 400 digits parse to inf
                return seconds
    raise ValueError(f"{value!r} is not a duration")


def _finite(value: int | float) -> bool:
    """A finite float, or an int a float can hold (math.isfinite raises OverflowError past 1e308)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


# -- validation machinery ------------------------------------------------------------------------------------

Path_ = tuple[str, ...]


class _Invalid(Exception):
    def __init__(self, path: Path_, what: str, allowed: str) -> None:
        super().__init__(what)
        self.path, self.what, self.allowed = path, what, allowed


class _DuplicateKey(Exception):
    def __init__(self, path: Path_, first: int, second: int) -> None:
        super().__init__(path)
        self.path, self.first, self.second = path, first, second


def _find_duplicate_keys(node: yaml.Node | None, path: Path_ = ()) -> None:
    """Refuse a key written twice in one mapping (YAML would silently keep the last), naming its field path.
    Keys compare as the values they construct to (`a` and `'a'` are one key); unhashable keys are left to the
    loader, which refuses them."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[object, int] = {}
        for key_node, value_node in node.value:
            key = None
            if isinstance(key_node, yaml.ScalarNode):
                try:
                    key = yaml.SafeLoader("").construct_object(key_node, deep=True)
                except yaml.YAMLError:
                    key = None
            line = key_node.start_mark.line + 1
            try:
                if key is not None and key in seen:
                    raise _DuplicateKey(path + (str(key),), seen[key], line)
                if key is not None:
                    seen[key] = line
            except TypeError:  # unhashable
                pass
            _find_duplicate_keys(value_node, path + (str(key) if key is not None else "?",))
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _find_duplicate_keys(item, path + (str(index),))


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _dotted(path: Path_) -> str:
    return ".".join(path) if path else "(document)"


def _mapping(value: object, path: Path_, fields: Iterable[str], required: Iterable[str] = ()) -> dict:
    fields = tuple(fields)
    if not isinstance(value, dict):
        raise _Invalid(path, f"must be a mapping, got {_show(value)}",
                       f"a mapping of {', '.join(fields)}" if fields else "an empty mapping (no fields here)")
    for key in value:
        if key not in fields:
            raise _Invalid(path + (str(key),), "unknown field", ", ".join(fields))
    for key in required:
        if key not in value:
            raise _Invalid(path + (key,), "missing", f"{key} is required here")
    return value


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> TypeGuard[float]:  # an int too (bool is not)
    return isinstance(value, (int, float)) and not isinstance(value, bool) and _finite(value)


def _num(value: float) -> str:
    """A bound as a person reads it: 2147483647, not 2.14748e+09."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else f"{value:g}"


def _bounds(minimum: float | None, maximum: float | None) -> str:
    parts = ([f">= {_num(minimum)}"] if minimum is not None else []) + ([f"<= {_num(maximum)}"]
                                                                        if maximum is not None else [])
    return " and ".join(parts)


def _limit(path: Path_, default: float) -> float:
    """The bound LIMITS declares for the field at `path` (its last named part), or `default`."""
    field = next((part for part in reversed(path) if not part.isdigit()), "")
    return LIMITS.get(field, default)


def _int(value: object, path: Path_, minimum: int | None = None, maximum: int | None = None) -> int:
    cap = int(_limit(path, MAX_INT))
    maximum = cap if maximum is None else min(maximum, cap)
    minimum = -cap if minimum is None else minimum
    if not _is_int(value) or (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise _Invalid(path, f"{_show(value)} is not valid", f"an integer {_bounds(minimum, maximum)}".strip())
    return value


def _number(value: object, path: Path_, minimum: float | None = None, maximum: float | None = None,
            above: float | None = None) -> float:
    cap = _limit(path, MAX_NUMBER)
    maximum = cap if maximum is None else min(maximum, cap)
    minimum = -cap if minimum is None and above is None else minimum
    if not (_is_number(value) and (minimum is None or value >= minimum) and (maximum is None or value <= maximum)
            and not (above is not None and value <= above)):
        bounds = _bounds(minimum, maximum) if above is None else f"> {_num(above)} and <= {_num(maximum)}"
        raise _Invalid(path, f"{_show(value)} is not valid", f"a number {bounds}".strip())
    return float(value)


def _bool(value: object, path: Path_) -> bool:
    if not isinstance(value, bool):
        raise _Invalid(path, f"{_show(value)} is not valid", "true | false")
    return value


def _text(value: object, path: Path_) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Invalid(path, f"{_show(value)} is not valid", "a non-empty string")
    return value


_C = TypeVar("_C")


def _choice(value: object, path: Path_, choices: tuple[_C, ...]) -> _C:
    """value, one of `choices` (typed as them: for strings it is one; a number may be an equal float, 1.0 for 1)."""
    if value not in choices or isinstance(value, bool):
        raise _Invalid(path, f"{_show(value)} is not valid", " | ".join(str(c) for c in choices))
    return value


def _duration(value: object, path: Path_, scale: float = 1.0, positive: bool = False) -> float:
    try:
        seconds = parse_duration(value)
    except ValueError:
        raise _Invalid(path, f"{_show(value)} is not a duration", _DURATION_HELP) from None
    if positive and seconds <= 0:
        raise _Invalid(path, f"{_show(value)} must be longer than 0", f"{_DURATION_HELP}, > 0")
    if not math.isfinite(seconds * scale) or seconds * scale > MAX_DURATION_S:
        raise _Invalid(path, f"{_show(value)} is too long" + (f" (x scale {scale:g})" if scale != 1 else ""),
                       f"{_DURATION_HELP}, at most {MAX_DURATION_S / 3600:g}h after scaling")
    # Microsecond rounding keeps scaled sums exact enough to compare (0.2 * 30 + 0.2 * 60 == 0.2 * 90).
    return round(seconds * scale, 6)


def _regex(value: object, path: Path_) -> str:
    pattern = _text(value, path)
    try:
        re.compile(pattern)
    except re.error as exc:
        raise _Invalid(path, f"{_show(pattern)} is not a valid regex ({exc})", "a Python regular expression") \
            from None
    return pattern


def _seconds(value: float) -> str:
    return f"{value:g}s"


# -- sections ------------------------------------------------------------------------------------------------

_TOP = ("name", "description", "incident", "seed", "workload", "job", "phases", "faults", "probes", "arms", "warm_up",
        "cannot_discriminate", "claims")
_TOP_REQUIRED = ("name", "description", "incident", "seed", "workload", "phases", "faults", "arms")
_SHAPE_PARAMS = {"zipf": ("zipf_s",), "hot_key": ("hot_key_share",),
                 "rotating": ("rotation_live_actors", "rotation_gap")}
_WORKLOAD = ("shape", "keys", "rate", "partitions", "payload_bytes", "zipf_s", "hot_key_share",
             "rotation_live_actors", "rotation_gap")
_JOB = ("session_gap", "max_session_length", "watermark", "trigger")
_SETTINGS: Mapping[str, Callable[[object, Path_], object]] = {
    "max_offsets_per_trigger": lambda v, p: None if v is None else _int(v, p, minimum=1),
    "kafka_options": lambda v, p: _option_map(v, p, "kafka."),
    "s3a_options": lambda v, p: _option_map(v, p, ""),
    "spark_options": lambda v, p: _option_map(v, p, "spark."),
    "changelog_checkpointing": _bool,
    "min_batches_to_retain": lambda v, p: _int(v, p, minimum=2),
    "state_impl": lambda v, p: _choice(v, p, STATE_IMPLS),
    # the hardening switches (docs/job.md): an arm can run with one of them off, or with another budget
    "lease": _bool,
    "verify_state": _bool,
    "supervise": _bool,
    "failure_budget": lambda v, p: _int(v, p, minimum=0),
    "spark_snapshot_repair": _bool,
}
_FAULT = ("fault", "target", "at", "duration", "start_jitter", "params", "on")
_PROBE = ("metric", "min", "max", "phases", "tolerance")
_PROBE_METRICS = tuple(m for m in SAMPLE_METRICS if m != "batch_id")
_TARGETS = ("progress", "recovery", "max_lag", "lost", "duplicated", "state", "logs", "lineage", "refused_within",
            "exit_code")
JOB_EXIT_CODES = (0, 1, 3, 4, 5, 6, 7)  # job/__main__.py: stopped, failed, refused, budget, integrity, lease, repeating


def _incident(raw: object) -> Incident:
    path = ("incident",)
    section = _mapping(raw, path, ("file", "error"), required=("file", "error"))
    file = _text(section["file"], path + ("file",))
    if not _INCIDENT_FILE.match(file):
        raise _Invalid(path + ("file",), f"{_show(file)} is not an incident file name",
                       "a file name in ../shared/incidents/ like 001-kafka-disconnects.txt")
    return Incident(file=file, error=_text(section["error"], path + ("error",)))


def _workload(raw: object) -> Workload:
    path = ("workload",)
    section = _mapping(raw, path, _WORKLOAD, required=("shape", "rate"))
    shape = _choice(section["shape"], path + ("shape",), SHAPES)
    for name in _WORKLOAD:
        owner = next((s for s, names in _SHAPE_PARAMS.items() if name in names), None)
        if name in section and owner is not None and owner != shape:
            raise _Invalid(path + (name,), f"only applies to shape {owner}",
                           f"for shape {shape}: {', '.join(_SHAPE_PARAMS.get(shape, ())) or 'no shape params'}")
    rate = _number(section["rate"], path + ("rate",), above=0)
    live: int | None
    gap: float | None
    if shape == "rotating":
        if "keys" in section:
            raise _Invalid(path + ("keys",), "rotating has an unbounded key space",
                           "rotation_live_actors sizes a rotating workload")
        live = _int(_required(section, "rotation_live_actors", path), path + ("rotation_live_actors",), minimum=1)
        gap = _duration(_required(section, "rotation_gap", path), path + ("rotation_gap",), positive=True)
        implied = 2 * live / gap  # Little's law: each actor sends 2 events over `gap`
        if abs(rate - implied) > 1e-6 * implied:
            raise _Invalid(path + ("rate",), f"{rate:g} events/s disagrees with {live} live actors sending 2 events "
                           f"{_seconds(gap)} apart", f"2 * rotation_live_actors / rotation_gap = {implied:g}")
        keys = None
    else:
        keys = _int(_required(section, "keys", path), path + ("keys",), minimum=2 if shape == "hot_key" else 1)
        live = gap = None
    return Workload(
        shape=shape, rate=rate, keys=keys,
        partitions=_int(section.get("partitions", 4), path + ("partitions",), minimum=1),
        payload_bytes=_int(section.get("payload_bytes", 32), path + ("payload_bytes",), 0, MAX_PAYLOAD_BYTES),
        zipf_s=_number(section.get("zipf_s", 1.1), path + ("zipf_s",), above=0) if shape == "zipf" else None,
        hot_key_share=(_number(section.get("hot_key_share", 0.5), path + ("hot_key_share",), 0.01, 0.99)
                       if shape == "hot_key" else None),
        rotation_live_actors=live, rotation_gap=gap,
    )


def _required(section: dict, key: str, path: Path_) -> object:
    if key not in section:
        raise _Invalid(path + (key,), "missing", f"{key} is required here")
    return section[key]


def _job(raw: object) -> Job:
    path = ("job",)
    section = _mapping(raw if raw is not None else {}, path, _JOB)

    def optional(key: str) -> float | None:
        value = section.get(key)
        return None if value is None else _duration(value, path + (key,), positive=True)

    return Job(session_gap=optional("session_gap"), max_session_length=optional("max_session_length"),
               max_session_length_set="max_session_length" in section, watermark=optional("watermark"),
               trigger=optional("trigger"))


def _phases(raw: object, scale: float) -> Phases:
    path = ("phases",)
    section = _mapping(raw, path, PHASES, required=PHASES)
    return Phases(**{name: _duration(section[name], path + (name,), scale, positive=True) for name in PHASES})


def _param(value: object, path: Path_, param: Param, scale: float) -> object:
    if param.kind == "duration":
        if value is None and not param.required:
            return None
        seconds = _duration(value, path, scale if param.scaled else 1.0)
        if param.minimum is not None and seconds < param.minimum * (scale if param.scaled else 1.0):
            raise _Invalid(path, f"{_show(value)} is too short", param.allowed())
        return seconds
    if param.kind == "choice":
        if param.many and isinstance(value, list):
            if not value or len(set(map(str, value))) != len(value):
                raise _Invalid(path, f"{_show(value)} is not valid (empty, or a choice twice)", param.allowed())
            return [_param(item, path + (str(index),), dataclasses.replace(param, many=False), scale)
                    for index, item in enumerate(value)]
        if isinstance(value, (list, dict)) or value not in param.choices or isinstance(value, bool):
            raise _Invalid(path, f"{_show(value)} is not valid", param.allowed())
        return value
    if param.kind == "glob":
        if not isinstance(value, str) or not _GLOB.match(value):
            raise _Invalid(path, f"{_show(value)} is not valid", param.allowed())
        return value
    if value in param.words:
        return value
    check: Callable[[object], TypeGuard[float]] = _is_int if param.kind == "int" else _is_number
    cap = _limit(path, MAX_INT if param.kind == "int" else MAX_NUMBER)
    minimum = -cap if param.minimum is None else param.minimum
    maximum = cap if param.maximum is None else min(param.maximum, cap)
    param = dataclasses.replace(param, maximum=maximum, minimum=minimum)
    ok = check(value) and value >= minimum and value <= maximum
    if not ok:
        noun = "an integer" if param.kind == "int" else "a number"
        raise _Invalid(path, f"{_show(value)} is not valid",
                       " or ".join([f"{noun} {_bounds(param.minimum, param.maximum)}", *param.words]))
    return value


def _fault(raw: object, path: Path_, inject: float, scale: float) -> Fault:
    if isinstance(raw, dict) and True in raw and "on" not in raw:
        raw = {("on" if key is True else key): value for key, value in raw.items()}  # YAML 1.1 reads `on:` as true
    section = _mapping(raw, path, _FAULT, required=("fault",))
    name = section["fault"]
    if not isinstance(name, str) or name not in FAULTS:  # a list or mapping here is not hashable
        raise _Invalid(path + ("fault",), f"unknown fault {_show(name)}", ", ".join(FAULTS))
    kind = FAULTS[name]
    if "target" in section:
        target = _choice(section["target"], path + ("target",), kind.targets)
    elif len(kind.targets) == 1:
        target = kind.targets[0]
    else:
        raise _Invalid(path + ("target",), "missing", " | ".join(kind.targets))

    if not kind.params and isinstance(section.get("params"), dict) and section["params"]:
        raise _Invalid(path + ("params", str(next(iter(section["params"])))), "unknown field",
                       f"no params: {name} takes none")
    raw_params = _mapping(section.get("params", {}), path + ("params",), kind.params)
    params: dict[str, object] = {}
    for pname, param in kind.params.items():
        ppath = path + ("params", pname)
        if pname in raw_params:
            params[pname] = _param(raw_params[pname], ppath, param, scale)
        elif param.required:
            raise _Invalid(ppath, "missing", param.allowed())
        else:  # a list, as a spec would write it (and spec.json gives back)
            params[pname] = list(param.default) if isinstance(param.default, tuple) else param.default

    at = _duration(section.get("at", 0), path + ("at",), scale)
    jitter = _duration(section.get("start_jitter", 0), path + ("start_jitter",), scale)
    if "duration" in section:
        duration = _duration(section["duration"], path + ("duration",), scale, positive=True)
    else:
        duration = round(inject - at - jitter, 6)  # until the end of the inject phase
        if duration <= 0:
            raise _Invalid(path + ("at",), f"{_seconds(at)} + start_jitter {_seconds(jitter)} leaves no time in "
                           f"the inject phase ({_seconds(inject)})", "at + start_jitter < phases.inject")
    if at + jitter + duration > inject + _EPSILON:
        raise _Invalid(path + ("duration",), f"at {_seconds(at)} + start_jitter {_seconds(jitter)} + duration "
                       f"{_seconds(duration)} ends after the inject phase ({_seconds(inject)}, scale {scale:g})",
                       "at + start_jitter + duration <= phases.inject")
    on = None
    if "on" in section:
        if name not in TRIGGERABLE:
            raise _Invalid(path + ("on",), f"{name} cannot fire on a lifecycle event", ", ".join(TRIGGERABLE))
        if isinstance(section["on"], dict) and _is_int(section["on"].get("batch")):  # bounded like every number
            _int(section["on"]["batch"], path + ("on", "batch"), minimum=0)
        on = triggers.parse(section["on"], path + ("on",), lambda v: _duration(v, path + ("on",)), scale,
                            lambda where, what, allowed: _Invalid(where, what, allowed))
        if on.hold_for is not None and name in INSTANT:
            raise _Invalid(path + ("on", "for"), f"{name} acts at once: it has no length", "no for")
        if on.hold_for is not None and on.hold_for > duration + _EPSILON:
            raise _Invalid(path + ("on", "for"), f"{_seconds(on.hold_for)} is longer than the fault's window "
                           f"({_seconds(duration)})", "for <= duration")
        if name == "process.kill" and params.get("interval") is not None:
            raise _Invalid(path + ("params", "interval"), "a triggered kill fires on its events, not at intervals",
                           "no interval with on")
        if name == "checkpoint.corrupt" and target != "checkpoint":
            raise _Invalid(path + ("target",), "not valid", "checkpoint")
    fault = Fault(fault=name, target=target, at=at, duration=duration, start_jitter=jitter,
                  params=MappingProxyType(params), on=on)
    _fault_rules(fault, path)
    return fault


def _fault_rules(fault: Fault, path: Path_) -> None:
    """Constraints between a fault's params and its duration that the catalog's per-param ranges cannot say."""
    # Each param's value is of its catalog kind (_param checked it): a duration or number, a count, a choice or a
    # list of choices, or None where optional. Mapping[str, object] cannot say which, so it is read as Any here.
    p: Mapping[str, Any] = fault.params
    ppath = path + ("params",)
    if fault.fault == "network.flap":
        if p["down"] >= p["period"]:
            raise _Invalid(ppath + ("down",), f"{_seconds(p['down'])} is not shorter than the period "
                           f"{_seconds(p['period'])}", "down < period")
        if p["period"] > fault.duration + _EPSILON:
            raise _Invalid(ppath + ("period",), f"{_seconds(p['period'])} is longer than the fault "
                           f"({_seconds(fault.duration)})", "period <= duration")
    elif fault.fault == "process.kill" and p["interval"] is not None:
        span = (p["count"] - 1) * p["interval"]
        if span >= fault.duration - _EPSILON:
            raise _Invalid(ppath + ("interval",), f"{p['count']} kills {_seconds(p['interval'])} apart span "
                           f"{_seconds(span)}, not within the fault's duration {_seconds(fault.duration)}",
                           "(count - 1) * interval < duration")
    elif fault.fault == "checkpoint.corrupt":
        if p["version"] != "newest" and p["kind"] in ("metadata", "sources", "state_metadata"):
            raise _Invalid(ppath + ("version",), f"{p['version']}: a {p['kind']} file has no version", "newest")
        if p["version"] != "newest" and p["kind"] in ("sst", "zip", "changelog") and p["version"] < 1:
            raise _Invalid(ppath + ("version",), f"{p['version']} is not a state version", "an integer >= 1 or newest")
        many = not isinstance(p["method"], str) and len(p["method"]) > 1
        if many and p["kind"] != "sst" and p["version"] != "newest":
            # checkpoint_tools.choose takes further files from other partitions' newest versions only
            raise _Invalid(ppath + ("version",), f"{p['version']} with {len(p['method'])} methods: only one "
                           f"{p['kind']} file can be damaged at a fixed version", "newest, or one method")
    elif fault.fault == "checkpoint.second_deployment":
        if p["mode"] == "simultaneous" and p["stagger"] is not None:
            raise _Invalid(ppath + ("stagger",), "only applies to mode staggered", "no stagger with simultaneous")
        if p["mode"] == "staggered":
            if p["stagger"] is None:
                raise _Invalid(ppath + ("stagger",), "missing", "a duration: how long after the first deployment "
                               "restarts the second one starts")
            if p["stagger"] >= fault.duration - _EPSILON:
                raise _Invalid(ppath + ("stagger",), f"{_seconds(p['stagger'])} is not shorter than the fault "
                               f"({_seconds(fault.duration)}; stagger is not scaled)", "stagger < duration")


def _faults(raw: object, inject: float, scale: float) -> tuple[Fault, ...]:
    path = ("faults",)
    if not isinstance(raw, list) or not raw or len(raw) > MAX_ITEMS:
        raise _Invalid(path, f"{_show(raw)} is not a non-empty list of at most {MAX_ITEMS}",
                       "a list of faults from the catalog")
    return tuple(_fault(item, path + (str(i),), inject, scale) for i, item in enumerate(raw))


def _check_overlaps(faults: tuple[Fault, ...], arms: tuple[Arm, ...]) -> None:
    """Two copies of one fault on one target in one arm would fight over the same proxy/toxic/process; faults
    that run in different arms (an arm's `faults` subset) may share a time."""
    for arm in arms:
        indices = arm.faults if arm.faults is not None else range(len(faults))
        for j in indices:
            for i in (i for i in indices if i < j):
                earlier, later = faults[i], faults[j]
                same = (earlier.fault, earlier.target) == (later.fault, later.target)
                if same and later.at < earlier.latest_end and earlier.at < later.latest_end:
                    raise _Invalid(("faults", str(j)), f"overlaps faults.{i} ({later.fault} on {later.target}) in "
                                   f"arm {arm.profile}", "one copy of a fault per target at a time in an arm")


def _probe(raw: object, path: Path_) -> Probe:
    section = _mapping(raw, path, _PROBE, required=("metric",))
    metric = _choice(section["metric"], path + ("metric",), _PROBE_METRICS)
    if "min" not in section and "max" not in section:
        raise _Invalid(path, "has neither min nor max", "min and/or max")
    minimum = _number(section["min"], path + ("min",)) if "min" in section else None
    maximum = _number(section["max"], path + ("max",)) if "max" in section else None
    if minimum is not None and maximum is not None and minimum > maximum:
        raise _Invalid(path + ("min",), f"{minimum:g} is above max {maximum:g}", "min <= max")
    return Probe(metric=metric, minimum=minimum, maximum=maximum,
                 phases=_phase_list(section.get("phases", ["steady"]), path + ("phases",)),
                 tolerance=_number(section.get("tolerance", 0.0), path + ("tolerance",), 0.0, 0.99))


def _phase_list(raw: object, path: Path_) -> tuple[str, ...]:
    if not isinstance(raw, list) or not raw:
        raise _Invalid(path, f"{_show(raw)} is not a non-empty list", f"a list of {', '.join(PHASES)}")
    phases = tuple(_choice(p, path + (str(i),), PHASES) for i, p in enumerate(raw))
    if len(set(phases)) != len(phases):
        raise _Invalid(path, "names a phase twice", "each phase once")
    return phases


_OPTION_MAPS = ("kafka_options", "s3a_options", "spark_options")


def _option_map(raw: object, path: Path_, prefix: str) -> dict[str, str | None]:
    """kafka.* client options, fs.s3a.* options (without the prefix, e.g. connection.timeout) or spark.* settings,
    merged over the profile's own; null removes one of the profile's."""
    what = {"kafka.": "Kafka client options (kafka.*)", "spark.": "Spark settings (spark.*)",
            "": "fs.s3a.* options without the prefix (e.g. connection.timeout)"}[prefix]
    if not isinstance(raw, dict):
        raise _Invalid(path, f"must be a mapping, got {_show(raw)}", f"a mapping of {what} to values or null")
    options: dict[str, str | None] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not key.startswith(prefix) or not re.fullmatch(r"[A-Za-z0-9._-]{1,120}", key) \
                or (not prefix and key.startswith("fs.")):
            raise _Invalid(path + (str(key),), "is not a valid option name", what)
        if value is not None and (not isinstance(value, (str, int, float)) or isinstance(value, bool)):
            raise _Invalid(path + (key,), f"{_show(value)} is not valid", "a string, a number, or null (remove)")
        options[key] = None if value is None else str(value)
    return options


def _arm(profile: str, raw: object, path: Path_, spec_probes: tuple[Probe, ...], phases: Phases,
         faults: tuple[Fault, ...]) -> Arm:
    section = _mapping(raw, path, ("settings", "targets", "expect", "note", "faults"), required=("targets",))
    raw_settings = _mapping(section.get("settings", {}), path + ("settings",), _SETTINGS)
    settings = {name: _SETTINGS[name](value, path + ("settings", name)) for name, value in raw_settings.items()}
    targets = _targets(section["targets"], path + ("targets",), spec_probes, phases, faults)
    expect, note = _expectation(profile, section, path)
    chosen = None
    if "faults" in section:
        raw_faults, fpath = section["faults"], path + ("faults",)
        if not isinstance(raw_faults, list) or not raw_faults:
            raise _Invalid(fpath, f"{_show(raw_faults)} is not a non-empty list",
                           f"a list of fault indices 0..{len(faults) - 1}")
        chosen = tuple(_int(i, fpath + (str(n),), minimum=0, maximum=len(faults) - 1) for n, i in enumerate(raw_faults))
        if len(set(chosen)) != len(chosen) or list(chosen) != sorted(chosen):
            raise _Invalid(fpath, f"{list(chosen)} names a fault twice or out of order", "ascending distinct indices")
    return Arm(profile=profile, settings=MappingProxyType(settings), targets=targets, expect=expect, note=note,
               faults=chosen)


def _expectation(profile: str, section: dict, path: Path_) -> tuple[str | None, str | None]:
    """A control arm expects the incident (default) or, with a note saying why, to survive; a subject neither."""
    if profile not in CONTROL_PROFILES:
        for key in ("expect", "note"):
            if key in section:
                raise _Invalid(path + (key,), f"only a control arm has an expectation ({profile} is the subject)",
                               f"{key} under arms.{' / arms.'.join(CONTROL_PROFILES)} only")
        return None, None
    expect = _choice(section.get("expect", "incident"), path + ("expect",), EXPECTS)
    if expect == "incident":
        if "note" in section:
            raise _Invalid(path + ("note",), "only applies to expect: survives",
                           "no note when the control is expected to reproduce the incident")
        return expect, None
    if "note" not in section:
        raise _Invalid(path + ("note",), "missing: a control expected to survive must say why",
                       "a non-empty string: why the control honestly survives this fault")
    return expect, _text(section["note"], path + ("note",))


def _targets(raw: object, path: Path_, probes: tuple[Probe, ...], phases: Phases,
             faults: tuple[Fault, ...]) -> Targets:
    section = _mapping(raw, path, _TARGETS)
    if not section:
        raise _Invalid(path, "is empty: an arm must be judged on something", ", ".join(_TARGETS))
    recovery = _recovery(section["recovery"], path + ("recovery",), phases) if "recovery" in section else None
    refused_within = None
    if "refused_within" in section:
        refused_within = _duration(section["refused_within"], path + ("refused_within",), positive=True)
        if not any(f.fault == "checkpoint.second_deployment" for f in faults):
            raise _Invalid(path + ("refused_within",), "no fault starts a second deployment",
                           "a checkpoint.second_deployment fault in faults")

    def bound(key: str) -> int | None:
        return _int(section[key], path + (key,), minimum=0) if key in section else None

    return Targets(
        progress=_bool(section["progress"], path + ("progress",)) if "progress" in section else False,
        recovery=recovery,
        max_lag=bound("max_lag"),
        lost=bound("lost"),
        duplicated=bound("duplicated"),
        state=_state(section["state"], path + ("state",)) if "state" in section else None,
        logs=_logs(section["logs"], path + ("logs",)) if "logs" in section else None,
        lineage=_bool(section["lineage"], path + ("lineage",)) if "lineage" in section else False,
        refused_within=refused_within,
        probes=probes,
        exit_code=(_choice(section["exit_code"], path + ("exit_code",), JOB_EXIT_CODES)
                   if "exit_code" in section else None),
    )


def _recovery(raw: object, path: Path_, phases: Phases) -> Recovery:
    section = _mapping(raw, path, ("within", "healthy_samples", "lag_below"), required=("within", "lag_below"))
    within = _duration(section["within"], path + ("within",), positive=True)
    if within > phases.recover + _EPSILON:
        raise _Invalid(path + ("within",), f"{_seconds(within)} is longer than the recover phase "
                       f"({_seconds(phases.recover)} after scaling): recovery could not be observed",
                       "within <= phases.recover (targets are not scaled)")
    raw_lag = section["lag_below"]
    if isinstance(raw_lag, str):  # seconds of input: turned into records with the workload's rate (_with_rate)
        seconds = _duration(raw_lag, path + ("lag_below",), positive=True)
        lag, lag_s = -seconds, seconds
    else:
        lag, lag_s = _number(raw_lag, path + ("lag_below",), above=0), None
    return Recovery(within=within,
                    healthy_samples=_int(section.get("healthy_samples", 3), path + ("healthy_samples",), minimum=1),
                    lag_below=lag, lag_below_s=lag_s)


def _with_rate(arm: Arm, rate: float) -> Arm:
    """A recovery bound given in seconds of input, in records at the workload's rate."""
    recovery = arm.targets.recovery
    if recovery is None or recovery.lag_below_s is None:
        return arm
    records = round(recovery.lag_below_s * rate, 3)
    targets = dataclasses.replace(arm.targets, recovery=dataclasses.replace(recovery, lag_below=records))
    return dataclasses.replace(arm, targets=targets)


def _state(raw: object, path: Path_) -> StateTarget:
    fields = ("trend", "during", "warmup", "threshold", "bytes_threshold", "max_rows_per_key", "max_rows")
    section = _mapping(raw, path, fields)
    if not {"trend", "max_rows_per_key", "max_rows"} & section.keys():
        raise _Invalid(path, "sets no trend and no bound", "trend, max_rows_per_key and/or max_rows")
    return StateTarget(
        trend=_choice(section["trend"], path + ("trend",), TRENDS) if "trend" in section else None,
        during=_phase_list(section.get("during", list(PHASES)), path + ("during",)),
        warmup=_number(section.get("warmup", 0.25), path + ("warmup",), 0.0, 0.9),
        threshold=_number(section.get("threshold", 0.2), path + ("threshold",), above=0),
        bytes_threshold=_number(section.get("bytes_threshold", 0.5), path + ("bytes_threshold",), above=0),
        max_rows_per_key=(_number(section["max_rows_per_key"], path + ("max_rows_per_key",), above=0)
                          if "max_rows_per_key" in section else None),
        max_rows=_int(section["max_rows"], path + ("max_rows",), minimum=1) if "max_rows" in section else None,
    )


def _logs(raw: object, path: Path_) -> Logs:
    section = _mapping(raw, path, ("expected", "forbidden", "min_matches"))

    def patterns(key: str) -> tuple[str, ...]:
        value = section.get(key, [])
        if not isinstance(value, list) or len(value) > MAX_ITEMS:
            raise _Invalid(path + (key,), f"{_show(value)} is not a list of at most {MAX_ITEMS}", "a list of regexes")
        return tuple(_regex(p, path + (key, str(i))) for i, p in enumerate(value))

    logs = Logs(expected=patterns("expected"), forbidden=patterns("forbidden"),
                min_matches=_int(section.get("min_matches", 1), path + ("min_matches",), minimum=1))
    if not logs.expected and not logs.forbidden:
        raise _Invalid(path, "lists no signature", "expected and/or forbidden regexes")
    if "min_matches" in section and not logs.expected:
        raise _Invalid(path + ("min_matches",), "applies to expected signatures, and there are none",
                       "min_matches with expected")
    return logs


def _experiment(doc: object, source: str, scale: float) -> ExperimentSpec:
    top = _mapping(doc, (), _TOP, required=_TOP_REQUIRED)
    name = _text(top["name"], ("name",))
    if not _NAME.match(name):
        raise _Invalid(("name",), f"{_show(name)} is not a valid name", _NAME_HELP)
    phases = _phases(top["phases"], scale)
    faults = _faults(top["faults"], phases.inject, scale)
    raw_probes = top.get("probes", [])
    if not isinstance(raw_probes, list) or len(raw_probes) > MAX_ITEMS:
        raise _Invalid(("probes",), f"{_show(raw_probes)} is not a list of at most {MAX_ITEMS}", "a list of probes")
    probes = tuple(_probe(p, ("probes", str(i))) for i, p in enumerate(raw_probes))
    raw_arms = _mapping(top["arms"], ("arms",), ARM_PROFILES)
    if not raw_arms:
        raise _Invalid(("arms",), "is empty: nothing would run", " and/or ".join(ARM_PROFILES))
    rate = _workload(top["workload"]).rate
    arms = tuple(_with_rate(_arm(profile, raw_arms[profile], ("arms", profile), probes, phases, faults), rate)
                 for profile in ARM_PROFILES if profile in raw_arms)
    _check_overlaps(faults, arms)
    return ExperimentSpec(
        source=source, scale=scale, name=name,
        description=_text(top["description"], ("description",)),
        incident=_incident(top["incident"]),
        seed=_int(top["seed"], ("seed",), minimum=0),
        workload=_workload(top["workload"]),
        job=_job(top.get("job")),
        phases=phases, faults=faults, probes=probes, arms=arms,
        warm_up=_bool(top.get("warm_up", True), ("warm_up",)),
        cannot_discriminate=(_text(top["cannot_discriminate"], ("cannot_discriminate",))
                             if "cannot_discriminate" in top else None),
        claims=_claims(top.get("claims", [])),
    )


def _claims(raw: object) -> tuple[str, ...]:
    from .switches import SWITCHES

    path = ("claims",)
    if not isinstance(raw, list):
        raise _Invalid(path, f"{_show(raw)} is not a list", "a list of hardening switches: " + ", ".join(SWITCHES))
    for index, name in enumerate(raw):
        if not isinstance(name, str) or name not in SWITCHES:
            raise _Invalid(path + (str(index),), f"unknown switch {_show(name)}", ", ".join(SWITCHES))
    if len(set(raw)) != len(raw):
        raise _Invalid(path, f"{_show(raw)} names a switch twice", "distinct switches")
    return tuple(raw)


# -- the incidents ---------------------------------------------------------------------------------------------
INCIDENTS_ENV = "CHAOS_INCIDENTS_DIR"


def incidents_dir() -> Path | None:
    """Where the incident files are: $CHAOS_INCIDENTS_DIR, else shared/incidents/ beside the repository (its
    `../shared/incidents/`) or beside a directory above it (a git worktree's); None when there is none."""
    if os.environ.get(INCIDENTS_ENV):
        return Path(os.environ[INCIDENTS_ENV])
    root = Path(__file__).resolve().parent.parent
    return next((d / "shared" / "incidents" for d in root.parents if (d / "shared" / "incidents").is_dir()), None)


def check_incident(spec: ExperimentSpec) -> None:
    """One SpecError line when the incident file a spec reproduces does not exist. Checked by the command line
    (run, validate, list, ...) before anything starts; without an incidents directory there is nothing to check
    against (an install elsewhere) and every name is taken as written."""
    directory = incidents_dir()
    if directory is None or (directory / spec.incident.file).is_file():
        return
    known = sorted(p.name.split("-")[0] for p in directory.glob("*.txt")) if directory.is_dir() else []
    raise SpecError(f"{spec.source}: incident.file: {spec.incident.file!r} is not in {directory}; allowed: an "
                    f"incident file there ({', '.join(known) or 'none found'})")


# -- loading -------------------------------------------------------------------------------------------------

def _load_yaml(path: Path) -> object:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{path}: (file): cannot read ({exc.strerror}); allowed: an existing YAML file") from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: (file): not UTF-8 text (byte {exc.start}); allowed: a UTF-8 YAML file") from None
    try:
        _find_duplicate_keys(yaml.compose(text, Loader=yaml.SafeLoader))
        return yaml.safe_load(text)
    except _DuplicateKey as exc:
        raise SpecError(f"{path}: {_dotted(exc.path)}: appears twice (lines {exc.first} and {exc.second}); "
                        "allowed: each key once per mapping") from None
    except RecursionError:
        raise SpecError(f"{path}: (document): nested too deeply; allowed: a YAML mapping") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "(document)"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(f"{path}: {where}: not valid YAML ({problem}); allowed: a YAML mapping") from None


def _check_scale(scale: object, source: str, path: Path_) -> float:
    if not _is_number(scale) or scale <= 0 or scale > MAX_SCALE:
        raise SpecError(f"{source}: {_dotted(path)}: {_show(scale)} is not valid; allowed: a number > 0 and "
                        f"<= {_num(MAX_SCALE)}")
    return float(scale)


def load_experiment(path: str | Path, scale: float = 1.0) -> ExperimentSpec:
    """Load and validate one experiment; durations resolved to seconds with `scale` applied. A `.json` file is a
    run store's spec.json (load_stored): already scaled, so only scale 1 applies to it."""
    path = Path(path)
    scale = _check_scale(scale, str(path), ("scale",))
    if path.suffix == ".json":
        if scale != 1.0:
            raise SpecError(f"{path}: scale: a stored spec.json is already scaled, {scale:g} cannot be applied "
                            "again; allowed: no --scale with a spec.json")
        return load_stored(path)
    try:
        return _experiment(_load_yaml(path), str(path), scale)
    except _Invalid as exc:
        raise SpecError(f"{path}: {_dotted(exc.path)}: {exc.what}; allowed: {exc.allowed}") from None


def load_stored(path: str | Path) -> ExperimentSpec:
    """A run store's <experiment>/spec.json (ExperimentSpec.to_dict()) back as the spec that ran: its durations
    already scaled, its seed the one drawn. Every number in it is held to the same bounds as a spec's (LIMITS), so a
    hand-edited copy cannot start what a YAML spec could not."""
    import json

    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SpecError(f"{path}: (file): cannot read ({exc.strerror}); allowed: a run's spec.json") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise SpecError(f"{path}: (document): not JSON ({str(exc).splitlines()[0]}); allowed: a run's spec.json") \
            from None
    spec = ExperimentSpec.from_dict(doc, where=str(path))
    try:
        _stored_numbers(doc, ())
        _int(spec.seed, ("seed",), minimum=0)
        if not _NAME.match(spec.name):
            raise _Invalid(("name",), f"{_show(spec.name)} is not a valid name", _NAME_HELP)
        _check_scale(spec.scale, str(path), ("scale",))
        for index, fault in enumerate(spec.faults):
            if fault.fault not in FAULTS:
                raise _Invalid(("faults", str(index), "fault"), f"unknown fault {_show(fault.fault)}",
                               ", ".join(FAULTS))
        for arm in spec.arms:
            _choice(arm.profile, ("arms", "profile"), ARM_PROFILES)
        if spec.phases.total > MAX_DURATION_S:
            raise _Invalid(("phases",), f"{_seconds(spec.phases.total)} in all", f"at most {_seconds(MAX_DURATION_S)}")
    except _Invalid as exc:
        raise SpecError(f"{path}: {_dotted(exc.path)}: {exc.what}; allowed: {exc.allowed}") from None
    return spec


def _stored_numbers(node: object, path: Path_) -> None:
    """Every number of a stored spec within the bound of its field (LIMITS, else its kind's default)."""
    if isinstance(node, dict):
        for key, value in node.items():
            _stored_numbers(value, path + (str(key),))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            _stored_numbers(value, path + (str(index),))
    elif _is_int(node):
        _int(node, path)
    elif isinstance(node, float):
        _number(node, path)


REPLACE_MARK = "!"  # `targets!: {...}` in an override replaces the mapping instead of merging into it


def _merge(base: object, overrides: object) -> object:
    """Mappings merge key by key, unless the override's key ends in `!` (then its value replaces the base's
    whole); anything else (lists included) is replaced whole."""
    if isinstance(base, dict) and isinstance(overrides, dict):
        merged = dict(base)
        for key, value in overrides.items():
            if isinstance(key, str) and key.endswith(REPLACE_MARK):
                merged[key[: -len(REPLACE_MARK)]] = copy.deepcopy(_unmarked(value))
            else:
                merged[key] = _merge(base.get(key), value) if key in base else copy.deepcopy(_unmarked(value))
        return merged
    return copy.deepcopy(_unmarked(overrides))


def _unmarked(value: object) -> object:
    """A value as the spec sees it: `key!` marks inside a value that replaces whole are just `key`."""
    if isinstance(value, dict):
        return {(k[: -len(REPLACE_MARK)] if isinstance(k, str) and k.endswith(REPLACE_MARK) else k): _unmarked(v)
                for k, v in value.items()}
    return value


def _from_overrides(overrides: object, path: Path_) -> bool:
    """Did the value at `path` (or the branch holding it) come from the overrides?"""
    node = overrides
    for key in path:
        if not isinstance(node, dict):  # a value (a list included) the overrides replaced whole
            return True
        if key + REPLACE_MARK in node:
            return True
        if key not in node and not (key.isdigit() and int(key) in node):
            return False
        node = node[key] if key in node else node[int(key)]
    return True


_SUITE = ("name", "description", "scale", "repeat", "require_discrimination", "experiments")


def _only_arms(merged: Mapping, raw: object, path: Path, epath: Path_) -> dict:
    """The experiment document with only the arms a suite entry runs (before validation: an arm left out is not
    judged at the suite's scale either, e.g. a recovery bound that only fits the nightly recover phase)."""
    arms = merged.get("arms")
    if not isinstance(arms, Mapping):
        arms = {}
    have = [name for name in ARM_PROFILES if name in arms]
    if not isinstance(raw, list) or not raw or any(name not in have for name in raw) or len(set(raw)) != len(raw):
        raise SpecError(f"{path}: {_dotted(epath)}: {_show(raw)} is not valid; allowed: a non-empty list of "
                        f"distinct arms of {merged.get('name')}: {', '.join(have)}")
    return {**merged, "arms": {name: arms[name] for name in have if name in raw}}


def _entry_seed(value: object, path: Path_) -> int | None:
    """A suite entry's `seed`: an integer >= 0, or `random` (a new one each run: the nightly draws new moments every
    night; the seed it drew is in the run's spec.json, and `chaos run --seed N` reruns it)."""
    if value is None:
        return None
    if value == "random":
        import secrets

        return secrets.randbelow(2**31)
    return _int(value, path, minimum=0)


def load_suite(path: str | Path, scale: float | None = None) -> Suite:
    """Load a suite: every experiment with the suite's overrides merged in and its scale applied, all validated.
    An error caused by an override names the suite file and the override's path. `scale` replaces the suite's
    own (the command line's --scale); an entry's own `scale` is kept either way: it is the shortest that entry
    runs and still shows its mechanism."""
    path = Path(path)
    doc = _load_yaml(path)
    try:
        top = _mapping(doc, (), _SUITE, required=("name", "experiments"))
        name = _text(top["name"], ("name",))
        if not _NAME.match(name):
            raise _Invalid(("name",), f"{_show(name)} is not a valid name", _NAME_HELP)
        description = _text(top["description"], ("description",)) if "description" in top else ""
        raw_entries = top["experiments"]
        if not isinstance(raw_entries, list) or not raw_entries or len(raw_entries) > MAX_ITEMS:
            raise _Invalid(("experiments",), f"{_show(raw_entries)} is not a non-empty list of at most {MAX_ITEMS}",
                           "a list of {path, overrides}")
    except _Invalid as exc:
        raise SpecError(f"{path}: {_dotted(exc.path)}: {exc.what}; allowed: {exc.allowed}") from None
    suite_scale = _check_scale(top.get("scale", 1.0), str(path), ("scale",))
    if scale is not None:
        suite_scale = _check_scale(scale, "--scale", ("scale",))
    repeat = top.get("repeat", 1)
    if not _is_int(repeat) or not 1 <= repeat <= LIMITS["repeat"]:
        raise SpecError(f"{path}: repeat: {_show(repeat)} is not valid; allowed: an integer >= 1 and <= "
                        f"{_num(LIMITS['repeat'])}")
    require = top.get("require_discrimination", False)
    if not isinstance(require, bool):
        raise SpecError(f"{path}: require_discrimination: {_show(require)} is not valid; allowed: true | false")

    entries: list[SuiteEntry] = []
    names: dict[str, int] = {}
    for i, raw in enumerate(raw_entries):
        epath = ("experiments", str(i))
        try:
            entry = _mapping(raw, epath, ("path", "scale", "overrides", "arms", "seed"), required=("path",))
            entry_seed = _entry_seed(entry.get("seed"), epath + ("seed",))
            relative = _text(entry["path"], epath + ("path",))
            overrides = _mapping(entry.get("overrides", {}), epath + ("overrides",), _TOP)
            entry_scale = (_number(entry["scale"], epath + ("scale",), above=0) if "scale" in entry else None)
        except _Invalid as exc:
            raise SpecError(f"{path}: {_dotted(exc.path)}: {exc.what}; allowed: {exc.allowed}") from None
        experiment_path = path.parent / relative
        if not experiment_path.is_file():
            raise SpecError(f"{path}: {_dotted(epath + ('path',))}: {experiment_path} is not a file; allowed: a "
                            "path relative to the suite file")
        merged = _merge(_load_yaml(experiment_path), overrides)
        if "arms" in entry and isinstance(merged, Mapping):  # the arms this entry runs (default: all)
            merged = _only_arms(merged, entry["arms"], path, epath + ("arms",))
        try:
            spec = _experiment(merged, str(experiment_path), entry_scale or suite_scale)
        except _Invalid as exc:
            if _from_overrides(overrides, exc.path):
                raise SpecError(f"{path}: {_dotted(epath + ('overrides',) + exc.path)}: {exc.what}; "
                                f"allowed: {exc.allowed}") from None
            raise SpecError(f"{experiment_path}: {_dotted(exc.path)}: {exc.what}; allowed: {exc.allowed}") from None
        if spec.name in names:
            raise SpecError(f"{path}: {_dotted(epath)}: experiment name {spec.name!r} is already used by "
                            f"experiments.{names[spec.name]}; allowed: unique names (override name)")
        names[spec.name] = i
        if require:
            spec = dataclasses.replace(spec, require_discrimination=True)
        if entry_seed is not None:  # the seed drawn or given here is the one spec.json records
            spec = dataclasses.replace(spec, seed=entry_seed)
        entries.append(SuiteEntry(spec=spec, overrides=MappingProxyType(overrides), scale=entry_scale))
    return Suite(source=str(path), name=name, description=description, scale=suite_scale, entries=tuple(entries),
                 repeat=repeat, require_discrimination=require)
