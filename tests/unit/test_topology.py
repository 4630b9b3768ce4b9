"""Topology as data (infra/components.py): names, ports and each broker's configuration for `single` and `cluster`,
each worker's own link to the driver, and the pure choices faults make on a cluster (which broker leads the most
partitions, which proxies one worker's link is)."""
from __future__ import annotations

from pathlib import Path

import pytest

from chaos.faults.base import FaultError
from chaos.faults.network import proxies_for, worker_link_proxies
from chaos.faults.process import busiest_leader
from infra import preloads
from infra.components import (
    TOPOLOGIES,
    Ports,
    driver_link,
    kafka_properties,
    redirect_to_link,
    role_of,
    topology,
)
from infra.errors import InfraError


def _properties(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def test_names_follow_the_topology_and_roles_read_back():
    single, cluster = TOPOLOGIES["single"], TOPOLOGIES["cluster"]
    assert (single.broker_names, single.worker_names) == (["kafka"], ["spark-worker"])
    assert cluster.broker_names == ["kafka-1", "kafka-2", "kafka-3"]
    assert cluster.worker_names == ["spark-worker-1", "spark-worker-2"]
    assert [role_of(n) for n in ("kafka", "kafka-2", "spark-worker-1", "spark-master", "s3proxy")] == \
        ["kafka", "kafka", "spark-worker", "spark-master", "s3proxy"]
    with pytest.raises(InfraError, match="unknown topology 'mesh'; allowed: single, cluster"):
        topology("mesh")


@pytest.mark.parametrize("name, count", [("single", 9 + 4 + 4), ("cluster", 9 + 12 + 8)])
def test_ports_are_allocated_scalars_first_then_per_broker_and_per_worker(name, count):
    shape = TOPOLOGIES[name]
    numbers = list(range(1000, 1000 + Ports.count(shape)))
    assert len(numbers) == count
    ports = Ports.allocate(numbers, shape)
    assert ports.minio == 1002  # number 2: what a test that squats MinIO's port relies on
    assert len(ports.brokers) == shape.brokers and len(ports.workers) == shape.workers
    every = [ports.toxiproxy_api, ports.s3_proxy, ports.minio, ports.spark_master, ports.spark_master_ui,
             ports.driver_rpc, ports.driver_blocks, ports.s3proxy, ports.s3proxy_api,
             *(p for b in ports.brokers for p in (b.proxy, b.internal, b.external, b.controller)),
             *(p for w in ports.workers for p in (w.port, w.ui, w.driver_rpc_proxy, w.driver_blocks_proxy))]
    assert every == numbers  # each number used once


def test_each_cluster_node_is_broker_and_controller_with_replication_three():
    shape = TOPOLOGIES["cluster"]
    ports = Ports.allocate(list(range(2000, 2000 + Ports.count(shape))), shape)
    configs = [_properties(kafka_properties(ports, node, Path(f"/data/{node}"), shape)) for node in (1, 2, 3)]
    voters = {c["controller.quorum.voters"] for c in configs}
    assert len(voters) == 1 and voters.pop().count("@127.0.0.1:") == 3  # one quorum of the three, loopback only
    assert [c["node.id"] for c in configs] == ["1", "2", "3"]
    for node, config in enumerate(configs, start=1):
        me = ports.brokers[node - 1]
        assert config["advertised.listeners"] == (f"INTERNAL://127.0.0.1:{me.internal},"
                                                  f"EXTERNAL://127.0.0.1:{me.proxy}")  # its own proxy
        assert (config["default.replication.factor"], config["min.insync.replicas"]) == ("3", "2")
        assert (config["offsets.topic.replication.factor"], config["transaction.state.log.min.isr"]) == ("3", "2")
        assert config["log.dirs"] == f"/data/{node}"
    single = TOPOLOGIES["single"]
    one = _properties(kafka_properties(Ports.allocate(list(range(3000, 3017)), single), 1, Path("/d"), single))
    assert (one["default.replication.factor"], one["min.insync.replicas"], one["node.id"]) == ("1", "1", "1")


def test_the_busiest_leader_leads_the_most_partitions_and_the_lowest_node_wins_a_tie():
    assert busiest_leader({0: 3, 1: 1, 2: 3, 3: 2}) == 3
    assert busiest_leader({0: 2, 1: 1, 2: 2, 3: 1}) == 1
    assert busiest_leader({0: -1, 1: 2}) == 2  # a partition without a leader counts for nobody
    with pytest.raises(FaultError, match="no partition of the job's topic has a leader"):
        busiest_leader({0: -1})


def test_each_cluster_worker_is_redirected_to_its_own_driver_proxies():
    shape = TOPOLOGIES["cluster"]
    ports = Ports.allocate(list(range(4000, 4000 + Ports.count(shape))), shape)
    second = ports.workers[1]
    assert redirect_to_link(ports, 2) == {"CHAOS_REDIRECT": f"{ports.driver_rpc}:{second.driver_rpc_proxy},"
                                                            f"{ports.driver_blocks}:{second.driver_blocks_proxy}"}
    assert driver_link("spark-worker-2") == ("spark-driver-worker-2", "spark-driver-blocks-worker-2")
    # the redirect shim preloaded beside fsfault, with the worker's own setting; never without its setting
    shims = {"fsfault": Path("/lib/fsfault.so"), "redirect": Path("/lib/redirect.so")}
    env = preloads.worker_env(shims, Path("/stack"), "spark-worker-2", redirect=redirect_to_link(ports, 2))
    assert env["LD_PRELOAD"] == "/lib/fsfault.so /lib/redirect.so"
    assert env["CHAOS_REDIRECT"] == redirect_to_link(ports, 2)["CHAOS_REDIRECT"]
    assert preloads.preloaded(shims, {"spark-worker-2": env}) == {"fsfault": ["spark-worker-2"],
                                                                 "redirect": ["spark-worker-2"]}
    single = preloads.worker_env(shims, Path("/stack"), "spark-worker")
    assert "CHAOS_REDIRECT" not in single and "redirect" not in single["LD_PRELOAD"]


def test_a_workers_link_is_its_two_proxies_and_a_stack_without_them_says_so():
    assert proxies_for("spark-driver-worker-2", []) == ("spark-driver-worker-2", "spark-driver-blocks-worker-2")
    assert proxies_for("spark-driver", []) == ("spark-driver", "spark-driver-blocks")  # every worker: links end there
    cluster = ["spark-driver", "spark-driver-blocks", "spark-driver-worker-1", "spark-driver-blocks-worker-1",
               "spark-driver-worker-2", "spark-driver-blocks-worker-2"]
    assert worker_link_proxies("spark-driver-worker-1", cluster) == ("spark-driver-worker-1",
                                                                      "spark-driver-blocks-worker-1")
    # a single-node stack, or a cluster on the containers backend (no shim preloaded): a clear error, not a no-op
    with pytest.raises(FaultError, match="no link of its own between the driver and worker-2"):
        worker_link_proxies("spark-driver-worker-2", ["spark-driver", "spark-driver-blocks"])
    with pytest.raises(FaultError, match="spark-driver-blocks-worker-2"):
        worker_link_proxies("spark-driver-worker-2", cluster[:5])
