"""Stack.restart and process faults on every backend: a component killed with SIGKILL comes back in place
(same ports, same data), and Spark executors are found under the worker's pid as chaos/faults/process.py does.

One stack per backend for the module.
"""
from __future__ import annotations

import io
import signal
import time
import uuid

import pytest

from chaos import smoke
from chaos.faults.process import executor_pids
from infra.driver import launch_driver
from infra.errors import InfraError
from infra.stack import PROXIES

pytestmark = [pytest.mark.integration, pytest.mark.all_backends]


def _wait_dead(handle, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while handle.alive():
        assert time.monotonic() < deadline, f"{handle.name} still alive {timeout} s after SIGKILL"
        time.sleep(0.05)


def test_broker_killed_with_sigkill_comes_back_with_its_data(stack):
    info = stack.info
    topic = f"restart-{uuid.uuid4().hex[:8]}"
    smoke.create_topic(info.kafka_internal_bootstrap, topic, partitions=2)
    smoke.produce_records(info.kafka_internal_bootstrap, topic, 200, "before")
    old = stack.handles["kafka"]
    old.signal(signal.SIGKILL)
    _wait_dead(old)

    seconds = stack.restart("kafka")

    new = stack.handles["kafka"]
    assert new is not old and new.alive()
    assert seconds < 90
    # Same address (the proxy's upstream did not change), same data directory: the records are still there.
    assert stack.toxiproxy.proxies()["kafka"].upstream == info.proxies["kafka"]["upstream"]
    smoke.produce_records(info.kafka_bootstrap, topic, 100, "after")
    assert smoke.consume_count(info.kafka_bootstrap, topic, 300, timeout=60, group="restart-read") == 300


def test_minio_restart_keeps_objects(stack):
    s3 = stack.s3_client()
    payload = uuid.uuid4().bytes * 64
    s3.put_object(stack.info.bucket, "restart/object", io.BytesIO(payload), len(payload))
    stack.restart("minio")
    response = stack.s3_client().get_object(stack.info.bucket, "restart/object")
    try:
        assert response.read() == payload
    finally:
        response.close()
        response.release_conn()


def test_toxiproxy_restart_recreates_the_proxies(stack):
    stack.toxiproxy.add_toxic("s3", "restart_latency", "latency", {"latency": 100})
    stack.restart("toxiproxy")
    assert set(stack.toxiproxy.proxies()) == {*stack.info.brokers, *PROXIES}
    assert stack.toxiproxy.toxics("s3") == {}  # a restarted Toxiproxy starts without toxics
    assert smoke.check_s3_roundtrip(stack)["equal"] is True


def test_restart_of_an_unknown_component_is_one_line(stack):
    with pytest.raises(InfraError, match="not a component of this stack"):
        stack.restart("zookeeper")


def test_spark_worker_restart_registers_again(stack):
    import requests

    old = stack.handles["spark-worker"]
    old.signal(signal.SIGKILL)
    _wait_dead(old)
    stack.restart("spark-worker")
    assert stack.handles["spark-worker"].pid != old.pid
    status = requests.get(f"{stack.info.spark_master_ui}/json/", timeout=5).json()
    alive = [w for w in status["workers"] if w["state"] == "ALIVE"]
    assert len(alive) == 1, status["workers"]


def test_executors_descend_from_the_worker_pid(stack):
    """chaos/faults/process.py finds executors as descendants of the worker's host pid: that holds on every backend.

    The probe query is stopped once its executor is found: that the same probe runs to its end on every backend (its
    rows counted, its checkpoint on s3a://) is test_stack.py's `chaos stack smoke` test."""
    worker = stack.handles["spark-worker"]
    assert isinstance(worker.pid, int) and worker.pid > 1
    topic = smoke.check_kafka_roundtrip(stack)["topic"]
    probe = launch_driver(stack, f"spark-probe-{topic}", "infra.spark_probe", [topic, f"restart/{topic}"])
    found: list[int] = []
    try:
        deadline = time.monotonic() + 240
        while not found and probe.alive() and time.monotonic() < deadline:
            found = executor_pids(worker.pid)
            time.sleep(0.2)
        ended = None if probe.alive() else probe.returncode
    finally:
        if probe.alive():
            probe.stop()
    assert found, (f"no executor found under the worker's pid {worker.pid}"
                   f"{'' if ended is None else f' (the probe ended first, exit {ended})'}; see {probe.log_path}")
