"""The recovery target of an arm (chaos/checks/recovery.py judges it): parsed against the recover phase it must be
observed in, and its lag bound, when given in seconds of input, turned into records at the workload's rate."""
from __future__ import annotations

import dataclasses

from .fields import EPSILON, Invalid, Path_, boolean, duration_field, fmt_seconds, integer, mapping_of, number
from .model import Arm, Phases, Recovery


def recovery_target(raw: object, path: Path_, phases: Phases) -> Recovery:
    """The `recovery` target: its bound must fit the (scaled) recover phase to be observed."""
    section = mapping_of(raw, path, ("within", "healthy_samples", "lag_below", "grouped", "control_margin"),
                         required=("within", "lag_below"))
    within = duration_field(section["within"], path + ("within",), positive=True)
    if within > phases.recover + EPSILON:
        raise Invalid(path + ("within",), f"{fmt_seconds(within)} is longer than the recover phase "
                       f"({fmt_seconds(phases.recover)} after scaling): recovery could not be observed",
                       "within <= phases.recover (targets are not scaled)")
    raw_lag = section["lag_below"]
    if isinstance(raw_lag, str):  # seconds of input: turned into records with the workload's rate (with_rate)
        seconds = duration_field(raw_lag, path + ("lag_below",), positive=True)
        lag, lag_s = -seconds, seconds
    else:
        lag, lag_s = number(raw_lag, path + ("lag_below",), above=0), None
    return Recovery(within=within,
                    healthy_samples=integer(section.get("healthy_samples", 3), path + ("healthy_samples",), minimum=1),
                    lag_below=lag, lag_below_s=lag_s,
                    grouped=boolean(section["grouped"], path + ("grouped",)) if "grouped" in section else False,
                    control_margin=(duration_field(section["control_margin"], path + ("control_margin",))
                                    if "control_margin" in section else None))


def with_rate(arm: Arm, rate: float) -> Arm:
    """A recovery bound given in seconds of input, in records at the workload's rate."""
    recovery = arm.targets.recovery
    if recovery is None or recovery.lag_below_s is None:
        return arm
    records = round(recovery.lag_below_s * rate, 3)
    targets = dataclasses.replace(arm.targets, recovery=dataclasses.replace(recovery, lag_below=records))
    return dataclasses.replace(arm, targets=targets)
