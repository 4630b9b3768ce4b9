"""environment: an arm with `error` records (the environment failed, not the job) gets an UNKNOWN check."""
from __future__ import annotations

from .base import CheckDef
from .timeline import Check, Timeline, at_time


def check_environment(tl: Timeline) -> Check | None:
    if not tl.errors:
        return None
    first = tl.errors[0]
    more = f" (and {len(tl.errors) - 1} more)" if len(tl.errors) > 1 else ""
    return Check("environment", "UNKNOWN", "no environment error", f"{len(tl.errors)} error record(s)",
                 f"the environment failed at {at_time(first)}: {first.get('message')}{more}")


ENVIRONMENT = CheckDef("environment", None, lambda arm, _target: check_environment(arm.tl),
                       lambda data, _target: check_environment(data.tl), ends_early=True)
