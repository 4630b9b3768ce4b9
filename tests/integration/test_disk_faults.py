"""Disk faults on the real stack (chaos/faults/disk.py through the fsfault shim every local Spark worker preloads):
RocksDB in the executor gets ENOSPC for its own files while the fault is in place, the hardened job's query fails
and is restarted as an outage (Settings.local_disk_outage), and once healed it commits batches again.

Local backend only: the containers backend preloads no shim (its arms are SKIPPED, chaos/target/gate.py)."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from types import MappingProxyType

import pytest

from chaos.arm.job import ArmConfig, JobArm
from chaos.faults import FaultContext, build
from chaos.history import HistoryWriter
from chaos.outputs import read_progress
from chaos.spec import Fault
from chaos.workload import WorkloadSpec
from tests.integration.job_settings import OUTCOME_TRIGGER_MS

pytestmark = [pytest.mark.integration, pytest.mark.backends("local")]


def _batches(arm: JobArm) -> int:
    return sum(1 for r in read_progress(arm.progress_path) if r.get("event") == "progress")


def _wait(what: str, arm: JobArm, done, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert arm.job is not None and arm.job.alive(), f"the job ended before {what}: " + \
            arm.job.log_path.read_text()[-3000:]
        assert time.monotonic() < deadline, f"no {what} within {timeout:.0f} s: " + arm.job.log_path.read_text()[-3000:]
        time.sleep(0.5)


def _executor_stderr(stack) -> str:
    return "".join(path.read_text(errors="replace") for path in Path(stack.stack_dir).glob("spark-work/**/stderr"))


def test_rocksdb_gets_enospc_while_the_disk_is_full_and_the_job_goes_on_once_healed(stack, tmp_path):
    workload = WorkloadSpec(shape="uniform", keys=50, rate=100, duration_ms=180_000, seed=5)
    arm = JobArm(stack, tmp_path / "disk", ArmConfig(profile="hardened", workload=workload, settings={
        "gap_ms": 2_000, "max_session_ms": 10_000, "watermark_ms": 1_000, "trigger_ms": OUTCOME_TRIGGER_MS}))
    arm.create_topic()
    arm.start_job()
    stop = threading.Event()
    producer = threading.Thread(target=arm.produce, kwargs={"stop_event": stop}, daemon=True)
    producer.start()
    history = HistoryWriter(tmp_path / "history.jsonl")
    full = build(Fault(fault="disk.full", target="executor", at=0.0, duration=20.0, start_jitter=0.0,
                       params=MappingProxyType({})), FaultContext(stack, arm=arm, history=history, say=print))
    try:
        _wait("three batches", arm, lambda: _batches(arm) >= 3, 240)
        full.run_inject()
        assert arm.job is not None
        _wait("restart for the full disk", arm, lambda: "query failed (local disk)" in arm.job.log_path.read_text(), 60)
        stderr = _executor_stderr(stack)
        assert "fsfault: injected ENOSPC on " in stderr and "/StateStoreId(" in stderr, stderr[-3000:]
        assert "No space left on device" in stderr, stderr[-3000:]  # RocksDB's own IOError, in the executor
        full.run_heal()
        healed_at = _batches(arm)
        _wait("batch after the heal", arm, lambda: _batches(arm) >= healed_at + 2, 120)
    finally:
        full.run_heal()
        stop.set()
        producer.join(30)
        history.close()
        if arm.job is not None and arm.job.alive():
            arm.job.stop(grace=10)
