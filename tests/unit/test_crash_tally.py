"""`chaos bench crashes` (chaos/bench/crash_tally.py): counted from trigger records alone, so a campaign over several
seeds can be tallied offline."""
from __future__ import annotations

import json

from chaos.bench.crash_tally import tally
from chaos.history import HistoryWriter, read_history


def _arm(run, name, profile, seed, kills, lost=0):
    arm = run / name / profile
    arm.mkdir(parents=True)
    (run / name / "spec.json").write_text(json.dumps({"seed": seed}))
    with HistoryWriter(arm / "history.jsonl") as history:
        for n, (event, last_commit, in_flight, target) in enumerate(kills, 1):
            history.trigger(0, "process.kill", target, n, len(kills), event=event, last_commit=last_commit,
                            in_flight=in_flight, released="drop")
        history.error("process.kill on job-driver: trigger first_batch (firing 9 of 9) did not happen within the "
                      "fault's window")
    (arm / "oracle.json").write_text(json.dumps({"lost": lost, "duplicated": 0}))
    (arm / "result.json").write_text(json.dumps({"verdict": "PASSED" if not lost else "FAILED", "recovery_s": 3.0}))


def test_kills_are_counted_by_where_the_checkpoint_stood(tmp_path):
    run = tmp_path / "run"
    _arm(run, "crash-anywhere", "hardened", 101, [
        ("output_written", None, [0], "job-driver"),      # before the first commit, batch 0 in flight
        ("job_started", None, [], "job-driver"),          # before the first commit, nothing in flight
        ("commit_written", 31, [], "job-driver"),         # after a commit, nothing in flight
        ("offsets_written", 40, [41], "job-driver"),      # between offsets/41 and commits/41
        ("state_put_started", 50, [51], "executor"),
    ])
    _arm(run, "crash-anywhere", "naive", 101, [("offsets_written", 12, [13], "job-driver")], lost=3)
    history = read_history(run / "crash-anywhere" / "hardened" / "history.jsonl")
    assert [r["type"] for r in history].count("trigger") == 5
    result = tally([run])
    hardened = result["totals"]["hardened"]
    assert (hardened["kills"], hardened["before_first_commit"], hardened["batch_in_flight"]) == (5, 2, 3)
    arm = next(a for a in result["arms"] if a["arm"] == "crash-anywhere/hardened")
    assert (arm["driver_kills"], arm["executor_kills"], arm["unrealised"], arm["seed"]) == (4, 1, 1, 101)
    assert result["totals"]["naive"]["lost"] == 3 and result["totals"]["naive"]["verdicts"] == {"FAILED": 1}
