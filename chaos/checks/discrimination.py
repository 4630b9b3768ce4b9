"""Discrimination (per experiment): the control's (naive) history and outputs judged again by the hardened arm's
targets, with the same registered checks (each check's `control` judge). A job without the hardening must fail at
least one of them, or the experiment cannot tell the hardening from its absence. Where the control's data cannot
stand for what a check judges (another fault schedule, a history that stops before its phases ended, an oracle in
other units, log lines it never watched), that check is NODATA with the reason, never PASSED; a failure stands when
more data could not undo it (chaos.checks.base.settle). See docs/experiments.md, "Discrimination"."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..spec import ExperimentSpec
from .base import ControlData, is_outcome
from .registry import judge_control_checks
from .timeline import Check, Timeline, timeline

SUBJECT, CONTROL = "hardened", "naive"
DISCRIMINATION_STATUSES = ("discriminating", "not_discriminating", "inconclusive", "waived", "not_run")
NOT_DISCRIMINATING = "not discriminating: a job without the hardening passes every hardened target"
# Not outcomes, but a control whose record could not be read (judge.py: `history`, `spec`), whose judge raised
# (`discrimination`) or whose environment failed is not judged: inconclusive, never "not discriminating".
_HARNESS_CHECKS = ("history", "discrimination", "spec", "environment")
_LINE_MESSAGE_CHARS = 160  # each check's message in the one-line summary (the full messages are in `checks`)


def _fault_indices(spec: ExperimentSpec, profile: str) -> tuple[int, ...]:
    chosen = spec.arm(profile).faults
    return tuple(range(len(spec.faults))) if chosen is None else tuple(sorted(chosen))


def _ended_phases(records: Sequence[Mapping[str, object]]) -> frozenset[str]:
    started, ended = set(), set()
    for record in records:
        if record.get("type") != "phase":
            continue
        if record.get("boundary") == "start":
            started.add(record.get("name"))
        elif record.get("boundary") == "end" and record.get("name") in started:
            ended.add(record.get("name"))
    return frozenset(str(p) for p in ended)


def _unhealed(tl: Timeline) -> tuple[str, ...]:
    last: dict[tuple[str, str], object] = {}
    for record in tl.faults:
        last[(str(record.get("name")), str(record.get("target")))] = record.get("state")
    return tuple(f"{name} on {target}" for (name, target), state in last.items() if state != "healed")


def complete_schedule(records: Sequence[Mapping[str, object]], spec: ExperimentSpec) -> bool:
    """The control ran the hardened arm's faults, every one healed, and reached the end of its last phase: its
    recovery can stand beside the hardened arm's."""
    tl = timeline(records)
    return (_fault_indices(spec, CONTROL) == _fault_indices(spec, SUBJECT) and not _unhealed(tl)
            and "recover" in _ended_phases(records))


def discriminate(records: Sequence[Mapping[str, object]], spec: ExperimentSpec,
                 oracle: Mapping[str, object] | None = None, lineage: Mapping[str, object] | None = None,
                 missing: Mapping[str, str] | None = None, subject_kind: str = "compare") -> dict:
    """The control's (naive) history and outputs judged by the hardened arm's targets: the experiment's
    `discrimination` object of results.json. `subject_kind` is the hardened arm's oracle kind (compare: sessions)."""
    tl = timeline(records)
    control_logs = spec.arm(CONTROL).targets.logs
    watched = frozenset(control_logs.expected + control_logs.forbidden) if control_logs is not None else frozenset()
    data = ControlData(tl, _fault_indices(spec, SUBJECT), _fault_indices(spec, CONTROL), _ended_phases(records),
                       _unhealed(tl), spec=spec, oracle=oracle, lineage=lineage, missing=dict(missing or {}),
                       subject_kind=subject_kind, watched=watched)
    return discrimination_result(spec, judge_control_checks(data, spec.arm(SUBJECT).targets))


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _LINE_MESSAGE_CHARS else text[:_LINE_MESSAGE_CHARS - 1].rstrip() + "…"


def discrimination_result(spec: ExperimentSpec | None, checks: Sequence[Check], not_run: str | None = None) -> dict:
    """status, what it adds to the experiment's verdict, the one line the report shows, and the checks.

    Only outcome checks count (chaos.checks.base.OUTCOME_CHECKS and the probes): a log line, a refusal's timing or
    an exit code shows a mechanism the job without the hardening lacks by construction, not what its users would
    see; those checks are listed, never counted. discriminating: an outcome check FAILED or HANG on the control's
    data; not_discriminating: every outcome check PASSED; inconclusive: neither (NODATA/UNKNOWN, or no outcome
    check); waived: the spec's `cannot_discriminate` says why it cannot, and nothing failed (or the control did
    not run); not_run: no control (or no hardened targets) in this run. `verdict` is FAILED for not_discriminating
    and for inconclusive under a suite's require_discrimination: a requirement nothing showed is not met."""
    required = bool(spec is not None and spec.require_discrimination)
    waiver = spec.cannot_discriminate if spec is not None else None
    counted = [c for c in checks if is_outcome(c.name)]
    harness = [c for c in checks if c.name in _HARNESS_CHECKS and c.verdict != "PASSED"]
    failed = [c for c in counted if c.verdict in ("FAILED", "HANG")]
    if not_run is not None:
        measured = "not_run"
    elif failed:
        measured = "discriminating"
    elif counted and all(c.verdict == "PASSED" for c in counted) and not harness:
        measured = "not_discriminating"
    else:
        measured = "inconclusive"
    # A waived experiment whose control a suite leaves out (the nightly: it runs in pre-release) stays waived.
    status = "waived" if waiver and measured in ("not_discriminating", "inconclusive", "not_run") else measured
    if status == "discriminating":
        line = "a job without the hardening: " + "; ".join(f"{c.verdict} on {c.name} ({_short(c.message)})"
                                                           for c in failed)
        if waiver:
            line += f" (though the spec says it cannot discriminate: {_short(waiver)})"
    elif status == "not_discriminating":
        line = NOT_DISCRIMINATING
    elif status == "inconclusive":
        unjudged = harness + [c for c in counted if c.verdict != "PASSED"]
        line = ("inconclusive: a job without the hardening failed no hardened outcome target, but "
                + ("; ".join(f"{c.name} could not be judged on its data ({_short(c.message)})" for c in unjudged)
                   if unjudged else "the hardened arm sets no outcome target to judge it by"))
        uncounted = [c for c in checks if c not in counted and c not in harness and c.verdict in ("FAILED", "HANG")]
        if uncounted:
            line += (" (" + ", ".join(f"{c.name} {c.verdict}" for c in uncounted)
                     + ": not an outcome, not counted)")
    elif status == "waived":
        line = (f"waived: {' '.join(str(waiver).split())} (measured: "
                + (f"not run: {not_run})" if not_run is not None else f"{measured.replace('_', ' ')})"))
    else:
        line = f"a job without the hardening: not run ({not_run})"
    return {"status": status, "required": required,
            "verdict": "FAILED" if required and status in ("not_discriminating", "inconclusive") else "PASSED",
            "message": line, "measured": measured, "waiver": waiver, "control": CONTROL, "targets": SUBJECT,
            "failed": [{"name": c.name, "verdict": c.verdict, "message": c.message} for c in failed],
            "checks": [c.to_dict() for c in checks]}


