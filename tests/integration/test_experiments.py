"""Experiments end to end through the CLI, on the real stack: the smoke suite's verdicts, one test item per arm, and
a run that leaves its report and nothing else behind (interrupts: test_interrupts.py).

The arms run as `chaos run` in a subprocess, exactly as a user or the nightly job runs them, then the run store and
the machine are checked: no process of the run alive, no port of the run listening. ONE run serves the session
(chaos/pytest_plugin.py): the arms the selected items name, each as the suite runs it (`chaos run --suite smoke
--only EXP/ARM,...`), so `pytest -k 'kafka-broker-disconnect and hardened'` runs that arm alone, and the whole
suite when every arm (or only a whole-suite check) is selected.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from chaos.pytest_plugin import ChaosRun, chaos_arms, describe, record_arm, suite_arms
from infra.ports import listening
from tests.leftovers import pids_of, ports_of

pytestmark = [pytest.mark.integration, pytest.mark.chaos, pytest.mark.alone]  # the smoke: recovery bounds

SUITE = os.environ.get("CHAOS_TEST_SUITE", "smoke")


def _assert_nothing_left(run_dir: Path) -> None:
    assert pids_of(run_dir) == []
    infos = [json.loads(path.read_text()) for path in sorted((run_dir / "stack").rglob("stack.json"))]
    assert infos  # one stack, or one per lane (stack/lane-N/stack.json)
    for info in infos:
        assert [a for a in ports_of(info) if listening(*a, timeout=0.2)] == []


@pytest.fixture(scope="module")
def suite_run(backend, chaos_suite_runs) -> ChaosRun:
    """The suite's selected arms (all of them without -k), once per backend, through the CLI."""
    run = chaos_suite_runs.get(SUITE, backend)
    assert run.run_dir is not None and run.results is not None, run.stderr[-3000:]
    return run


def _summary(run: ChaosRun) -> str:
    return "\n".join(f"{e['name']}/{a['profile']}: {describe(a)}" for e in run.results["experiments"]
                     for a in e["arms"])


# One test item per experiment arm of the suite, so `pytest -m chaos --junitxml=...` reports each arm, with its
# recovery time and lost and duplicated counts as properties.
@pytest.mark.parametrize("experiment,profile", chaos_arms(SUITE))
def test_arm_meets_its_targets(suite_run, experiment, profile, record_property):
    run_dir = suite_run.run_dir
    arm = suite_run.arm(experiment, profile)
    assert arm, f"{experiment}/{profile} did not run (see {run_dir})\n{suite_run.stderr[-3000:]}"
    record_arm(record_property, arm)
    assert arm["verdict"] == "PASSED", f"{describe(arm)} (see {run_dir / experiment / profile})"
    assert (run_dir / experiment / profile / "history.jsonl").is_file()
    if arm["role"] == "control" and not any(c["name"] == "control" and "survived too" in (c.get("message") or "")
                                            for c in arm["checks"]):
        assert arm["signature"], "a control that passes must show its incident's signature"


@pytest.mark.chaos_suite(SUITE)
def test_the_run_leaves_its_report_and_nothing_behind(suite_run):
    """Whatever part of the suite ran: a completed run, its report and junit.xml, no process or port left."""
    run_dir = suite_run.run_dir
    assert json.loads((run_dir / "run.json").read_text())["status"] == "completed", suite_run.stderr[-3000:]
    assert (run_dir / "index.html").is_file() and (run_dir / "junit.xml").is_file()
    _assert_nothing_left(run_dir)


@pytest.mark.chaos_suite(SUITE)
def test_the_whole_suite_passes(suite_run):
    """The suite's own verdict (discrimination where the suite requires it, flaky repeats) and exit code: only
    meaningful for the whole suite."""
    if not suite_run.complete:
        pytest.skip(f"only part of the suite ran (--only {suite_run.only}: the -k/-m/--deselect selection); the "
                    f"whole-suite verdict needs all {len(suite_arms(SUITE))} arms: select every arm item, or no -k")
    ran, planned = suite_run.ran(), suite_arms(SUITE)
    assert sorted(ran) == sorted(planned), f"arms that did not run: {sorted(set(planned) - set(ran))}"
    assert suite_run.returncode == 0, f"{_summary(suite_run)}\n{suite_run.stderr[-3000:]}"
    assert suite_run.results["verdict"] == "PASSED", _summary(suite_run)
