"""The system under test on the real stack: a clean run of each profile, judged by the oracle."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from chaos.arm.job import ArmConfig, JobArm
from chaos.outputs import read_progress
from chaos.workload import Ledger, WorkloadSpec
from infra.cds import mapped_archives
from infra.procs import descendants_running

pytestmark = pytest.mark.integration


# Zipf keys over 15 s at 400 events/s: some keys are hot, many are sparse, so sessions close by gap,
# by the max-session bucket and by the final drain.
WORKLOAD = WorkloadSpec(shape="zipf", keys=300, rate=400, duration_ms=15_000, seed=7)


# The naive run is slow (`make test-all` only): the smoke runs the naive job through the same arm (topic, start,
# workload, drain, stop, the oracle) in `make test`, in hot-key-session-growth/naive and corrupted-sst/naive, and the
# hardened run below scans the same command lines (both profiles pass the credentials through infra/driver.py) and
# checks the same class-data archives mechanism. What only it asserts: the naive job exactly once on a clean run.
@pytest.mark.parametrize("profile", ["hardened", pytest.param("naive", marks=pytest.mark.slow)])
def test_clean_run_is_exactly_once(stack, tmp_path, profile):
    arm = JobArm(stack, tmp_path / profile, ArmConfig(profile=profile, workload=WORKLOAD, settings={
        "gap_ms": 2_000, **({} if profile == "naive" else {"max_session_ms": 5_000, "watermark_ms": 1_000})}))
    # A clean run (no fault): topic, job, workload, drain, stop, judge; the job is stopped whatever happens. And a
    # look at the driver's and the executor's JVMs, and at every command line, while the workload runs.
    needles = {"the S3 secret key": stack.credentials.secret_key.encode(),
               "the S3 access key": stack.credentials.access_key.encode()}
    leaks: list[str] = []
    arm.create_topic()
    arm.start_job()
    try:
        producer = threading.Thread(target=arm.produce, name="producer")
        producer.start()
        mapped = _jvm_archives(stack, arm.job.pid, each_poll=lambda: leaks.extend(_command_lines_holding(needles)))
        scans = _scan_until_state_is_written(arm, needles, leaks)
        producer.join()
        arm.drain()
    finally:
        arm.stop_job()
    # Issue 18: while the job ran and its executors wrote state to S3, no process's command line held the run's S3
    # secret key or access key (pyspark passes every session setting to spark-submit as `--conf`, which `ps` shows).
    # Scanned during this clean run rather than a job of its own: the same scan of the same processes, one job start
    # fewer. The hardened and the naive job pass the credentials the same way (infra/driver.py), both are scanned.
    assert not leaks, "\n".join(sorted(set(leaks)))
    assert scans >= 2
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
    # the topic read back (chaos/topic_audit.py): the workload and the drain's events, none twice
    assert oracle["topic_records"] > 6_000 and oracle["topic_duplicates"] == 0, oracle
    keys = {ack.key for ack in Ledger.read(arm.ledger_path).acked}
    if profile == "hardened":
        # event-time rules: gap and max-session closes split keys into several sessions
        assert result["sessions_emitted"] == oracle["expected"] > len(keys)
    else:
        # processing-time sessions depend on batch timing; every key's events are covered exactly once
        assert result["sessions_emitted"] >= len(keys)


def test_the_topic_read_back_finds_an_event_written_twice_and_which_uncertain_deliveries_landed(stack):
    """A plain producer (no idempotence) writes seq 17 twice and one record that is not an event: the read-back
    counts every record and names the one copy, so the oracle can count it as input; of the deliveries taken as
    uncertain, it names those the topic holds (chaos/topic_audit.py)."""
    from confluent_kafka import Producer

    from chaos.smoke import create_topic
    from chaos.topic_audit import read_topic
    from chaos.workload import Event

    topic = f"audit-{uuid.uuid4().hex[:8]}"
    create_topic(stack.info.kafka_internal_bootstrap, topic, 2)
    producer = Producer({"bootstrap.servers": stack.info.kafka_bootstrap, "log_level": 0,
                         **stack.kafka_client_login()})
    for seq in [*range(50), 17]:
        producer.produce(topic, key="a", value=Event("a", seq, 1_000 + seq, "").to_json())
    producer.produce(topic, key="b", value=b"not an event")
    assert producer.flush(30) == 0
    records, extra, landed = read_topic(stack.info.kafka_bootstrap, topic, stack.kafka_client_login(),
                                        uncertain={("a", 3), ("a", 50), ("b", 0)})
    assert (records, extra, landed) == (52, {"a": {17: 1}}, {("a", 3)})


JVM_STARTED_S = 3.0


def _age_s(pid: int) -> float:
    """Seconds since the process started (its start time in /proc is in clock ticks since boot)."""
    started_ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    uptime_s = float(Path("/proc/uptime").read_text().split()[0])
    return uptime_s - started_ticks / os.sysconf("SC_CLK_TCK")


def _jvm_archives(stack, job_pid: int, timeout_s: float = 120.0,
                  each_poll: Callable[[], object] = lambda: None) -> dict[str, set[str]]:
    """Names of the archive files the job's driver JVM and its executor JVM have mapped, once both run (`each_poll`
    is called on every look, from the job's start on)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        each_poll()
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
            at = cmdline.find(needle)
            if at >= 0:  # shown around the place, the value itself masked
                shown = cmdline[max(0, at - 120):at].replace(b"\0", b" ") + b"<" + what.encode() + b">"
                found.append(f"{what} in pid {entry}: ...{shown!r}")
    return found


def _scan_until_state_is_written(arm: JobArm, needles: dict[str, bytes], leaks: list[str],
                                 timeout_s: float = 180.0) -> int:
    """Scan every command line for `needles` (into `leaks`) until a batch with rows has committed its state (the
    executors then had working credentials too); the number of scans."""
    deadline = time.monotonic() + timeout_s
    scans = 0
    while not leaks:
        leaks += _command_lines_holding(needles)
        scans += 1
        if any(record.get("event") == "progress" and record["progress"].get("numInputRows", 0) > 0
               and record["progress"].get("stateOperators") for record in read_progress(arm.progress_path)):
            break
        assert arm.job.alive(), f"the job ended; see {arm.job.log_path}"
        assert time.monotonic() < deadline, f"no batch with rows within {timeout_s:.0f} s; see {arm.job.log_path}"
        time.sleep(0.5)
    leaks += _command_lines_holding(needles)
    return scans


def _spark_submit_env(stack) -> dict[str, str]:
    """What a deployer's shell has: a PATH with java, and the S3 credentials. Nothing of the harness."""
    java = shutil.which("java")
    assert java, "java is not on PATH"
    env = {"PATH": f"{Path(java).resolve().parent}:/usr/bin:/bin", **stack.credentials.as_env()}
    if os.environ.get("JAVA_HOME"):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    return env


def _submitted_sessions(stack, prefix: str) -> list[dict]:
    client = stack.s3_client(direct=True)
    sessions = []
    for listed in client.list_objects(stack.info.bucket, prefix=prefix, recursive=True):
        if listed.object_name.endswith(".jsonl"):
            body = client.get_object(stack.info.bucket, listed.object_name)
            try:
                sessions += [json.loads(line) for line in body.read().decode().splitlines() if line.strip()]
            finally:
                body.close()
                body.release_conn()
    return [s for s in sessions if s["key"] != "__drain__"]


def test_the_packaged_job_runs_under_spark_submit_with_no_harness_environment(stack, tmp_path):
    """Issue 19: the job built by `python -m job.package`, run by the pinned Spark's spark-submit (client mode) with
    explicit options and an environment of PATH and the AWS credentials only, reads events from Kafka and writes
    their sessions to S3 (and its lease and manifests, through its own S3 client)."""
    from confluent_kafka import Producer

    from chaos.smoke import create_topic

    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "job.package", "--out", str(dist)], check=True, capture_output=True,
                   cwd=Path(__file__).resolve().parents[2])
    info = stack.info
    topic, deployment = f"submit-{uuid.uuid4().hex[:6]}", "submitted"
    create_topic(info.kafka_internal_bootstrap, topic, 2)
    argv = [str(Path(info.spark_home) / "bin" / "spark-submit"), "--master", info.spark_master,
            "--deploy-mode", "client", "--jars", ",".join(info.spark_jars), "--py-files", str(dist / "job.zip"),
            "--conf", f"spark.pyspark.python={sys.executable}",
            "--conf", f"spark.pyspark.driver.python={sys.executable}",
            "--conf", "spark.driver.bindAddress=127.0.0.1", "--conf", "spark.driver.host=127.0.0.1",
            "--conf", "spark.cores.max=2", "--conf", "spark.executor.memory=1g", "--conf", "spark.ui.enabled=false",
            "--conf", "spark.sql.shuffle.partitions=4",
            str(dist / "job_main.py"),
            "--profile", "hardened", "--topic", topic, "--deployment", deployment,
            "--gap", "1s", "--watermark", "500ms", "--max-session", "10s",
            "--kafka-bootstrap-servers", info.kafka_bootstrap,
            "--s3-endpoint", info.s3_endpoint, "--s3-path-style", "--no-s3-tls", "--storage-uri", f"s3a://{info.bucket}"]
    env = _spark_submit_env(stack)
    log_path = tmp_path / "spark-submit.log"
    keys = [f"user-{n}" for n in range(5)]
    # 1 s into a 10 s bucket of event time: the job cuts sessions at --max-session boundaries, and a boundary between
    # a key's events (2 % of random starts) split its session in two (a red CI run).
    base_ms = int(time.time() * 1000) // 10_000 * 10_000 + 1_000
    producer = Producer({"bootstrap.servers": info.kafka_internal_bootstrap, "log_level": 0})
    for seq, offset_ms in enumerate((0, 100, 200)):
        for key in keys:
            event = {"key": key, "seq": seq, "event_time_ms": base_ms + offset_ms, "payload": "x"}
            producer.produce(topic, key=key, value=json.dumps(event))
    assert producer.flush(30) == 0
    with open(log_path, "wb") as log:
        process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path,
                                   start_new_session=True)
    sessions: list[dict] = []
    try:
        deadline = time.monotonic() + 240
        drain = 0
        while time.monotonic() < deadline and process.poll() is None:
            # A drain event far ahead in event time moves the watermark past every session, which then closes.
            drain += 1
            event = {"key": "__drain__", "seq": drain, "event_time_ms": base_ms + 120_000, "payload": ""}
            producer.produce(topic, key="__drain__", value=json.dumps(event))
            producer.flush(10)
            sessions = _submitted_sessions(stack, f"{deployment}/output/")
            if len(sessions) >= len(keys):
                break
            time.sleep(2)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
    log = log_path.read_text(errors="replace")
    assert sorted((s["key"], s["count"], s["first_seq"], s["last_seq"]) for s in sessions) == [
        (key, 3, 0, 2) for key in keys], f"sessions {sessions}; spark-submit log {log_path}:\n{log[-3000:]}"
    # its hardening ran too: integrity manifests through the job's own S3 client (credentials from the environment)
    objects = [o.object_name for o in stack.s3_client(direct=True).list_objects(
        info.bucket, prefix=f"{deployment}/checkpoint/_integrity/manifests/", recursive=True)]
    assert objects, f"no integrity manifest; spark-submit log {log_path}"
