"""The typed spec: what an experiment (`ExperimentSpec`) and a suite (`Suite`) are once validated, frozen, with
every duration in seconds; and their JSON form for the run store (`to_dict`, `from_dict`)."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, cast

from job.settings import Settings

from .. import triggers
from ..errors import SpecError
from ..triggers import Trigger

SHAPES = ("uniform", "zipf", "hot_key", "rotating")
ARM_PROFILES = ("hardened", "naive")
CONTROL_PROFILES = ("naive",)  # arms that run the incident's job: controls, judged on reproducing the incident
EXPECTS = ("incident", "survives")  # what a control arm is expected to show
TRENDS = ("plateau", "growth")
SCHEDULES = ("fixed", "compact")  # how fault windows follow each other (ExperimentSpec.schedule)
# What every subject arm is judged on whether or not its targets name it: no session lost, none duplicated (each at
# 0 unless the arm's targets set a bound), and no exit of its job the harness did not cause (the exits check,
# chaos/checks/deployment.py); only the arm's `waive`, with a reason for each, lets one go unjudged.
INVARIANTS = ("lost", "duplicated", "exits")
# Arm settings that are maps of options, merged over the profile's own (a None value removes one of its keys).
OPTION_MAPS = ("kafka_options", "s3a_options", "spark_options")

# -- the typed spec ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Incident:
    file: str  # in the repository's incidents/ (chaos/spec/loading.py check_incident)
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
    rotation_gap: float | None  # seconds of event time between an actor's consecutive events
    rotation_events: int | None = None  # events per actor (its session's length); None for the keyed shapes
    # Bytes of each session's first payload the hardened job keeps as the session's attributes (landing page,
    # device): what makes its state grow with open sessions * attribute_bytes (docs/job.md "State size").
    attribute_bytes: int = 0

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
    fault: str  # a fault kind, by name in chaos.faults.registry.FAULTS
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
    # Disruptions that come faster than a recovery are measured as a group: one not recovered before the next fault
    # is carried to the healthy run after the next (from the group's first disruption, not counting time a fault is
    # in place); without it such a disruption FAILS.
    grouped: bool = False
    # Where the control (naive) arm ran the same faults in the same run and recovered, the hardened arm's recovery may
    # exceed the control's by at most this many seconds (`recovery_vs_control`): the hardening may cost, say, a
    # verification per restart, but a regression of the hardened path beyond plain Spark's figure shows up. None:
    # not compared.
    control_margin: float | None = None


@dataclass(frozen=True)
class StateTarget:
    trend: str | None  # plateau (hardened) | growth (a control arm showing a leak) | None
    during: tuple[str, ...]  # phases whose samples are fitted
    warmup: float  # leading fraction of that window left out of the fit
    threshold: float  # relative change of the fitted line (and of its peak, for rows) above which state grows
    max_rows_per_key: float | None
    max_rows: int | None
    # The same for state bytes (RocksDB's SST bytes): a bounded state's still grow until compaction (measured +28-29 %
    # over 30 s for the hardened job), a list state's without bound (+118 %).
    bytes_threshold: float = 0.5
    # ... and bytes count as grown only when the fitted line also gains more than this per input event: a state that
    # keeps events gains at least their size for each (measured 32-47 B per input event for the naive list state under
    # a hot key), while a bounded state's compaction sawtooth stays within about +-5 B (hardened: -961..+820 B/s at
    # 200 events/s). Without it a small bounded state reads +81 % on a tiny base (a CI flake of hot-key-session-growth).
    bytes_per_event: float = 8.0


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
    # The targets declared by their params (chaos/spec/targets.py TARGET_PARAMS): name -> {param: value}, validated
    extra: Mapping[str, Mapping[str, object]] = dataclasses.field(default_factory=lambda: MappingProxyType({}))


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
    # Subject arms only: invariants (INVARIANTS) this arm is not judged on, each with the measured reason why.
    waive: Mapping[str, str] = dataclasses.field(default_factory=lambda: MappingProxyType({}))

    @property
    def role(self) -> str:
        return "control" if self.profile in CONTROL_PROFILES else "subject"

    @property
    def judged_targets(self) -> Targets:
        """The targets the arm is judged by: its own and, for a subject, the invariants they leave out (0 lost,
        0 duplicated) unless `waive` says why not. The exits check runs on every arm (it needs no target)."""
        if self.role != "subject":
            return self.targets
        targets = self.targets
        if targets.lost is None and "lost" not in self.waive:
            targets = dataclasses.replace(targets, lost=0)
        if targets.duplicated is None and "duplicated" not in self.waive:
            targets = dataclasses.replace(targets, duplicated=0)
        return targets


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
    # the discrimination check (chaos/checks/discrimination.py `discriminate`), shown in its place.
    cannot_discriminate: str | None = None
    # Set by a suite with `require_discrimination: true` (never by the experiment's YAML): a control that passes
    # every hardened target then fails the experiment. Kept in spec.json, so `chaos check` judges as `chaos run` did.
    require_discrimination: bool = False
    # The hardening switches (chaos/switches.py) this experiment exists to need: `chaos mutate` turns each off in
    # turn and the hardened arm must then fail an outcome check.
    claims: tuple[str, ...] = ()
    # The stack it runs on (infra.components.TOPOLOGIES): `single` (one broker, one Spark worker) or `cluster`
    # (three KRaft brokers, replication factor 3 and min.insync.replicas 2; two Spark workers).
    topology: str = "single"
    # How the fault windows follow each other (SCHEDULES): `fixed`, each at its own time; `compact`, each window an
    # upper bound: once a triggered fault has fired its count and the job has recovered, the next window opens
    # (and the phases after the inject phase move up by the time saved). Faults one after another only.
    schedule: str = "fixed"

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
        changes: dict[str, Any] = {}  # Settings field -> value: each checked for its field by ARM_SETTINGS
        for field, seconds in (("gap_ms", job.session_gap), ("watermark_ms", job.watermark),
                               ("trigger_ms", job.trigger)):
            if seconds is not None:
                changes[field] = round(seconds * 1000)
        if job.max_session_length_set:
            length = job.max_session_length
            changes["max_session_ms"] = None if length is None else round(length * 1000)
        if self.workload.attribute_bytes:
            changes["attribute_bytes"] = self.workload.attribute_bytes
        for name, value in (self.arm(profile).settings.items() if arm_settings else ()):
            if name in OPTION_MAPS:  # merged over the profile's own; a None value removes the profile's key
                merged = {**getattr(base, name), **cast(Mapping[str, "str | None"], value)}  # option_map's
                changes[name] = {key: v for key, v in merged.items() if v is not None}
            else:
                changes[name] = value
        # the deployer tells the job its input rate, as it tells it the topic: the hardened batch cap is sized from
        # it (job/settings.py batch_cap)
        return dataclasses.replace(base, **{"expected_rate": float(self.workload.rate), **changes})

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
    # How many lanes (stacks side by side, chaos/lanes/launch.py) the suite runs on when the command line does not say:
    # the way its figures were measured.
    lanes: int = 1


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
    d = _known(d, Targets, optional=("exit_code", "extra"))
    recovery, state, logs = d["recovery"], d["state"], d["logs"]
    return Targets(
        progress=d["progress"],
        recovery=None if recovery is None else Recovery(**_known(recovery, Recovery,
                                                                 optional=("lag_below_s", "grouped",
                                                                           "control_margin"))),
        max_lag=d["max_lag"], lost=d["lost"], duplicated=d["duplicated"],
        state=None if state is None else StateTarget(**{**_known(state, StateTarget,
                                                                 optional=("bytes_threshold", "bytes_per_event")),
                                                        "during": tuple(state["during"])}),
        logs=None if logs is None else Logs(expected=tuple(_known(logs, Logs, optional=("min_matches",))["expected"]),
                                            forbidden=tuple(logs["forbidden"]), min_matches=logs.get("min_matches", 1)),
        lineage=d["lineage"], refused_within=d["refused_within"],
        probes=tuple(_probe_from_plain(p) for p in d["probes"]), exit_code=d.get("exit_code"),
        extra=MappingProxyType({str(name): MappingProxyType(dict(value))
                                for name, value in d.get("extra", {}).items()}),
    )


def _arm_from_plain(d: Mapping) -> Arm:
    d = _known(d, Arm, optional=("expect", "note", "faults", "waive"))
    profile = d["profile"]
    # spec.json files written before expect/note existed: a control expected the incident.
    default_expect = "incident" if profile in CONTROL_PROFILES else None
    return Arm(profile=profile, settings=MappingProxyType(dict(d["settings"])),
               targets=_targets_from_plain(d["targets"]), expect=d.get("expect", default_expect),
               note=d.get("note"), faults=None if d.get("faults") is None else tuple(d["faults"]),
               waive=MappingProxyType({str(k): str(v) for k, v in dict(d.get("waive") or {}).items()}))


def _spec_from_plain(d: Mapping) -> ExperimentSpec:
    d = _known(d, ExperimentSpec, optional=("warm_up", "cannot_discriminate", "require_discrimination", "claims",
                                            "topology", "schedule"))
    faults = [_known(f, Fault, optional=("on",)) for f in d["faults"]]
    return ExperimentSpec(
        source=d["source"], scale=d["scale"], name=d["name"], description=d["description"],
        incident=Incident(**_known(d["incident"], Incident)),
        seed=d["seed"],
        workload=Workload(**_known(d["workload"], Workload, optional=("rotation_events", "attribute_bytes"))),
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
        topology=d.get("topology", "single"),
        schedule=d.get("schedule", "fixed"),
    )


def _plain(value: object) -> object:
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value

