"""`chaos stack smoke`: start the stack, prove every part of it works for real, tear it down.

Each check measures something and fails loudly; the result is one JSON-able dict:
{"ok", "backend", "start_s": {component: s}, "total_start_s", "checks": {...}, "toxics": {...},
 "teardown_s", "error"}.
"""
from __future__ import annotations

import io
import json
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from infra.driver import launch_driver
from infra.errors import InfraError
from infra.stack import Stack

RECORDS = 1000
S3_LATENCY_MS = 300


class SmokeFailure(Exception):
    """A check of the smoke did not hold (exit 1)."""


def produce_records(bootstrap: str, topic: str, count: int, prefix: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5, "log_level": 3})
    failures: list[str] = []
    for n in range(count):
        producer.produce(topic, key=f"{prefix}-{n % 17}", value=f"{prefix}-{n}",
                         on_delivery=lambda err, msg: failures.append(str(err)) if err else None)
        producer.poll(0)
    remaining = producer.flush(30)
    if remaining or failures:
        raise SmokeFailure(f"producing to {topic} via {bootstrap}: {remaining} undelivered, "
                           f"{len(failures)} failed ({failures[:1]})")


def consume_count(bootstrap: str, topic: str, expected: int, timeout: float, group: str) -> int:
    """Count records read from `topic` until `expected` arrive or `timeout` passes."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "log_level": 0, "socket.connection.setup.timeout.ms": 2000})
    seen = 0
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while seen < expected and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen += 1
    finally:
        consumer.close()
    return seen


def create_topic(bootstrap: str, topic: str, partitions: int, replication: int = 1, min_insync: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    config = {"min.insync.replicas": str(min_insync)} if replication > 1 else {}
    admin.create_topics([NewTopic(topic, partitions, replication, config=config)])[topic].result(30)


def put_times_ms(client, bucket: str, key: str, payload: bytes, repeats: int = 5) -> list[float]:
    times = []
    for _ in range(repeats):
        t0 = time.monotonic()
        client.put_object(bucket, key, io.BytesIO(payload), len(payload))
        times.append((time.monotonic() - t0) * 1000)
    return times


def check_kafka_roundtrip(stack: Stack) -> dict:
    """1,000 records produced and consumed through the `kafka` proxy."""
    info = stack.info
    topic = f"smoke-{uuid.uuid4().hex[:8]}"
    t0 = time.monotonic()
    create_topic(info.kafka_bootstrap, topic, partitions=3)
    produce_records(info.kafka_bootstrap, topic, RECORDS, "smoke")
    consumed = consume_count(info.kafka_bootstrap, topic, RECORDS, timeout=60, group="smoke-read")
    if consumed != RECORDS:
        raise SmokeFailure(f"kafka: produced {RECORDS} records through the proxy, consumed {consumed}")
    return {"topic": topic, "produced": RECORDS, "consumed": consumed, "seconds": round(time.monotonic() - t0, 2)}


def check_s3_roundtrip(stack: Stack) -> dict:
    """An object written and read back through the `s3` proxy."""
    s3 = stack.s3_client()
    payload = uuid.uuid4().bytes * 2048  # 32 KiB
    s3.put_object(stack.info.bucket, "smoke/object", io.BytesIO(payload), len(payload))
    response = s3.get_object(stack.info.bucket, "smoke/object")
    try:
        echoed = response.read()
    finally:
        response.close()
        response.release_conn()
    if echoed != payload:
        raise SmokeFailure("s3: the object read back through the proxy differs from the one written")
    return {"bytes": len(payload), "equal": True}


def check_s3_latency_toxic(stack: Stack, latency_ms: int = S3_LATENCY_MS) -> dict:
    """A latency toxic on `s3` slows every PUT by the injected amount, and removing it restores speed.

    Every PUT under the toxic must take at least `latency_ms` (the response cannot cross the proxy sooner),
    and after removal at least one PUT must be faster than it again. A median-minus-median check was tried
    and was flaky in CI: one slow PUT on a loaded machine inflates the "before" median (220 of 250 ms
    "added" while the fastest toxic PUT still took 260 ms); the lower bound has no such noise.
    """
    s3, bucket, small = stack.s3_client(), stack.info.bucket, b"x" * 1024
    before = put_times_ms(s3, bucket, "smoke/latency", small)
    stack.toxiproxy.add_toxic("s3", "smoke_latency", "latency", {"latency": latency_ms, "jitter": 0},
                              stream="downstream")
    try:
        with_toxic = put_times_ms(s3, bucket, "smoke/latency", small)
    finally:
        stack.toxiproxy.remove_toxic("s3", "smoke_latency")
    after = put_times_ms(s3, bucket, "smoke/latency", small)
    base, toxic, healed = (statistics.median(t) for t in (before, with_toxic, after))
    measured = {"injected_ms": latency_ms, "put_ms_before": round(base, 1), "put_ms_with_toxic": round(toxic, 1),
                "fastest_put_ms_with_toxic": round(min(with_toxic), 1), "added_ms": round(toxic - base, 1),
                "put_ms_after_removal": round(healed, 1)}
    if min(with_toxic) < latency_ms:
        raise SmokeFailure(f"toxiproxy: with a {latency_ms} ms latency toxic on s3 a PUT took only "
                           f"{min(with_toxic):.0f} ms (median {toxic:.0f} ms, {base:.0f} ms before)")
    if min(after) >= latency_ms:  # every PUT still slowed: the toxic did not go away
        raise SmokeFailure(f"toxiproxy: PUTs still take {min(after):.0f} ms or more after the latency toxic "
                           f"was removed")
    return measured


def check_kafka_proxy_down(stack: Stack) -> dict:
    """With `kafka` disabled a consumer fetches nothing; enabled again, it fetches everything."""
    info = stack.info
    topic = f"smoke-cut-{uuid.uuid4().hex[:8]}"
    create_topic(info.kafka_internal_bootstrap, topic, partitions=1)
    produce_records(info.kafka_internal_bootstrap, topic, 10, "cut")  # straight to the broker
    stack.toxiproxy.set_enabled("kafka", False)
    try:
        while_down = consume_count(info.kafka_bootstrap, topic, 10, timeout=6, group="smoke-cut")
    finally:
        stack.toxiproxy.set_enabled("kafka", True)
    after_enable = consume_count(info.kafka_bootstrap, topic, 10, timeout=60, group="smoke-heal")
    if while_down != 0 or after_enable != 10:
        raise SmokeFailure(f"toxiproxy: with `kafka` disabled a consumer fetched {while_down} records "
                           f"(expected 0); after enabling it fetched {after_enable} (expected 10)")
    return {"fetched_while_down": while_down, "fetched_after_enable": after_enable}


def check_spark_query(stack: Stack, topic: str, expected_rows: int = RECORDS) -> dict:
    """A streaming query reads `topic` through the proxy, keeps RocksDB state and checkpoints to s3a://."""
    t0 = time.monotonic()
    prefix = f"smoke/{topic}"
    probe = launch_driver(stack, f"spark-probe-{topic}", "infra.spark_probe", [topic, prefix])
    code = probe.wait(timeout=300)
    if code is None:
        probe.stop()
        raise SmokeFailure(f"spark: the probe query did not finish within 300 s; see {probe.log_path}")
    lines = [line for line in probe.log_path.read_text().splitlines() if line.startswith("{")]
    outcome = json.loads(lines[-1]) if lines else {}
    objects = [o.object_name for o in stack.s3_client().list_objects(
        stack.info.bucket, prefix=f"{prefix}/checkpoint/", recursive=True)]
    has = {part: any(f"/checkpoint/{part}/" in name for name in objects) for part in ("offsets", "commits", "state")}
    measured = {"exit": code, "rows": outcome.get("rows"), "batches": outcome.get("batches"),
                "checkpoint_objects": len(objects), "checkpoint_has": has,
                "seconds": round(time.monotonic() - t0, 2)}
    if code != 0 or outcome.get("rows") != expected_rows or not all(has.values()):
        raise SmokeFailure(f"spark: probe exit {code}, counted {outcome.get('rows')} of {expected_rows} rows, "
                           f"checkpoint parts {has}; see {probe.log_path}")
    return measured


def run_smoke(run_dir: Path, backend: str = "local", progress: Callable[[str], None] = lambda m: None) -> dict:
    result: dict = {"ok": False, "backend": backend, "run_dir": str(run_dir), "checks": {}, "toxics": {}}
    checks, toxics = result["checks"], result["toxics"]
    stack = Stack(run_dir, backend=backend, progress=progress)
    try:
        with stack:
            result["start_s"] = {k: v for k, v in stack.info.start_seconds.items() if k != "total"}
            result["total_start_s"] = stack.info.start_seconds["total"]
            progress(f"stack up in {result['total_start_s']:.1f} s")
            checks["kafka_roundtrip"] = check_kafka_roundtrip(stack)
            progress(f"kafka: {RECORDS} records produced and consumed through the proxy")
            checks["s3_roundtrip"] = check_s3_roundtrip(stack)
            progress("s3: object written and read back through the proxy")
            toxics["s3_latency"] = check_s3_latency_toxic(stack)
            progress(f"toxiproxy: s3 latency toxic added {toxics['s3_latency']['added_ms']:.0f} ms per PUT")
            toxics["kafka_down"] = check_kafka_proxy_down(stack)
            progress("toxiproxy: kafka proxy down stops fetching, up restores it")
            checks["spark_query"] = check_spark_query(stack, checks["kafka_roundtrip"]["topic"])
            progress(f"spark: streaming query counted {RECORDS} rows; checkpoint on s3a has offsets, commits, state")
            teardown_started = time.monotonic()
        result["teardown_s"] = round(time.monotonic() - teardown_started, 2)
        result["ok"] = True
    except (SmokeFailure, InfraError) as error:
        result["error"] = str(error)
        result["error_kind"] = "environment" if isinstance(error, InfraError) else "check"
    return result
