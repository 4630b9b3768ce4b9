"""`chaos bench suite`: where a stored run's time went, from its files alone (pure: a run directory in, figures out)."""
from __future__ import annotations

import json
from pathlib import Path

from chaos.history import HistoryWriter
from chaos.spec import load_experiment
from chaos.suite_timing import suite_timing

ROOT = Path(__file__).resolve().parents[2]


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def write_arm(directory: Path, warm_up: float, phases: list[tuple[str, float, float]], tail: float) -> None:
    directory.mkdir(parents=True)
    clock = Clock()
    with HistoryWriter(directory / "history.jsonl", clock=clock) as history:
        history.job("started", "job-driver", pid=1)
        clock.t = warm_up
        for name, start, end in phases:
            clock.t = warm_up + start
            history.phase(name, "start")
            clock.t = warm_up + end
            history.phase(name, "end")
        clock.t += tail
        history.job("exited", "job-driver", code=0)


def test_the_recover_phase_ending_early_and_the_overhead_are_measured(tmp_path):
    spec = load_experiment(ROOT / "tests" / "fixtures" / "experiments" / "tiny.yaml")  # phases 6 + 8 + 8 s, one arm
    run = tmp_path / "run"
    (run / "tiny").mkdir(parents=True)
    (run / "tiny" / "spec.json").write_text(json.dumps(spec.to_dict()))
    (run / "run.json").write_text(json.dumps({"suite": "t", "status": "completed", "experiments": ["tiny"],
                                              "started": "2026-11-23T10:00:00+00:00",
                                              "ended": "2026-11-23T10:00:44+00:00"}))
    # recovery was seen 3 s into the recover phase: the phases took 17 s of the 22 scheduled
    write_arm(run / "tiny" / "hardened", warm_up=20, phases=[("steady", 0, 6), ("inject", 6, 14), ("recover", 14, 17)],
              tail=5)
    timing = suite_timing(run)
    assert timing["arms"] == [{"experiment": "tiny", "profile": "hardened", "scheduled_s": 22.0, "phases_s": 17.0,
                               "wall_s": 42.0, "warm_up_s": 20.0}]
    assert timing["scheduled_phases_s"] == 22.0 and timing["wall_s"] == 44.0
    assert timing["overhead_ratio"] == round(44 / 22, 3)
