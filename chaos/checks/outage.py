"""outage_reported: an outage that lasts is reported by the job within its bound, the way its users learn of it.

A job that restarts forever through an outage that will not end looks alive and serves nothing; its operators
learn of the outage only from what stops arriving. The hardened job spends a failure budget and then ends with a
documented failure code and one `job:` line (job/__main__.py). Judged from the history: from the start of the first
lasting fault (its `injecting` record; a workload shape, a kind that declares a `reshape`, is no outage) to the job's
driver exiting by itself with a documented failure code. An exit the harness caused (a kill, a stop: its record
carries a `cause`) and an exit by signal are no report.
"""
from __future__ import annotations

from collections.abc import Mapping

from .base import CheckDef, ControlData, settle
from .recovery import shapes_workload
from .timeline import Check, Timeline, at_time, secs, time_of

# job/__main__.py: 1 failed and not restarted, 2 bad arguments, 3 refused, 4 failure budget exceeded, 5 no state
# version verifies, 6 lease lost, 7 a failure that repeats. 0 is a requested stop; a negative code (or 128 + N) is
# a signal.
REPORTED_CODES = {1: "failed, not restarted", 2: "bad arguments", 3: "refused", 4: "failure budget exceeded",
                  5: "no retained state verifies", 6: "lost its lease", 7: "a failure repeated on every restart"}


def outage_start(tl: Timeline) -> Mapping[str, object] | None:
    """The first `injecting` record of a fault that is not a workload shape."""
    return next((f for f in tl.faults if f.get("state") == "injecting"
                 and not shapes_workload(f)), None)


def job_report(tl: Timeline, after: float) -> Mapping[str, object] | None:
    """The first exit of the job's driver after `after` that the job chose: no harness cause, a documented code."""
    return next((j for j in tl.jobs if j.get("process") == "job-driver" and j.get("event") == "exited"
                 and time_of(j) >= after and not j.get("cause") and j.get("code") in REPORTED_CODES), None)


def check_outage_reported(tl: Timeline, within: float) -> Check:
    expected = f"an outage reported (the job exits with a documented failure code) within {secs(within)}"
    start = outage_start(tl)
    if start is None:
        return Check("outage_reported", "NODATA", expected, "no fault", "no lasting fault was injected")
    report = job_report(tl, time_of(start))
    where = f"{start.get('name')} on {start.get('target')} from {at_time(start)}"
    if report is None:
        return Check("outage_reported", "FAILED", expected, "never reported",
                     f"the job never reported the outage ({where}): its driver did not exit by itself with a "
                     f"documented failure code before the history ends at t={tl.end:.1f}s")
    delay = time_of(report) - time_of(start)
    code = report.get("code")
    measured = f"exit {code} ({REPORTED_CODES[code]}) after {secs(delay)}"  # type: ignore[index]
    if delay > within:
        return Check("outage_reported", "FAILED", expected, measured,
                     f"the job reported the outage ({where}) only at {at_time(report)}: {secs(delay)}, past the "
                     f"bound of {secs(within)}")
    return Check("outage_reported", "PASSED", expected, measured,
                 f"the job reported the outage ({where}) at {at_time(report)} with exit {code}")


def _judge(tl: Timeline, target: Mapping[str, float]) -> Check:
    return check_outage_reported(tl, float(target["within"]))


def control_outage_reported(data: ControlData, target: Mapping[str, float]) -> Check:
    # A report is final; "never reported" stands only on a whole history (the job might have reported later).
    check = _judge(data.tl, target)
    never = None if data.complete or check.measured != "never reported" else data.incomplete()
    return settle(check, data, fail_unless=never)


OUTAGE_REPORTED = CheckDef("outage_reported", "outage_reported", lambda arm, target: _judge(arm.tl, target),
                           control_outage_reported)
