"""An experiment's YAML document to a validated `ExperimentSpec`: one function per section, each raising
chaos.spec.fields.Invalid with the path of the field at fault. A fault is checked against its kind (targets, params,
triggers, the kind's own `validate`), found by name in chaos/faults/registry.py.

The suite's `scale` multiplies the durations that decide how long the run spends in time (phases; each fault's at,
duration and start_jitter; params declared scaled). It leaves alone what defines the system under test or what it is
judged against (job settings, workload, fault magnitudes, targets, probes).
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TypeGuard

from infra.components import TOPOLOGIES
from job.settings import STATE_IMPLS

from .. import triggers
from ..faults import registry as fault_registry  # by module: its names are read when a spec is validated
from ..faults.base import Param
from ..history import PHASES, SAMPLE_METRICS
from .fields import (
    EPSILON,
    GLOB_RE,
    INCIDENT_FILE_RE,
    MAX_INT,
    MAX_ITEMS,
    MAX_NUMBER,
    MAX_PAYLOAD_BYTES,
    NAME_HELP,
    NAME_RE,
    Invalid,
    Path_,
    boolean,
    bounds_text,
    choice,
    duration_field,
    fmt_seconds,
    integer,
    is_int,
    is_number,
    limit_of,
    mapping_of,
    nonempty_text,
    number,
    regex_field,
    required_key,
    show,
)
from .model import (
    ARM_PROFILES,
    CONTROL_PROFILES,
    EXPECTS,
    INVARIANTS,
    SCHEDULES,
    SHAPES,
    TRENDS,
    Arm,
    ExperimentSpec,
    Fault,
    Incident,
    Job,
    Logs,
    Phases,
    Probe,
    StateTarget,
    Targets,
    Workload,
)
from .order import check_one_after_another, check_spacing
from .recovery import recovery_target, with_rate
from .targets import TARGET_PARAMS

# -- sections ------------------------------------------------------------------------------------------------

TOP_FIELDS = ("name", "description", "incident", "seed", "workload", "job", "phases", "faults", "probes", "arms",
        "warm_up", "cannot_discriminate", "claims", "topology", "schedule")
TOP_REQUIRED = ("name", "description", "incident", "seed", "workload", "phases", "faults", "arms")
SHAPE_PARAMS = {"zipf": ("zipf_s",), "hot_key": ("hot_key_share",),
                 "rotating": ("rotation_live_actors", "rotation_gap", "rotation_events")}
WORKLOAD_FIELDS = ("shape", "keys", "rate", "partitions", "payload_bytes", "attribute_bytes", "zipf_s",
                   "hot_key_share", "rotation_live_actors", "rotation_gap", "rotation_events")
JOB_FIELDS = ("session_gap", "max_session_length", "watermark", "trigger")
ARM_SETTINGS: Mapping[str, Callable[[object, Path_], object]] = {
    "max_offsets_per_trigger": lambda v, p: None if v is None else integer(v, p, minimum=1),
    "catch_up_factor": lambda v, p: None if v is None else number(v, p, above=0),
    "kafka_options": lambda v, p: option_map(v, p, "kafka."),
    "s3a_options": lambda v, p: option_map(v, p, ""),
    "spark_options": lambda v, p: option_map(v, p, "spark."),
    "changelog_checkpointing": boolean,
    "min_batches_to_retain": lambda v, p: integer(v, p, minimum=2),
    "state_impl": lambda v, p: choice(v, p, STATE_IMPLS),
    # the hardening switches (docs/job.md): an arm can run with one of them off, or with another budget
    "lease": boolean,
    "verify_state": boolean,
    "supervise": boolean,
    "failure_budget": lambda v, p: integer(v, p, minimum=0),
    "spark_snapshot_repair": boolean,
}
FAULT_FIELDS = ("fault", "target", "at", "duration", "start_jitter", "params", "on")
PROBE_FIELDS = ("metric", "min", "max", "phases", "tolerance")
PROBE_METRICS = tuple(m for m in SAMPLE_METRICS if m != "batch_id")
TARGET_FIELDS = ("progress", "recovery", "max_lag", "lost", "duplicated", "state", "logs", "lineage", "refused_within",
            "exit_code")
JOB_EXIT_CODES = (0, 1, 3, 4, 5, 6, 7)  # job/__main__.py: stopped, failed, refused, budget, integrity, lease, repeating


def _incident(raw: object) -> Incident:
    path = ("incident",)
    section = mapping_of(raw, path, ("file", "error"), required=("file", "error"))
    file = nonempty_text(section["file"], path + ("file",))
    if not INCIDENT_FILE_RE.match(file):
        raise Invalid(path + ("file",), f"{show(file)} is not an incident file name",
                       "a file name in incidents/ like 001-kafka-disconnects.txt")
    return Incident(file=file, error=nonempty_text(section["error"], path + ("error",)))


def _workload(raw: object) -> Workload:
    path = ("workload",)
    section = mapping_of(raw, path, WORKLOAD_FIELDS, required=("shape", "rate"))
    shape = choice(section["shape"], path + ("shape",), SHAPES)
    for name in WORKLOAD_FIELDS:
        owner = next((s for s, names in SHAPE_PARAMS.items() if name in names), None)
        if name in section and owner is not None and owner != shape:
            raise Invalid(path + (name,), f"only applies to shape {owner}",
                           f"for shape {shape}: {', '.join(SHAPE_PARAMS.get(shape, ())) or 'no shape params'}")
    rate = number(section["rate"], path + ("rate",), above=0)
    live: int | None
    gap: float | None
    events: int | None
    if shape == "rotating":
        if "keys" in section:
            raise Invalid(path + ("keys",), "rotating has an unbounded key space",
                           "rotation_live_actors sizes a rotating workload")
        live = integer(required_key(section, "rotation_live_actors", path), path + ("rotation_live_actors",), minimum=1)
        gap = duration_field(required_key(section, "rotation_gap", path), path + ("rotation_gap",), positive=True)
        events = integer(section.get("rotation_events", 2), path + ("rotation_events",), minimum=2)
        implied = live * events / ((events - 1) * gap)  # Little's law: each actor sends `events` over their span
        if abs(rate - implied) > 1e-6 * implied:
            raise Invalid(path + ("rate",), f"{rate:g} events/s disagrees with {live} live actors sending {events} "
                           f"events {fmt_seconds(gap)} apart", "rotation_live_actors * rotation_events / "
                           f"((rotation_events - 1) * rotation_gap) = {implied:g}")
        keys = None
    else:
        keys = integer(required_key(section, "keys", path), path + ("keys",), minimum=2 if shape == "hot_key" else 1)
        live = gap = events = None
    payload_bytes = integer(section.get("payload_bytes", 32), path + ("payload_bytes",), 0, MAX_PAYLOAD_BYTES)
    attribute_bytes = integer(section.get("attribute_bytes", 0), path + ("attribute_bytes",), 0, MAX_PAYLOAD_BYTES)
    if attribute_bytes > payload_bytes:
        raise Invalid(path + ("attribute_bytes",), f"{attribute_bytes} is more than the payload it is cut from",
                      f"at most payload_bytes ({payload_bytes})")
    return Workload(
        shape=shape, rate=rate, keys=keys,
        partitions=integer(section.get("partitions", 4), path + ("partitions",), minimum=1),
        payload_bytes=payload_bytes, attribute_bytes=attribute_bytes, rotation_events=events,
        zipf_s=number(section.get("zipf_s", 1.1), path + ("zipf_s",), above=0) if shape == "zipf" else None,
        hot_key_share=(number(section.get("hot_key_share", 0.5), path + ("hot_key_share",), 0.01, 0.99)
                       if shape == "hot_key" else None),
        rotation_live_actors=live, rotation_gap=gap,
    )



def _job(raw: object) -> Job:
    path = ("job",)
    section = mapping_of(raw if raw is not None else {}, path, JOB_FIELDS)

    def optional(key: str) -> float | None:
        value = section.get(key)
        return None if value is None else duration_field(value, path + (key,), positive=True)

    return Job(session_gap=optional("session_gap"), max_session_length=optional("max_session_length"),
               max_session_length_set="max_session_length" in section, watermark=optional("watermark"),
               trigger=optional("trigger"))


def _phases(raw: object, scale: float) -> Phases:
    path = ("phases",)
    section = mapping_of(raw, path, PHASES, required=PHASES)
    return Phases(**{name: duration_field(section[name], path + (name,), scale, positive=True) for name in PHASES})


def _param(value: object, path: Path_, param: Param, scale: float) -> object:
    if param.kind == "duration":
        if value is None and not param.required:
            return None
        seconds = duration_field(value, path, scale if param.scaled else 1.0)
        if param.minimum is not None and seconds < param.minimum * (scale if param.scaled else 1.0):
            raise Invalid(path, f"{show(value)} is too short", param.allowed())
        return seconds
    if param.kind == "choice":
        if param.many and isinstance(value, list):
            if not value or len(set(map(str, value))) != len(value):
                raise Invalid(path, f"{show(value)} is not valid (empty, or a choice twice)", param.allowed())
            return [_param(item, path + (str(index),), dataclasses.replace(param, many=False), scale)
                    for index, item in enumerate(value)]
        if isinstance(value, (list, dict)) or value not in param.choices or isinstance(value, bool):
            raise Invalid(path, f"{show(value)} is not valid", param.allowed())
        return value
    if param.kind == "glob":
        if not isinstance(value, str) or not GLOB_RE.match(value):
            raise Invalid(path, f"{show(value)} is not valid", param.allowed())
        return value
    if value in param.words:
        return value
    check: Callable[[object], TypeGuard[float]] = is_int if param.kind == "int" else is_number
    cap = limit_of(path, MAX_INT if param.kind == "int" else MAX_NUMBER)
    minimum = -cap if param.minimum is None else param.minimum
    maximum = cap if param.maximum is None else min(param.maximum, cap)
    param = dataclasses.replace(param, maximum=maximum, minimum=minimum)
    ok = check(value) and value >= minimum and value <= maximum
    if not ok:
        noun = "an integer" if param.kind == "int" else "a number"
        raise Invalid(path, f"{show(value)} is not valid",
                       " or ".join([f"{noun} {bounds_text(param.minimum, param.maximum)}", *param.words]))
    return value


def _params(raw: object, path: Path_, declared: Mapping[str, Param], scale: float) -> dict[str, object]:
    """A mapping of params checked against their declarations (a fault kind's, a declared target's), defaults
    filled in."""
    raw_params = mapping_of(raw, path, declared)
    found: dict[str, object] = {}
    for pname, param in declared.items():
        ppath = path + (pname,)
        if pname in raw_params:
            found[pname] = _param(raw_params[pname], ppath, param, scale)
        elif param.required:
            raise Invalid(ppath, "missing", param.allowed())
        else:  # a list, as a spec would write it (and spec.json gives back)
            found[pname] = list(param.default) if isinstance(param.default, tuple) else param.default
    return found


def _fault(raw: object, path: Path_, inject: float, scale: float) -> Fault:
    if isinstance(raw, dict) and True in raw and "on" not in raw:
        raw = {("on" if key is True else key): value for key, value in raw.items()}  # YAML 1.1 reads `on:` as true
    section = mapping_of(raw, path, FAULT_FIELDS, required=("fault",))
    name = section["fault"]
    kinds = fault_registry.FAULTS
    if not isinstance(name, str) or name not in kinds:  # a list or mapping here is not hashable
        raise Invalid(path + ("fault",), f"unknown fault {show(name)}", ", ".join(kinds))
    kind = kinds[name]
    if "target" in section:
        target = choice(section["target"], path + ("target",), kind.targets)
    elif len(kind.targets) == 1:
        target = kind.targets[0]
    else:
        raise Invalid(path + ("target",), "missing", " | ".join(kind.targets))

    if not kind.params and isinstance(section.get("params"), dict) and section["params"]:
        raise Invalid(path + ("params", str(next(iter(section["params"])))), "unknown field",
                       f"no params: {name} takes none")
    params = _params(section.get("params", {}), path + ("params",), kind.params, scale)

    at = duration_field(section.get("at", 0), path + ("at",), scale)
    jitter = duration_field(section.get("start_jitter", 0), path + ("start_jitter",), scale)
    if "duration" in section:
        duration = duration_field(section["duration"], path + ("duration",), scale, positive=True)
    else:
        duration = round(inject - at - jitter, 6)  # until the end of the inject phase
        if duration <= 0:
            raise Invalid(path + ("at",), f"{fmt_seconds(at)} + start_jitter {fmt_seconds(jitter)} leaves no time in "
                           f"the inject phase ({fmt_seconds(inject)})", "at + start_jitter < phases.inject")
    if at + jitter + duration > inject + EPSILON:
        raise Invalid(path + ("duration",), f"at {fmt_seconds(at)} + start_jitter {fmt_seconds(jitter)} + duration "
                       f"{fmt_seconds(duration)} ends after the inject phase ({fmt_seconds(inject)}, scale {scale:g})",
                       "at + start_jitter + duration <= phases.inject")
    on = None
    if "on" in section:
        if not kind.triggerable:
            raise Invalid(path + ("on",), f"{name} cannot fire on a lifecycle event",
                          ", ".join(fault_registry.TRIGGERABLE))
        if isinstance(section["on"], dict) and is_int(section["on"].get("batch")):  # bounded like every number
            integer(section["on"]["batch"], path + ("on", "batch"), minimum=0)
        on = triggers.parse(section["on"], path + ("on",), duration_field, scale,
                            lambda where, what, allowed: Invalid(where, what, allowed))
        if on.hold_for is not None and kind.instant:
            raise Invalid(path + ("on", "for"), f"{name} acts at once: it has no length", "no for")
        if on.hold_for is not None and on.hold_for > duration + EPSILON:
            raise Invalid(path + ("on", "for"), f"{fmt_seconds(on.hold_for)} is longer than the fault's window "
                           f"({fmt_seconds(duration)})", "for <= duration")
    fault = Fault(fault=name, target=target, at=at, duration=duration, start_jitter=jitter,
                  params=MappingProxyType(params), on=on)
    if kind.validate is not None:  # the kind's own rules between its params and its window
        kind.validate(fault, path)
    return fault


def _faults(raw: object, inject: float, scale: float) -> tuple[Fault, ...]:
    path = ("faults",)
    if not isinstance(raw, list) or not raw or len(raw) > MAX_ITEMS:
        raise Invalid(path, f"{show(raw)} is not a non-empty list of at most {MAX_ITEMS}",
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
                    raise Invalid(("faults", str(j)), f"overlaps faults.{i} ({later.fault} on {later.target}) in "
                                   f"arm {arm.profile}", "one copy of a fault per target at a time in an arm")


def _probe(raw: object, path: Path_) -> Probe:
    section = mapping_of(raw, path, PROBE_FIELDS, required=("metric",))
    metric = choice(section["metric"], path + ("metric",), PROBE_METRICS)
    if "min" not in section and "max" not in section:
        raise Invalid(path, "has neither min nor max", "min and/or max")
    minimum = number(section["min"], path + ("min",)) if "min" in section else None
    maximum = number(section["max"], path + ("max",)) if "max" in section else None
    if minimum is not None and maximum is not None and minimum > maximum:
        raise Invalid(path + ("min",), f"{minimum:g} is above max {maximum:g}", "min <= max")
    return Probe(metric=metric, minimum=minimum, maximum=maximum,
                 phases=_phase_list(section.get("phases", ["steady"]), path + ("phases",)),
                 tolerance=number(section.get("tolerance", 0.0), path + ("tolerance",), 0.0, 0.99))


def _phase_list(raw: object, path: Path_) -> tuple[str, ...]:
    if not isinstance(raw, list) or not raw:
        raise Invalid(path, f"{show(raw)} is not a non-empty list", f"a list of {', '.join(PHASES)}")
    phases = tuple(choice(p, path + (str(i),), PHASES) for i, p in enumerate(raw))
    if len(set(phases)) != len(phases):
        raise Invalid(path, "names a phase twice", "each phase once")
    return phases



def option_map(raw: object, path: Path_, prefix: str) -> dict[str, str | None]:
    """kafka.* client options, fs.s3a.* options (without the prefix, e.g. connection.timeout) or spark.* settings,
    merged over the profile's own; null removes one of the profile's."""
    what = {"kafka.": "Kafka client options (kafka.*)", "spark.": "Spark settings (spark.*)",
            "": "fs.s3a.* options without the prefix (e.g. connection.timeout)"}[prefix]
    if not isinstance(raw, dict):
        raise Invalid(path, f"must be a mapping, got {show(raw)}", f"a mapping of {what} to values or null")
    options: dict[str, str | None] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not key.startswith(prefix) or not re.fullmatch(r"[A-Za-z0-9._-]{1,120}", key) \
                or (not prefix and key.startswith("fs.")):
            raise Invalid(path + (str(key),), "is not a valid option name", what)
        if value is not None and (not isinstance(value, (str, int, float)) or isinstance(value, bool)):
            raise Invalid(path + (key,), f"{show(value)} is not valid", "a string, a number, or null (remove)")
        options[key] = None if value is None else str(value)
    return options


def _arm(profile: str, raw: object, path: Path_, spec_probes: tuple[Probe, ...], phases: Phases,
         faults: tuple[Fault, ...]) -> Arm:
    section = mapping_of(raw, path, ("settings", "targets", "expect", "note", "faults", "waive"),
                         required=("targets",))
    raw_settings = mapping_of(section.get("settings", {}), path + ("settings",), ARM_SETTINGS)
    settings = {name: ARM_SETTINGS[name](value, path + ("settings", name)) for name, value in raw_settings.items()}
    targets = _targets(section["targets"], path + ("targets",), spec_probes, phases, faults)
    expect, note = _expectation(profile, section, path)
    chosen = None
    if "faults" in section:
        raw_faults, fpath = section["faults"], path + ("faults",)
        if not isinstance(raw_faults, list) or not raw_faults:
            raise Invalid(fpath, f"{show(raw_faults)} is not a non-empty list",
                           f"a list of fault indices 0..{len(faults) - 1}")
        chosen = tuple(integer(i, fpath + (str(n),), minimum=0, maximum=len(faults) - 1)
                       for n, i in enumerate(raw_faults))
        if len(set(chosen)) != len(chosen) or list(chosen) != sorted(chosen):
            raise Invalid(fpath, f"{list(chosen)} names a fault twice or out of order", "ascending distinct indices")
    waive = _waive(profile, section["waive"], targets, path + ("waive",)) if "waive" in section else {}
    return Arm(profile=profile, settings=MappingProxyType(settings), targets=targets, expect=expect, note=note,
               faults=chosen, waive=MappingProxyType(waive))


def _waive(profile: str, raw: object, targets: Targets, path: Path_) -> dict[str, str]:
    """A subject arm's waivers of its invariants (INVARIANTS), each with its reason; a waiver of a target the arm
    sets contradicts it."""
    if profile in CONTROL_PROFILES:
        raise Invalid(path, f"only a subject arm carries invariants to waive ({profile} is a control, judged on "
                      "showing its incident)", "waive under arms.hardened only")
    section = mapping_of(raw, path, INVARIANTS)
    if not section:
        raise Invalid(path, "waives nothing", f"a mapping of {', '.join(INVARIANTS)} to the measured reason why")
    for name in ("lost", "duplicated"):
        if name in section and getattr(targets, name) is not None:
            raise Invalid(path + (name,), f"waives {name}, which the arm's targets set",
                          f"either targets.{name} or its waiver, not both")
    return {name: nonempty_text(reason, path + (name,)) for name, reason in section.items()}


def _expectation(profile: str, section: dict, path: Path_) -> tuple[str | None, str | None]:
    """A control arm expects the incident (default) or, with a note saying why, to survive; a subject neither."""
    if profile not in CONTROL_PROFILES:
        for key in ("expect", "note"):
            if key in section:
                raise Invalid(path + (key,), f"only a control arm has an expectation ({profile} is the subject)",
                               f"{key} under arms.{' / arms.'.join(CONTROL_PROFILES)} only")
        return None, None
    expect = choice(section.get("expect", "incident"), path + ("expect",), EXPECTS)
    if expect == "incident":
        if "note" in section:
            raise Invalid(path + ("note",), "only applies to expect: survives",
                           "no note when the control is expected to reproduce the incident")
        return expect, None
    if "note" not in section:
        raise Invalid(path + ("note",), "missing: a control expected to survive must say why",
                       "a non-empty string: why the control honestly survives this fault")
    return expect, nonempty_text(section["note"], path + ("note",))


def _targets(raw: object, path: Path_, probes: tuple[Probe, ...], phases: Phases,
             faults: tuple[Fault, ...]) -> Targets:
    names = TARGET_FIELDS + tuple(TARGET_PARAMS)
    section = mapping_of(raw, path, names)
    if not section:
        raise Invalid(path, "is empty: an arm must be judged on something", ", ".join(names))
    recovery = recovery_target(section["recovery"], path + ("recovery",), phases) if "recovery" in section else None
    refused_within = None
    if "refused_within" in section:
        refused_within = duration_field(section["refused_within"], path + ("refused_within",), positive=True)
        if not any(fault_registry.FAULTS[f.fault].starts_deployment for f in faults):
            starters = [name for name, kind in fault_registry.FAULTS.items() if kind.starts_deployment]
            raise Invalid(path + ("refused_within",), "no fault starts a second deployment",
                           f"a {' or '.join(starters)} fault in faults")

    def bound(key: str) -> int | None:
        return integer(section[key], path + (key,), minimum=0) if key in section else None

    return Targets(
        progress=boolean(section["progress"], path + ("progress",)) if "progress" in section else False,
        recovery=recovery,
        max_lag=bound("max_lag"),
        lost=bound("lost"),
        duplicated=bound("duplicated"),
        state=_state(section["state"], path + ("state",)) if "state" in section else None,
        logs=_logs(section["logs"], path + ("logs",)) if "logs" in section else None,
        lineage=boolean(section["lineage"], path + ("lineage",)) if "lineage" in section else False,
        refused_within=refused_within,
        probes=probes,
        exit_code=(choice(section["exit_code"], path + ("exit_code",), JOB_EXIT_CODES)
                   if "exit_code" in section else None),
        extra=MappingProxyType({name: MappingProxyType(_params(section[name], path + (name,), declared.params, 1.0))
                                for name, declared in TARGET_PARAMS.items() if name in section}),
    )


def _state(raw: object, path: Path_) -> StateTarget:
    fields = ("trend", "during", "warmup", "threshold", "bytes_threshold", "bytes_per_event", "max_rows_per_key",
              "max_rows")
    section = mapping_of(raw, path, fields)
    if not {"trend", "max_rows_per_key", "max_rows"} & section.keys():
        raise Invalid(path, "sets no trend and no bound", "trend, max_rows_per_key and/or max_rows")
    return StateTarget(
        trend=choice(section["trend"], path + ("trend",), TRENDS) if "trend" in section else None,
        during=_phase_list(section.get("during", list(PHASES)), path + ("during",)),
        warmup=number(section.get("warmup", 0.25), path + ("warmup",), 0.0, 0.9),
        threshold=number(section.get("threshold", 0.2), path + ("threshold",), above=0),
        bytes_threshold=number(section.get("bytes_threshold", 0.5), path + ("bytes_threshold",), above=0),
        bytes_per_event=number(section.get("bytes_per_event", 8.0), path + ("bytes_per_event",), 0.0),
        max_rows_per_key=(number(section["max_rows_per_key"], path + ("max_rows_per_key",), above=0)
                          if "max_rows_per_key" in section else None),
        max_rows=integer(section["max_rows"], path + ("max_rows",), minimum=1) if "max_rows" in section else None,
    )


def _logs(raw: object, path: Path_) -> Logs:
    section = mapping_of(raw, path, ("expected", "forbidden", "min_matches"))

    def patterns(key: str) -> tuple[str, ...]:
        value = section.get(key, [])
        if not isinstance(value, list) or len(value) > MAX_ITEMS:
            raise Invalid(path + (key,), f"{show(value)} is not a list of at most {MAX_ITEMS}", "a list of regexes")
        return tuple(regex_field(p, path + (key, str(i))) for i, p in enumerate(value))

    logs = Logs(expected=patterns("expected"), forbidden=patterns("forbidden"),
                min_matches=integer(section.get("min_matches", 1), path + ("min_matches",), minimum=1))
    if not logs.expected and not logs.forbidden:
        raise Invalid(path, "lists no signature", "expected and/or forbidden regexes")
    if "min_matches" in section and not logs.expected:
        raise Invalid(path + ("min_matches",), "applies to expected signatures, and there are none",
                       "min_matches with expected")
    return logs


def parse_experiment(doc: object, source: str, scale: float) -> ExperimentSpec:
    top = mapping_of(doc, (), TOP_FIELDS, required=TOP_REQUIRED)
    name = nonempty_text(top["name"], ("name",))
    if not NAME_RE.match(name):
        raise Invalid(("name",), f"{show(name)} is not a valid name", NAME_HELP)
    phases = _phases(top["phases"], scale)
    topology = choice(top.get("topology", "single"), ("topology",), tuple(TOPOLOGIES))
    faults = _faults(top["faults"], phases.inject, scale)
    _check_topology(faults, topology)
    raw_probes = top.get("probes", [])
    if not isinstance(raw_probes, list) or len(raw_probes) > MAX_ITEMS:
        raise Invalid(("probes",), f"{show(raw_probes)} is not a list of at most {MAX_ITEMS}", "a list of probes")
    probes = tuple(_probe(p, ("probes", str(i))) for i, p in enumerate(raw_probes))
    raw_arms = mapping_of(top["arms"], ("arms",), ARM_PROFILES)
    if not raw_arms:
        raise Invalid(("arms",), "is empty: nothing would run", " and/or ".join(ARM_PROFILES))
    rate = _workload(top["workload"]).rate
    arms = tuple(with_rate(_arm(profile, raw_arms[profile], ("arms", profile), probes, phases, faults), rate)
                 for profile in ARM_PROFILES if profile in raw_arms)
    _check_overlaps(faults, arms)
    check_spacing(faults, arms)
    schedule = choice(top.get("schedule", "fixed"), ("schedule",), SCHEDULES)
    if schedule == "compact":
        check_one_after_another(faults, arms)
    return ExperimentSpec(
        source=source, scale=scale, name=name,
        description=nonempty_text(top["description"], ("description",)),
        incident=_incident(top["incident"]),
        seed=integer(top["seed"], ("seed",), minimum=0),
        workload=_workload(top["workload"]),
        job=_job(top.get("job")),
        phases=phases, faults=faults, probes=probes, arms=arms,
        warm_up=boolean(top.get("warm_up", True), ("warm_up",)),
        cannot_discriminate=(nonempty_text(top["cannot_discriminate"], ("cannot_discriminate",))
                             if "cannot_discriminate" in top else None),
        claims=_claims(top.get("claims", [])),
        topology=topology,
        schedule=schedule,
    )


def _check_topology(faults: tuple[Fault, ...], topology: str) -> None:
    """A fault that names one broker of several, or whose kind needs several (`min_brokers`), or one worker's link
    to the driver, needs a stack that has them."""
    brokers = TOPOLOGIES[topology].brokers
    for i, fault in enumerate(faults):
        needed = fault_registry.FAULTS[fault.fault].min_brokers
        if needed > brokers:
            enough = [f"topology: {name}" for name, shape in TOPOLOGIES.items() if shape.brokers >= needed]
            raise Invalid(("faults", str(i), "fault"), f"{fault.fault} needs at least {needed} brokers, and this "
                          f"experiment runs on a {topology} stack of {brokers} broker{'s' if brokers > 1 else ''}",
                          " or ".join(enough) or f"a topology of {needed} brokers")
        if fault.target.startswith("kafka-") and brokers == 1:
            raise Invalid(("faults", str(i), "target"), f"{fault.target} names one broker of a cluster, and this "
                          f"experiment runs on a {topology} stack", "kafka; or topology: cluster")
        if fault.target.startswith("spark-driver-worker-"):
            workers = TOPOLOGIES[topology].workers
            node = int(fault.target.rpartition("-")[2])
            if workers == 1 or node > workers:
                raise Invalid(("faults", str(i), "target"), f"{fault.target} names one Spark worker's link to the "
                              f"driver, and this experiment runs on a {topology} stack of {workers} worker"
                              f"{'s' if workers > 1 else ''}", "spark-driver; or topology: cluster")
        broker = fault.params.get("broker")
        if fault.target == "broker" and isinstance(broker, int) and broker > brokers:
            raise Invalid(("faults", str(i), "params", "broker"), f"broker {broker} on a {topology} stack of "
                          f"{brokers} broker{'s' if brokers > 1 else ''}",
                          f"{'1' if brokers == 1 else f'1..{brokers}'}, leader or each; or topology: cluster")


def _claims(raw: object) -> tuple[str, ...]:
    from ..switches import SWITCHES

    path = ("claims",)
    if not isinstance(raw, list):
        raise Invalid(path, f"{show(raw)} is not a list", "a list of hardening switches: " + ", ".join(SWITCHES))
    for index, name in enumerate(raw):
        if not isinstance(name, str) or name not in SWITCHES:
            raise Invalid(path + (str(index),), f"unknown switch {show(name)}", ", ".join(SWITCHES))
    if len(set(raw)) != len(raw):
        raise Invalid(path, f"{show(raw)} names a switch twice", "distinct switches")
    return tuple(raw)

