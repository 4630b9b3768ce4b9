"""`chaos bench suite RUN_DIR`: where a stored suite run's wall time went, from its own files.

For every arm: the phases its spec scheduled (steady + inject + recover, as scaled), the time its phases actually
took (the recover phase ends early once recovery is seen, a control once it has shown its incident), and the
arm's whole wall time from its job's start to its last record (start-up and warm-up, drain, stop, outputs). The
run's wall time is run.json's started → ended, so stack start, resets, judging and the report are in it too.

    harness overhead = run wall time / sum of scheduled phases

In a `--lanes` run each arm also says its lane (from its job's log directory, logs/<lane>/) and which arms of the
other lanes ran beside it, with the seconds they overlapped: a timed verdict that moved is read against them.

Then where the arms' time went, summed over them (lane-seconds: on two lanes the wall is about half of it): their
phases, their warm-ups, and the rest of their walls (the driver's stop, the drain, reading the topic back). The
phases summed over the lanes is the wall no harness change can go below without shortening the experiments.
"""
from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

from ..history import read_history
from ..spec import ExperimentSpec
from ..store import RESULT_FILE


def _seconds(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def lane_of(records: list[dict]) -> str | None:
    """The lane an arm ran in: its job's log sits under logs/<lane>/ (logs/<lane>-<topology>/ for another
    topology); None for a run on one lane."""
    log = next((r.get("log") for r in records if r.get("type") == "job" and r.get("log")), None)
    parts = Path(str(log)).parts if log else ()
    # logs/<topology>/ alone (a one-lane run's cluster stack) is not a lane
    lane = parts[1] if len(parts) == 3 and parts[0] == "logs" else None
    return lane if lane is not None and re.fullmatch(r"lane-\d+(-[\w-]+)?", lane) else None


def arm_timing(history_path: Path) -> dict:
    records = read_history(history_path)
    phases = [r for r in records if r["type"] == "phase"]
    first = next((r["t"] for r in phases if r["boundary"] == "start"), None)
    last = max((r["t"] for r in phases if r["boundary"] == "end"), default=None)
    return {"phases_s": None if first is None or last is None else round(last - first, 1),
            "wall_s": round(records[-1]["t"] - records[0]["t"], 1) if records else None,
            "warm_up_s": None if first is None else round(first - records[0]["t"], 1),
            "lane": lane_of(records),
            "began": records[0].get("wall") if records else None, "ended": records[-1].get("wall") if records else None}


def _overlap_s(one: dict, other: dict) -> float:
    if not all((one["began"], one["ended"], other["began"], other["ended"])):
        return 0.0
    start = max(datetime.fromisoformat(one["began"]), datetime.fromisoformat(other["began"]))
    end = min(datetime.fromisoformat(one["ended"]), datetime.fromisoformat(other["ended"]))
    return max(0.0, (end - start).total_seconds())


def beside(arms: list[dict]) -> None:
    """Fill each arm's `beside`: the arms of other lanes that ran while it did, with the seconds they overlapped
    (at least one), longest first."""
    for arm in arms:
        found = [(f"{other['experiment']}/{other['profile']}", round(_overlap_s(arm, other)))
                 for other in arms if other is not arm and other["lane"] and other["lane"] != arm["lane"]]
        arm["beside"] = [{"arm": name, "overlap_s": seconds}
                         for name, seconds in sorted(found, key=lambda item: -item[1]) if seconds >= 1]


def _verdict(result_path: Path) -> str | None:
    """The arm's verdict as judged (result.json), None before it was judged."""
    try:
        return json.loads(result_path.read_text()).get("verdict")
    except (OSError, ValueError):
        return None


def suite_timing(run_dir: Path) -> dict:
    run = json.loads((run_dir / "run.json").read_text())
    arms, scheduled = [], 0.0
    for name in run.get("experiments", []):
        experiment = run_dir / name
        if not (experiment / "spec.json").is_file():
            continue
        spec = ExperimentSpec.from_dict(json.loads((experiment / "spec.json").read_text()))
        for arm in spec.arms:
            history = experiment / arm.profile / "history.jsonl"
            if not history.is_file():
                continue
            phases = spec.phases_of(arm.profile)  # an arm running a subset of the faults runs its own inject
            scheduled += phases.total
            arms.append({"experiment": name, "profile": arm.profile, "scheduled_s": round(phases.total, 1),
                         **arm_timing(history), "verdict": _verdict(experiment / arm.profile / RESULT_FILE)})
    if any(arm["lane"] for arm in arms):
        beside(arms)
    wall = _seconds(run["started"], run["ended"]) if run.get("ended") else None
    return {"run": str(run_dir), "suite": run.get("suite"), "status": run.get("status"), "arms": arms,
            "scheduled_phases_s": round(scheduled, 1), "wall_s": wall,
            "overhead_ratio": round(wall / scheduled, 3) if wall and scheduled else None,
            "arm_time": arm_time(arms)}


def arm_time(arms: list[dict]) -> dict:
    """The arms' walls summed, split into phases, warm-ups and the rest; and each lane's sum (one lane: "-")."""
    def total(key: str, of: list[dict]) -> float:
        return round(sum(arm[key] or 0.0 for arm in of), 1)
    walls, phases, warm_ups = total("wall_s", arms), total("phases_s", arms), total("warm_up_s", arms)
    lanes = sorted({arm["lane"] or "-" for arm in arms})
    return {"walls_s": walls, "phases_s": phases, "warm_ups_s": warm_ups,
            "rest_s": round(walls - phases - warm_ups, 1),
            "lanes": {lane: total("wall_s", [arm for arm in arms if (arm["lane"] or "-") == lane]) for lane in lanes}}


def print_timing(timing: dict) -> None:
    lanes = any(arm["lane"] for arm in timing["arms"])
    width = max([len("verdict")] + [len(arm["verdict"] or "-") for arm in timing["arms"]])
    print(f"{'experiment / arm':<40} {'scheduled':>9} {'phases':>7} {'warm-up':>8} {'arm wall':>9}"
          f"  {'verdict':<{width}}"
          + (f"  {'lane':<14} beside it (overlap)" if lanes else ""))
    for arm in timing["arms"]:
        cells = [f"{arm[k]:.0f} s" if arm[k] is not None else "-" for k in ("scheduled_s", "phases_s", "warm_up_s",
                                                                              "wall_s")]
        line = (f"{arm['experiment'] + ' / ' + arm['profile']:<40} {cells[0]:>9} {cells[1]:>7} {cells[2]:>8} "
                f"{cells[3]:>9}  {arm['verdict'] or '-':<{width}}")
        if lanes:
            others = ", ".join(f"{b['arm']} ({b['overlap_s']} s)" for b in arm.get("beside", [])) or "alone"
            line += f"  {arm['lane'] or '-':<14} {others}"
        print(line)
    wall = f"{timing['wall_s'] / 60:.1f} min" if timing["wall_s"] else "not ended"
    print(f"suite {timing['suite']} ({timing['status']}): wall {wall}, scheduled phases "
          f"{timing['scheduled_phases_s'] / 60:.1f} min, wall / scheduled = {timing['overhead_ratio']}")
    spent = timing["arm_time"]
    if spent["walls_s"]:
        print(f"arm walls summed {spent['walls_s'] / 60:.1f} min: phases {spent['phases_s'] / 60:.1f}, warm-ups "
              f"{spent['warm_ups_s'] / 60:.1f}, the rest (stop, drain, read-back) {spent['rest_s'] / 60:.1f}")
    if len(spent["lanes"]) > 1:
        print("per lane: " + ", ".join(f"{lane} {seconds / 60:.1f} min" for lane, seconds in spent["lanes"].items()))
