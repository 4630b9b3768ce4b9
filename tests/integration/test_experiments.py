"""Experiments end to end through the CLI, on the real stack: the smoke suite's verdicts, one test item per arm, and
a run that leaves its report and nothing else behind (interrupts: test_interrupts.py).

Each test runs `chaos run` as a subprocess, exactly as a user or the nightly job would, then checks the run store
and the machine: no process of the run alive, no port of the run listening.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.spec import load_suite
from infra.ports import listening
from tests.leftovers import pids_of, ports_of

pytestmark = [pytest.mark.integration, pytest.mark.chaos]


def _chaos(*args: str, out: Path, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "chaos.cli", *args, "--out", str(out)],
                          capture_output=True, text=True, timeout=timeout)


def _assert_nothing_left(run_dir: Path) -> None:
    assert pids_of(run_dir) == []
    info = json.loads((run_dir / "stack" / "stack.json").read_text())
    assert [a for a in ports_of(info) if listening(*a, timeout=0.2)] == []


SUITE = os.environ.get("CHAOS_TEST_SUITE", "smoke")
SUITE_FILE = Path(__file__).resolve().parents[2] / "experiments" / "suites" / f"{SUITE}.yaml"
# One test item per experiment arm of the suite, so `pytest -m chaos --junitxml=...` reports each arm.
ARMS = [(entry.spec.name, arm.profile) for entry in load_suite(SUITE_FILE).entries for arm in entry.spec.arms]


@pytest.fixture(scope="module")
def suite_run(backend, tmp_path_factory):
    """The whole suite, once per backend, through the CLI as the nightly job runs it."""
    out = tmp_path_factory.mktemp(f"suite-{backend}")
    done = _chaos("run", "--suite", SUITE, "--backend", backend, out=out, timeout=3600)
    latest = out / "latest"
    assert latest.exists(), done.stderr[-3000:]
    run_dir = latest.resolve()
    results = json.loads((run_dir / "results.json").read_text())
    return done, run_dir, results


def _describe(arm: dict) -> str:
    failed = [f"{c['name']}={c['verdict']} (expected {c.get('expected')}, measured {c.get('measured')}: "
              f"{c.get('message')})" for c in arm.get("checks", []) if c.get("verdict") != "PASSED"]
    return f"{arm['verdict']}: " + ("; ".join(failed) or "no failed check")


@pytest.mark.parametrize("experiment,profile", ARMS, ids=[f"{e}/{p}" for e, p in ARMS])
def test_arm_meets_its_targets(suite_run, experiment, profile):
    _done, run_dir, results = suite_run
    found = [arm for e in results["experiments"] if e["name"] == experiment for arm in e["arms"]
             if arm["profile"] == profile]
    assert found, f"{experiment}/{profile} did not run (see {run_dir})"
    arm = found[0]
    assert arm["verdict"] == "PASSED", f"{_describe(arm)} (see {run_dir / experiment / profile})"
    assert (run_dir / experiment / profile / "history.jsonl").is_file()
    if arm["role"] == "control" and not any(c["name"] == "control" and "survived too" in (c.get("message") or "")
                                            for c in arm["checks"]):
        assert arm["signature"], "a control that passes must show its incident's signature"


def test_the_suite_run_passes_leaves_its_report_and_nothing_behind(suite_run):
    done, run_dir, results = suite_run
    summary = "\n".join(f"{e['name']}/{a['profile']}: {_describe(a)}" for e in results["experiments"] for a in e["arms"])
    assert done.returncode == 0, f"{summary}\n{done.stderr[-3000:]}"
    assert results["verdict"] == "PASSED", summary
    assert json.loads((run_dir / "run.json").read_text())["status"] == "completed"
    assert (run_dir / "index.html").is_file() and (run_dir / "junit.xml").is_file()
    _assert_nothing_left(run_dir)
