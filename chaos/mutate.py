"""`chaos mutate`: every hardening switch turned off in turn, in the experiments that claim it; a verdict that does not
change when a feature is gone proves nothing about the feature.

The plan (pure): for each experiment and each switch it `claims` (chaos/switches.py), a mutant spec that runs only
the hardened arm, with that one switch off and nothing else changed, named `<experiment>--<switch>`. The mutants run
as one suite run (one stack); `mutation.json` in the run directory records the plan, so `chaos check` re-judges it.

The matrix (pure, from results.json): a mutant is **killed** when its arm FAILS (or HANGs) on an outcome a user of
the job would see (`OUTCOME_CHECKS`: sessions lost or duplicated, output late past its bound, state growing without
bound, no progress, a broken lineage, an outage not reported in time, a steady-state probe) — never on a mechanism
alone (the exit code, the second deployment's refusal) nor a log line (a feature's own message is no evidence of
its necessity); **survived** when it passes, or fails on those only; **unknown** when the environment failed or
nothing was measured. A switch is killed when any experiment kills it. A survivor whose switch says why no outcome
here depends on it (`Switch.explained`, docs/job.md) is still a survivor: the text is the reason it survives.

Two figures: the kill rate over **every** switch in chaos/switches.py (a switch this run did not claim counts as
not killed), and over the switches this run claimed (a suite such as the smoke claims a subset).
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .checks.base import is_outcome
from .spec import ExperimentSpec
from .store import RunStore
from .switches import SWITCHES

# What a user of the job sees. refused_within and exit_code are mechanisms (a job without a lease is never refused, a
# job may end with another code and still serve its users), so they alone never kill a mutant.
SEPARATOR = "--"


def _merged(settings: Mapping[str, object], off: Mapping[str, object]) -> dict[str, object]:
    merged: dict[str, Any] = dict(settings)
    for name, value in off.items():
        if isinstance(value, Mapping) and isinstance(merged.get(name), Mapping):
            merged[name] = {**merged[name], **value}
        else:
            merged[name] = dict(value) if isinstance(value, Mapping) else value
    return merged


def mutant(spec: ExperimentSpec, switch: str) -> ExperimentSpec:
    """The experiment's hardened arm alone, with `switch` off."""
    off = SWITCHES[switch]
    hardened = spec.arm("hardened")
    arm = dataclasses.replace(hardened, settings=MappingProxyType(_merged(hardened.settings, off.off)))
    job = spec.job
    if "max_session_length" in off.job_off:
        length: Any = off.job_off["max_session_length"]  # seconds or None (chaos/switches.py)
        job = dataclasses.replace(job, max_session_length=length,
                                  max_session_length_set=True)
    return dataclasses.replace(spec, name=f"{spec.name}{SEPARATOR}{switch}", arms=(arm,), job=job, claims=(),
                               require_discrimination=False, cannot_discriminate=None)


def plan(specs: Iterable[ExperimentSpec], switches: Sequence[str] | None = None) -> list[dict]:
    """[{experiment, switch, mutant}] for every claimed switch (of `switches`, default all) of every experiment with a
    hardened arm."""
    rows = []
    for spec in specs:
        if not any(arm.profile == "hardened" for arm in spec.arms):
            continue
        for switch in spec.claims:
            if switches is None or switch in switches:
                rows.append({"experiment": spec.name, "switch": switch, "mutant": mutant(spec, switch)})
    return rows


def write_plan(run_dir: Path, rows: list[dict]) -> None:
    RunStore(run_dir).write_mutation(
        [{"experiment": r["experiment"], "switch": r["switch"], "mutant": r["mutant"].name} for r in rows])


def read_plan(run_dir: Path) -> list[dict] | None:
    try:
        rows = json.loads(RunStore(run_dir).mutation_file.read_text())
    except (OSError, ValueError):
        return None
    return rows if isinstance(rows, list) else None


def _outcome(check: Mapping[str, object]) -> bool:
    return is_outcome(str(check.get("name")))


def mutant_status(arm: Mapping[str, Any] | None) -> tuple[str, str]:
    """(killed | survived | unknown, why) for one mutant arm's result."""
    if arm is None:
        return "unknown", "not run"
    checks = [c for c in arm.get("checks", []) if isinstance(c, Mapping)]
    fatal = [c for c in checks if c.get("verdict") in ("FAILED", "HANG") and _outcome(c)]
    if fatal:
        return "killed", "; ".join(f"{c['name']}: {c.get('message') or c.get('measured')}" for c in fatal)[:400]
    if arm.get("verdict") == "PASSED":
        return "survived", "every check passed"
    if arm.get("verdict") == "FAILED":  # failed, but on log checks only: the feature's own lines are no evidence
        failing = [str(c["name"]) for c in checks if c.get("verdict") in ("FAILED", "HANG")]
        return "survived", f"every outcome check passed (failed only on {', '.join(failing)}: not an outcome)"
    return "unknown", f"verdict {arm.get('verdict')}: the environment failed or nothing was measured"


def matrix(results: Mapping[str, Any], rows: list[dict]) -> dict:
    """The switch x experiment matrix of a mutate run, and the kill rate over every switch and over those claimed."""
    arms = {}
    for experiment in results.get("experiments", []):
        hardened = next((a for a in experiment.get("arms", []) if a.get("profile") == "hardened"), None)
        arms[experiment.get("name")] = hardened
    cells: list[dict[str, Any]] = []
    switches: dict[str, dict[str, Any]] = {}
    for row in rows:
        status, why = mutant_status(arms.get(row["mutant"]))
        cells.append({**row, "status": status, "why": why})
        entry = switches.setdefault(row["switch"], {"killed_by": [], "survived": [], "unknown": []})
        entry["killed_by" if status == "killed" else status].append(row["experiment"])
    for name, entry in switches.items():
        entry["status"] = ("killed" if entry["killed_by"] else "unknown" if entry["unknown"] and not entry["survived"]
                           else "survived")
        if entry["status"] == "survived" and SWITCHES[name].explained:
            entry["explained"] = SWITCHES[name].explained  # why it survives; a survivor all the same
    claimed = [name for name in SWITCHES if name in switches]
    killed = [name for name in claimed if switches[name]["status"] == "killed"]
    survivors = [name for name in claimed if switches[name]["status"] == "survived"]
    unclaimed = [name for name in SWITCHES if name not in switches]
    for name in unclaimed:  # no mutant ran: not killed, and shown so
        switches[name] = {"killed_by": [], "survived": [], "unknown": [], "status": "not claimed"}
    return {"cells": cells, "switches": switches,
            "total": len(SWITCHES), "killed": len(killed),
            "kill_rate": round(len(killed) / len(SWITCHES), 3) if SWITCHES else None,
            "claimed": len(claimed),
            "claimed_kill_rate": round(len(killed) / len(claimed), 3) if claimed else None,
            "survivors": survivors,
            "explained": {name: switches[name]["explained"] for name in survivors if "explained" in switches[name]},
            "unknown": [name for name in claimed if switches[name]["status"] == "unknown"],
            "not_run": unclaimed}


def _percent(rate: object) -> str:
    return f"{rate * 100:.0f} %" if isinstance(rate, (int, float)) else "n/a"


def headline(mutation: Mapping[str, Any], claimer: str = "this run") -> str:
    """One line: the kill rate over every switch, then over the switches `claimer` (this run, the smoke) claims."""
    total, killed, claimed = mutation.get("total"), mutation.get("killed"), mutation.get("claimed")
    survivors = list(mutation.get("survivors") or [])
    explained = mutation.get("explained") or {}
    unknown = list(mutation.get("unknown") or [])
    if claimed and killed == claimed:
        of_claimed = f"every switch {claimer} claims was killed ({claimed} of {claimed})"
    else:
        of_claimed = f"of the {claimed} {claimer} claims: {killed} killed"
    shown = [f"{name} (explained: docs/job.md)" if name in explained else name for name in survivors]
    return (f"mutation kill rate {killed} of {total} switches ({_percent(mutation.get('kill_rate'))}); {of_claimed}"
            + (f"; survivors: {', '.join(shown)}" if shown else "")
            + (f"; unknown: {', '.join(unknown)}" if unknown else "")
            + (f"; not claimed, so not killed: {', '.join(mutation['not_run'])}" if mutation.get("not_run") else ""))
