"""How the job's deployments ended: refused_within (every second deployment refused within the bound), exit_code
(the code the job's driver ended with) and exits (run on every arm: an exit of the driver the harness did not
cause)."""
from __future__ import annotations

from collections.abc import Mapping

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


# Codes of a driver asked to stop: 0 (it stopped its query on request) or death by SIGTERM. Histories written before
# the arm's final stop carried `stop` recorded it with no cause, so these codes also stand for it there.
STOP_CODES = (0, -15, 143, None)
# A `cause` that does not name something the harness did: the warm-up's record of a job that ended during start-up.
OWN_CAUSES = ("during start-up",)


def own_exit(record: Mapping[str, object]) -> bool:
    """An `exited` record of the job's driver that the harness did not cause: not one of its kills or stops for a
    fault (`cause`), nor its stop at the arm's end (`stop`), nor a stop on request (STOP_CODES)."""
    if record.get("process") != "job-driver" or record.get("event") != "exited":
        return False
    if record.get("stop") or (record.get("cause") and record.get("cause") not in OWN_CAUSES):
        return False
    return record.get("code") not in STOP_CODES


def meaning(code: object) -> str:
    """What an exit code of the job says (EXIT_MEANINGS; a negative one is a signal)."""
    if not isinstance(code, int) or isinstance(code, bool):
        return "?"
    return EXIT_MEANINGS.get(code, f"killed by signal {-code}" if code < 0 else "?")


def down_by_itself(tl: Timeline, t: float) -> bool:
    """At history time `t`, the job's driver had ended by itself and no driver had started since."""
    before = [j for j in tl.jobs if j.get("process") == "job-driver" and time_of(j) <= t
              and j.get("event") in ("started", "restarted", "exited")]
    return bool(before) and own_exit(before[-1])


def check_exits(tl: Timeline, allowed: int | None, role: str) -> Check:
    """Every exit of the job's driver the harness did not cause (own_exit): FAILED on a subject arm, naming the code,
    what it means and the job's last `job:` line, unless the arm's `exit_code` target names that code. On a control
    such an exit is evidence of its incident, not a defect: recorded in a PASSED check, never failing it."""
    expected = "no exit the harness did not cause" + (f" (exit {allowed} allowed)" if allowed is not None else "")
    own = [j for j in tl.jobs if own_exit(j)]
    if not own:
        return Check("exits", "PASSED", expected, "none",
                     "the job's driver ended only when the harness stopped or killed it")
    unexpected = [j for j in own if j.get("code") != allowed]
    described = [_exit_line(j) for j in (unexpected or own)]
    measured = ", ".join(f"exit {j.get('code')} at {at_time(j)}" for j in own)
    more = f" (and {len(described) - 1} more)" if len(described) > 1 else ""
    if role == "control":
        return Check("exits", "PASSED", expected, measured, f"not judged on a control (evidence of its incident, "
                     f"not a defect): {described[0]}{more}")
    if not unexpected:
        return Check("exits", "PASSED", expected, measured, f"{described[0]}{more}: the arm's exit_code target "
                     "allows it")
    return Check("exits", "FAILED", expected, measured, f"{described[0]}{more}")


def _exit_line(record: Mapping[str, object]) -> str:
    code = record.get("code")
    line = record.get("line")
    said = f"; its last line: {line}" if isinstance(line, str) and line else "; no `job:` line of it was recorded"
    return (f"the job's driver exited {code} ({meaning(code)}) at {at_time(record)}, which the harness did not "
            f"cause{said}")


def check_exit_code(tl: Timeline, expected_code: int) -> Check:
    """The job's driver ended with this code: the last exit of the job-driver the history recorded (0 when the arm
    stopped it at its end; its own code when it ended by itself)."""
    expected = f"exit {expected_code} ({EXIT_MEANINGS.get(expected_code, '?')})"
    exits = [j for j in tl.jobs if j.get("process") == "job-driver" and j.get("event") == "exited"
             and j.get("code") is not None]
    if not exits:
        return Check("exit_code", "NODATA", expected, "running", "no exit code of the job's driver was recorded")
    code = exits[-1].get("code")
    own = [j for j in exits if own_exit(j)]
    ended = own[0] if own else exits[-1]
    measured = f"exit {ended.get('code')} ({meaning(ended.get('code'))})"
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
# Every arm (no target: an invariant); a subject's `waive: {exits: ...}` leaves it out (chaos/checks/registry.py).
# Not part of discrimination: a control's own exit is evidence of its incident, judged there by exit_code if at all.
EXITS = CheckDef("exits", None, lambda arm, _target: check_exits(
    arm.tl, arm.spec.arm(arm.profile).targets.exit_code, arm.spec.arm(arm.profile).role))
