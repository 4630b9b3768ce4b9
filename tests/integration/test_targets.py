"""A target written by a running stack, checked from another process (issue 19, docs/targets.md):
`chaos stack up --s3-tls --kafka-sasl --write-target FILE` starts the local stack, its S3 over TLS with a CA made for
it and its brokers asking clients for a SASL login, and writes it as a target; `chaos doctor --target FILE`
finds every endpoint answering and the Kafka and S3 traffic crossing the stack's proxies (each disabled for a moment:
the endpoint stops answering); `chaos run --target FILE`, a third process, runs an experiment through the target's
proxies and SKIPs one whose fault has no way to act there; Ctrl-C stops the stack, removes the file and leaves no
process or port behind. No secret value is in the file or in anything the commands printed. One stack start and one
short arm, about three minutes."""
from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from infra.ports import listening
from tests.integration.test_reliability import wait_for
from tests.leftovers import pids_of, ports_of

# Shared, not alone: what this judges is the target's plumbing (TLS, SASL, proxies, hooks), so its recovery bound is
# a loose "it came back" (60 s), not a figure of the job's, and holds beside other tests.
pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]

# Two short experiments for `chaos run --target`: the broker unreachable for 12 s (the target's `kafka` proxy) while
# checkpoint writes are slowed by the S3 fault proxy (which must see them through TLS), then the broker killed and
# restarted through the target's hooks (a `pkill` line, and SIGUSR1 to `chaos stack up`); and one executor
# of several killed, which a hook cannot do (it reaches every executor at once): SKIPPED, never PASSED.
THROUGH_PROXY = """
name: target-kafka-down
description: the broker unreachable for 12 s through the target's proxy, then killed; every session exactly once
incident: {file: 001-kafka-disconnects-tolerable-failures-bad-magic-metadata-exists.txt, error: Node 1 disconnected}
seed: 5
workload: {shape: uniform, keys: 50, rate: 100, partitions: 2}
job: {session_gap: 3s, max_session_length: 30s, watermark: 2s, trigger: 1s}
phases: {steady: 10s, inject: 30s, recover: 60s}
faults:
  - {fault: network.down, target: kafka, at: 0s, duration: 12s}
  - {fault: s3.slow_put, target: s3, at: 0s, duration: 12s, params: {delay: 0.3s, keys: "checkpoint/*"}}
  - {fault: process.kill, target: broker, at: 16s, duration: 10s}
arms:
  hardened:
    # grouped: the broker is killed 4 s after the proxy heals, sooner than a recovery can be seen (issue 36); 60 s:
    # the broker's restart and the job's catch-up beside the shared session's other stacks, not a timing target
    targets: {exit_code: 0, progress: true, recovery: {within: 60s, lag_below: 5s, healthy_samples: 3, grouped: true},
              lost: 0, duplicated: 0}
"""
NO_HOOK_RUN = """
name: target-one-executor
description: one executor of several killed; a target's hook reaches every executor at once
incident: {file: 001-kafka-disconnects-tolerable-failures-bad-magic-metadata-exists.txt, error: Node 1 disconnected}
seed: 5
workload: {shape: uniform, keys: 50, rate: 100, partitions: 2}
phases: {steady: 10s, inject: 20s, recover: 30s}
faults:
  - {fault: process.kill, target: executor, at: 0s, duration: 15s, params: {executors: one}}
arms:
  hardened:
    targets: {exit_code: 0, lost: 0, duplicated: 0}
"""


def test_stack_up_writes_a_target_that_doctor_finds_ready_and_crossing_its_proxies(tmp_path):
    access, secret = f"chaos-{secrets.token_hex(4)}", secrets.token_urlsafe(18)
    kafka_password = secrets.token_urlsafe(18)
    env = {**os.environ, "AWS_ACCESS_KEY_ID": access, "AWS_SECRET_ACCESS_KEY": secret,
           "KAFKA_USERNAME": "chaos-target", "KAFKA_PASSWORD": kafka_password}
    target, out, log = tmp_path / "t.yaml", tmp_path / "runs", tmp_path / "up.log"
    with open(log, "w") as up_log:
        up = subprocess.Popen([sys.executable, "-m", "chaos.cli", "stack", "up", "--s3-tls", "--kafka-sasl",
                               "--write-target", str(target),
                               "--out", str(out)], stdout=up_log, stderr=subprocess.STDOUT, cwd=ROOT, env=env,
                              start_new_session=True)
    try:
        wait_for(lambda: target.is_file() or up.poll() is not None, 300, "the target file")
        assert up.poll() is None, f"stack up ended: {log.read_text()[-3000:]}"
        doc = yaml.safe_load(target.read_text())
        assert doc["toxiproxy"]["api"].startswith("http://127.0.0.1:")
        assert set(doc["hooks"]) == {"broker", "minio", "executor"}
        assert {k: doc["credentials"][k] for k in ("s3_access_key", "s3_secret_key")} == \
            {"s3_access_key": "AWS_ACCESS_KEY_ID", "s3_secret_key": "AWS_SECRET_ACCESS_KEY"}
        # S3 over TLS: https endpoints, the stack's CA for the harness, its trust store in the JVMs' options
        assert doc["s3"]["tls"] is True and doc["s3"]["endpoint"].startswith("https://127.0.0.1:")
        assert doc["s3"]["direct_endpoint"].startswith("https://") and Path(doc["s3"]["ca_bundle"]).is_file()
        assert "javax.net.ssl.trustStore=" in doc["spark"]["conf"]["spark.executor.extraJavaOptions"]
        # SASL on Kafka: the login by name, the job's JAAS line by reference
        assert doc["credentials"]["kafka_password"] == "KAFKA_PASSWORD"
        assert doc["kafka"]["options"]["security.protocol"] == "SASL_PLAINTEXT"

        doctor = subprocess.run([sys.executable, "-m", "chaos.cli", "doctor", "--target", str(target)], cwd=tmp_path,
                                env=env, capture_output=True, text=True, timeout=180)
        lines = {line[4:28].strip(): line for line in doctor.stdout.splitlines() if line[:3] in ("ok ", "NO ", "-- ")}
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
        for check in ("credentials", "kafka metadata", "s3 bucket", "spark master", "toxiproxy",
                      "kafka advertises proxy", "kafka crosses proxy", "s3 crosses proxy", "hook broker",
                      "hook executor", "hook minio"):
            assert lines.get(check, "").startswith("ok "), f"{check}: {doctor.stdout}"
        assert "stopped answering" in lines["kafka crosses proxy"] and "stopped answering" in lines["s3 crosses proxy"]
        assert "(TLS, CA " in lines["s3 bucket"]
        assert doctor.stdout.rstrip().endswith("ready")

        # Without the credentials in its environment the doctor says so, and never shows a value.
        bare = {k: v for k, v in env.items() if not k.startswith(("AWS_", "KAFKA_"))}
        missing = subprocess.run([sys.executable, "-m", "chaos.cli", "doctor", "--target", str(target)],
                                 cwd=tmp_path, env=bare, capture_output=True, text=True, timeout=180)
        assert missing.returncode == 3 and "NO  credentials" in missing.stdout, missing.stdout
        for text in (target.read_text(), doctor.stdout, doctor.stderr, missing.stdout, missing.stderr):
            assert secret not in text and access not in text and kafka_password not in text

        specs = []
        for name, text in (("through-proxy.yaml", THROUGH_PROXY), ("no-hook.yaml", NO_HOOK_RUN)):
            (tmp_path / name).write_text(text)
            specs.append(str(tmp_path / name))
        runs = tmp_path / "target-runs"
        ran = subprocess.run([sys.executable, "-m", "chaos.cli", "run", "--target", str(target), *specs,
                              "--out", str(runs)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
        assert ran.returncode == 6, ran.stdout[-4000:] + ran.stderr[-2000:]  # SKIPPED: nothing failed, one not run
        results = json.loads((next(p for p in runs.iterdir() if p.is_dir() and not p.is_symlink())
                              / "results.json").read_text())
        arms = {e["name"]: e["arms"][0] for e in results["experiments"]}
        assert arms["target-kafka-down"]["verdict"] == "PASSED", ran.stdout[-4000:]
        assert arms["target-kafka-down"]["lost"] == 0 and arms["target-kafka-down"]["duplicated"] == 0
        assert arms["target-one-executor"]["verdict"] == "SKIPPED"
        assert "every executor at once" in arms["target-one-executor"]["skipped"]
        history = [json.loads(line) for line in (next(p for p in runs.iterdir() if p.is_dir() and not p.is_symlink())
                                                 / "target-kafka-down" / "hardened" / "history.jsonl").open()]
        restarted = [r for r in history if r.get("type") == "job" and r.get("event") == "restarted"
                     and r.get("process") == "broker"]
        assert restarted, "the broker was not restarted through the hook"
        assert "kafka restarted (asked by a restart hook)" in log.read_text()
        # the fault proxy saw the job's checkpoint writes through TLS, and delayed them
        from infra.s3proxy import S3ProxyClient

        requests = S3ProxyClient(doc["s3"]["fault_proxy"]).stats()["requests"]
        assert requests.get("PUT", {}).get("delayed", 0) > 0, requests
        for text in (ran.stdout, ran.stderr):
            assert secret not in text and access not in text and kafka_password not in text
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGINT)
        try:
            up.wait(timeout=120)
        finally:
            if up.poll() is None:
                os.killpg(up.pid, signal.SIGKILL)
                up.wait()
    assert up.returncode == 0, log.read_text()[-3000:]
    assert not target.exists(), "the target file outlived its stack"
    assert secret not in log.read_text() and access not in log.read_text() and kafka_password not in log.read_text()
    run_dir = next(p for p in out.iterdir() if p.is_dir() and not p.is_symlink())
    assert pids_of(run_dir) == []
    info = json.loads((run_dir / "stack" / "stack.json").read_text())
    assert [a for a in ports_of(info) if listening(*a, timeout=0.2)] == []
