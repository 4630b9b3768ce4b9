"""chaos run --lanes: how experiments are shared among lanes (chaos/lanes.py), and bad --lanes values."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from chaos.lanes import MAX_LANES, partition
from chaos.run import experiment_dirs, planned_seconds
from chaos.spec import load_suite

ROOT = Path(__file__).resolve().parents[2]


def _planned():
    specs = [entry.spec for entry in load_suite(ROOT / "experiments" / "suites" / "smoke.yaml").entries]
    return experiment_dirs(specs, 1)


def _seconds(spec):
    return sum(planned_seconds(spec, None))


def test_every_experiment_runs_once_and_each_lane_keeps_the_run_order():
    planned = _planned()
    groups = partition(planned, 2, _seconds)
    names = [d for d, _ in planned]
    assert sorted(d for group in groups for d, _ in group) == sorted(names)
    for group in groups:
        assert [d for d, _ in group] == [n for n in names if n in {d for d, _ in group}]


def test_the_lanes_are_balanced_by_planned_time():
    planned = _planned()
    loads = [sum(_seconds(s) for _, s in group) for group in partition(planned, 2, _seconds)]
    longest = max(_seconds(s) for _, s in planned)
    assert max(loads) - min(loads) <= longest  # greedy longest-first: never off by more than one experiment
    assert max(loads) < 0.6 * sum(loads)


def test_the_cluster_experiments_share_one_lane():
    specs = [entry.spec for entry in load_suite(ROOT / "experiments" / "suites" / "nightly.yaml").entries]
    planned = experiment_dirs(specs, 1)
    groups = partition(planned, 2, _seconds)
    with_cluster = [g for g in groups if any(spec.topology == "cluster" for _, spec in g)]
    assert len(with_cluster) == 1
    assert sum(spec.topology == "cluster" for _, spec in with_cluster[0]) == 4
    assert any(spec.topology == "single" for _, spec in with_cluster[0])  # the lanes are still balanced


def test_more_lanes_than_experiments_leaves_no_empty_lane():
    planned = _planned()[:2]
    assert len(partition(planned, 4, _seconds)) == 2


@pytest.mark.parametrize("value", ["0", str(MAX_LANES + 1), "two", "-1"])
def test_a_bad_lanes_value_is_a_usage_error(tmp_path, value):
    done = subprocess.run([sys.executable, "-m", "chaos.cli", "run", "--suite", "smoke", "--lanes", value,
                           "--out", str(tmp_path / "runs")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "--lanes" in done.stderr
    assert not (tmp_path / "runs").exists()
