"""How the job's deployments ended: refused_within (every second deployment refused within the bound) and
exit_code (the code the job's driver ended with)."""
from __future__ import annotations

from .base import CheckDef, ControlData, settle
from .timeline import Check, Timeline, at_time, num, secs, time_of


SECOND = "second-deployment"


def check_refused(tl: Timeline, within: float) -> Check:
    """Every `started` second deployment ends with `refused`, or `exited` non-zero, within `within` seconds."""
    expected = f"refused within {num(within)}s"
    events = [j for j in tl.jobs if j.get("process") == SECOND]
    starts = [i for i, j in enumerate(events) if j.get("event") == "started"]
    if not starts:
        return Check("refused_within", "NODATA", expected, "no data", "no second deployment started")
    outcomes, failures = [], []
    for n, i in enumerate(starts):
        start = events[i]
        stop = starts[n + 1] if n + 1 < len(starts) else len(events)
        end = next((j for j in events[i + 1:stop] if j.get("event") in ("refused", "exited")), None)
        if end is None:
            outcomes.append("not refused")
            failures.append(f"the second deployment started at {at_time(start)} was never refused")
            continue
        delay = time_of(end) - time_of(start)
        code = end.get("code")
        refused = end.get("event") == "refused"  # exit 3 with its one line (a crash is no refusal)
        if not refused:
            outcomes.append(f"exited {code} after {secs(delay)}")
            failures.append(f"the second deployment started at {at_time(start)} exited with code {code} after "
                            f"{secs(delay)}: it was not refused (a refusal is exit 3, before Spark starts)")
        else:
            outcomes.append(secs(delay))
            if delay > within:
                failures.append(f"the second deployment started at {at_time(start)} was refused only after "
                                f"{secs(delay)}")
    measured = ", ".join(outcomes)
    if failures:
        return Check("refused_within", "FAILED", expected, measured, failures[0])
    return Check("refused_within", "PASSED", expected, measured,
                 f"{len(starts)} second deployment(s) refused within {secs(within)}")


EXIT_MEANINGS = {0: "stopped on request", 1: "failed, not restarted", 3: "refused", 4: "failure budget exceeded",
                 5: "no retained state verifies", 6: "lost its lease", 7: "a failure repeated on every restart"}


def check_exit_code(tl: Timeline, expected_code: int) -> Check:
    """The job's driver ended with this code: the last exit of the job-driver the history recorded (0 when the arm
    stopped it at its end; its own code when it ended by itself)."""
    expected = f"exit {expected_code} ({EXIT_MEANINGS.get(expected_code, '?')})"
    exits = [j for j in tl.jobs if j.get("process") == "job-driver" and j.get("event") == "exited"
             and j.get("code") is not None]
    if not exits:
        return Check("exit_code", "NODATA", expected, "running", "no exit code of the job's driver was recorded")
    code = exits[-1].get("code")
    own = [j for j in exits if j.get("code") not in (0, -15, 143, None) and not j.get("cause")]
    ended = own[0] if own else exits[-1]
    ended_code = ended.get("code")
    meaning = (EXIT_MEANINGS.get(ended_code, "killed" if ended_code < 0 else "?") if isinstance(ended_code, int)
               else "?")
    measured = f"exit {ended.get('code')} ({meaning})"
    if ended.get("code") == expected_code:
        return Check("exit_code", "PASSED", expected, measured, f"the job's driver ended with {measured} at "
                     f"{at_time(ended)}")
    return Check("exit_code", "FAILED", expected, measured, f"the job's driver ended with {measured} at "
                 f"{at_time(ended)}, not {expected}"
                 + (f" (last recorded exit: {code})" if ended is not exits[-1] else ""))


def control_refused(data: ControlData, within: float) -> Check:
    check = check_refused(data.tl, within)
    why = None if data.complete else data.incomplete()
    never = why if "not refused" in check.measured else None  # it might still have been refused later
    return settle(check, data, pass_unless=why, fail_unless=never)


def control_exit_code(data: ControlData, code: int) -> Check:
    # An ended job stays ended; a running one might still end otherwise.
    check = check_exit_code(data.tl, code)
    return settle(check, data, pass_unless=None if data.complete else data.incomplete(),
                  fail_unless=None if data.complete or check.measured != "running" else data.incomplete())


REFUSED = CheckDef("refused_within", "refused_within", lambda arm, within: check_refused(arm.tl, within),
                   control_refused)
# An arm stopped early ends with the harness's stop (exit 0), not its own code: exit_code holds it to the end.
EXIT_CODE = CheckDef("exit_code", "exit_code", lambda arm, code: check_exit_code(arm.tl, code), control_exit_code)
