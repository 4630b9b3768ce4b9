"""What a check is (`CheckDef`) and what it reads: `ArmData` (one arm's parsed files, judged by its own targets) and
`ControlData` (the control's parsed files, judged by the hardened arm's targets for discrimination), with the rules
that decide whether a check of the control's data can stand for the hardened target (`settle`, `unjudged`)."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..history import PHASES
from ..spec import ExperimentSpec, Targets
from .timeline import Check, Timeline

# What a check's judge returns: one check, several (the probes: one per probe), or none (nothing to say).
Judged = Check | Sequence[Check] | None

# The checks that judge an outcome a user of the job would see (sessions lost or duplicated, output late, no progress,
# state without bound, a checkpoint a restart cannot load) and each `probe:<metric>`. Discrimination counts only
# these: a log line, a refusal's timing or an exit code shows a mechanism, which a job without the hardening lacks
# by construction.
# What a user of the job would see (never a mechanism such as an exit code or a refusal's timing, nor a log line):
# the one list that discrimination, a control's early end and `chaos mutate`'s kills go by.
OUTCOME_CHECKS = ("lost", "duplicated", "recovery", "progress", "max_lag", "state", "lineage", "still_healthy",
                  "outage_reported", "emitted_within", "stalled")


# The outcome checks that read the job's output back (the oracle's counts, each session's emission): only an arm
# judged by one of them needs its drain, every session closed and written.
OUTPUT_CHECKS = ("lost", "duplicated", "emitted_within")


def is_outcome(name: str) -> bool:
    return name in OUTCOME_CHECKS or name.startswith("probe:")


@dataclass(frozen=True)
class ArmData:
    """One arm's parsed files: its history as a `Timeline`, its oracle.json and lineage.json (None when missing,
    `missing` says why, keyed "oracle" and "lineage") and the experiment's spec."""

    tl: Timeline
    spec: ExperimentSpec
    profile: str
    oracle: Mapping[str, object] | None = None
    lineage: Mapping[str, object] | None = None
    missing: Mapping[str, str] = field(default_factory=dict)

    def why_missing(self, name: str) -> str:
        return self.missing.get(name, f"no {name}.json")


@dataclass(frozen=True)
class CheckDef:
    """A check in the registry (chaos/checks/registry.py).

    name        the check's name in results.json (probes: each one is `probe:<metric>`)
    target      the field of chaos.spec.Targets it judges, or a target declared by its params (chaos/spec/targets.py
                TARGET_PARAMS: the check is given {param: value}); the check runs on an arm whose targets set it (not
                None, not False, not empty). None: it runs on every arm (environment).
    judge       (ArmData, the target's value) -> Check(s): the arm judged by its own targets
    control     (ControlData, the hardened arm's target value) -> Check(s): the control's data judged by the
                hardened target, for discrimination; None: the check is not part of discrimination
    ends_early  whether an arm judged by this check may stop as soon as its incident shows
                (chaos.arm.schedule.ends_early): True only when what it judges is settled by then (a matched log
                line, the checkpoint as left)
    """

    name: str
    target: str | None
    judge: Callable[[ArmData, Any], Judged]
    control: Callable[[ControlData, Any], Judged] | None = None
    ends_early: bool = False

    def target_of(self, targets: Targets) -> object | None:
        """The target this check judges in `targets`, or None when they do not set it."""
        if self.target is None:
            return True
        value = targets.extra.get(self.target) if self.target in targets.extra else getattr(targets, self.target, None)
        return None if value is False or value == () else value


@dataclass(frozen=True)
class ControlData:
    """What decides whether a check of the control's history can stand for the hardened arm's target."""

    tl: Timeline
    subject_faults: tuple[int, ...]  # indices into spec.faults each arm runs
    control_faults: tuple[int, ...]
    ended: frozenset[str]  # phases whose end the control's history recorded
    unhealed: tuple[str, ...]  # faults injected and never healed in the control's history
    spec: ExperimentSpec | None = None
    oracle: Mapping[str, object] | None = None
    lineage: Mapping[str, object] | None = None
    missing: Mapping[str, str] = field(default_factory=dict)
    subject_kind: str = "compare"  # the hardened arm's oracle kind (compare: sessions; coverage: events)
    watched: frozenset[str] = frozenset()  # log patterns the control's own scanner watched

    def why_missing(self, name: str) -> str:
        return self.missing.get(name, f"no {name}.json")

    @property
    def relation(self) -> str:
        """same (the hardened arm's schedule), fewer (a subset of it) or other (a fault the hardened arm never ran)."""
        if self.control_faults == self.subject_faults:
            return "same"
        return "fewer" if set(self.control_faults) < set(self.subject_faults) else "other"

    @property
    def complete(self) -> bool:
        return all(phase in self.ended for phase in PHASES)

    @property
    def schedule_done(self) -> bool:
        """Every fault of the control's schedule ran and healed: its last heal is the schedule's last heal."""
        return "inject" in self.ended and not self.unhealed

    def schedule(self) -> str:
        return (f"the control ran faults {_indices(self.control_faults)}, the hardened arm "
                f"{_indices(self.subject_faults)}")

    def incomplete(self, phases: Iterable[str] = PHASES) -> str:
        missing = [p for p in phases if p not in self.ended]
        return (f"the control's history ends (t={self.tl.end:.1f}s) before its {'/'.join(missing)} phase"
                f"{'s' if len(missing) > 1 else ''} ended: the control stopped once it showed its incident, or the "
                "run was cut short")

    def not_done(self) -> str:
        if self.unhealed:
            return f"in the control's history {', '.join(self.unhealed)} never healed: no last heal to measure from"
        return self.incomplete(("inject",))


def _indices(ids: Sequence[int]) -> str:
    return ", ".join(map(str, ids)) if ids else "none"


def unjudged(check: Check, why: str) -> Check:
    """A check whose measurement on the control's data cannot stand for the hardened target: NODATA, with the
    reason and what was measured."""
    return Check(check.name, "NODATA", check.expected, check.measured,
                 f"not judged on the control's data: {why} (measured {check.verdict}: {check.message})")


def settle(check: Check, data: ControlData, *, pass_unless: str | None = None, fail_unless: str | None = None,
           schedule_matters: bool = True) -> Check:
    """The control's verdict of one check, kept only where its data stands for the target: a PASS needs the
    hardened arm's schedule (and `pass_unless` None: what it judges was observed to the end), a FAILED/HANG needs
    `fail_unless` None (more data could not undo it) and no fault the hardened arm never ran; failing on fewer
    faults stands (a job without the hardening failed on less) and says so."""
    if check.verdict not in ("PASSED", "FAILED", "HANG"):
        return check
    if schedule_matters and data.relation == "other":
        return unjudged(check, f"{data.schedule()}: one the hardened arm never faced")
    if check.verdict == "PASSED":
        if schedule_matters and data.relation == "fewer":
            return unjudged(check, f"{data.schedule()}: passing fewer faults proves nothing")
        return check if pass_unless is None else unjudged(check, pass_unless)
    if fail_unless is not None:
        return unjudged(check, fail_unless)
    if schedule_matters and data.relation == "fewer":
        return dataclasses.replace(check, message=f"{check.message} (with fewer faults: {data.schedule()})")
    return check
