"""The JSON Schema of an experiment spec, built from the validator's own tables (chaos/spec/, the fault kinds,
the lifecycle triggers), so editors can complete and check a spec as it is written. `chaos schema` prints it;
docs/spec.schema.json is the committed copy (a unit test keeps it equal to this).

The schema says what each field may hold: its name, type, choices and bounds (LIMITS). What depends on other fields
(a fault must end inside the inject phase, a shape's own params, a recovery bound within the recover phase) is for
`chaos validate`, which gives the one-line error a run would give.
"""
from __future__ import annotations

from collections.abc import Mapping

from infra.components import TOPOLOGIES

from . import spec, triggers
from .faults.base import Param
from .faults.registry import FAULTS
from .history import PHASES
from .spec.model import INVARIANTS

SCHEMA_ID = "https://streaming-state-chaos.invalid/spec.schema.json"  # an identifier only; nothing is fetched


def _duration(minimum: float = 0.0) -> dict:
    return {"anyOf": [{"type": "string", "pattern": spec.DURATION_RE.pattern},
                      {"type": "number", "minimum": minimum, "maximum": spec.MAX_DURATION_S}],
            "description": spec.DURATION_HELP}


def _int(field: str, minimum: int | None = 0, maximum: float | None = None) -> dict:
    cap = int(spec.LIMITS.get(field, spec.MAX_INT))
    return {"type": "integer", "minimum": -cap if minimum is None else minimum,
            "maximum": cap if maximum is None else min(cap, maximum)}


def _number(field: str, minimum: float | None = None, maximum: float | None = None, above: float | None = None) -> dict:
    cap = spec.LIMITS.get(field, spec.MAX_NUMBER)
    out: dict = {"type": "number", "maximum": cap if maximum is None else min(cap, maximum)}
    if above is not None:
        out["exclusiveMinimum"] = above
    else:
        out["minimum"] = -cap if minimum is None else minimum
    return out


def _object(properties: dict, required: tuple[str, ...] = (), description: str | None = None) -> dict:
    out: dict = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = list(required)
    if description:
        out["description"] = description
    return out


def _text() -> dict:
    return {"type": "string", "minLength": 1}


def _phase_list() -> dict:
    return {"type": "array", "items": {"enum": list(PHASES)}, "minItems": 1, "uniqueItems": True}


def _param(name: str, param: Param) -> dict:
    if param.kind == "duration":
        out = _duration(param.minimum or 0.0)
    elif param.kind == "choice":
        one = {"enum": list(param.choices)}
        out = {"anyOf": [one, {"type": "array", "items": one, "minItems": 1, "uniqueItems": True}]} if param.many \
            else one
    elif param.kind == "glob":
        out = {"type": "string", "pattern": spec.GLOB_RE.pattern}
    else:
        cap = spec.LIMITS.get(name, spec.MAX_INT if param.kind == "int" else spec.MAX_NUMBER)
        bound = {"type": "integer" if param.kind == "int" else "number",
                 "minimum": -cap if param.minimum is None else param.minimum,
                 "maximum": cap if param.maximum is None else min(cap, param.maximum)}
        out = {"anyOf": [bound, {"enum": list(param.words)}]} if param.words else bound
    return {**out, "description": param.summary}


def _fault(name: str) -> dict:
    kind = FAULTS[name]
    trigger = _object({
        "event": {"anyOf": [{"enum": list(triggers.EVENTS)},
                            {"type": "array", "items": {"enum": list(triggers.EVENTS)}, "minItems": 1}]},
        "batch": _int("batch"),
        "skip": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 1000},
                           {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 1000},
                            "minItems": 2, "maxItems": 2}]},
        "after": {"anyOf": [_duration(), {"type": "array", "items": _duration(), "minItems": 2, "maxItems": 2}]},
        "state_kind": {"enum": list(triggers.STATE_KINDS)},
        "bytes": {"anyOf": [{"type": "integer", "minimum": 1},
                            {"type": "string", "pattern": "^" + triggers.SIZE_RE.pattern + "$"}],
                  "description": "state_reached only: RocksDB SST bytes, or a size such as 1GiB"},
        "for": _duration(),
    }, required=("event",), description="fire on a lifecycle event of the job instead of at a time")
    return _object({
        "fault": {"const": name},
        "target": {"enum": list(kind.targets)},
        "at": _duration(), "duration": _duration(), "start_jitter": _duration(),
        "params": _params(kind.params),
        "on": trigger,
    }, required=("fault",), description=kind.summary)


def _params(declared: Mapping[str, Param], description: str | None = None) -> dict:
    return _object({p: _param(p, param) for p, param in declared.items()},
                   required=tuple(p for p, param in declared.items() if param.required), description=description)


def _targets() -> dict:
    bound = _int("lost")
    return _object({
        "progress": {"type": "boolean"},
        "recovery": _object({"within": _duration(), "healthy_samples": _int("healthy_samples", 1),
                             "lag_below": {"anyOf": [_number("lag_below", above=0), _duration()]},
                             "grouped": {"type": "boolean"}, "control_margin": _duration()},
                            required=("within", "lag_below")),
        "max_lag": _int("max_lag"), "lost": bound, "duplicated": _int("duplicated"),
        "state": _object({"trend": {"enum": list(spec.TRENDS)}, "during": _phase_list(),
                          "warmup": _number("warmup", 0.0, 0.9), "threshold": _number("threshold", above=0),
                          "bytes_threshold": _number("bytes_threshold", above=0),
                          "bytes_per_event": _number("bytes_per_event", 0.0),
                          "max_rows_per_key": _number("max_rows_per_key", above=0), "max_rows": _int("max_rows", 1)}),
        "logs": _object({"expected": {"type": "array", "items": _text(), "maxItems": spec.MAX_ITEMS},
                         "forbidden": {"type": "array", "items": _text(), "maxItems": spec.MAX_ITEMS},
                         "min_matches": _int("min_matches", 1)}),
        "lineage": {"type": "boolean"},
        "refused_within": _duration(),
        "exit_code": {"enum": list(spec.JOB_EXIT_CODES)},
        **{name: _params(declared.params, declared.summary) for name, declared in spec.TARGET_PARAMS.items()},
    })


def _settings() -> dict:
    option_map = {"type": "object", "additionalProperties": {"type": ["string", "number", "null"]}}
    kinds = {"max_offsets_per_trigger": {"anyOf": [_int("max_offsets_per_trigger", 1), {"type": "null"}]},
             "catch_up_factor": {"anyOf": [_number("catch_up_factor", above=0), {"type": "null"}]},
             "min_batches_to_retain": _int("min_batches_to_retain", 2), "failure_budget": _int("failure_budget"),
             "state_impl": {"enum": list(spec.STATE_IMPLS)}}
    return _object({name: kinds.get(name, option_map if name in spec.OPTION_MAPS else {"type": "boolean"})
                    for name in spec.ARM_SETTINGS})


def _arm(control: bool) -> dict:
    properties = {"settings": _settings(), "targets": _targets(),
                  "faults": {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1,
                             "uniqueItems": True}}
    if control:
        properties.update(expect={"enum": list(spec.EXPECTS)}, note=_text())
    else:  # a subject's invariants, each waived only with the measured reason why
        properties["waive"] = {**_object({name: _text() for name in INVARIANTS}, description="invariants this arm "
                                         "is not judged on, each with the measured reason why"), "minProperties": 1}
    return _object(properties, required=("targets",))


def spec_schema() -> dict:
    """The JSON Schema (draft 2020-12) of an experiment spec file."""
    workload = _object({
        "shape": {"enum": list(spec.SHAPES)}, "keys": _int("keys", 1), "rate": _number("rate", above=0),
        "partitions": _int("partitions", 1), "payload_bytes": _int("payload_bytes", 0, spec.MAX_PAYLOAD_BYTES),
        "zipf_s": _number("zipf_s", above=0), "hot_key_share": _number("hot_key_share", 0.01, 0.99),
        "rotation_live_actors": _int("rotation_live_actors", 1), "rotation_gap": _duration(),
        "rotation_events": _int("rotation_events", 2),
        "attribute_bytes": _int("attribute_bytes", 0, spec.MAX_PAYLOAD_BYTES),
    }, required=("shape", "rate"))
    properties = {
        "name": {"type": "string", "pattern": spec.NAME_RE.pattern, "maxLength": spec.MAX_NAME},
        "description": _text(),
        "incident": _object({"file": {"type": "string", "pattern": spec.INCIDENT_FILE_RE.pattern}, "error": _text()},
                            required=("file", "error")),
        "seed": _int("seed"),
        "workload": workload,
        "job": _object({name: {"anyOf": [_duration(), {"type": "null"}]} for name in spec.JOB_FIELDS}),
        "phases": _object({name: _duration() for name in PHASES}, required=PHASES),
        "faults": {"type": "array", "minItems": 1, "maxItems": spec.MAX_ITEMS,
                   "items": {"oneOf": [_fault(name) for name in FAULTS]}},
        "probes": {"type": "array", "maxItems": spec.MAX_ITEMS, "items": _object({
            "metric": {"enum": list(spec.PROBE_METRICS)}, "min": _number("min"), "max": _number("max"),
            "phases": _phase_list(), "tolerance": _number("tolerance", 0.0, 0.99)}, required=("metric",))},
        "arms": {**_object({profile: _arm(profile in spec.CONTROL_PROFILES) for profile in spec.ARM_PROFILES}),
                 "minProperties": 1},
        "warm_up": {"type": "boolean"},
        "cannot_discriminate": _text(),
        "claims": {"type": "array", "items": {"enum": list(_switches())}, "uniqueItems": True},
        "topology": {"enum": list(TOPOLOGIES), "default": "single"},
        "schedule": {"enum": list(spec.SCHEDULES), "default": "fixed"},
    }
    missing = set(spec.TOP_FIELDS) ^ set(properties)
    assert not missing, f"the schema and chaos.spec's top-level fields differ: {sorted(missing)}"
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID,
            "title": "streaming-state-chaos experiment spec",
            "description": "experiments/*.yaml; the fields are documented in experiments/README.md",
            **_object(properties, required=spec.TOP_REQUIRED)}


def _switches() -> tuple[str, ...]:
    from .switches import SWITCHES

    return tuple(SWITCHES)
