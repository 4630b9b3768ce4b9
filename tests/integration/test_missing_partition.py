"""A state partition whose every file is gone, on the real stack (issue 36 part 8): the hardened job must never
call such a checkpoint verified. Every partition of a batch loads the same state version, and a partition with no
files can load none but version 0, so the job starts the whole query over (every batch replayed from Kafka, which
still holds the topic from its first offset here) and loses nothing; once the batches before the retained log are
gone, it cannot, and it stops with exit 5 naming the partition.

One stack, one hardened job and one workload. Local backend only. The job is stopped gracefully before each removal
(the stop records its last commit), so the partition is the only thing wrong with the checkpoint.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from chaos import checkpoint_tools
from chaos.arm.job import JobArm
from infra.stack import Stack
from tests.integration import checkpoint_damage_steps as steps

pytestmark = [pytest.mark.integration, pytest.mark.backends("local")]

SEED = 36
PARTITION = "0/3"          # operator 0 (the session window's state), partition 3 of spark.sql.shuffle.partitions=4
FIRST_BATCHES_S = 180.0    # the stack's first job start (JVM, Kafka source) until the batches below have committed
BATCHES_BEFORE = 6         # committed before the removal: a snapshot (every 5 versions) and changelogs after it
RESTART_S = 180.0          # the restart, its start over, and batches past the replayed backlog
REFUSED_S = 60.0           # a refusal comes before Spark starts


def _job_lines(path: Path) -> list[str]:
    try:
        return [ln for ln in path.read_text(errors="replace").splitlines() if ln.startswith("job: ")]
    except OSError:
        return []


def _context(arm: JobArm) -> str:
    job = arm.job
    if job is None:
        return "no job"
    state = f"job pid {job.pid} {'alive' if job.alive() else f'exited {job.returncode}'}"
    return f"{state}; last job: lines of {job.log_path}:\n" + "\n".join(_job_lines(job.log_path)[-12:])


def _commits(stack: Stack, arm: JobArm) -> list[int]:
    layout = checkpoint_tools.read_layout(stack.s3_client(direct=True), stack.info.bucket, arm.checkpoint_prefix)
    return sorted(layout.commits)


def _wait_for_commits(stack: Stack, arm: JobArm, at_least: int, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert arm.job is not None and arm.job.alive(), f"the job exited {what}\n{_context(arm)}"
        commits = _commits(stack, arm)
        if commits and commits[-1] >= at_least:
            return
        assert time.monotonic() < deadline, (f"no commit {at_least} within {timeout:.0f} s {what} "
                                             f"(commits {commits[-3:]})\n{_context(arm)}")
        time.sleep(1)


def _remove_partition(stack: Stack, arm: JobArm, partition: str) -> list[str]:
    """Every object under state/<partition>/ (snapshots, changelogs, SSTs, and the schema of partition 0)."""
    s3, bucket = stack.s3_client(direct=True), stack.info.bucket
    prefix = f"{arm.checkpoint_prefix}/state/{partition}/"
    keys = [obj.object_name for obj in s3.list_objects(bucket, prefix=prefix, recursive=True)]
    for key in keys:
        s3.remove_object(bucket, key)
    assert not list(s3.list_objects(bucket, prefix=prefix, recursive=True)), f"{prefix} still holds objects"
    return [key[len(arm.checkpoint_prefix) + 1:] for key in keys]


@pytest.fixture(scope="module")
def run(stack, tmp_path_factory):
    job = steps.running_job(stack, tmp_path_factory, seed=SEED, duration_ms=600_000)
    state = next(job)
    try:
        yield state.arm, state.stop, state.producer
    finally:
        job.close()  # its own finally stops the producer and the job


def test_a_partition_with_every_state_file_removed_is_rebuilt_from_kafka_and_nothing_is_lost(stack, run):
    arm, stop, producer = run
    _wait_for_commits(stack, arm, BATCHES_BEFORE, FIRST_BATCHES_S, "before the removal")
    code = arm.stop_job()
    assert code == 0, f"the graceful stop ended with exit {code}\n{_context(arm)}"
    before = _commits(stack, arm)
    removed = _remove_partition(stack, arm, PARTITION)
    assert any(key.endswith(".changelog") for key in removed), f"nothing of {PARTITION} to remove: {removed}"
    job = arm.start_job()
    # The start over replays every batch from offset 0: wait for more commits than there were, in the new log.
    _wait_for_commits(stack, arm, before[-1] + 2, RESTART_S, f"after state/{PARTITION}/ was removed")
    lines = _job_lines(job.log_path)
    integrity = [ln for ln in lines if ln.startswith("job: integrity:")]
    assert not [ln for ln in integrity if ln.endswith(" verified")], (
        f"a checkpoint without partition {PARTITION} was called verified: {integrity}")
    assert len(integrity) == 1, f"{len(integrity)} integrity lines, wanted one repair: {integrity}"
    assert f"state/{PARTITION}/: operator 0, partition 3" in integrity[0], integrity[0]
    assert "starting over from the input" in integrity[0], integrity[0]
    assert "Kafka still holds every offset from batch 0's start" in integrity[0], integrity[0]
    failed = [ln for ln in lines if ln.startswith(("job: query failed", "job: stopped", "job: cannot start"))]
    assert not failed, f"the query failed after the repair: {failed[:2]}\n{_context(arm)}"
    print(f"removed {len(removed)} objects of state/{PARTITION}/ at commit {before[-1]}; {integrity[0]}")

    stop.set()
    producer.join(60)
    assert not producer.is_alive(), "the producer did not stop within 60 s"
    drained = arm.drain()
    code = arm.stop_job()
    oracle = arm.judge()["oracle"]
    last = _context(arm)
    assert drained, f"the drain did not finish (job exit {code})\n{last}"
    assert oracle["lost"] == 0, f"{oracle['lost']} sessions lost: {oracle['lost_examples'][:3]}\n{last}"
    assert oracle["duplicated"] == 0, (f"{oracle['duplicated']} sessions duplicated: "
                                       f"{oracle['duplicated_examples'][:3]}\n{last}")
    assert oracle["wrong"] == 0, f"{oracle['wrong']} sessions wrong: {oracle['wrong_examples'][:3]}\n{last}"


def test_without_batch_0_in_the_log_a_partition_with_no_files_stops_the_job_with_exit_5_naming_it(stack, run):
    """As after Spark's own log retention (minBatchesToRetain): the offsets and commits of batch 0 are gone, so no
    start over can rebuild the partition."""
    arm, _, _ = run
    if arm.job is not None and arm.job.alive():  # stopped by the test before, unless it failed half-way
        code = arm.stop_job()
        assert code == 0, f"the graceful stop ended with exit {code}\n{_context(arm)}"
    assert len(_commits(stack, arm)) >= 2, f"too few commits to remove batch 0's: {_commits(stack, arm)}"
    s3, bucket = stack.s3_client(direct=True), stack.info.bucket
    for log in ("offsets", "commits"):
        s3.remove_object(bucket, f"{arm.checkpoint_prefix}/{log}/0")
    _remove_partition(stack, arm, PARTITION)
    job = arm.start_job()
    assert job.wait(REFUSED_S) is not None, f"the job still runs {REFUSED_S:.0f} s after the start\n{_context(arm)}"
    assert job.returncode == 5, f"exit {job.returncode}, wanted 5\n{_context(arm)}"
    last = _job_lines(job.log_path)[-1]
    assert last.startswith("job: cannot start: state version "), last
    assert f"(state/{PARTITION}/: operator 0, partition 3: its state files are missing" in last, last
    print(last)
