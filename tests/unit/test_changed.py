"""`--changed-since`: which experiments a change can affect (chaos/changed.py)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chaos import errors
from chaos.changed import Change, changes_since, section_kinds, sections_at, select
from chaos.spec import load_suite

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "experiments" / "suites" / "smoke.yaml"


@pytest.fixture(scope="module")
def specs():
    return [entry.spec for entry in load_suite(SUITE).entries]


def _decide(specs, *changes: Change):
    decisions = select(specs, list(changes), str(SUITE), sections_at(ROOT), ROOT)
    assert [d.name for d in decisions] == [s.name for s in specs]
    return {d.name: d for d in decisions}


def _line_of(path: str, text: str) -> int:
    lines = (ROOT / path).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def test_docs_and_tests_run_nothing(specs):
    chosen = _decide(specs, Change("docs/job.md"), Change("tests/unit/test_oracle.py"), Change("chaos/report.py"))
    assert not any(d.run for d in chosen.values())
    assert all(d.reason == "nothing it depends on changed" for d in chosen.values())


def test_a_spec_runs_its_experiment_only(specs):
    chosen = _decide(specs, Change("experiments/slow-s3-put.yaml"))
    assert {n for n, d in chosen.items() if d.run} == {"slow-s3-put"}
    assert chosen["slow-s3-put"].reason == "experiments/slow-s3-put.yaml changed"


def test_the_suite_file_or_the_job_runs_everything(specs):
    for path in ("experiments/suites/smoke.yaml", "job/integrity.py", "chaos/run.py", "infra/stack.py",
                 "a-new-unknown-file.py"):
        chosen = _decide(specs, Change(path))
        assert all(d.run for d in chosen.values()), path
        assert path in chosen["slow-s3-put"].reason


def test_a_line_inside_one_fault_kind_runs_its_users(specs):
    line = _line_of("chaos/faults.py", "class CorruptCheckpoint")
    chosen = _decide(specs, Change("chaos/faults.py", (line + 3,)))
    users = {s.name for s in specs if any(f.fault == "checkpoint.corrupt" for f in s.faults)}
    assert users and {n for n, d in chosen.items() if d.run} == users
    assert "checkpoint.corrupt" in chosen[sorted(users)[0]].reason


def test_a_shared_line_in_a_fault_module_runs_everything(specs):
    chosen = _decide(specs, Change("chaos/faults.py", (1,)))
    assert all(d.run for d in chosen.values())


def test_a_toxic_kind_maps_through_the_comprehension():
    sections = section_kinds((ROOT / "chaos/faults.py").read_text(), "chaos/faults.py")
    assert sections["network.latency"] == sections["network.reset_peer"]
    catalog = section_kinds((ROOT / "chaos/faults_catalog.py").read_text(), "chaos/faults_catalog.py")
    assert catalog["network.latency"] != catalog["network.reset_peer"]


def test_trigger_code_runs_experiments_with_on(specs):
    chosen = _decide(specs, Change("chaos/triggers.py"))
    with_on = {s.name for s in specs if any(f.on is not None for f in s.faults)}
    assert {n for n, d in chosen.items() if d.run} == with_on


def test_s3proxy_runs_s3_and_trigger_experiments(specs):
    chosen = _decide(specs, Change("infra/s3proxy/main.go"))
    expected = {s.name for s in specs if any(f.fault.startswith("s3.") or f.on is not None for f in s.faults)}
    assert {n for n, d in chosen.items() if d.run} == expected


@pytest.fixture()
def repo(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path / "repo"
    (root / "chaos").mkdir(parents=True)
    shutil.copy(ROOT / "chaos" / "faults.py", root / "chaos" / "faults.py")
    (root / "README.md").write_text("x\n")

    def git(*args):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)
    git("init", "-q")
    git("-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "base")
    return root


def test_changes_since_reads_the_working_tree(repo):
    path = repo / "chaos" / "faults.py"
    lines = path.read_text().splitlines(keepends=True)
    target = next(i for i, line in enumerate(lines) if "class Pause" in line)
    lines.insert(target + 1, "    # a comment\n")
    path.write_text("".join(lines))
    (repo / "new.txt").write_text("untracked\n")
    found = {c.path: c for c in changes_since("HEAD", repo)}
    assert set(found) == {"chaos/faults.py", "new.txt"}
    assert found["chaos/faults.py"].lines == (target + 2,)
    assert section_kinds(path.read_text(), "chaos/faults.py")["process.pause"][0] == target + 1


@pytest.mark.parametrize("ref", ["no-such-ref", "--output=x", "HEAD~5"])
def test_a_bad_ref_is_a_usage_error(repo, ref):
    with pytest.raises(errors.ChaosError) as caught:
        changes_since(ref, repo)
    assert caught.value.exit_code == errors.USAGE
    assert "\n" not in str(caught.value)


def test_the_cli_refuses_a_bad_ref_before_starting_anything(tmp_path):
    done = subprocess.run([sys.executable, "-m", "chaos.cli", "run", "--suite", "smoke", "--changed-since",
                           "no-such-ref-xyz", "--out", str(tmp_path / "runs")], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == errors.USAGE
    assert len(done.stderr.strip().splitlines()) == 1 and "no-such-ref-xyz" in done.stderr
    assert not (tmp_path / "runs").exists()
