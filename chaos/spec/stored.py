"""A run store's spec.json back as the spec that ran (`load_stored`), held to the bounds a YAML spec is."""
from __future__ import annotations

from pathlib import Path

from ..errors import SpecError
from ..faults import registry as fault_registry  # by module: its names are read when a spec is loaded
from .fields import (
    MAX_DURATION_S,
    NAME_HELP,
    NAME_RE,
    Invalid,
    Path_,
    check_scale,
    choice,
    dotted,
    fmt_seconds,
    integer,
    is_int,
    number,
    show,
)
from .model import ARM_PROFILES, ExperimentSpec


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
        integer(spec.seed, ("seed",), minimum=0)
        if not NAME_RE.match(spec.name):
            raise Invalid(("name",), f"{show(spec.name)} is not a valid name", NAME_HELP)
        check_scale(spec.scale, str(path), ("scale",))
        for index, fault in enumerate(spec.faults):
            if fault.fault not in fault_registry.FAULTS:
                raise Invalid(("faults", str(index), "fault"), f"unknown fault {show(fault.fault)}",
                               ", ".join(fault_registry.FAULTS))
        for arm in spec.arms:
            choice(arm.profile, ("arms", "profile"), ARM_PROFILES)
        if spec.phases.total > MAX_DURATION_S:
            raise Invalid(("phases",), f"{fmt_seconds(spec.phases.total)} in all",
                          f"at most {fmt_seconds(MAX_DURATION_S)}")
    except Invalid as exc:
        raise SpecError(f"{path}: {dotted(exc.path)}: {exc.what}; allowed: {exc.allowed}") from None
    return spec


def _stored_numbers(node: object, path: Path_) -> None:
    """Every number of a stored spec within the bound of its field (LIMITS, else its kind's default)."""
    if isinstance(node, dict):
        for key, value in node.items():
            _stored_numbers(value, path + (str(key),))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            _stored_numbers(value, path + (str(index),))
    elif is_int(node):
        integer(node, path)
    elif isinstance(node, float):
        number(node, path)
