"""`chaos bench suite`: where a stored run's time went, from its files alone (pure: a run directory in, figures out)."""
from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from chaos.bench.suite_timing import lane_of, print_timing, suite_timing
from chaos.history import HistoryWriter
from chaos.spec import load_experiment

ROOT = Path(__file__).resolve().parents[2]


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def write_arm(directory: Path, warm_up: float, phases: list[tuple[str, float, float]], tail: float,
              log: str = "logs/job-hardened-1.log", began: float = 0.0) -> None:
    """An arm's history; `began`: its start in seconds after 10:00:00 on the wall clock."""
    directory.mkdir(parents=True)
    clock = Clock()
    origin = datetime(2026, 11, 23, 10, tzinfo=UTC) + timedelta(seconds=began)
    with HistoryWriter(directory / "history.jsonl", clock=clock,
                       wall_clock=lambda: origin + timedelta(seconds=clock.t)) as history:
        history.job("started", "job-driver", pid=1, log=log)
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
                               "wall_s": 42.0, "warm_up_s": 20.0, "lane": None,
                               "began": "2026-11-23T10:00:00.000+00:00", "ended": "2026-11-23T10:00:42.000+00:00",
                               "verdict": None}]
    assert timing["scheduled_phases_s"] == 22.0 and timing["wall_s"] == 44.0
    assert timing["overhead_ratio"] == round(44 / 22, 3)
    assert timing["arm_time"] == {"walls_s": 42.0, "phases_s": 17.0, "warm_ups_s": 20.0, "rest_s": 5.0,
                                  "lanes": {"-": 42.0}}


def test_in_a_lanes_run_each_arm_says_its_lane_and_what_ran_beside_it(tmp_path, capsys):
    spec = load_experiment(ROOT / "tests" / "fixtures" / "experiments" / "tiny.yaml")
    run = tmp_path / "run"
    for name in ("one", "two", "three"):
        (run / name).mkdir(parents=True)
        (run / name / "spec.json").write_text(json.dumps(spec.to_dict()))
    (run / "run.json").write_text(json.dumps({"suite": "t", "status": "completed",
                                              "experiments": ["one", "two", "three"],
                                              "started": "2026-11-23T10:00:00+00:00",
                                              "ended": "2026-11-23T10:02:00+00:00"}))
    phases = [("steady", 0, 6), ("inject", 6, 14), ("recover", 14, 22)]
    # lane-1: one (0-42 s), then three (50-92 s); lane-2: two (30-72 s)
    write_arm(run / "one" / "hardened", 20, phases, 0, log="logs/lane-1/job-hardened-a-1.log", began=0)
    write_arm(run / "two" / "hardened", 20, phases, 0, log="logs/lane-2/job-hardened-b-1.log", began=30)
    write_arm(run / "three" / "hardened", 20, phases, 0, log="logs/lane-1/job-hardened-c-1.log", began=50)
    (run / "two" / "hardened" / "result.json").write_text(json.dumps({"verdict": "FAILED"}))
    arms = {arm["experiment"]: arm for arm in suite_timing(run)["arms"]}
    assert [arms[name]["verdict"] for name in ("one", "two", "three")] == [None, "FAILED", None]
    assert [arms[name]["lane"] for name in ("one", "two", "three")] == ["lane-1", "lane-2", "lane-1"]
    assert arms["one"]["beside"] == [{"arm": "two/hardened", "overlap_s": 12}]
    assert arms["two"]["beside"] == [{"arm": "three/hardened", "overlap_s": 22},
                                     {"arm": "one/hardened", "overlap_s": 12}]
    assert arms["three"]["beside"] == [{"arm": "two/hardened", "overlap_s": 22}]  # never its own lane's arms
    print_timing(suite_timing(run))
    out = capsys.readouterr().out
    assert "lane-2" in out and "three/hardened (22 s), one/hardened (12 s)" in out
    # three 42 s arms: 66 s of phases, 60 of warm-ups; lane-1 ran two of them
    assert "arm walls summed 2.1 min: phases 1.1, warm-ups 1.0, the rest (stop, drain, read-back) 0.0" in out
    assert "per lane: lane-1 1.4 min, lane-2 0.7 min" in out


def test_a_cluster_lanes_log_directory_names_its_lane_and_a_one_lane_run_has_none():
    assert lane_of([{"type": "job", "log": "logs/lane-3-cluster/job-naive-1.log"}]) == "lane-3-cluster"
    assert lane_of([{"type": "job", "log": "logs/job-naive-1.log"}]) is None
    assert lane_of([{"type": "job", "log": "logs/cluster/job-naive-1.log"}]) is None  # one lane, the cluster stack
    assert lane_of([{"type": "watch"}]) is None
