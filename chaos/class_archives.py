"""Record the JVMs' class-data archives (infra/cds.py) on a training stack: part of `chaos setup`.

The training starts the local stack with every JVM recording (-XX:+RecordDynamicDumpInfo; Kafka's storage format,
which exits at once, dumps at its exit), runs the job of each profile until it has finished a few stateful batches
(Kafka source, session state in RocksDB, changelog and output on S3: the classes every arm loads), and dumps each
running JVM's classes with `jcmd <pid> VM.cds dynamic_dump`. The archives are written to a staging directory and
moved into place together with a record of their sizes and SHA-256, so a killed training leaves nothing half-done.
One Spark job at a time, as everywhere in the suite. About four minutes, once per JDK, venv and jar set.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from infra import artifacts, cds
from infra.driver import launch_driver
from infra.errors import InfraError
from infra.paths import cache_dir
from infra.procs import descendants_running
from infra.stack import Stack, host_spark_home

from .outputs import read_progress
from .smoke import create_topic
from .workload import Ledger, Pacer, WorkloadSpec, plan, produce

TRAINING_BATCHES = 6  # stateful batches each job finishes before its JVMs are dumped
FEED_RATE = 100
JOB_TIMEOUT_S = 300.0
DUMP_TIMEOUT_S = 180.0


class TrainingError(InfraError):
    """The archives could not be recorded (the JVMs then start without them)."""


def ensure(progress: Callable[[str], None]) -> cds.ArchiveSet:
    """The host's archive set, recorded first if it is missing or damaged; raises TrainingError.

    One training at a time on this machine (two set-ups side by side would run four Spark jobs on two cores and race
    to move their sets into place): a second set-up waits for the first and then finds the archives recorded."""
    host_artifacts = artifacts.verify()
    spark_home = host_spark_home()
    target = cds.ArchiveSet.for_host(host_artifacts, spark_home)
    with cds.training_lock():
        cds.prune(keep=target.directory, spark_home=spark_home)
        found = target.problems(full=True)
        if not found:
            return target
        jcmd = _jcmd()
        progress(f"class-data archives: recording them ({found[0]}); about four minutes, once per JDK, venv and jars")
        staging = cache_dir() / "cds" / f"{target.directory.name}.training-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        try:
            record = cds.ClassArchives("record", {role: str(staging / f"{role}.jsa") for role in cds.ROLES})
            _train(staging / "run", record, jcmd, progress)
            run_dir = staging / "run"
            cds.seal(staging, target, spark_home)  # moves the staging directory into place, the training's run too
            shutil.rmtree(target.directory / run_dir.name)
        except Exception as error:  # an optimisation: whatever stops the training, set-up goes on without archives
            raise TrainingError(f"class-data archives not recorded: {error} "
                                f"(training logs: {staging / 'run' / 'logs'})") from error
        finally:
            for archive in staging.glob("*.jsa"):  # a failed training keeps its logs, not 700 MB of archives
                archive.unlink()
    progress(f"class-data archives recorded in {target.directory}")
    return target


def _jcmd() -> str:
    java = shutil.which("java")
    candidates = [shutil.which("jcmd"), str(Path(os.path.realpath(java)).parent / "jcmd") if java else None]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise TrainingError("class-data archives not recorded: jcmd (part of the JDK) is missing; install "
                        "openjdk-17-jdk-headless")


def _pid(stack: Stack, component: str) -> int:
    """A server's pid on the local backend (the only one the training runs on)."""
    pid = stack.handles[component].pid
    if pid is None:
        raise TrainingError(f"class-data archives: no pid for {component} on this backend")
    return pid


def _dump(jcmd: str, pid: int, path: str, role: str, progress: Callable[[str], None]) -> None:
    started = time.monotonic()
    result = subprocess.run([jcmd, str(pid), "VM.cds", "dynamic_dump", path], capture_output=True, text=True,
                            timeout=DUMP_TIMEOUT_S)
    if result.returncode != 0 or not Path(path).is_file():
        raise TrainingError(f"class-data archive {role}: jcmd VM.cds dynamic_dump failed "
                            f"({(result.stdout + result.stderr).strip()[-300:]})")
    progress(f"class-data archives: {role} dumped in {time.monotonic() - started:.1f} s "
             f"({Path(path).stat().st_size / 2**20:.0f} MB)")


def _one_pid(pids: list[int], what: str) -> int:
    if len(pids) != 1:
        raise TrainingError(f"class-data archives: expected one {what} JVM, found {len(pids)}")
    return pids[0]


def _train(run_dir: Path, record: cds.ClassArchives, jcmd: str, progress: Callable[[str], None]) -> None:
    with Stack(run_dir, backend="local", class_archives=record, progress=lambda message: None) as stack:
        for profile in cds.DRIVER_PROFILES:
            _train_job(stack, run_dir, profile, record, jcmd, progress)
        for role in ("kafka", "spark-master", "spark-worker"):
            _dump(jcmd, _pid(stack, role), record.paths[role], role, progress)


def _train_job(stack: Stack, run_dir: Path, profile: str, record: cds.ClassArchives, jcmd: str,
               progress: Callable[[str], None]) -> None:
    topic = f"cds-training-{profile}-{uuid.uuid4().hex[:6]}"
    bootstrap = stack.info.kafka_internal_bootstrap
    create_topic(bootstrap, topic, 4)
    stop = threading.Event()
    workload = WorkloadSpec(shape="uniform", keys=100, rate=FEED_RATE, duration_ms=3600 * 1000, seed=7)

    def feed() -> None:
        with Ledger(run_dir / f"feed-{profile}.jsonl") as ledger:
            produce(plan(workload, start_ms=int(time.time() * 1000)), bootstrap, topic, ledger, Pacer(FEED_RATE),
                    stop_event=stop, config={"log_level": 3})

    feeder = threading.Thread(target=feed, name=f"cds-feed-{profile}", daemon=True)
    progress_file = run_dir / f"progress-{profile}.jsonl"
    # A short gap, so sessions close (and the output path runs) within the training's batches.
    args = ["--profile", profile, "--topic", topic, "--deployment", f"cds-{profile}-{uuid.uuid4().hex[:6]}",
            "--progress-file", str(progress_file), "--gap", "1s"]
    if profile != "naive":
        args += ["--watermark", "500ms"]
    job = launch_driver(stack, f"cds-training-{profile}", "job", args)
    try:
        feeder.start()
        deadline = time.monotonic() + JOB_TIMEOUT_S
        while True:
            if not job.alive():
                raise TrainingError(f"class-data archives: the {profile} training job exited "
                                    f"(code {job.returncode}); see {job.log_path}")
            stateful = [r for r in read_progress(progress_file) if r.get("event") == "progress"
                        and r["progress"].get("numInputRows", 0) > 0]
            if len(stateful) >= TRAINING_BATCHES:
                break
            if time.monotonic() > deadline:
                raise TrainingError(f"class-data archives: the {profile} training job did not finish "
                                    f"{TRAINING_BATCHES} batches in {JOB_TIMEOUT_S:.0f} s; see {job.log_path}")
            time.sleep(0.5)
        progress(f"class-data archives: the {profile} job ran {len(stateful)} batches; dumping its JVMs")
        driver = _one_pid(descendants_running(job.pid, b"org.apache.spark.deploy.SparkSubmit"), "driver")
        executor = _one_pid(descendants_running(_pid(stack, "spark-worker"), b"CoarseGrainedExecutorBackend"),
                            "executor")
        _dump(jcmd, driver, record.paths[f"driver-{profile}"], f"driver-{profile}", progress)
        _dump(jcmd, executor, record.paths[f"executor-{profile}"], f"executor-{profile}", progress)
    finally:
        stop.set()
        job.signal_leader(15)
        if job.wait(60) is None:
            job.stop()
        if feeder.is_alive():
            feeder.join(30)
