"""One arm judged: the registered checks its targets set (chaos/checks/registry.py), then, for a control arm, the
`control` check (did it reproduce its incident, or survive as expected) and its signature: the shape of
result.json."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..spec import Arm, ExperimentSpec, Targets
from ..state_held import peak_state
from ..verdicts import INTERRUPTED, SKIPPED, worst
from .base import ArmData
from .exactly_once import count_of
from .logs import evidence_start, match_count, trim
from .progress import stall_signature
from .recovery import measure_recovery
from .registry import judge_arm_checks, raised
from .state import growth_signature
from .timeline import Check, Timeline, time_of, timeline


def judge_records(records: Sequence[Mapping[str, object]], spec: ExperimentSpec, profile: str,
                  oracle: Mapping[str, object] | None = None, lineage: Mapping[str, object] | None = None,
                  summary: Mapping[str, object] | None = None, missing: Mapping[str, str] | None = None,
                  run_status: str | None = None) -> dict:
    """An arm's result (the shape of result.json) from its parsed files. `missing` says why oracle/lineage are
    None (keys "oracle", "lineage"), for the checks' messages; `run_status` is run.json's (an arm of an interrupted
    run may have been cut short: `cut_short`)."""
    arm = spec.arm(profile)
    reason = skipped_reason(records)
    if reason is not None:
        return skipped_arm(profile, arm.role, reason)
    targets = arm.targets
    tl = timeline(records)
    checks = judge_arm_checks(ArmData(tl, spec, profile, oracle, lineage, dict(missing or {})))
    signature = None
    if arm.role == "control":
        try:
            control, signature = control_check(tl, arm, checks, summary)
        except Exception as error:  # noqa: BLE001 - guarded like every check (registry.guarded)
            control, signature = raised("control", error), None
        if control is not None:
            checks.append(control)

    def count(key: str) -> int | None:
        return count_of(oracle, key) if oracle is not None else None

    recovery_s, recovery_window = _recovery(tl, targets)
    result: dict[str, object] = {"profile": profile, "verdict": worst(c.verdict for c in checks), "role": arm.role,
                                 "recovery_s": recovery_s, "recovery_window": recovery_window,
                                 "lost": count("lost"), "duplicated": count("duplicated"), "signature": signature,
                                 "checks": [c.to_dict() for c in checks], "state_held": peak_state(tl.samples)}
    if arm.waive:  # shown beside the checks: what the arm was not judged on, and why
        result["waived"] = dict(arm.waive)
    interrupted = cut_short(records, run_status)
    if interrupted is not None:  # whatever its checks measured, an arm cut short never passes (nor fails)
        result.update(verdict=INTERRUPTED, interrupted=interrupted)
    return result


def cut_short(records: Sequence[Mapping[str, object]], run_status: str | None = None) -> str | None:
    """Why the arm was cut short by an interrupt, or None: its history's `interrupted` record, or (a history
    written before that record existed) an interrupted run in which the arm never stopped its job (the last record
    of its driver is no exit)."""
    found = next((r for r in records if r.get("type") == "interrupted"), None)
    if found is not None:
        return str(found.get("reason") or "the run was interrupted while this arm ran")
    if run_status != "interrupted":
        return None
    driver = [r for r in records if r.get("type") == "job" and r.get("process") == "job-driver"]
    if driver and driver[-1].get("event") == "exited":
        return None
    return "the run was interrupted before this arm stopped its job"


def skipped_reason(records: Sequence[Mapping[str, object]]) -> str | None:
    """Why the arm was not run (its history's `skipped` record), or None when it was."""
    found = next((r for r in records if r.get("type") == "skipped"), None)
    return None if found is None else str(found.get("reason") or "no reason recorded")


def skipped_arm(profile: str, role: str, reason: str) -> dict:
    """A SKIPPED arm's result: no check was judged, `skipped` says why (never PASSED: chaos/verdicts.py)."""
    return {"profile": profile, "verdict": SKIPPED, "role": role, "recovery_s": None, "lost": None,
            "duplicated": None, "signature": None, "skipped": reason, "checks": []}


def _recovery(tl: Timeline, targets: Targets) -> tuple[float | None, list[float | None] | None]:
    """The arm's recovery in seconds, and the interval it spans in the history's time ([the disruption it was
    measured from, the start of the healthy run]; the end is None when it never recovered): the report draws the
    worst disruption's recovery there, not after the last heal."""
    if targets.recovery is None:
        return None, None
    try:
        result = measure_recovery(tl, targets.recovery)
    except Exception:  # noqa: BLE001 - the recovery check itself carries the error (UNKNOWN)
        return None, None
    if result.heal is None or result.verdict == "NODATA":
        return result.seconds, None
    end = result.healthy_at if result.seconds is not None else result.cut_at
    return result.seconds, [round(time_of(result.heal), 1), None if end is None else round(end, 1)]


def control_check(tl: Timeline, arm: Arm, checks: Sequence[Check], summary: Mapping[str, object] | None
                  ) -> tuple[Check | None, str | None]:
    """A control arm's `control` check and its signature, after its other checks: expect=incident needs a signature
    (else FAILED when every other check passed), expect=survives fails when another check failed."""
    if arm.expect == "survives":
        failed = [c.name for c in checks if c.verdict == "FAILED"]
        return Check("control", "FAILED" if failed else "PASSED", "survives", "did not survive"
                     if failed else "survived",
                     f"the control was expected to survive ({arm.note}) but failed {', '.join(failed)}"
                     if failed else f"control survived too: {arm.note}"), None
    signature = control_signature(tl, arm.targets, summary)
    if signature is not None:
        return Check("control", "PASSED", "reproduces the incident", "reproduced",
                     f"control reproduced the incident: {signature}"), signature
    if worst((c.verdict for c in checks), default="PASSED") == "PASSED":
        return Check("control", "FAILED", "reproduces the incident", "no signature",
                     "control did not reproduce the incident: no expected log line matched, state did "
                     "not grow, the job did not stall as long as its target asks and did not fail"), None
    return None, None


def control_signature(tl: Timeline, targets, summary: Mapping[str, object] | None) -> str | None:
    """What shows the incident in a control arm: the first log line matching an expected pattern, else the state's
    growth, else a stall its `stalled` target asks for, else the job's failure line (arm.json job_error)."""
    if targets.logs is not None and targets.logs.expected:
        since = evidence_start(tl)
        first = next((r for r in tl.logs if r.get("signature") in targets.logs.expected and time_of(r) >= since), None)
        if first is not None:
            line = trim(str(first.get("text") or ""), str(first.get("signature"))) or str(first.get("signature"))
            if targets.logs.min_matches > 1:  # a loop: how often it repeated is the evidence
                return f"{match_count(tl.logs, str(first.get('signature')), since)} lines like {line}"
            return line
    if targets.state is not None:
        growth = growth_signature(tl, targets.state)
        if growth is not None:
            return growth
    stalled = targets.extra.get("stalled")
    if stalled is not None:
        stall = stall_signature(tl, float(stalled["for"]))
        if stall is not None:
            return stall
    error = (summary or {}).get("job_error")
    if isinstance(error, str) and error.strip():
        return trim(error)
    return None

