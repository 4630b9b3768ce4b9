"""Targets declared by their params: a target that is a small mapping of numbers is one entry in `TARGET_PARAMS`, and
nothing else in chaos/spec/ changes for it. The spec validates it with its params' own rules (the `Param`s a fault
kind's params use), `chaos schema` describes it, the run store's spec.json keeps it (`Targets.extra`), and the check
whose `CheckDef.target` names it (chaos/checks/) is given the validated mapping: {param: value}, defaults filled.

A target with rules between its fields and other sections (recovery's `within` inside the recover phase) is a field
of `chaos.spec.Targets` with its own function in experiment.py instead (docs/architecture.md, "Where a new check
goes")."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..faults.base import Param, params


@dataclass(frozen=True)
class TargetParams:
    summary: str  # one line: what the check of this target asks of the arm (the schema's description)
    params: Mapping[str, Param]


TARGET_PARAMS: Mapping[str, TargetParams] = MappingProxyType({
    "still_healthy": TargetParams(
        "the last `samples` samples of the recover phase all show the job healthy: lag below the arm's recovery "
        "lag_below (else 5 s of input) and progress (the batch id advanced, or nothing was pending)",
        params(samples=Param("int", "how many of the recover phase's last samples (one a second) must be healthy",
                             required=True, minimum=2, maximum=3600))),
    "outage_reported": TargetParams(
        "the job reports a lasting fault (its driver exits by itself with a documented failure code, not at the "
        "harness's hand) within `within` of the first lasting fault's start (chaos/checks/outage.py)",
        params(within=Param("duration", "from the first lasting fault's `injecting` record to the job's own exit",
                            required=True, minimum=1, maximum=3600))),
    "stalled": TargetParams(
        "a control's signature, an outcome (no output while the input goes on: the job falls behind): somewhere in "
        "the inject and recover phases, no batch completed for at least `for` (the batch id unchanged across the "
        "samples), or the job's driver ended by itself after its last batch (a stall no later batch ends) "
        "(chaos/checks/progress.py)",
        params(**{"for": Param("duration", "the shortest stall that shows the incident", required=True, minimum=1,
                               maximum=3600)})),
    "emitted_within": TargetParams(
        "no session's output waits longer than `within` after the session's first event: from its first event to "
        "the end of the batch that wrote it (chaos/checks/output_latency.py)",
        params(within=Param("duration", "the longest a session's first event may wait for the session's output",
                            required=True, minimum=1, maximum=3600))),
})
