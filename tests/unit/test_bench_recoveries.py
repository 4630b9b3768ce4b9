"""`chaos bench recoveries`: every disruption of a stored run on its own, beside what the arm's check judged."""
from __future__ import annotations

from pathlib import Path

from chaos import cli
from chaos.bench.recoveries import recoveries

RUN = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "20261123T085731-smoke-464"


def test_each_disruption_is_measured_alone_beside_the_judged_recovery():
    rows = {row["arm"]: row for row in recoveries(RUN)}
    crash = rows["process-crash/hardened"]
    assert (crash["within_s"], crash["judged"]["verdict"]) == (30.0, "FAILED")
    # Three restarts in a row completed no batch before the next thing hit the job; the fourth recovered.
    assert [d["at_s"] for d in crash["disruptions"]] == [32.2, 50.2, 64.9, 83.6]
    assert [d["cut_at_s"] for d in crash["disruptions"]] == [50.2, 64.9, 70.1, None]
    assert crash["disruptions"][-1] == {"at_s": 83.6, "first_batch_s": 12.2, "recovered_s": 15.2, "cut_at_s": None}
    assert "slow-s3-put/hardened" in rows and "slow-s3-put/naive" not in rows  # the control sets no recovery bound


def test_the_command_prints_one_line_per_disruption(capsys):
    assert cli.main(["bench", "recoveries", str(RUN)]) == 0
    out = capsys.readouterr().out
    assert "process-crash/hardened: judged FAILED - s against 30 s" in out
    assert "  t=32.2s  first new batch none  not recovered before t=50.2s" in out
    assert "  t=83.6s  first new batch 12.2 s  recovered 15.2 s" in out


def test_a_directory_that_is_no_run_is_a_usage_error(tmp_path, capsys):
    assert cli.main(["bench", "recoveries", str(tmp_path)]) == 2
    assert "is not a run directory" in capsys.readouterr().err
