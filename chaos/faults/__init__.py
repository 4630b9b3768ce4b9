"""Fault kinds, one module per family (network, process, checkpoint, data, s3), found by name in registry.py; what a
kind declares and the inject/heal protocol are in base.py. Where a new kind goes: docs/architecture.md.

Re-exported here: only what a run builds its faults with (`FaultContext`, `build`); anything else is imported from
its defining module (e.g. chaos.faults.registry).
"""
from __future__ import annotations

# Load order: the spec package first. Kinds validate with its toolkit (chaos.spec.fields) and the spec reads the
# registry, so the registry must not start loading before the toolkit has.
from .. import spec as _spec  # noqa: F401
from .base import FaultContext
from .registry import build

__all__ = ["FaultContext", "build"]
