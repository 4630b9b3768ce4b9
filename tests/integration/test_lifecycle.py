"""Lifecycle triggers on the real stack (chaos/arm/lifecycle.py, s3proxy holding the job's requests), and the regression
of issue 15: the hardened job killed before its checkpoint's first commit, and again with a batch in flight,
restarted at once each time, loses and duplicates nothing.

Before the fix, a kill after batch 0's state upload and before commits/0 made every later start fail with
STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY, restarted as transient until the budget ran out: no session was written.
"""
from __future__ import annotations

import signal
import threading
import time

import pytest

from chaos.arm.job import ArmConfig, JobArm
from chaos.arm.lifecycle import LifecycleWatch
from chaos.triggers import Draw, Trigger
from chaos.workload import WorkloadSpec
from tests.integration.job_settings import OUTCOME_TRIGGER_MS

pytestmark = [pytest.mark.integration, pytest.mark.backends("local")]


def _kill_on(watch: LifecycleWatch, arm: JobArm, event: str, batch: int | None = None, timeout: float = 150.0):
    """Hold the job at the event, kill its driver's process group, drop the held request, restart the driver."""
    trigger = Trigger((event,), batch=batch)
    occurrence = watch.wait(trigger, Draw(event, 0, 0.0), time.monotonic() + timeout, threading.Event())
    assert occurrence is not None, f"{event} did not happen within {timeout:.0f} s; see {arm.job.log_path}"
    position = watch.position()
    arm.job.signal(signal.SIGKILL)
    watch.release(occurrence, "drop")
    assert arm.job.wait(30) is not None
    arm.start_job()
    watch.job_started()
    return occurrence, position


def test_kills_before_the_first_commit_and_with_a_batch_in_flight_lose_nothing(stack, tmp_path):
    arm = JobArm(stack, tmp_path / "arm", ArmConfig(
        profile="hardened", workload=WorkloadSpec(shape="zipf", keys=100, rate=150, duration_ms=75_000, seed=15),
        settings={"gap_ms": 3_000, "max_session_ms": 30_000, "watermark_ms": 2_000, "trigger_ms": OUTCOME_TRIGGER_MS}))
    prefix = arm.checkpoint_prefix + "/"
    watch = LifecycleWatch(stack.s3proxy, arm.state.deployment, checkpoint_lister=lambda: [
        o.object_name[len(prefix):] for o in stack.s3_client(direct=True).list_objects(
            stack.info.bucket, prefix=prefix, recursive=True)])
    arm.create_topic()
    stop = threading.Event()
    producer = threading.Thread(target=arm.produce, kwargs={"stop_event": stop}, daemon=True)
    producer.start()
    arm.start_job()
    watch.job_started()
    try:
        # Batch 0's state version 1 is stored, commits/0 is not: the moment that lost a whole run (issue 15).
        first, at_first = _kill_on(watch, arm, "state_put_done", batch=0)
        assert first.batch == 0 and first.key.startswith("checkpoint/state/")
        assert at_first["last_commit"] is None and at_first["in_flight"] == [0], at_first
        # Again before the first commit: the restarted driver is killed as its output for batch 0 is stored.
        second, at_second = _kill_on(watch, arm, "output_written", batch=0)
        assert at_second["last_commit"] is None, at_second
        # Later, between an offsets write and its commit.
        third, at_third = _kill_on(watch, arm, "offsets_written")
        assert third.batch is not None and third.batch in at_third["in_flight"], (third.to_dict(), at_third)
        producer.join(120)
        assert arm.drain(), f"drain incomplete; see {arm.job.log_path}"
    finally:
        stop.set()
        arm.stop_job()
    result = arm.judge()
    oracle = result["oracle"]
    assert result["job_exit"] == 0, result["job_error"]
    assert oracle["lost"] == 0 and oracle["duplicated"] == 0 and oracle["wrong"] == 0, oracle
    assert oracle["emitted"] == oracle["expected"] > 0, oracle
