"""The stack for real: each point of `chaos stack smoke` against a running stack, and a clean teardown.

One stack per module (starting one costs ~10-20 s); every test leaves it healed (no toxic, proxies up).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from chaos import smoke
from infra.containers import containers_of
from infra.ports import listening
from infra.stack import PROXIES
from tests.leftovers import pids_of as _pids_of
from tests.leftovers import ports_of as _ports_of

pytestmark = [pytest.mark.integration, pytest.mark.all_backends]


@pytest.fixture(autouse=True)
def healed(request):
    """Whatever a test did to the proxies, the next one starts from a healed stack."""
    yield
    if "stack" in request.fixturenames:
        stack = request.getfixturevalue("stack")
        if not stack._closing:  # after Ctrl-C the stack is already torn down: nothing to heal
            stack.reset()


def test_every_component_is_up_on_loopback(stack):
    info = stack.info
    assert set(stack.handles) == {"toxiproxy", "s3proxy", "minio", "kafka", "spark-master", "spark-worker"}
    assert all(handle.alive() for handle in stack.handles.values())
    assert set(stack.toxiproxy.proxies()) == {*stack.info.brokers, *PROXIES}
    for proxy in info.proxies.values():
        host, port = proxy["listen"].rsplit(":", 1)
        assert host.startswith("127."), proxy
        assert listening(host, int(port))


def test_server_jvms_map_their_class_data_archives_where_the_backend_can(stack):
    """On the local backend Kafka and the Spark daemons map the archives `make setup` recorded (a JVM that cannot use
    one says nothing: this is how we know the start-up speed-up is real); containers run other JDK builds and map
    none of the host's."""
    from infra.cds import mapped_archives

    expected = {"kafka": "kafka.jsa", "spark-master": "spark-master.jsa", "spark-worker": "spark-worker.jsa"}
    for component, archive in expected.items():
        mapped = {Path(path).name for path in mapped_archives(stack.handles[component].pid)}
        if stack.backend.name == "local":
            assert archive in mapped, (component, mapped)
        else:
            assert archive not in mapped, (component, mapped)


def test_kafka_advertises_the_proxy(stack):
    """Every client connection, reconnects included, must cross the `kafka` proxy."""
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": stack.info.kafka_bootstrap}).list_topics(timeout=10)
    advertised = {f"{b.host}:{b.port}" for b in metadata.brokers.values()}
    assert advertised == {stack.info.proxies["kafka"]["listen"]}


def test_kafka_roundtrip_through_the_proxy(stack):
    measured = smoke.check_kafka_roundtrip(stack)
    assert measured["consumed"] == measured["produced"] == smoke.RECORDS


def test_s3_roundtrip_through_the_proxy(stack):
    assert smoke.check_s3_roundtrip(stack)["equal"] is True


def test_latency_toxic_on_s3_slows_puts(stack):
    measured = smoke.check_s3_latency_toxic(stack, latency_ms=250)
    # The fastest PUT under the toxic is the check: a median-minus-median "added" is noise on a loaded machine (one
    # slow PUT before the toxic inflates the base: 227 of 250 ms "added" in a CI run with another test file beside
    # it, every PUT under the toxic still >= 250 ms; chaos/smoke.py check_s3_latency_toxic).
    assert measured["fastest_put_ms_with_toxic"] >= 250
    assert stack.toxiproxy.toxics("s3") == {}


def test_kafka_proxy_down_blocks_fetching_and_up_restores_it(stack):
    measured = smoke.check_kafka_proxy_down(stack)
    assert measured == {"fetched_while_down": 0, "fetched_after_enable": 10}
    assert stack.toxiproxy.proxy("kafka").enabled is True


def test_cli_smoke_json_passes_and_teardown_leaves_nothing(backend, tmp_path):
    """`chaos stack smoke --json` end to end — its Spark streaming query read every record through the proxy and
    checkpointed offsets, commits and RocksDB state to s3a://, its executor reached the driver through the driver's
    proxy — and afterwards no process of the run lives, no port listens, no container of the run exists. (The
    Spark query is checked here only: a second probe query on the module's stack would cost ~45 s per backend.)"""
    done = subprocess.run([sys.executable, "-m", "chaos.cli", "stack", "smoke", "--backend", backend, "--json",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["ok"] is True
    assert set(result["start_s"]) == {"toxiproxy", "s3proxy", "minio", "kafka", "spark-master", "spark-worker"}
    assert result["total_start_s"] > 0
    assert result["toxics"]["kafka_down"] == {"fetched_while_down": 0, "fetched_after_enable": 10}
    spark = result["checks"]["spark_query"]
    assert spark["exit"] == 0 and spark["rows"] == smoke.RECORDS
    assert spark["checkpoint_has"] == {"offsets": True, "commits": True, "state": True}
    run_dir = Path(result["run_dir"])
    info = json.loads((run_dir / "stack" / "stack.json").read_text())
    # The executor launched for the probe query was told the proxied driver address, not the driver's own.
    driver = info["driver"]
    worker_log = (run_dir / "logs" / "spark-worker.log").read_text()
    assert f"CoarseGrainedScheduler@{driver['advertised_host']}:{driver['rpc_port']}" in worker_log
    assert _pids_of(run_dir) == []
    still_listening = [address for address in _ports_of(info) if listening(*address, timeout=0.2)]
    assert still_listening == []
    assert containers_of(run_dir) == []
    assert (tmp_path / "latest").resolve() == run_dir
    assert json.loads((run_dir / "results.json").read_text())["ok"] is True
