"""environment: an arm with `error` records (the environment failed, not the job) gets an UNKNOWN check. A trigger
that did not happen while the job's driver was down by its own exit is the job's failure (judged by the exits
check, chaos/checks/deployment.py), not the environment's."""
from __future__ import annotations

from collections.abc import Mapping

from .base import CheckDef
from .deployment import down_by_itself
from .timeline import Check, Timeline, at_time, time_of


def environment_errors(tl: Timeline) -> list[Mapping[str, object]]:
    """The error records that are the environment's: all but a trigger that could not happen because the job's
    driver had ended by itself (histories written before the harness stopped recording those as errors)."""
    return [e for e in tl.errors
            if not ("trigger " in str(e.get("message")) and "did not happen" in str(e.get("message"))
                    and down_by_itself(tl, time_of(e)))]


def check_environment(tl: Timeline) -> Check | None:
    errors = environment_errors(tl)
    if not errors:
        return None
    first = errors[0]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return Check("environment", "UNKNOWN", "no environment error", f"{len(errors)} error record(s)",
                 f"the environment failed at {at_time(first)}: {first.get('message')}{more}")


ENVIRONMENT = CheckDef("environment", None, lambda arm, _target: check_environment(arm.tl),
                       lambda data, _target: check_environment(data.tl), ends_early=True)
