"""`chaos bench recovery-size`: each disruption as a point (state held before it, recovery, the S3-read floor), for
both arms by one definition, as a table, a plot, and a section of a scale run's report."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from chaos import cli
from chaos.bench.recovery_size import fault_of, markdown, plot_svg, run_points
from chaos.checks.timeline import timeline
from chaos.history import read_history
from chaos.report.page import write_report

RUN = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "20261123T085731-smoke-464"
MIB = 1 << 20


def _run(tmp_path: Path, sst_per_row: int, rate: int | None, naive_target: bool = True) -> Path:
    """The fixture's process-crash experiment (two driver kills, an executor's, a broker's) in a run of its own, its
    samples given SST bytes (sst_per_row per state row), a measured S3 read rate, and a naive arm that is the hardened
    history again."""
    run = tmp_path / "run"
    (run / "process-crash").mkdir(parents=True)
    for name in ("results.json", "run.json"):
        shutil.copy(RUN / name, run / name)
    spec = json.loads((RUN / "process-crash" / "spec.json").read_text())
    if not naive_target:
        for arm in spec["arms"]:
            if arm["profile"] == "naive":
                arm["targets"]["recovery"] = None
    (run / "process-crash" / "spec.json").write_text(json.dumps(spec))
    lines = []
    for line in (RUN / "process-crash" / "hardened" / "history.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["type"] == "sample" and record.get("state_rows") is not None:
            record["state_sst_bytes"] = record["state_rows"] * sst_per_row
        lines.append(json.dumps(record))
    last_t = json.loads(lines[-1])["t"]
    if rate is not None:
        lines.append(json.dumps({"t": last_t + 500, "wall": "2026-11-23T09:40:00.000+00:00", "type": "measure",
                                 "name": "s3_read", "bytes": 256 * MIB, "seconds": 2.0, "bytes_per_s": rate}))
    for profile in ("hardened", "naive"):
        (run / "process-crash" / profile).mkdir()
        (run / "process-crash" / profile / "history.jsonl").write_text("\n".join(lines) + "\n")
    return run


def test_each_disruption_is_a_point_with_the_state_before_it_and_its_floor(tmp_path):
    run = _run(tmp_path, sst_per_row=MIB, rate=128 * MIB)
    points = [p for p in run_points(run) if p.profile == "hardened"]
    assert [p.fault for p in points] == ["driver crash", "driver crash", "executor loss", "broker loss"]
    assert [p.at_s for p in points] == [32.2, 50.2, 64.9, 83.6]
    # the disruptions before the broker's return completed no batch before the next kill: not recovered, watched to
    # that kill
    assert [p.recovered_s for p in points] == [None, None, None, 15.2]
    assert [p.watched_s for p in points][:2] == [18.0, 14.7]
    for p in points:
        assert p.state_bytes is not None and p.state_bytes % MIB == 0
        assert p.floor_s == round(p.state_bytes / (128 * MIB), 1) and p.read_bytes_per_s == 128 * MIB


def test_a_control_without_a_recovery_target_is_measured_by_its_subjects(tmp_path):
    run = _run(tmp_path, sst_per_row=MIB, rate=None, naive_target=False)
    by_arm = {profile: [p for p in run_points(run) if p.profile == profile] for profile in ("hardened", "naive")}
    assert [p.recovered_s for p in by_arm["naive"]] == [p.recovered_s for p in by_arm["hardened"]]
    assert all(p.floor_s is None for p in by_arm["naive"])  # no S3 read measured: no floor, never a guess


def test_a_job_over_the_bound_before_the_fault_is_measured_back_to_its_own_lag(tmp_path):
    """The naive job at scale is slower than its input before any fault: its lag never meets the bound, and what
    says whether the fault cost it anything is the time back to the lag it had before."""
    run = _run(tmp_path, sst_per_row=MIB, rate=None)
    history = run / "process-crash" / "naive" / "history.jsonl"
    records = [json.loads(line) for line in history.read_text().splitlines()]
    for record in records:
        if record["type"] == "sample" and record.get("lag") is not None:
            record["lag"] += 3000  # never under the bound of 2500
    history.write_text("".join(json.dumps(r) + "\n" for r in records))
    broker = {p.profile: p for p in run_points(run) if p.fault == "broker loss"}
    assert broker["hardened"].back_s == broker["hardened"].recovered_s == 15.2
    naive = broker["naive"]
    assert naive.recovered_s is None and naive.lag_before is not None and naive.lag_before > naive.lag_below
    assert naive.back_s == 15.2
    assert "(over the bound) | 15.2 s |" in markdown([naive])


def test_a_measure_taken_after_the_arm_does_not_lengthen_what_the_checks_watch(tmp_path):
    with_measure = timeline(read_history(_run(tmp_path / "a", 1, rate=MIB) / "process-crash/hardened/history.jsonl"))
    without = timeline(read_history(_run(tmp_path / "b", 1, rate=None) / "process-crash/hardened/history.jsonl"))
    assert with_measure.end == without.end and len(with_measure.measures) == 1


def test_disruptions_are_named_by_what_hit_the_job():
    assert fault_of({"type": "job", "event": "restarted", "process": "job-driver"}) == "driver crash"
    assert fault_of({"type": "job", "event": "restarted", "process": "job-driver", "corrupted": "sst"}) == \
        "damaged snapshot"
    assert fault_of({"type": "job", "event": "restarted", "process": "broker"}) == "broker loss"
    assert fault_of({"type": "fault", "name": "network.latency", "state": "healed"}) == "network.latency healed"


def test_the_table_and_plot_show_every_point_and_unrecovered_ones_as_such(tmp_path):
    points = run_points(_run(tmp_path, sst_per_row=MIB, rate=128 * MIB))
    table = markdown(points)
    assert table.count("| driver crash |") == 4 and table.count("| broker loss |") == 2
    assert "| not in 18 s |" in table and "| 15.2 s |" in table
    svg = plot_svg(points)
    assert svg is not None and svg.startswith("<svg")
    assert plot_svg([]) is None


def test_the_report_of_a_run_at_scale_shows_the_plot_and_a_small_run_does_not(tmp_path):
    scale = _run(tmp_path / "scale", sst_per_row=MIB, rate=128 * MIB)
    small = _run(tmp_path / "small", sst_per_row=64, rate=None)
    assert "recovery against state size" in write_report(scale).read_text()
    assert "recovery against state size" not in write_report(small).read_text()


def test_a_spec_this_version_cannot_read_gives_no_points_and_the_report_is_still_written(tmp_path):
    run = _run(tmp_path, sst_per_row=MIB, rate=128 * MIB)
    (run / "process-crash" / "spec.json").write_text(json.dumps({"name": "process-crash", "from": "another version"}))
    assert run_points(run) == []
    assert "recovery against state size" not in write_report(run).read_text()


def test_the_command_writes_the_table_and_the_plot(tmp_path, capsys):
    run = _run(tmp_path, sst_per_row=MIB, rate=128 * MIB)
    table, svg = tmp_path / "table.md", tmp_path / "plot.svg"
    assert cli.main(["bench", "recovery-size", str(run), "--markdown", str(table), "--svg", str(svg)]) == 0
    assert capsys.readouterr().out == table.read_text()
    assert svg.read_text().startswith("<svg")
    assert cli.main(["bench", "recovery-size", str(tmp_path / "nothing")]) == 2
