"""The cluster topology for real: three KRaft brokers (each behind its own proxy), replication factor 3 with
min.insync.replicas 2, two Spark workers each with its own link to the driver; a broker lost and back, leadership
moved, one worker cut off from the driver and back, and a clean teardown.

One cluster stack for the module (it starts in ~9 s). Local backend only: the containers backend runs the same
component commands (infra/components.py), and its per-role images are covered by test_stack's containers run.
"""
from __future__ import annotations

import json
import signal
import time

import pytest
import requests

from chaos.faults.network import worker_link_proxies
from chaos.faults.process import busiest_leader, partition_leaders
from chaos.smoke import create_topic
from infra.components import driver_link
from infra.driver import launch_driver
from infra.kafka_admin import move_leaders
from infra.ports import listening
from infra.stack import PROXIES, Stack
from tests.leftovers import pids_of

pytestmark = [pytest.mark.integration]

PARTITIONS = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("cluster")
    with Stack(run_dir, topology="cluster") as stack:
        yield stack
    assert pids_of(run_dir) == [], "the cluster left processes behind"


def _partitions(stack: Stack, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": stack.info.kafka_internal_bootstrap, "log_level": 0}) \
        .list_topics(topic, timeout=10)
    return {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in metadata.topics[topic].partitions.values()}


def _produce(stack: Stack, topic: str, count: int) -> int:
    """Records acknowledged by acks=all through the brokers' proxies (what the workload does)."""
    from confluent_kafka import Producer

    acknowledged = []
    producer = Producer({"bootstrap.servers": stack.info.kafka_bootstrap, "acks": "all", "enable.idempotence": True,
                         "log_level": 0, "message.timeout.ms": 30000})
    for n in range(count):
        producer.produce(topic, key=str(n).encode(), value=b"x",
                         on_delivery=lambda err, msg: acknowledged.append(err is None))
    producer.flush(40)
    return sum(acknowledged)


def test_three_brokers_two_workers_each_broker_behind_its_own_proxy(cluster):
    info = cluster.info
    assert (info.topology, info.brokers, info.workers) == ("cluster", ["kafka-1", "kafka-2", "kafka-3"],
                                                           ["spark-worker-1", "spark-worker-2"])
    assert set(cluster.handles) == {"toxiproxy", "s3proxy", "minio", "kafka-1", "kafka-2", "kafka-3",
                                    "spark-master", "spark-worker-1", "spark-worker-2"}
    links = {proxy for worker in info.workers for proxy in driver_link(worker)}
    assert set(cluster.toxiproxy.proxies()) == {*info.brokers, *PROXIES, *links}
    assert len(info.kafka_bootstrap.split(",")) == 3
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": info.kafka_bootstrap, "log_level": 0}).list_topics(timeout=10)
    advertised = {node: f"{b.host}:{b.port}" for node, b in metadata.brokers.items()}
    assert advertised == {n: info.proxies[f"kafka-{n}"]["listen"] for n in (1, 2, 3)}
    for proxy in info.proxies.values():
        host, port = proxy["listen"].rsplit(":", 1)
        assert host.startswith("127.") and listening(host, int(port))
    import requests

    workers = requests.get(f"{info.spark_master_ui}/json/", timeout=5).json()["workers"]
    assert [w["state"] for w in workers] == ["ALIVE", "ALIVE"] and sum(w["cores"] for w in workers) == 4


def test_a_topic_is_replicated_three_times_and_writes_survive_one_broker_lost(cluster, tmp_path):
    """The broker is killed by the hook a written target would give for it (`{node}`: that broker alone), as
    `chaos run --target` kills it, and told down by its own endpoint."""
    from chaos.target.from_stack import local_hooks
    from chaos.target.model import Hook
    from chaos.target.stack import HookHandle

    topic = "lost-one"
    create_topic(cluster.info.kafka_internal_bootstrap, topic, PARTITIONS, cluster.info.replication_factor,
                 cluster.info.min_insync_replicas)
    assert all(len(replicas) == 3 for _leader, replicas, _isr in _partitions(cluster, topic).values())
    victim = busiest_leader(partition_leaders(cluster.info.kafka_internal_bootstrap, topic))
    name = f"kafka-{victim}"
    direct = cluster.info.kafka_internal_bootstrap.split(",")
    hook = Hook(str(local_hooks(cluster)["broker"]["signal"]))
    handles = [HookHandle("broker", hook, [direct[n - 1]], tmp_path / "hooks.log", node=n) for n in (1, 2, 3)]
    handles[victim - 1].signal(signal.SIGKILL)
    try:
        deadline = time.monotonic() + 30
        while handles[victim - 1].alive():
            assert time.monotonic() < deadline, f"the hook did not kill {name}: {(tmp_path / 'hooks.log').read_text()}"
            time.sleep(0.2)
        assert [h.alive() for h in handles].count(True) == 2  # the other two brokers untouched
        # two of three replicas are in sync: acks=all still succeeds (min.insync.replicas 2)
        assert _produce(cluster, topic, 200) == 200
        # brokers learn the new leaders from the controller a moment later: wait for their metadata, bounded
        leaders = _settled(lambda: {leader for leader, _r, _i in _partitions(cluster, topic).values()},
                           lambda found: victim not in found and -1 not in found)
        assert victim not in leaders and -1 not in leaders, leaders
    finally:
        cluster.restart(name)
    deadline = time.monotonic() + 60
    while any(len(isr) < 3 for _leader, _replicas, isr in _partitions(cluster, topic).values()):
        assert time.monotonic() < deadline, f"{name} did not rejoin the in-sync replicas: {_partitions(cluster, topic)}"
        time.sleep(1)


def _settled(read, done, timeout: float = 30.0):
    """What `read` returns once `done` holds of it, or its last reading after `timeout` (for the caller's assert)."""
    deadline = time.monotonic() + timeout
    found = read()
    while not done(found) and time.monotonic() < deadline:
        time.sleep(0.5)
        found = read()
    return found


def test_leadership_moves_to_another_in_sync_replica_with_no_broker_stopped(cluster):
    topic = "moved"
    create_topic(cluster.info.kafka_internal_bootstrap, topic, PARTITIONS, 3, 2)
    before = {p: leader for p, (leader, _r, _i) in _partitions(cluster, topic).items()}
    moved = move_leaders(cluster.info.kafka_internal_bootstrap, topic)
    after = _settled(lambda: {p: leader for p, (leader, _r, _i) in _partitions(cluster, topic).items()},
                     lambda found: all(found[p] != before[p] and found[p] > 0 for p in before))
    assert len(moved) == PARTITIONS and all(line.startswith("moved ") for line in moved), moved
    assert all(after[p] != before[p] and after[p] > 0 for p in before), (before, after)
    assert all(handle.alive() for handle in cluster.handles.values())
    assert _produce(cluster, topic, 50) == 50


def _worker_executors(stack: Stack, worker: str) -> tuple[set[str], set[str]]:
    """(running, finished) executor ids on `worker`, from its own status page."""
    argv = stack.command_of(worker)
    port = int(argv[argv.index("--port") + 1])
    found = next(w for w in requests.get(f"{stack.info.spark_master_ui}/json/", timeout=5).json()["workers"]
                 if w["port"] == port)
    status = requests.get(f"{found['webuiaddress']}/json/", timeout=5).json()
    return ({str(e["id"]) for e in status.get("executors", [])},
            {str(e["id"]) for e in status.get("finishedexecutors", [])})


def _jobs(stack: Stack) -> list[dict]:
    """The link probe's lines so far: one per Spark job, with the executors the driver had after it."""
    log = stack.log_dir / "link-probe.log"
    return [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")] if log.exists() else []


def _until(what: str, done, timeout: float, stack: Stack, probe) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert probe.alive(), f"the probe driver ended while waiting for {what}"
        assert time.monotonic() < deadline, f"no {what} within {timeout:.0f} s: {_jobs(stack)[-3:]}"
        time.sleep(1)


def test_a_partition_between_the_driver_and_one_worker_loses_that_workers_executors_alone(cluster):
    """spark-driver-worker-2 down: the driver loses worker 2's executor and runs its jobs on worker 1's, whose
    executor it keeps; healed, worker 2 runs an executor of the application again."""
    probe = launch_driver(cluster, "link-probe", "tests.integration.link_probe", ["240"])
    link = worker_link_proxies("spark-driver-worker-2", cluster.info.proxies)
    try:
        _until("job on two executors", lambda: bool(_jobs(cluster)) and len(_jobs(cluster)[-1]["executors"]) == 2,
               150, cluster, probe)
        first, second = (_worker_executors(cluster, w)[0] for w in cluster.info.workers)
        assert len(first) == 1 and len(second) == 1, (first, second)  # spread out: one executor per worker
        cut = time.time()
        for proxy in link:
            cluster.toxiproxy.set_enabled(proxy, False)

        def lost() -> bool:
            return any(j["end"] > cut and not second & set(j["executors"]) for j in _jobs(cluster))

        _until("job without worker 2's executor", lost, 90, cluster, probe)
        lost_after = next(j["end"] for j in _jobs(cluster) if j["end"] > cut and not second & set(j["executors"]))
        _until("second job on worker 1 alone",
               lambda: sum(j["end"] > lost_after for j in _jobs(cluster)) >= 2, 60, cluster, probe)
        during = [j for j in _jobs(cluster) if j["end"] > lost_after]
        assert all(set(j["executors"]) == first for j in during), during  # worker 1's executor kept, and only it
        running, finished = _worker_executors(cluster, "spark-worker-2")
        healed = time.time()
        for proxy in link:
            cluster.toxiproxy.set_enabled(proxy, True)

        def back() -> bool:  # a new executor of worker 2 in the driver's list
            return bool(_worker_executors(cluster, "spark-worker-2")[0] & set(_jobs(cluster)[-1]["executors"]) - second)

        _until("executor of worker 2 back with the driver", back, 120, cluster, probe)
        print(f"link down: worker 2's executor {sorted(second)} gone from the driver {lost_after - cut:.1f} s after "
              f"the cut; {len(during)} jobs on worker 1's {sorted(first)} alone; worker 2 then ran {sorted(running)}, "
              f"finished {sorted(finished, key=int)}; healed: worker 2 back with the driver in "
              f"{time.time() - healed:.1f} s ({_jobs(cluster)[-1]['executors']})")
        logs = (cluster.stack_dir / "spark-work" / "spark-worker-2").glob(f"app-*/{min(second)}/stderr")
        said = [line for log in logs for line in log.read_text(errors="replace").splitlines()
                if "ERROR" in line or "disassociated" in line]
        print(f"worker 2's executor {min(second)} said: {said[:3]}")
        assert second <= finished, (second, finished)  # the cut-off executor itself ended, not just forgotten
    finally:
        for proxy in link:
            cluster.toxiproxy.set_enabled(proxy, True)
        probe.stop()
