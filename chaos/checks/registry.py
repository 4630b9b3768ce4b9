"""The registry of checks: every check an arm can be judged by, in the order results.json lists them, and the guard
every call goes through.

A check is a `CheckDef` (chaos/checks/base.py) in its own module: the target it judges, how it judges an arm, how it
judges the control's data for discrimination, and whether an arm judged by it may end early. `CHECKS` below is the
only list of them, gathered from the seam modules in `SEAMS`; `judge_arm_checks` and `judge_control_checks` run the
ones an arm's targets set, and chaos.arm.schedule.ends_early asks `holding_back` which of them keep an arm running to
its end.

Every call is guarded, as Jepsen's check-safe does: a check that raises becomes an UNKNOWN check carrying the error
(`raised`), the other checks are judged as usual and the run's results are written. A bug in a check is a broken
harness, never a broken job, so it can never pass as PASSED or vanish as a lost results.json.
"""
from __future__ import annotations

import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from ..spec import Targets
from . import (
    deployment,
    environment,
    exactly_once,
    lineage,
    logs,
    outage,
    output_latency,
    progress,
    recovery,
    state,
    steady_state,
)
from .base import ArmData, CheckDef, ControlData, Judged, is_outcome
from .timeline import Check

# The seam modules, in the order their checks appear in results.json. Within a module its checks come in the order
# it defines them: a new check in an existing seam is found here without a line of its own; a new seam module is one
# line in SEAMS (as a new fault family is one line in chaos/faults/registry.py FAMILIES).
SEAMS = (environment, progress, recovery, exactly_once, output_latency, state, logs, lineage, deployment, outage,
         steady_state)


def declared(module: ModuleType) -> list[CheckDef]:
    """The `CheckDef`s a seam module defines at its top level, in the order it defines them; one it imports from
    another module (its judge was written there) is that module's."""
    found: list[CheckDef] = []
    for value in vars(module).values():
        home = getattr(value.judge, "__module__", module.__name__) if isinstance(value, CheckDef) else None
        if home == module.__name__ and all(value is not other for other in found):
            found.append(value)
    return found


CHECKS: list[CheckDef] = [check for seam in SEAMS for check in declared(seam)]


def register(check: CheckDef, after: str | None = None) -> CheckDef:
    """Add a check (last, or right after the check named `after`); its name must be new."""
    if any(c.name == check.name for c in CHECKS):
        raise ValueError(f"a check named {check.name!r} is already registered")
    names = [c.name for c in CHECKS]
    CHECKS.insert(names.index(after) + 1 if after is not None else len(CHECKS), check)
    return check


def unregister(name: str) -> None:
    CHECKS[:] = [c for c in CHECKS if c.name != name]


@contextmanager
def registered(check: CheckDef, after: str | None = None) -> Iterator[CheckDef]:
    """A check registered for the duration of a block (tests)."""
    register(check, after)
    try:
        yield check
    finally:
        unregister(check.name)


def raised(name: str, error: BaseException) -> Check:
    """The UNKNOWN check a check that raised becomes: the error, and where in the check it was raised."""
    frames = traceback.extract_tb(error.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    text = " ".join(str(error).split())
    return Check(name, "UNKNOWN", "the check runs to its verdict", f"raised {type(error).__name__}",
                 f"the check raised {type(error).__name__}{where}: {text or '(no message)'}; the harness failed "
                 "here, not the job")


def guarded(name: str, judge: Callable[..., Judged], *args: Any) -> list[Check]:
    """Call one check; its result as a list; an exception (or a result that is not a Check) as UNKNOWN."""
    try:
        result = judge(*args)
        found = [] if result is None else [result] if isinstance(result, Check) else list(result)
        wrong = next((c for c in found if not isinstance(c, Check)), None)
        if wrong is not None:
            raise TypeError(f"the check returned {type(wrong).__name__}, not a Check")
        return found
    except Exception as error:  # noqa: BLE001 - the guard: any error in a check is that check's UNKNOWN
        return [raised(name, error)]


def judge_arm_checks(arm: ArmData) -> list[Check]:
    """Every registered check the arm's judged targets set (its own, and a subject's invariants: chaos.spec.model
    Arm.judged_targets), judged on its own data, in registry order; an invariant the arm waives is left out."""
    spec_arm = arm.spec.arm(arm.profile)
    targets = spec_arm.judged_targets
    checks: list[Check] = []
    for check in list(CHECKS):
        value = check.target_of(targets)
        if value is not None and check.name not in spec_arm.waive:
            checks += guarded(check.name, check.judge, arm, value)
    return checks


def judge_control_checks(data: ControlData, targets: Targets) -> list[Check]:
    """Every registered check the hardened `targets` set, on the control's data (discrimination)."""
    checks: list[Check] = []
    for check in list(CHECKS):
        value = check.target_of(targets)
        if value is not None and check.control is not None:
            checks += guarded(check.name, check.control, data, value)
    return checks


def holding_back(targets: Targets) -> list[str]:
    """The checks `targets` set that need the arm to run to its end (ends_early False), in registry order."""
    return [c.name for c in CHECKS if c.target is not None and not c.ends_early and c.target_of(targets) is not None]


def outcomes_set(targets: Targets) -> list[str]:
    """The outcome checks (chaos.checks.base.OUTCOME_CHECKS, probes) `targets` set, in registry order: what a
    control judged by these targets must run to its end for."""
    return [c.name for c in CHECKS if c.target is not None and c.target_of(targets) is not None
            and (is_outcome(c.name) or c.target == "probes")]
