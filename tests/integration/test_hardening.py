"""Checkpoint ownership on the real stack: MinIO's conditional writes, a second deployment refused, the same
start going ahead with the switch off, a deployment that loses its lease stopping before its next commit, and a
lease that ran out while S3 was cut off failing only the batch, then renewed (or found taken) once S3 is back.

State integrity with rollback and supervised restarts are exercised end to end by the corrupted-sst and
checkpoint-commit-failures experiments (tests/integration/test_experiments.py runs them in the smoke suite),
where the naive control arm is the same scenario without the feature.
"""
from __future__ import annotations

import json
import time

import pytest

from chaos.arm.job import ArmConfig, JobArm
from chaos.outputs import read_progress
from chaos.workload import WorkloadSpec
from infra.driver import launch_driver
from infra.stack import Stack
from job.lease import CheckpointLease, LeaseLost, LeaseRecord, LeaseUnconfirmed
from job.objectstore import ObjectStore, PreconditionFailed
from tests.integration.job_settings import OUTCOME_TRIGGER_MS

pytestmark = pytest.mark.integration


def store_of(stack: Stack) -> ObjectStore:
    return ObjectStore.connect(stack.info.s3_endpoint, stack.credentials.access_key, stack.credentials.secret_key,
                               stack.info.bucket)


def foreign_lease(store: ObjectStore, checkpoint: str, owner: str = "other-deployment", ttl_s: float = 120) -> str:
    record = LeaseRecord(owner=owner, instance="x1", fencing=7, expires_at_ms=int((time.time() + ttl_s) * 1000),
                         host="elsewhere", pid=4242)
    return store.put_if_absent(f"{checkpoint}/_lease", record.to_bytes())


def start_job(stack: Stack, name: str, tmp_path, **settings):
    args = ["--profile", "hardened", "--topic", "unused-topic", "--deployment", name,
            "--progress-file", str(tmp_path / f"{name}.progress.jsonl")]
    if settings:
        args += ["--settings-json", json.dumps(settings)]
    return launch_driver(stack, f"job-{name}", "job", args)


def test_minio_honours_the_conditional_writes_the_lease_relies_on(stack):
    store = store_of(stack)
    first = store.put_if_absent("conditional/object", b"one")
    with pytest.raises(PreconditionFailed):
        store.put_if_absent("conditional/object", b"two")  # create-only: it exists
    with pytest.raises(PreconditionFailed):
        store.put_if_match("conditional/object", b"three", "0" * 32)  # replace-if-unchanged: wrong ETag
    second = store.put_if_match("conditional/object", b"four", first)
    assert second != first and store.get("conditional/object") == (b"four", second)
    with pytest.raises(PreconditionFailed):
        store.put_if_match("conditional/missing", b"x", second)  # If-Match never creates


def test_a_second_deployment_is_refused_within_seconds_naming_the_owner(stack, tmp_path):
    checkpoint = "shared-a/checkpoint"
    foreign_lease(store_of(stack), checkpoint)
    started = time.monotonic()
    job = start_job(stack, "second-a", tmp_path, checkpoint_path=checkpoint)
    code = job.wait(60)
    seconds = time.monotonic() - started
    log = job.log_path.read_text()
    assert code == 3, log[-2000:]
    assert seconds < 10, f"refused after {seconds:.1f} s"  # Spark alone takes longer to start; 1.2-1.4 s measured
    lines = [line for line in log.splitlines() if line.startswith("job: refused:")]
    assert len(lines) == 1, log[-2000:]
    assert f"s3a://{stack.info.bucket}/{checkpoint}" in lines[0] and "'other-deployment'" in lines[0]
    assert not (tmp_path / "second-a.progress.jsonl").exists()  # Spark never started


def test_with_the_lease_switched_off_the_second_deployment_starts_on_the_owned_checkpoint(stack, tmp_path):
    checkpoint = "shared-b/checkpoint"
    foreign_lease(store_of(stack), checkpoint)
    job = start_job(stack, "second-b", tmp_path, checkpoint_path=checkpoint, lease=False, verify_state=False)
    try:
        deadline = time.monotonic() + 180
        started = []
        while time.monotonic() < deadline and job.alive() and not started:
            started = [r for r in read_progress(tmp_path / "second-b.progress.jsonl") if r.get("event") == "started"]
            time.sleep(1)
        assert started, job.log_path.read_text()[-2000:]  # its query runs on a checkpoint another deployment owns
        assert "refused" not in job.log_path.read_text()
    finally:
        job.stop(grace=10)


def test_a_deployment_that_loses_its_lease_stops_before_its_next_commit(stack, tmp_path):
    workload = WorkloadSpec(shape="uniform", keys=50, rate=100, duration_ms=60_000, seed=3)
    arm = JobArm(stack, tmp_path / "owner", ArmConfig(profile="hardened", workload=workload, settings={
        "gap_ms": 2_000, "max_session_ms": 10_000, "watermark_ms": 1_000, "trigger_ms": OUTCOME_TRIGGER_MS}))
    arm.create_topic()
    arm.start_job()
    import threading

    stop = threading.Event()
    producer = threading.Thread(target=arm.produce, kwargs={"stop_event": stop}, daemon=True)
    producer.start()
    try:
        store = store_of(stack)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and arm.job.alive():
            batches = [r for r in read_progress(arm.progress_path) if r.get("event") == "progress"]
            if len(batches) >= 3:
                break
            time.sleep(1)
        assert arm.job.alive(), arm.job.log_path.read_text()[-2000:]
        # Another deployment takes the checkpoint over (as it would after this one's lease expired).
        key = f"{arm.checkpoint_prefix}/_lease"
        current, etag = store.get(key)
        owner = LeaseRecord.from_bytes(current)
        taker = LeaseRecord("usurper", "u1", owner.fencing + 1, int((time.time() + 120) * 1000), "elsewhere", 1)
        store.put_if_match(key, taker.to_bytes(), etag)
        commits_then = {o.key for o in store.list(f"{arm.checkpoint_prefix}/commits/")}
        code = arm.job.wait(60)
        log = arm.job.log_path.read_text()
        assert code == 6, log[-3000:]
        assert any("lost the lease" in line and "'usurper'" in line for line in log.splitlines()
                   if line.startswith("job: ")), log[-3000:]
        commits_after = {o.key for o in store.list(f"{arm.checkpoint_prefix}/commits/")} - commits_then
        assert len(commits_after) <= 1, commits_after  # at most the batch already past its last check
        assert LeaseRecord.from_bytes(store.get(key)[0]).owner == "usurper"  # it never wrote the lease back
    finally:
        stop.set()
        producer.join(30)
        if arm.job.alive():
            arm.job.stop(grace=10)


def test_a_lease_that_runs_out_while_s3_is_cut_off_is_renewed_after_unless_it_was_taken_over(stack):
    """Real MinIO behind the stack's real `s3` proxy: the proxy disabled for longer than the TTL, then enabled."""
    key = f"lapse-{time.time_ns()}/checkpoint/_lease"
    proxied = ObjectStore.connect(stack.info.s3_endpoint, stack.credentials.access_key, stack.credentials.secret_key,
                                  stack.info.bucket, timeout_s=2)
    direct = ObjectStore.connect(stack.info.s3_direct_endpoint, stack.credentials.access_key,
                                 stack.credentials.secret_key, stack.info.bucket)  # past the proxy: never cut off
    kept = CheckpointLease(proxied, key, "keeper", "s3a://test/lapse", ttl_s=2, say=lambda line: None)
    kept.acquire()
    before = LeaseRecord.from_bytes(direct.get(key)[0])
    try:
        stack.toxiproxy.set_enabled("s3", False)
        time.sleep(2.5)  # past the TTL, with S3 out of reach
        with pytest.raises(LeaseUnconfirmed, match="ran out while S3 could not be reached"):
            kept.check()
    finally:
        stack.toxiproxy.set_enabled("s3", True)
    kept.check()  # nobody wrote the lease meanwhile: the conditional renewal succeeds
    after = LeaseRecord.from_bytes(direct.get(key)[0])
    assert after.instance == kept.instance and after.expires_at_ms > before.expires_at_ms  # renewed, not just read

    try:
        stack.toxiproxy.set_enabled("s3", False)
        time.sleep(2.5)
        with pytest.raises(LeaseUnconfirmed):
            kept.check()
        # meanwhile another deployment, which still reaches S3, takes the expired lease over
        CheckpointLease(direct, key, "usurper", "s3a://test/lapse", ttl_s=60, say=lambda line: None).acquire()
    finally:
        stack.toxiproxy.set_enabled("s3", True)
    with pytest.raises(LeaseLost, match="'usurper'"):
        kept.check()
    assert LeaseRecord.from_bytes(direct.get(key)[0]).owner == "usurper"
