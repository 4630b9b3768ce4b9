"""Experiment specs and suites: YAML in, a validated frozen spec out, or one SpecError line before anything starts.

Every error reads `<file>: <dotted.field.path>: <what is wrong>; allowed: <what is allowed>`. The schema is
documented in experiments/README.md; fault kinds and their params come from chaos/faults/ (registry.py).

  model.py       the typed spec (ExperimentSpec, Arm, Targets, Fault, Suite, ...) and its JSON form
  targets.py     targets declared by their params (TARGET_PARAMS): one entry each, validated like fault params
  fields.py      the validation toolkit: field kinds, bounds (LIMITS), durations, Invalid
  experiment.py  an experiment document to an ExperimentSpec, section by section
  loading.py     YAML files in, load_experiment, the incident files
  stored.py      a run store's spec.json back (load_stored)
  suites.py      suites: overrides, arms, seeds, scale (load_suite)

Re-exported here: only the names other modules import through chaos.spec; anything else is imported from its
defining module (e.g. chaos.spec.model).
"""
from __future__ import annotations

from job.settings import STATE_IMPLS

from ..errors import SpecError
from .experiment import (
    ARM_SETTINGS,
    FAULT_FIELDS,
    JOB_EXIT_CODES,
    JOB_FIELDS,
    PROBE_FIELDS,
    PROBE_METRICS,
    TARGET_FIELDS,
    TOP_FIELDS,
    TOP_REQUIRED,
    WORKLOAD_FIELDS,
)
from .fields import (
    DURATION_HELP,
    DURATION_RE,
    GLOB_RE,
    INCIDENT_FILE_RE,
    LIMITS,
    MAX_DURATION_S,
    MAX_INT,
    MAX_ITEMS,
    MAX_NAME,
    MAX_NUMBER,
    MAX_PAYLOAD_BYTES,
    MAX_SCALE,
    NAME_RE,
)
from .loading import check_incident, load_experiment
from .model import (
    ARM_PROFILES,
    CONTROL_PROFILES,
    EXPECTS,
    OPTION_MAPS,
    SCHEDULES,
    SHAPES,
    TRENDS,
    Arm,
    ExperimentSpec,
    Fault,
    Logs,
    Probe,
    Recovery,
    StateTarget,
    Targets,
)
from .stored import load_stored
from .suites import load_suite
from .targets import TARGET_PARAMS

__all__ = ["ARM_PROFILES", "ARM_SETTINGS", "Arm", "CONTROL_PROFILES", "DURATION_HELP", "DURATION_RE", "EXPECTS",
           "ExperimentSpec", "FAULT_FIELDS", "Fault", "GLOB_RE", "INCIDENT_FILE_RE", "JOB_EXIT_CODES", "JOB_FIELDS",
           "LIMITS", "Logs", "MAX_DURATION_S", "MAX_INT", "MAX_ITEMS", "MAX_NAME", "MAX_NUMBER", "MAX_PAYLOAD_BYTES",
           "MAX_SCALE", "NAME_RE", "OPTION_MAPS", "PROBE_FIELDS", "PROBE_METRICS", "Probe", "Recovery", "SCHEDULES",
           "SHAPES", "STATE_IMPLS", "SpecError", "StateTarget", "TARGET_FIELDS", "TARGET_PARAMS", "TOP_FIELDS",
           "TOP_REQUIRED", "TRENDS", "Targets", "WORKLOAD_FIELDS", "check_incident", "load_experiment", "load_stored",
           "load_suite"]
