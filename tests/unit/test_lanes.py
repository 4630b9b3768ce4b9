"""chaos run --lanes: how experiments are shared among lanes (chaos/lanes/launch.py), and bad --lanes values."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from chaos.cli import _parser
from chaos.lanes.launch import MAX_LANES, lane_command, split
from chaos.lanes.queue import LaneQueue, QueueItem, offered_order, restarts_processes, write_queue
from chaos.run import experiment_dirs, planned_seconds
from chaos.spec import load_suite

ROOT = Path(__file__).resolve().parents[2]


def _planned(suite: str = "smoke"):
    specs = [entry.spec for entry in load_suite(ROOT / "experiments" / "suites" / f"{suite}.yaml").entries]
    return experiment_dirs(specs, 1)


def _seconds(spec):
    return sum(planned_seconds(spec, None))


def test_experiments_whose_faults_kill_pause_or_restart_a_process_are_the_restarting_ones():
    restarting = {d for d, spec in _planned("nightly") if restarts_processes(spec)}
    assert {"process-crash", "crash-anywhere", "lifecycle-kills", "driver-latency", "checkpoint-collision",
            "corrupted-sst"} <= restarting
    assert not restarting & {"kafka-broker-disconnect", "slow-s3-put", "hot-key-session-growth",
                             "key-rotation-state-leak", "s3-slowdown-storm", "checkpoint-commit-failures"}


def test_the_queue_offers_restarting_experiments_first_each_class_longest_first():
    items = offered_order(_planned(), _seconds)
    assert sorted(i.directory for i in items) == sorted(d for d, _ in _planned())
    flags = [i.restarts for i in items]
    assert flags == sorted(flags, reverse=True) and any(flags) and not all(flags)
    for restarts in (True, False):
        lengths = [i.seconds for i in items if i.restarts is restarts]
        assert lengths == sorted(lengths, reverse=True)


def test_cluster_experiments_run_alone_after_the_one_node_ones():
    queued, alone = split(_planned("nightly"))
    assert {spec.topology for _, spec in queued} == {"single"}
    assert len(alone) == 5 and {spec.topology for _, spec in alone} == {"cluster"}


def test_the_lane_command_lines_parse_as_the_lane_reads_them(tmp_path):
    """A cluster lane's directories once came after its options, and argparse refused them (exit 2)."""
    for queue, directories in ((True, []), (False, ["cluster-broker-lost", "cluster-leader-move"])):
        command = lane_command(tmp_path, "lane-3", "local", ["hardened"], queue=queue, directories=directories)
        assert command[1:4] == ["-m", "chaos.cli", "lane"]
        args = _parser().parse_args(command[3:])
        assert (args.run_dir, args.lane, args.backend, args.arms) == (tmp_path, "lane-3", "local", ["hardened"])
        assert (args.queue, args.directories) == (queue, directories)


def _queue(tmp_path, *items: tuple[str, bool], lanes: int = 2) -> Path:
    write_queue(tmp_path, [QueueItem(name, restarts, 60.0) for name, restarts in items], lanes)
    return tmp_path


def test_two_lanes_never_hold_restarting_experiments_at_once_and_take_other_work_meanwhile(tmp_path):
    directory = _queue(tmp_path, ("kill-a", True), ("kill-b", True), ("net", False))
    one, two = LaneQueue(directory, poll_s=0.05), LaneQueue(directory, poll_s=0.05)
    said: list[str] = []
    assert one.claim(said.append) == "kill-a"
    assert two.claim(said.append) == "net"  # kill-b waits while kill-a runs
    got: list[str | None] = []
    waiter = threading.Thread(target=lambda: got.append(two.claim(said.append)))
    waiter.start()
    time.sleep(0.4)
    assert got == []  # only a restarting experiment is left, and lane one runs one
    one.done()
    waiter.join(timeout=5)
    assert got == ["kill-b"] and any("waited" in line for line in said)
    assert one.claim(said.append) is None and (directory / "claimed").read_text().split() == [
        "kill-a", "net", "kill-b"]
    two.done()


def test_a_lane_that_died_with_a_restarting_experiment_does_not_block_the_others(tmp_path):
    directory = _queue(tmp_path, ("kill-a", True), ("kill-b", True))
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from chaos.lanes.queue import LaneQueue; "
        "q = LaneQueue(Path(sys.argv[1])); print(q.claim(print), flush=True); time.sleep(60)"), str(directory)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "kill-a"
        other = LaneQueue(directory, poll_s=0.05)
        holder.kill()
        holder.wait(timeout=10)
        assert other.claim(lambda _line: None) == "kill-b"  # the kernel gave the dead lane's lock back
        other.done()
    finally:
        holder.kill()
        holder.wait(timeout=10)


def test_what_is_left_is_shared_by_the_lanes(tmp_path):
    queue = LaneQueue(_queue(tmp_path, ("a", False), ("b", False), ("c", False)))
    assert queue.unclaimed_s() == pytest.approx(90.0)
    queue.claim(lambda _line: None)
    assert queue.unclaimed_s() == pytest.approx(60.0)


@pytest.mark.parametrize("value", ["0", str(MAX_LANES + 1), "two", "-1"])
def test_a_bad_lanes_value_is_a_usage_error(tmp_path, value):
    done = subprocess.run([sys.executable, "-m", "chaos.cli", "run", "--suite", "smoke", "--lanes", value,
                           "--out", str(tmp_path / "runs")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "--lanes" in done.stderr
    assert not (tmp_path / "runs").exists()
