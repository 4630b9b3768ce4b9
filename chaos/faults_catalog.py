"""Re-exports for importers of the former catalog module: every fault kind is declared in its family's module under
chaos/faults/ and found by name in chaos/faults/registry.py."""
from __future__ import annotations

from .faults.base import FaultKind, Param, ParamKind
from .faults.registry import FAULTS, INSTANT, TRIGGERABLE

FaultType = FaultKind

__all__ = ["FAULTS", "FaultKind", "FaultType", "INSTANT", "Param", "ParamKind", "TRIGGERABLE"]
