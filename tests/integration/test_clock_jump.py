"""clock.jump on a real job driver (chaos/faults/clock.py through infra/shims/clock.c): the hardened job started
with the clock shim, its wall clock moved 120 s back and then healed, as its own two sides report it. Its Python side
stamps every progress line (`wall_ms`: time.time() in the listener); its JVM stamps every batch (Spark's progress
`timestamp`: System.currentTimeMillis at the trigger; with the batch's duration added, its end). Both fall 120 s
behind this process's clock after the jump and come back after the heal, and the job says it restarted its query on
the step back (restart_on_clock_step)."""
from __future__ import annotations

import threading
import time
from datetime import datetime
from types import MappingProxyType

import pytest

from chaos.arm.job import ArmConfig, JobArm
from chaos.faults import FaultContext, build
from chaos.history import HistoryWriter
from chaos.outputs import read_progress
from chaos.spec import Fault
from chaos.workload import WorkloadSpec
from job.lease import LeaseRecord
from job.objectstore import ObjectStore

pytestmark = pytest.mark.integration

OFFSET_S = -120.0


def _wait_for(arm: JobArm, test, timeout_s: float, what: str) -> tuple[float, float]:
    seen = len(read_progress(arm.progress_path))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert arm.job is not None and arm.job.alive(), f"the job's driver ended; see {arm.job and arm.job.log_path}"
        records = read_progress(arm.progress_path)
        fresh = [r for r in records[seen:] if r.get("event") == "progress"]
        if fresh:
            now_ms = time.time() * 1000
            record = fresh[-1]
            progress = record["progress"]
            # The JVM stamps a batch when it starts; its end (start + its own duration) is what compares with the
            # listener's stamp and with now. A first batch can take 20 s in a loaded session, which is no skew.
            started_s = datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()
            ended_s = started_s + progress.get("durationMs", {}).get("triggerExecution", 0) / 1000
            skew = ((record["wall_ms"] - now_ms) / 1000, ended_s - now_ms / 1000)
            if test(skew):
                return skew
        time.sleep(0.5)
    raise AssertionError(f"no batch {what} within {timeout_s:.0f} s; see {arm.job.log_path if arm.job else ''}")


def test_a_jump_moves_the_drivers_python_and_jvm_clocks_back_and_the_heal_brings_them_forward(stack, tmp_path):
    workload = WorkloadSpec(shape="uniform", keys=20, rate=20, duration_ms=240_000, seed=3)
    arm = JobArm(stack, tmp_path / "hardened", ArmConfig(profile="hardened", workload=workload, settings={
        "gap_ms": 2_000, "max_session_ms": 5_000, "watermark_ms": 1_000}), progress=lambda line: None)
    arm.preload(["clock"])
    history = HistoryWriter(tmp_path / "history.jsonl")
    jump = build(Fault(fault="clock.jump", target="job-driver", at=0.0, duration=30.0, start_jitter=0.0,
                       params=MappingProxyType({"offset": OFFSET_S})),
                 FaultContext(stack, arm, history, say=lambda line: None))
    arm.create_topic()
    stop = threading.Event()
    producer = threading.Thread(target=arm.produce, kwargs={"stop_event": stop}, name="producer")
    arm.start_job()
    producer.start()
    try:
        before = _wait_for(arm, lambda skew: True, 180, "before the jump")
        jump.run_inject()
        behind = _wait_for(arm, lambda skew: skew[0] < -100 and skew[1] < -100, 60, "120 s behind")
        # The lease the driver renews with its clock 120 s behind: its record's wall-clock expiry has passed by
        # every other clock, while S3's own clock (through the stack's proxy, as the job reads it) says it is fresh.
        store = ObjectStore.connect(stack.info.s3_endpoint, stack.credentials.access_key,
                                    stack.credentials.secret_key, stack.info.bucket)
        data, _, age_s = store.get_aged(f"{arm.checkpoint_prefix}/_lease")
        record = LeaseRecord.from_bytes(data)
        jump.run_heal()
        healed = _wait_for(arm, lambda skew: abs(skew[0]) < 15 and abs(skew[1]) < 15, 60, "back on time")
    finally:
        jump.run_heal()
        stop.set()
        producer.join(30)
        arm.stop_job()
        history.close()
    assert all(abs(side) < 15 for side in before), before
    # Python and the JVM both fell 120 s behind (less the seconds between a batch and this read)...
    assert all(-135 < side < -100 for side in behind), behind
    assert record.expires_at_ms < time.time() * 1000 and age_s is not None and 0 <= age_s < record.ttl_ms / 1000
    assert all(abs(side) < 15 for side in healed), healed
    # ... and the hardened job saw the step back and restarted its query rather than let its trigger wait it out
    log = arm.job.log_path.read_text(errors="replace") if arm.job else ""
    assert "job: the wall clock stepped back 120 s: the query is restarted" in log
