"""An interrupted arm's outputs, stored unjudged (judge-later.json beside sessions.jsonl), judged by the next
`chaos check` (chaos/rejudge.py judge_left) by the session rules its spec gives its profile."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.bench.oracle import generate
from chaos.rejudge import judge_left
from chaos.spec import load_experiment
from chaos.store import JUDGE_LATER_FILE

SPEC = """
name: cut
description: test
incident: {file: 001-x.txt, error: boom}
seed: 1
workload: {shape: uniform, keys: 50, rate: 2000}
job: {session_gap: 2s, max_session_length: 20s, watermark: 1s}
phases: {steady: 10s, inject: 20s, recover: 10s}
faults:
  - {fault: network.down, target: kafka, at: 0s, duration: 5s}
arms:
  hardened:
    targets: {lost: 0, duplicated: 0}
"""


def cut_run(tmp_path: Path, damage: float) -> tuple[Path, dict]:
    """A run directory whose hardened arm an interrupt left unjudged: its ledger and the rows its job emitted."""
    source = tmp_path / "cut.yaml"
    source.write_text(SPEC)
    run_dir = tmp_path / "run"
    arm_dir = run_dir / "cut" / "hardened"
    arm_dir.mkdir(parents=True)
    (run_dir / "cut" / "spec.json").write_text(json.dumps(load_experiment(source).to_dict()))
    meta = generate(arm_dir, 20_000, "uniform", 50, gap_ms=2_000, max_session_ms=20_000, damage=damage, seed=3)
    (arm_dir / "emitted.jsonl").rename(arm_dir / "sessions.jsonl")
    (arm_dir / JUDGE_LATER_FILE).write_text(json.dumps({"drained": False, "topic_audit": "not read back: cut"}))
    return arm_dir, meta


def test_check_judges_what_the_interrupt_left_and_only_once(tmp_path):
    arm_dir, meta = cut_run(tmp_path, damage=0.0)
    said: list[str] = []
    assert judge_left(tmp_path / "run", said.append) == 1
    oracle = json.loads((arm_dir / "oracle.json").read_text())
    assert (oracle["lost"], oracle["duplicated"], oracle["drained"]) == (0, 0, False)
    assert oracle["judged_by"] == "chaos check" and oracle["topic_audit"] == "not read back: cut"
    assert oracle["judging"]["events"] == meta["events"]
    assert said == ["cut/hardened: outputs judged (left by an interrupt)"]
    assert not (arm_dir / JUDGE_LATER_FILE).exists()
    assert judge_left(tmp_path / "run", said.append) == 0  # judged once: the note is gone


@pytest.mark.parametrize("damage", [0.05])
def test_what_the_job_lost_or_repeated_is_counted(tmp_path, damage):
    arm_dir, _meta = cut_run(tmp_path, damage)
    judge_left(tmp_path / "run", lambda line: None)
    oracle = json.loads((arm_dir / "oracle.json").read_text())
    assert oracle["lost"] > 0 and oracle["duplicated"] > 0


def test_outputs_that_cannot_be_judged_are_left_as_they_were_and_say_why(tmp_path):
    arm_dir, _meta = cut_run(tmp_path, damage=0.0)
    (arm_dir / "ledger.jsonl").write_text("not a ledger line\n{}\n")
    said: list[str] = []
    assert judge_left(tmp_path / "run", said.append) == 0
    assert not (arm_dir / "oracle.json").exists() and (arm_dir / JUDGE_LATER_FILE).exists()
    assert len(said) == 1 and said[0].startswith("cut/hardened: its outputs could not be judged: LedgerError: ")


def test_an_interrupted_run_writes_its_verdicts_only_and_check_judges_the_rest(tmp_path):
    from chaos.rejudge import rejudge

    arm_dir, _meta = cut_run(tmp_path, damage=0.0)
    run_dir = tmp_path / "run"
    (run_dir / "run.json").write_text(json.dumps({"status": "interrupted", "experiments": ["cut"]}))
    said: list[str] = []
    results = rejudge(run_dir, said.append, interrupted=True)
    assert results["verdict"] == "INTERRUPTED" and (run_dir / "results.json").is_file()
    assert (run_dir / "junit.xml").is_file() and not (run_dir / "index.html").exists()
    assert not (arm_dir / "oracle.json").exists() and (arm_dir / JUDGE_LATER_FILE).exists()
    assert said[-1] == f"interrupted: the outputs and the report are judged by: chaos check {run_dir}"
    rejudge(run_dir, said.append)  # `chaos check RUN_DIR`
    assert (arm_dir / "oracle.json").is_file() and not (arm_dir / JUDGE_LATER_FILE).exists()
    assert (run_dir / "index.html").is_file()
