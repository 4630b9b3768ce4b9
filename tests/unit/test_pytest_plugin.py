"""The pytest plugin's selection (chaos/pytest_plugin.py), with `chaos run` replaced by a stub that records its
arguments: `-k` on the arm items asks for exactly those arms, once per session; the whole-suite checks get the
whole suite, or skip after a part; --chaos-scale/--chaos-seed reach the command; the arm's numbers are junit
properties. Each case is a pytest subprocess on a generated test directory (nothing here starts a service)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CONFTEST = '''
import json, os
from pathlib import Path
from chaos import pytest_plugin

pytest_plugins = ["chaos.pytest_plugin"]


def fake_run(args, out, timeout=3600):
    with open(os.environ["CHAOS_FAKE_LOG"], "a") as log:
        log.write(json.dumps(list(args)) + "\\n")
    only = args[args.index("--only") + 1].split(",") if "--only" in args else None
    experiments = []
    for name, arm in pytest_plugin.suite_arms("smoke"):
        if only is None or name in only or f"{name}/{arm}" in only:
            if not experiments or experiments[-1]["name"] != name:
                experiments.append({"name": name, "arms": []})
            verdict = "FAILED" if name == "checkpoint-commit-failures" else "PASSED"
            checks = [{"name": "recovery", "verdict": verdict, "expected": "<= 30s", "measured": "41s",
                       "message": "too slow"}]
            experiments[-1]["arms"].append({"profile": arm, "verdict": verdict, "role": "subject",
                                            "recovery_s": 4.5 if arm == "hardened" else None, "lost": 0,
                                            "duplicated": 2, "checks": checks})
    return pytest_plugin.ChaosRun(["chaos", "run", *args], 0, "", "", Path(out),
                                  {"verdict": "PASSED", "experiments": experiments})


pytest_plugin.chaos_run = fake_run
'''

TESTS = '''
import pytest
from chaos.pytest_plugin import chaos_arms, describe, record_arm


@pytest.mark.parametrize("experiment,profile", chaos_arms("smoke"))
def test_arm(chaos_suite_runs, experiment, profile, record_property):
    arm = chaos_suite_runs.get("smoke").arm(experiment, profile)
    assert arm, "did not run"
    record_arm(record_property, arm)
    assert arm["verdict"] == "PASSED", describe(arm)


def test_one_experiment(run_experiment):
    run = run_experiment("kafka-broker-disconnect", arms=["hardened"], seed=3)
    assert run.results["verdict"] == "PASSED"


@pytest.mark.chaos_suite("smoke")
def test_whole_suite(chaos_suite_runs):
    run = chaos_suite_runs.get("smoke")
    if not run.complete:
        pytest.skip(f"part of the suite: {run.only}")
'''


def _pytest(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, list[list[str]], ET.Element]:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_suite.py").write_text(TESTS)
    log, junit = tmp_path / "runs.log", tmp_path / "junit.xml"
    env = {**os.environ, "CHAOS_FAKE_LOG": str(log), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
                           f"--rootdir={tmp_path}", "-o", "addopts=", "-o", "junit_family=xunit1",
                           str(tmp_path), *args],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    runs = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return done, runs, ET.parse(junit).getroot()


def _option(run: list[str], name: str) -> str | None:
    return run[run.index(name) + 1] if name in run else None


def test_k_on_one_arm_runs_that_arm_alone(tmp_path):
    done, runs, junit = _pytest(tmp_path, "-k", "hot-key-session-growth and hardened")
    assert done.returncode == 0, done.stdout
    assert len(runs) == 1 and _option(runs[0], "--only") == "hot-key-session-growth/hardened"
    assert _option(runs[0], "--suite") == "smoke"
    properties = {p.get("name"): p.get("value") for p in junit.iter("property")}
    assert properties == {"recovery_s": "4.5", "lost": "0", "duplicated": "2", "verdict": "PASSED"}
    assert "PytestWarning" not in done.stdout  # record_property needs xunit1 (the project's junit_family)


def test_a_number_the_arm_did_not_measure_is_no_property(tmp_path):
    done, _runs, junit = _pytest(tmp_path, "-k", "hot-key-session-growth and naive")
    assert done.returncode == 0, done.stdout
    assert {p.get("name") for p in junit.iter("property")} == {"lost", "duplicated", "verdict"}


def test_k_on_an_experiment_runs_its_arms_as_the_suite_does_in_one_run(tmp_path):
    done, runs, _junit = _pytest(tmp_path, "-k", "hot-key-session-growth or checkpoint-collision/hardened")
    assert done.returncode == 0, done.stdout
    # the collision runs one arm in the smoke: its only arm selected is the whole experiment
    assert [_option(run, "--only") for run in runs] == ["checkpoint-collision,hot-key-session-growth"]
    assert "3 passed" in done.stdout


def test_no_selection_runs_the_whole_suite_once_and_a_failing_arm_says_why(tmp_path):
    done, runs, _junit = _pytest(tmp_path, "--chaos-scale", "0.1", "--chaos-seed", "7", "-k", "not one_experiment")
    assert len(runs) == 1 and "--only" not in runs[0]
    assert _option(runs[0], "--scale") == "0.1" and _option(runs[0], "--seed") == "7"
    assert "1 failed" in done.stdout and "recovery=FAILED (expected <= 30s, measured 41s: too slow)" in done.stdout


@pytest.mark.parametrize("selection, only, outcome", [
    ("whole_suite", None, "1 passed"),                                 # a whole-suite check alone: the whole suite
    ("whole_suite or hot-key-session-growth/naive", "hot-key-session-growth/naive", "1 passed, 1 skipped"),  # a part
])
def test_whole_suite_checks_get_the_whole_suite_or_skip(tmp_path, selection, only, outcome):
    done, runs, _junit = _pytest(tmp_path, "-k", selection, "-rs")
    assert [_option(run, "--only") for run in runs] == [only]
    assert outcome in done.stdout, done.stdout
    if only:
        assert f"part of the suite: {only}" in done.stdout


def test_run_experiment_runs_the_spec_with_the_options(tmp_path):
    done, runs, _junit = _pytest(tmp_path, "-k", "one_experiment", "--chaos-scale", "0.2", "--chaos-seed", "9")
    assert done.returncode == 0, done.stdout
    [run] = runs
    assert run[0] == "kafka-broker-disconnect" and _option(run, "--arms") == "hardened"
    assert _option(run, "--backend") == "local" and _option(run, "--scale") == "0.2"
    assert _option(run, "--seed") == "3"  # the argument wins over --chaos-seed
