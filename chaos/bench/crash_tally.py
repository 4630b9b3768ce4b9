"""`chaos bench crashes RUN_DIR...`: what stored runs' lifecycle-triggered faults hit, and how each arm came out.

Pure: it reads each arm's history.jsonl (the `trigger` records: the event, the batch, where the checkpoint stood),
oracle.json and result.json, so a campaign over several seeds (`chaos run crash-anywhere --seed N`, once per seed)
can be tallied offline. A kill lands "before the first commit" when the checkpoint had no commit yet, and "between
an offsets write and its commit" when an offsets entry past the newest commit existed (a batch in flight).
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from ..faults import registry as fault_registry  # by module: its kinds are read as a run is tallied
from ..history import read_history


def _kills(record: dict) -> bool:
    """A firing of a kind that kills the process it targets (its kind declares `kills`)."""
    kind = fault_registry.kind_of(record.get("name"))
    return kind is not None and kind.kills


def arm_tally(arm_dir: Path) -> dict:
    records = read_history(arm_dir / "history.jsonl")
    fired = [r for r in records if r["type"] == "trigger"]
    kills = [r for r in fired if _kills(r)]
    oracle = _json(arm_dir / "oracle.json") or {}
    result = _json(arm_dir / "result.json") or {}
    spec = _json(arm_dir.parent / "spec.json") or {}
    return {
        "arm": f"{arm_dir.parent.name}/{arm_dir.name}",
        "seed": spec.get("seed"),
        "verdict": result.get("verdict"),
        "triggers": len(fired),
        "kills": len(kills),
        "driver_kills": sum(1 for r in kills if r.get("target") == "job-driver"),
        "executor_kills": sum(1 for r in kills if r.get("target") == "executor"),
        "before_first_commit": sum(1 for r in kills if "last_commit" in r and r["last_commit"] is None),
        "batch_in_flight": sum(1 for r in kills if r.get("in_flight")),
        "events": dict(sorted(Counter(r.get("event") for r in fired).items())),
        "unrealised": sum(1 for r in records if r["type"] == "error" and "did not happen" in str(r.get("message"))),
        "lost": oracle.get("lost"),
        "duplicated": oracle.get("duplicated"),
        "recovery_s": result.get("recovery_s"),
    }


def tally(run_dirs: list[Path]) -> dict:
    arms = []
    seen: set[Path] = set()
    for run_dir in run_dirs:
        resolved = Path(run_dir).resolve()  # a `latest` link names a run already given
        if resolved in seen:
            continue
        seen.add(resolved)
        for history in sorted(resolved.glob("*/*/history.jsonl")):
            tallied = arm_tally(history.parent)
            if tallied["triggers"]:
                arms.append(tallied)
    totals: dict[str, dict] = {}
    for arm in arms:
        profile = arm["arm"].rsplit("/", 1)[1]
        total = totals.setdefault(profile, {"arms": 0, "seeds": set(), "kills": 0, "before_first_commit": 0,
                                            "batch_in_flight": 0, "lost": 0, "duplicated": 0, "events": Counter(),
                                            "verdicts": Counter()})
        total["arms"] += 1
        total["seeds"].add(arm["seed"])
        for name in ("kills", "before_first_commit", "batch_in_flight"):
            total[name] += arm[name]
        for name in ("lost", "duplicated"):
            total[name] += arm[name] or 0
        total["events"].update(arm["events"])
        total["verdicts"][arm["verdict"]] += 1
    for total in totals.values():
        total["seeds"] = len(total["seeds"])
        total["events"] = dict(sorted(total["events"].items()))
        total["verdicts"] = dict(total["verdicts"])
    return {"arms": arms, "totals": totals}


def print_tally(result: dict) -> None:
    print(f"{'arm':<34} {'seed':>6} {'verdict':<8} {'kills':>5} {'pre-commit':>10} {'in flight':>9} "
          f"{'lost':>5} {'dup':>4}  events")
    for arm in result["arms"]:
        events = ", ".join(f"{name} {count}" for name, count in arm["events"].items())
        print(f"{arm['arm']:<34} {str(arm['seed']):>6} {str(arm['verdict']):<8} {arm['kills']:>5} "
              f"{arm['before_first_commit']:>10} {arm['batch_in_flight']:>9} {str(arm['lost']):>5} "
              f"{str(arm['duplicated']):>4}  {events}")
    for profile, total in sorted(result["totals"].items()):
        print(f"{profile}: {total['kills']} kills over {total['seeds']} seed(s) ({total['arms']} arms): "
              f"{total['before_first_commit']} before the first commit, {total['batch_in_flight']} with a batch in "
              f"flight; lost {total['lost']}, duplicated {total['duplicated']}; verdicts {total['verdicts']}")


def _json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
