"""Fault kinds, one module per family (network, process, checkpoint, data, s3), found by name in registry.py; what a
kind declares and the inject/heal protocol are in base.py. Where a new kind goes: docs/architecture.md.

The names below are re-exported for importers of the former chaos/faults.py module.
"""
from __future__ import annotations

# Load order: the spec package first. Kinds validate with its toolkit (chaos.spec.fields) and the spec reads the
# registry, so the registry must not start loading before the toolkit has.
from .. import spec as _spec  # noqa: F401
from .base import JOB_EXIT_REFUSED, ArmControl, BaseFault, FaultContext, FaultError, FaultKind, Param, job_line
from .checkpoint import CorruptCheckpoint, SecondDeployment
from .data import WorkloadWindow
from .network import PROXIES, Flap, ProxyDown, Toxic
from .process import Kill, Pause, ProcessFault, executor_pids
from .registry import FAULTS, IMPLEMENTATIONS, INSTANT, TRIGGERABLE, build
from .s3 import S3Rule, glob_regex

__all__ = ["ArmControl", "BaseFault", "CorruptCheckpoint", "FAULTS", "FaultContext", "FaultError", "FaultKind", "Flap",
           "IMPLEMENTATIONS", "INSTANT", "JOB_EXIT_REFUSED", "Kill", "PROXIES", "Param", "Pause", "ProcessFault",
           "ProxyDown", "S3Rule", "SecondDeployment", "TRIGGERABLE", "Toxic", "WorkloadWindow", "build",
           "executor_pids", "glob_regex", "job_line"]
