"""The checkers' former single module, kept so `from chaos.checkers import ...` keeps working: the checks live in
the chaos.checks package (one module per seam, chaos/checks/__init__.py lists them), verdicts in chaos/verdicts.py.
New code imports from those."""
from __future__ import annotations

from .checks.arm import control_check, control_signature, judge_records
from .checks.base import ArmData, CheckDef, ControlData
from .checks.deployment import EXIT_MEANINGS, SECOND, check_exit_code, check_refused
from .checks.discrimination import (CONTROL, DISCRIMINATION_STATUSES, NOT_DISCRIMINATING, SUBJECT, discriminate,
                                    discrimination_result)
from .checks.environment import check_environment
from .checks.exactly_once import check_duplicated, check_lost
from .checks.judge import flaky_arms, judge_arm, judge_discrimination, judge_run, mutate_plan
from .checks.lineage import check_lineage
from .checks.logs import SIGNATURE_CHARS, check_logs, evidence_start, match_count
from .checks.progress import STEADY_END_S, STEADY_IDLE_S, check_progress
from .checks.recovery import (MOMENTARY_FAULTS, RecoveryTime, check_max_lag, check_recovery, disruptions,
                              healthy_sample, measure_recoveries, measure_recovery)
from .checks.registry import CHECKS, register, registered, unregister
from .checks.state import MIN_STATE_SAMPLES, Trend, check_state, fit_trend, growth_signature, state_trends
from .checks.steady_state import check_probe
from .checks.timeline import Check, Timeline, timeline
from .verdicts import INTERRUPTED, VERDICTS, worst

__all__ = [
    "ArmData", "CHECKS", "CONTROL", "Check", "CheckDef", "ControlData", "DISCRIMINATION_STATUSES", "EXIT_MEANINGS",
    "INTERRUPTED", "MIN_STATE_SAMPLES", "MOMENTARY_FAULTS", "NOT_DISCRIMINATING", "RecoveryTime", "SECOND",
    "SIGNATURE_CHARS", "STEADY_END_S", "STEADY_IDLE_S", "SUBJECT", "Timeline", "Trend", "VERDICTS",
    "check_duplicated", "check_environment", "check_exit_code", "check_lineage", "check_logs", "check_lost",
    "check_max_lag", "check_probe", "check_progress", "check_recovery", "check_refused", "check_state",
    "control_check", "control_signature", "discriminate", "discrimination_result", "disruptions", "evidence_start",
    "fit_trend", "flaky_arms", "growth_signature", "healthy_sample", "judge_arm", "judge_discrimination",
    "judge_records", "judge_run", "match_count", "measure_recoveries", "measure_recovery", "mutate_plan", "register",
    "registered", "state_trends", "timeline", "unregister", "worst",
]
