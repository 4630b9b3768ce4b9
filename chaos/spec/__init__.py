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

Every public name the former chaos/spec.py module had is importable from here.
"""
from __future__ import annotations

from job.settings import STATE_IMPLS, Settings

from ..errors import SpecError
from ..faults.base import Param
from ..history import PHASES, SAMPLE_METRICS
from ..triggers import Trigger

from .model import (ARM_PROFILES, Arm, CONTROL_PROFILES, EXPECTS, ExperimentSpec, Fault, Incident, Job, Logs,
                    OPTION_MAPS, Phases, Probe, Recovery, SCHEDULES, SHAPES, StateTarget, Suite, SuiteEntry, TRENDS, Targets,
                    Workload)
from .fields import (DURATION_HELP, DURATION_RE, DURATION_UNITS, DuplicateKey, EPSILON, GLOB_RE, INCIDENT_FILE_RE,
                     Invalid, LIMITS, MAX_DURATION_S, MAX_INT, MAX_ITEMS, MAX_NAME, MAX_NUMBER, MAX_PAYLOAD_BYTES,
                     MAX_SCALE, NAME_HELP, NAME_RE, Path_, boolean, bounds_text, check_scale, choice, dotted,
                     duration_field, find_duplicate_keys, finite, fmt_seconds, integer, is_int, is_number, limit_of,
                     mapping_of, nonempty_text, num, number, parse_duration, regex_field, required_key, show)
from .experiment import (ARM_SETTINGS, FAULT_FIELDS, JOB_EXIT_CODES, JOB_FIELDS, PROBE_FIELDS, PROBE_METRICS,
                         SHAPE_PARAMS, TARGET_FIELDS, TOP_FIELDS, TOP_REQUIRED, WORKLOAD_FIELDS, option_map,
                         parse_experiment)
from .targets import TARGET_PARAMS, TargetParams
from .stored import (load_stored)
from .loading import (INCIDENTS_ENV, check_incident, incidents_dir, load_experiment, load_yaml)
from .suites import (REPLACE_MARK, SUITE_FIELDS, load_suite)


__all__ = ["ARM_PROFILES", "ARM_SETTINGS", "Arm", "CONTROL_PROFILES", "DURATION_HELP", "DURATION_RE",
           "DURATION_UNITS", "DuplicateKey", "EPSILON", "EXPECTS", "ExperimentSpec", "FAULT_FIELDS", "Fault",
           "GLOB_RE", "INCIDENTS_ENV", "INCIDENT_FILE_RE", "Incident", "Invalid", "JOB_EXIT_CODES", "JOB_FIELDS",
           "Job", "LIMITS", "Logs", "MAX_DURATION_S", "MAX_INT", "MAX_ITEMS", "MAX_NAME", "MAX_NUMBER",
           "MAX_PAYLOAD_BYTES", "MAX_SCALE", "NAME_HELP", "NAME_RE", "OPTION_MAPS", "PHASES", "PROBE_FIELDS",
           "PROBE_METRICS", "Param", "Path_", "Phases", "Probe", "REPLACE_MARK", "Recovery", "SAMPLE_METRICS",
           "SCHEDULES", "SHAPES", "SHAPE_PARAMS", "STATE_IMPLS", "SUITE_FIELDS", "Settings", "SpecError", "StateTarget", "Suite",
           "SuiteEntry", "TARGET_FIELDS", "TARGET_PARAMS", "TargetParams", "TOP_FIELDS", "TOP_REQUIRED", "TRENDS",
           "Targets", "Trigger", "WORKLOAD_FIELDS", "Workload", "boolean", "bounds_text", "check_incident",
           "check_scale", "choice",
           "dotted", "duration_field", "find_duplicate_keys", "finite", "fmt_seconds", "incidents_dir", "integer",
           "is_int", "is_number", "limit_of", "load_experiment", "load_stored", "load_suite", "load_yaml",
           "mapping_of", "nonempty_text", "num", "number", "option_map", "parse_duration", "parse_experiment",
           "regex_field", "required_key", "show"]
