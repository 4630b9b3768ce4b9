"""The system under test on the real stack: a clean run of each profile, judged by the oracle."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from chaos.jobrun import ArmConfig, JobArm
from chaos.outputs import read_progress
from chaos.workload import Ledger, WorkloadSpec
from infra.cds import mapped_archives
from infra.procs import descendants_running
from infra.stack import Stack

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stack(backend, tmp_path_factory):
    with Stack(tmp_path_factory.mktemp(f"job-{backend}"), backend=backend) as running:
        yield running


# Zipf keys over 15 s at 400 events/s: some keys are hot, many are sparse, so sessions close by gap,
# by the max-session bucket and by the final drain.
WORKLOAD = WorkloadSpec(shape="zipf", keys=300, rate=400, duration_ms=15_000, seed=7)


@pytest.mark.parametrize("profile", ["hardened", "naive"])
def test_clean_run_is_exactly_once(stack, tmp_path, profile):
    arm = JobArm(stack, tmp_path / profile, ArmConfig(profile=profile, workload=WORKLOAD, gap_ms=2_000,
                                                      max_session_ms=5_000, watermark_ms=1_000))
    # A clean run (no fault): topic, job, workload, drain, stop, judge; the job is stopped whatever happens. And a
    # look at the driver's and the executor's JVMs while the workload runs.
    arm.create_topic()
    arm.start_job()
    try:
        producer = threading.Thread(target=arm.produce, name="producer")
        producer.start()
        mapped = _jvm_archives(stack, arm.job.pid)
        producer.join()
        arm.drain()
    finally:
        arm.stop_job()
    result = arm.judge()
    # The JVMs map the class-data archives recorded for this profile: the driver always (it runs on this host), the
    # executor where it runs on this host too (local backend).
    assert f"driver-{profile}.jsa" in mapped["driver"], mapped
    if stack.backend.name == "local":
        assert f"executor-{profile}.jsa" in mapped["executor"], mapped
    else:
        assert not any(name.startswith("executor-") for name in mapped["executor"]), mapped
    oracle = result["oracle"]
    assert result["produced"]["acked"] == 6_000
    assert result["drained"], result
    assert oracle["ok"], oracle
    assert oracle["lost"] == 0 and oracle["duplicated"] == 0
    keys = {ack.key for ack in Ledger.read(arm.ledger_path).acked}
    if profile == "hardened":
        # event-time rules: gap and max-session closes split keys into several sessions
        assert result["sessions_emitted"] == oracle["expected"] > len(keys)
    else:
        # processing-time sessions depend on batch timing; every key's events are covered exactly once
        assert result["sessions_emitted"] >= len(keys)


JVM_STARTED_S = 3.0


def _age_s(pid: int) -> float:
    """Seconds since the process started (its start time in /proc is in clock ticks since boot)."""
    started_ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    uptime_s = float(Path("/proc/uptime").read_text().split()[0])
    return uptime_s - started_ticks / os.sysconf("SC_CLK_TCK")


def _jvm_archives(stack, job_pid: int, timeout_s: float = 120.0) -> dict[str, set[str]]:
    """Names of the archive files the job's driver JVM and its executor JVM have mapped, once both run."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        drivers = descendants_running(job_pid, b"org.apache.spark.deploy.SparkSubmit")
        worker_pid = stack.handles["spark-worker"].pid
        if worker_pid is None and drivers and _age_s(drivers[0]) >= JVM_STARTED_S:
            # a Docker engine in another PID namespace hides the worker's processes: the driver's JVM only
            return {"driver": {Path(p).name for p in mapped_archives(drivers[0])}, "executor": set()}
        executors = descendants_running(worker_pid, b"CoarseGrainedExecutorBackend") if worker_pid else []
        # A JVM maps its archives while it starts: the base archive first, the recorded one after the class path
        # is checked, so both are read once the JVMs have been up for a few seconds.
        if drivers and executors and min(_age_s(drivers[0]), _age_s(executors[0])) >= JVM_STARTED_S:
            return {"driver": {Path(p).name for p in mapped_archives(drivers[0])},
                    "executor": {Path(p).name for p in mapped_archives(executors[0])}}
        time.sleep(0.5)
    raise AssertionError(f"the job's driver and executor JVMs did not both appear within {timeout_s:.0f} s")


def _command_lines_holding(needles: dict[str, bytes]) -> list[str]:
    """'<what> in pid <pid>: <command line>' for every process on this machine whose command line holds a needle."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        for what, needle in needles.items():
            if needle in cmdline:
                shown = cmdline.replace(needle, b"<" + what.encode() + b">").replace(b"\0", b" ")
                found.append(f"{what} in pid {entry}: {shown[:400]!r}")
    return found


def test_no_process_has_the_s3_credentials_on_its_command_line(stack, tmp_path):
    """Issue 18: while a job runs and its executors write state to S3, no process's command line holds the run's S3
    secret key or access key (pyspark passes every session setting to spark-submit as `--conf`, which `ps` shows)."""
    arm = JobArm(stack, tmp_path / "secrets", ArmConfig(
        profile="hardened", workload=WorkloadSpec(shape="uniform", keys=20, rate=100, duration_ms=5_000, seed=3),
        gap_ms=1_000, max_session_ms=5_000, watermark_ms=500))
    needles = {"the S3 secret key": stack.credentials.secret_key.encode(),
               "the S3 access key": stack.credentials.access_key.encode()}
    arm.create_topic()
    arm.start_job()
    found: list[str] = []
    scans = 0
    try:
        producer = threading.Thread(target=arm.produce, name="producer")
        producer.start()
        deadline = time.monotonic() + 180
        # Scan until a batch with rows has committed its state (the executors then had working credentials too).
        while time.monotonic() < deadline and not found:
            found += _command_lines_holding(needles)
            scans += 1
            if any(record.get("event") == "progress" and record["progress"].get("numInputRows", 0) > 0
                   and record["progress"].get("stateOperators") for record in read_progress(arm.progress_path)):
                break
            assert arm.job.alive(), f"the job ended; see {arm.job.log_path}"
            time.sleep(0.5)
        found += _command_lines_holding(needles)
        assert not found, "\n".join(sorted(set(found)))
        assert time.monotonic() < deadline, f"no batch with rows within 180 s; see {arm.job.log_path}"
        producer.join()
    finally:
        arm.stop_job()
    assert scans >= 2
