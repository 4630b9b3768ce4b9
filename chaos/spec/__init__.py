"""Experiment specs and suites: YAML in, a validated frozen spec out, or one SpecError line before anything starts.

Every error reads `<file>: <dotted.field.path>: <what is wrong>; allowed: <what is allowed>`. The schema is
documented in experiments/README.md; fault kinds and their params come from chaos/faults/ (registry.py).

  model.py       the typed spec (ExperimentSpec, Arm, Targets, Fault, Suite, ...) and its JSON form
  fields.py      the validation toolkit: field kinds, bounds (LIMITS), durations, Invalid
  experiment.py  an experiment document to an ExperimentSpec, section by section
  loading.py     YAML files in, load_experiment, the incident files
  stored.py      a run store's spec.json back (load_stored)
  suites.py      suites: overrides, arms, seeds, scale (load_suite)

Every name the former chaos/spec.py module had is importable from here; its private ones under their old names
(aliases of the public names of the modules above) for older importers.
"""
from __future__ import annotations

from job.settings import STATE_IMPLS, Settings

from ..errors import SpecError
from ..faults.base import Param
from ..history import PHASES, SAMPLE_METRICS
from ..triggers import Trigger

from .model import (ARM_PROFILES, Arm, CONTROL_PROFILES, EXPECTS, ExperimentSpec, Fault, Incident, Job, Logs,
                    OPTION_MAPS, Phases, Probe, Recovery, SHAPES, StateTarget, Suite, SuiteEntry, TRENDS, Targets,
                    Workload, _arm_from_plain, _known, _plain, _probe_from_plain, _spec_from_plain,
                    _targets_from_plain)
from .fields import (DURATION_HELP, DURATION_RE, DURATION_UNITS, DuplicateKey, EPSILON, GLOB_RE, INCIDENT_FILE_RE,
                     Invalid, LIMITS, MAX_DURATION_S, MAX_INT, MAX_ITEMS, MAX_NAME, MAX_NUMBER, MAX_PAYLOAD_BYTES,
                     MAX_SCALE, NAME_HELP, NAME_RE, Path_, boolean, bounds_text, check_scale, choice, dotted,
                     duration_field, find_duplicate_keys, finite, fmt_seconds, integer, is_int, is_number, limit_of,
                     mapping_of, nonempty_text, num, number, parse_duration, regex_field, required_key, show)
from .experiment import (ARM_SETTINGS, FAULT_FIELDS, JOB_EXIT_CODES, JOB_FIELDS, PROBE_FIELDS, PROBE_METRICS,
                         SHAPE_PARAMS, TARGET_FIELDS, TOP_FIELDS, TOP_REQUIRED, WORKLOAD_FIELDS, _arm,
                         _check_overlaps, _claims, _expectation, _fault, _faults, _incident, _job, _logs, _param,
                         _phase_list, _phases, _probe, _recovery, _state, _targets, _with_rate, _workload, option_map,
                         parse_experiment)
from .stored import (_stored_numbers, load_stored)
from .loading import (INCIDENTS_ENV, check_incident, incidents_dir, load_experiment, load_yaml)
from .suites import (REPLACE_MARK, SUITE_FIELDS, _entry_seed, _from_overrides, _merge, _only_arms, _unmarked,
                     load_suite)

# The former module's private names.
_DURATION = DURATION_RE
_DURATION_HELP = DURATION_HELP
_DuplicateKey = DuplicateKey
_EPSILON = EPSILON
_FAULT = FAULT_FIELDS
_GLOB = GLOB_RE
_INCIDENT_FILE = INCIDENT_FILE_RE
_Invalid = Invalid
_JOB = JOB_FIELDS
_NAME = NAME_RE
_NAME_HELP = NAME_HELP
_OPTION_MAPS = OPTION_MAPS
_PROBE = PROBE_FIELDS
_PROBE_METRICS = PROBE_METRICS
_SETTINGS = ARM_SETTINGS
_SHAPE_PARAMS = SHAPE_PARAMS
_SUITE = SUITE_FIELDS
_TARGETS = TARGET_FIELDS
_TOP = TOP_FIELDS
_TOP_REQUIRED = TOP_REQUIRED
_WORKLOAD = WORKLOAD_FIELDS
_bool = boolean
_bounds = bounds_text
_check_scale = check_scale
_choice = choice
_dotted = dotted
_duration = duration_field
_experiment = parse_experiment
_find_duplicate_keys = find_duplicate_keys
_finite = finite
_int = integer
_is_int = is_int
_is_number = is_number
_limit = limit_of
_load_yaml = load_yaml
_mapping = mapping_of
_num = num
_number = number
_option_map = option_map
_regex = regex_field
_required = required_key
_seconds = fmt_seconds
_show = show
_text = nonempty_text

__all__ = ["ARM_PROFILES", "ARM_SETTINGS", "Arm", "CONTROL_PROFILES", "DURATION_HELP", "DURATION_RE", "DURATION_UNITS",
           "DuplicateKey", "EPSILON", "EXPECTS", "ExperimentSpec", "FAULT_FIELDS", "Fault", "GLOB_RE",
           "INCIDENTS_ENV", "INCIDENT_FILE_RE", "Incident", "Invalid", "JOB_EXIT_CODES", "JOB_FIELDS", "Job",
           "LIMITS", "Logs", "MAX_DURATION_S", "MAX_INT", "MAX_ITEMS", "MAX_NAME", "MAX_NUMBER", "MAX_PAYLOAD_BYTES",
           "MAX_SCALE", "NAME_HELP", "NAME_RE", "OPTION_MAPS", "PHASES", "PROBE_FIELDS", "PROBE_METRICS", "Param",
           "Path_", "Phases", "Probe", "REPLACE_MARK", "Recovery", "SAMPLE_METRICS", "SHAPES", "SHAPE_PARAMS",
           "STATE_IMPLS", "SUITE_FIELDS", "Settings", "SpecError", "StateTarget", "Suite", "SuiteEntry",
           "TARGET_FIELDS", "TOP_FIELDS", "TOP_REQUIRED", "TRENDS", "Targets", "Trigger", "WORKLOAD_FIELDS",
           "Workload", "_DURATION", "_DURATION_HELP", "_DuplicateKey", "_EPSILON", "_FAULT", "_GLOB",
           "_INCIDENT_FILE", "_Invalid", "_JOB", "_NAME", "_NAME_HELP", "_OPTION_MAPS", "_PROBE", "_PROBE_METRICS",
           "_SETTINGS", "_SHAPE_PARAMS", "_SUITE", "_TARGETS", "_TOP", "_TOP_REQUIRED", "_WORKLOAD", "_arm",
           "_arm_from_plain", "_bool", "_bounds", "_check_overlaps", "_check_scale", "_choice", "_claims", "_dotted",
           "_duration", "_entry_seed", "_expectation", "_experiment", "_fault", "_faults", "_find_duplicate_keys",
           "_finite", "_from_overrides", "_incident", "_int", "_is_int", "_is_number", "_job", "_known", "_limit",
           "_load_yaml", "_logs", "_mapping", "_merge", "_num", "_number", "_only_arms", "_option_map", "_param",
           "_phase_list", "_phases", "_plain", "_probe", "_probe_from_plain", "_recovery", "_regex", "_required",
           "_seconds", "_show", "_spec_from_plain", "_state", "_stored_numbers", "_targets", "_targets_from_plain",
           "_text", "_unmarked", "_with_rate", "_workload", "boolean", "bounds_text", "check_incident", "check_scale",
           "choice", "dotted", "duration_field", "find_duplicate_keys", "finite", "fmt_seconds", "incidents_dir",
           "integer", "is_int", "is_number", "limit_of", "load_experiment", "load_stored", "load_suite", "load_yaml",
           "mapping_of", "nonempty_text", "num", "number", "option_map", "parse_duration", "parse_experiment",
           "regex_field", "required_key", "show"]
