"""The clock family (chaos/faults/clock.py): what a spec may say of a clock jump, the shim's control file it writes,
the arm preloading the shim only where a fault needs it, and the job's detection of a wall-clock step
(job/clock.py). The shim moving a real JVM's clock is measured in tests/integration/test_clock_jump.py."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from chaos.errors import SpecError
from chaos.faults.clock import write_offset
from chaos.faults.registry import FAULTS
from chaos.spec import load_experiment
from job.clock import WallClockSteps

SPEC = """
name: t-clock
description: test
incident: {file: 001-x.txt, error: boom}
seed: 1
workload: {shape: uniform, keys: 20, rate: 50, partitions: 2}
job: {session_gap: 2s, max_session_length: 20s, watermark: 1s, trigger: 1s}
phases: {steady: 10s, inject: 20s, recover: 10s}
faults:
  - {fault: clock.jump, target: job-driver, at: 0s, duration: 10s, params: {offset: -120}}
arms:
  hardened:
    targets: {progress: true, lost: 0, duplicated: 0}
"""


def spec_with(tmp_path: Path, **fault: object):
    doc = yaml.safe_load(SPEC)
    doc["faults"][0].update(fault)
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_experiment(path)


def test_a_jump_back_or_forward_is_a_signed_number_of_seconds(tmp_path):
    assert spec_with(tmp_path).faults[0].params == {"offset": -120}
    assert spec_with(tmp_path, params={"offset": 300.5}).faults[0].params == {"offset": 300.5}


@pytest.mark.parametrize("fault, fragment", [
    ({"params": {"offset": 0}}, "faults.0.params.offset: 0 moves nothing"),
    ({"params": {}}, "faults.0.params.offset: missing"),
    ({"params": {"offset": 3601}}, "faults.0.params.offset: 3601 is not valid"),
    ({"params": {"offset": "-2m"}}, "faults.0.params.offset: '-2m' is not valid"),
    ({"target": "broker"}, "faults.0.target: "),
])
def test_a_jump_that_moves_nothing_or_too_far_or_another_process_is_refused_in_one_line(tmp_path, fault, fragment):
    with pytest.raises(SpecError) as caught:
        spec_with(tmp_path, **fault)
    assert fragment in str(caught.value) and "\n" not in str(caught.value)


def test_the_clock_family_alone_needs_the_clock_shim_in_the_driver():
    assert {name for name, kind in FAULTS.items() if kind.needs.driver_shims} == {"clock.jump"}
    assert FAULTS["clock.jump"].needs.driver_shims == ("clock",)
    assert (Path(__file__).resolve().parents[2] / "infra" / "shims" / "clock.c").is_file()


def test_the_control_file_is_replaced_whole_with_the_offset_in_seconds(tmp_path):
    path = tmp_path / "driver-clock-offset"
    write_offset(path, -120)
    write_offset(path, 300.25)
    assert path.read_text() == "300.250\n" and [p.name for p in tmp_path.iterdir()] == [path.name]


class Clocks:
    def __init__(self) -> None:
        self.wall, self.mono = 1_000_000.0, 50.0

    def tick(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds


def test_a_step_back_past_the_threshold_is_seen_once_and_a_step_forward_is_not():
    clocks = Clocks()
    steps = WallClockSteps(2.0, wall=lambda: clocks.wall, monotonic=lambda: clocks.mono)
    clocks.tick(1)
    assert steps.stepped_back() is None  # time passing moves both clocks
    clocks.wall -= 1.5
    assert steps.stepped_back() is None  # under the threshold: the trigger loses at most that much
    clocks.wall += 300
    assert steps.stepped_back() is None  # forward: the trigger's wait only ends early
    clocks.wall -= 120
    clocks.tick(1)
    assert steps.stepped_back() == pytest.approx(120)
    assert steps.stepped_back() is None  # measured from the new clock on


# -- stalled: the control's signature in clock-jump-session-gap (chaos/checks/progress.py) ------------------------
def _phases_with(batches: list[tuple[float, int]]) -> list[dict]:
    """steady 0-10 s, inject 10-70 s, recover 70-80 s, and a sample (t, batch_id) per entry."""
    records: list[dict] = [{"t": 0.0, "type": "phase", "name": "steady", "boundary": "start"},
                           {"t": 10.0, "type": "phase", "name": "steady", "boundary": "end"},
                           {"t": 10.0, "type": "phase", "name": "inject", "boundary": "start"},
                           {"t": 70.0, "type": "phase", "name": "inject", "boundary": "end"},
                           {"t": 70.0, "type": "phase", "name": "recover", "boundary": "start"},
                           {"t": 80.0, "type": "phase", "name": "recover", "boundary": "end"}]
    records += [{"t": t, "type": "sample", "batch_id": batch} for t, batch in batches]
    return sorted(records, key=lambda r: r["t"])


def test_the_longest_stall_of_inject_and_recover_is_the_controls_signature():
    from chaos.checks.progress import check_stalled, longest_stall
    from chaos.checks.timeline import timeline

    steady_stall = [(t, 1) for t in range(0, 10)]  # stuck in steady: not counted
    waits = [(t, 2 + t // 2) for t in range(10, 30)] + [(t, 12) for t in range(30, 80)]  # stuck from 30 s on
    tl = timeline(_phases_with(steady_stall + waits))
    assert longest_stall(tl) == (30.0, 49.0)
    assert check_stalled(tl, 45).verdict == "PASSED"
    steady = timeline(_phases_with([(t, t // 2) for t in range(0, 80)]))
    check = check_stalled(steady, 45)
    assert check.verdict == "FAILED" and check.measured == "longest stall 1.0s from t=10.0s"
    assert check_stalled(timeline(_phases_with([])), 45).verdict == "NODATA"


def test_a_job_that_ended_by_itself_after_its_last_batch_stalled_without_end():
    """scale-hot-key-list-state's control: its executors die of OutOfMemoryError and its query fails 80 s into the
    hot key, before any stall reaches the target's length. A driver that ends by itself completes no batch again; one
    the harness stopped (a `stop` or a `cause`) or restarted afterwards says nothing of the sort."""
    from chaos.checks.progress import check_stalled, stall_signature
    from chaos.checks.timeline import timeline

    batches = [(t, t // 2) for t in range(10, 30)] + [(t, 15) for t in range(30, 50)]  # last batch at 30 s
    exited = {"t": 50.0, "type": "job", "event": "exited", "process": "job-driver", "code": 1}
    tl = timeline(sorted(_phases_with(batches) + [exited], key=lambda r: r["t"]))
    check = check_stalled(tl, 45)
    assert check.verdict == "PASSED" and check.measured.endswith("then the job ended by itself")
    assert "ended by itself at t=50.0s (exit 1)" in str(stall_signature(tl, 45))
    for harness in ({"stop": "at the arm's end"}, {"cause": "process.kill"}):
        stopped = timeline(sorted(_phases_with(batches) + [{**exited, **harness}], key=lambda r: r["t"]))
        assert check_stalled(stopped, 45).verdict == "FAILED"
    restarted = {"t": 55.0, "type": "job", "event": "started", "process": "job-driver"}
    again = timeline(sorted(_phases_with(batches) + [exited, restarted], key=lambda r: r["t"]))
    assert check_stalled(again, 45).verdict == "FAILED"
    before = timeline(sorted(_phases_with(batches + [(t, 16) for t in range(50, 60)]) + [{**exited, "t": 45.0}],
                             key=lambda r: r["t"]))
    assert check_stalled(before, 45).verdict == "FAILED"  # a batch completed after that exit: not this driver's end
