"""Every fault kind, found by name: the KINDS of each family module, in this order (the order of error messages and
of the schema). A new kind goes into its family's KINDS; a new family is one module and one line in FAMILIES."""
from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from . import broker, checkpoint, clock, data, disk, network, process, s3
from .base import BaseFault, FaultContext, FaultKind

if TYPE_CHECKING:
    from ..spec.model import Fault

FAMILIES = (network, process, broker, checkpoint, data, s3, disk, clock)

FAULTS: Mapping[str, FaultKind] = MappingProxyType({kind.name: kind for family in FAMILIES for kind in family.KINDS})
assert len(FAULTS) == sum(len(family.KINDS) for family in FAMILIES), "a fault kind is declared twice"
assert all(kind.implementation is not None for kind in FAULTS.values()), "every fault kind needs an implementation"

# Faults that may fire on a lifecycle event (`on:`, chaos/triggers.py); those that heal may also take `for`.
TRIGGERABLE = tuple(name for name, kind in FAULTS.items() if kind.triggerable)
INSTANT = tuple(name for name, kind in FAULTS.items() if kind.instant)  # act at once: `for` means nothing to them
IMPLEMENTATIONS: Mapping[str, type[BaseFault]] = MappingProxyType(
    {name: kind.implementation for name, kind in FAULTS.items() if kind.implementation is not None})


def kind_of(name: object) -> FaultKind | None:
    """The kind a fault's name (a spec's, a stored history record's) names; None for a name no family declares (a
    stored run's kind since renamed). Read at call time, so every module asks the one registry."""
    return FAULTS.get(name) if isinstance(name, str) else None


def build(fault: Fault, ctx: FaultContext) -> BaseFault:
    return IMPLEMENTATIONS[fault.fault](fault, ctx)
