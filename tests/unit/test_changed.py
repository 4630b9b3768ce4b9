"""`--changed-since`: which experiments a change can affect (chaos/changed.py)."""
from __future__ import annotations

import fnmatch
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chaos import errors
from chaos.changed import Change, changes_since, section_kinds, sections_at, select
from chaos.spec import load_suite

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "experiments" / "suites" / "nightly.yaml"  # every experiment


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
    chosen = _decide(specs, Change("docs/job.md"), Change("tests/unit/test_oracle.py"), Change("chaos/report/page.py"))
    assert not any(d.run for d in chosen.values())
    assert all(d.reason == "nothing it depends on changed" for d in chosen.values())


def test_a_spec_runs_its_experiment_only(specs):
    chosen = _decide(specs, Change("experiments/slow-s3-put.yaml"))
    assert {n for n, d in chosen.items() if d.run} == {"slow-s3-put"}
    assert chosen["slow-s3-put"].reason == "experiments/slow-s3-put.yaml changed"


def test_the_suite_file_or_the_job_runs_everything(specs):
    for path in ("experiments/suites/nightly.yaml", "job/integrity.py", "chaos/run.py", "infra/stack.py",
                 "a-new-unknown-file.py"):
        chosen = _decide(specs, Change(path))
        assert all(d.run for d in chosen.values()), path
        assert path in chosen["slow-s3-put"].reason


def _users(specs, *kinds: str) -> set[str]:
    return {s.name for s in specs if any(f.fault in kinds for f in s.faults)}


def test_a_line_inside_one_fault_kind_runs_its_users(specs):
    for text, kind in (("class CorruptCheckpoint", "checkpoint.corrupt"),
                       ("def _validate_corrupt", "checkpoint.corrupt"),
                       ('FaultKind("checkpoint.corrupt"', "checkpoint.corrupt")):
        line = _line_of("chaos/faults/checkpoint.py", text)
        chosen = _decide(specs, Change("chaos/faults/checkpoint.py", (line + 3,)))
        users = _users(specs, kind)
        assert users and {n for n, d in chosen.items() if d.run} == users, text
        assert kind in chosen[sorted(users)[0]].reason


def test_a_shared_line_of_a_family_runs_the_users_of_the_family(specs):
    chosen = _decide(specs, Change("chaos/faults/checkpoint.py", (1,)))
    users = _users(specs, "checkpoint.corrupt", "checkpoint.second_deployment")
    assert users and {n for n, d in chosen.items() if d.run} == users
    assert not all(d.run for d in chosen.values())


def test_the_shared_fault_code_runs_everything(specs):
    for path in ("chaos/faults/base.py", "chaos/faults/registry.py", "chaos/faults/__init__.py"):
        chosen = _decide(specs, Change(path, (1,)))
        assert all(d.run for d in chosen.values()), path


def test_every_kind_has_its_own_code_in_its_family_module():
    from chaos.faults.registry import FAULTS

    sections = sections_at(ROOT)
    assert set(FAULTS) == {kind for kinds in sections.values() if kinds for kind in kinds}
    network = sections["chaos/faults/network.py"]
    assert network is not None
    # the toxics share one class (both own it) but each has its own declaration
    assert network["network.latency"] != network["network.reset_peer"]
    assert set(network["network.latency"]) & set(network["network.reset_peer"])
    assert not set(network["network.down"]) & set(network["network.latency"])


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
    (root / "chaos" / "faults").mkdir(parents=True)
    shutil.copy(ROOT / "chaos" / "faults" / "process.py", root / "chaos" / "faults" / "process.py")
    (root / "README.md").write_text("x\n")

    def git(*args):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)
    git("init", "-q")
    git("-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "base")
    return root


def test_changes_since_reads_the_working_tree(repo):
    path = repo / "chaos" / "faults" / "process.py"
    lines = path.read_text().splitlines(keepends=True)
    target = next(i for i, line in enumerate(lines) if "class Pause" in line)
    lines.insert(target + 1, "    # a comment\n")
    path.write_text("".join(lines))
    (repo / "new.txt").write_text("untracked\n")
    found = {c.path: c for c in changes_since("HEAD", repo)}
    assert set(found) == {"chaos/faults/process.py", "new.txt"}
    assert found["chaos/faults/process.py"].lines == (target + 2,)
    sections = section_kinds(path.read_text(), "chaos/faults/process.py")
    assert sections is not None and any(first == target + 1 for first, _ in sections["process.pause"])


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


def test_every_harness_file_the_rules_name_exists():
    """A module moved or renamed must take its rule along: a pattern left naming the old path would quietly make
    the moved file rerun everything (or stop serving triggers)."""
    from chaos.changed import INERT, TRIGGER_FILES

    named = [p for p in (*INERT, *TRIGGER_FILES) if p.startswith(("chaos/", "infra/"))]
    assert "chaos/bench/job.py" in named and "chaos/triggers.py" in named  # the patterns are really read
    files = [f.relative_to(ROOT).as_posix() for top in ("chaos", "infra") for f in (ROOT / top).rglob("*")
             if f.is_file()]
    missing = [p for p in named if not any(fnmatch.fnmatch(path, p) for path in files)]
    assert not missing, f"chaos/changed.py names files that are not in the tree: {missing}"
