"""`chaos bench recoveries RUN_DIR`: every disruption of a stored run on its own, as the recovery check measures it.

Pure over the run's files (each experiment's spec.json and each arm's history.jsonl). For every arm whose targets
set a recovery bound, each disruption (a heal, a restart, a momentary fault) is measured alone, never grouped: the
seconds to the first batch that started after it, and to `healthy_samples` healthy samples in a row, or "not
recovered" before the next thing hit the job. Beside it, what the arm's own check judged (grouped where its spec
says so). This is how a schedule is fitted to what a restart really costs: a group that spans a whole schedule
shows here as a row of disruptions none of which recovered before the next.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ..checks.recovery import measure_recoveries, measure_recovery
from ..checks.timeline import time_of, timeline
from ..history import read_history
from ..spec.model import ExperimentSpec
from ..store import SPEC_FILE


def arm_recoveries(arm_dir: Path, spec: ExperimentSpec) -> dict | None:
    """One arm's disruptions, each alone, and its judged recovery; None when the arm sets no recovery bound."""
    target = spec.arm(arm_dir.name).targets.recovery
    if target is None:
        return None
    tl = timeline(read_history(arm_dir / "history.jsonl"))
    alone = measure_recoveries(tl, dataclasses.replace(target, grouped=False))
    judged = measure_recovery(tl, target)
    return {
        "arm": f"{arm_dir.parent.name}/{arm_dir.name}",
        "within_s": target.within,
        "grouped": target.grouped,
        "judged": {"verdict": judged.verdict, "seconds": judged.seconds},
        "disruptions": [{"at_s": round(time_of(r.heal), 1) if r.heal is not None else None,
                         "first_batch_s": r.first_batch_s, "recovered_s": r.seconds,
                         "cut_at_s": None if r.cut_at is None else round(r.cut_at, 1)} for r in alone],
    }


def recoveries(run_dir: Path) -> list[dict]:
    """Every arm with a recovery bound in the run, in the run's order of experiments and arms."""
    rows = []
    for spec_path in sorted(run_dir.glob(f"*/{SPEC_FILE}")):
        spec = ExperimentSpec.from_dict(json.loads(spec_path.read_text()), str(spec_path))
        for arm in spec.arms:
            arm_dir = spec_path.parent / arm.profile
            if (arm_dir / "history.jsonl").is_file():
                row = arm_recoveries(arm_dir, spec)
                if row is not None:
                    rows.append(row)
    return rows


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def print_recoveries(rows: list[dict]) -> None:
    for row in rows:
        judged = row["judged"]
        print(f"{row['arm']}: judged {judged['verdict']} {_seconds(judged['seconds'])} s against {row['within_s']:g} s"
              + (" (grouped)" if row["grouped"] else ""))
        for d in row["disruptions"]:
            ending = (f"recovered {_seconds(d['recovered_s'])} s" if d["recovered_s"] is not None
                      else f"not recovered before t={d['cut_at_s']:.1f}s" if d["cut_at_s"] is not None
                      else "not recovered")
            first = "none" if d["first_batch_s"] is None else f"{d['first_batch_s']:.1f} s"
            print(f"  t={_seconds(d['at_s'])}s  first new batch {first}  {ending}")
