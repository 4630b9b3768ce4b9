"""chaos/rejudge.py: a stored run judged again, its results and report written, by one function that the end of
`chaos run`, `chaos check` and `chaos clean` all call; and the one rule of what a run directory is (chaos/store.py)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from chaos import rejudge as rejudging
from chaos.store import is_run_dir

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
RUN_A = "20261123T081854-smoke-13866"


@pytest.fixture
def run(tmp_path) -> Path:
    copy = tmp_path / RUN_A
    shutil.copytree(FIXTURES / RUN_A, copy)
    return copy


def test_rejudge_writes_every_result_results_json_and_the_report_and_returns_the_results(run):
    stale = [*run.glob("*/*/result.json"), run / "results.json"]
    for path in stale:
        path.unlink()
    said: list[str] = []
    results = rejudging.rejudge(run, said.append)
    assert json.loads((run / "results.json").read_text()) == results and results["verdict"] == "FAILED"
    assert all(path.is_file() for path in stale)
    assert (run / "junit.xml").is_file() and (run / "index.html").is_file() and said == []


@pytest.fixture
def judged(monkeypatch) -> list[Path]:
    """The run directories chaos/rejudge.py judged, its report left out (the plots take seconds)."""
    calls: list[Path] = []
    judge = rejudging.judge_run

    def spy(run_dir):
        calls.append(Path(run_dir))
        return judge(run_dir)

    monkeypatch.setattr(rejudging, "judge_run", spy)
    monkeypatch.setattr(rejudging, "write_report", lambda run_dir, say: None)
    return calls


def test_chaos_check_judges_through_rejudge(run, judged):
    from chaos.commands.runs import check

    assert check(run) == 1 and judged == [run]


def test_chaos_clean_closes_a_killed_run_through_rejudge(run, judged, monkeypatch):
    from chaos.commands.runs import clean_dead_runs
    from infra import registry

    record = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**record, "status": "running"}))
    monkeypatch.setattr(registry, "cleanup_dead", lambda say: [(str(run), "stopped 3 processes")])
    clean_dead_runs()
    assert judged == [run]
    assert json.loads((run / "results.json").read_text())["verdict"] == "INTERRUPTED"


def test_the_end_of_chaos_run_judges_through_rejudge(tmp_path, judged):
    from chaos.run import run_experiments

    results = run_experiments([], tmp_path, "nothing", say=lambda line: None)  # no experiment: no stack starts
    assert judged == [tmp_path] and results == json.loads((tmp_path / "results.json").read_text())
    assert results["verdict"] == "NODATA" and results["status"] == "completed"


def test_a_run_directory_is_one_with_run_json(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    assert not is_run_dir(run)
    (run / "results.json").write_text("{}")  # what chaos stack smoke and chaos bench write: no run to judge
    assert not is_run_dir(run)
    (run / "run.json").mkdir()
    assert not is_run_dir(run)
    (run / "run.json").rmdir()
    (run / "run.json").write_text("{}")
    assert is_run_dir(run)
    (run / "results.json").unlink()  # running, or killed before it was judged: a run directory still
    assert is_run_dir(run)
    assert not is_run_dir(tmp_path / "none") and not is_run_dir(tmp_path / ("x" * 300))  # too long: none


def test_the_trend_takes_judged_run_directories_only(tmp_path):
    from chaos.report import collect_runs

    runs = tmp_path / "runs"
    shutil.copytree(FIXTURES / RUN_A, runs / RUN_A)
    shutil.copytree(FIXTURES / RUN_A, runs / "no-run-json")
    (runs / "no-run-json" / "run.json").unlink()  # results.json alone: a measurement's directory, not a run's
    shutil.copytree(FIXTURES / RUN_A, runs / "not-judged")
    (runs / "not-judged" / "results.json").unlink()
    assert [row.run.dir.name for row in collect_runs(runs)] == [RUN_A]
