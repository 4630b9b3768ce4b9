"""What each stack component runs: command lines, configuration files and readiness checks.

This is the one place that knows how to run Kafka, MinIO, Toxiproxy, the S3 fault proxy and Spark. Backends
only decide *where* a command runs (a local process, a container); they never build commands themselves, so
the two backends cannot drift apart.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .cds import OFF, ClassArchives
from .health import http_ok

# JVM flags for short-lived or light daemons: C1 only and the serial collector start fastest on 2 cores.
QUICK_JVM = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xss512k"]


@dataclass(frozen=True)
class Runtime:
    """Where a backend's commands find their programs (host paths locally, image paths in containers)."""

    java: str
    kafka_classpath: str
    spark_home: str
    minio: str
    toxiproxy: str
    s3proxy: str
    archives: ClassArchives = OFF  # class-data archives this runtime's JVMs can map (infra/cds.py)


@dataclass(frozen=True)
class Ports:
    toxiproxy_api: int
    kafka_proxy: int
    kafka_internal: int
    kafka_external: int
    kafka_controller: int
    s3_proxy: int
    minio: int
    spark_master: int
    spark_master_ui: int
    spark_worker: int
    spark_worker_ui: int
    driver_rpc: int
    driver_blocks: int
    s3proxy: int        # the S3 fault proxy's S3 listener: the `s3` Toxiproxy proxy's upstream
    s3proxy_api: int

    @classmethod
    def count(cls) -> int:
        return len(cls.__dataclass_fields__)


@dataclass(frozen=True)
class LaunchSpec:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    ready: Callable[[], bool] = lambda: True
    timeout: float = 90.0
    # A command that must finish successfully before `argv` starts (Kafka's storage format).
    prepare: list[str] | None = None


LOOPBACK = "127.0.0.1"
# Spark advertises the port it binds, so executors reach the driver through a proxy that listens on the
# same port at another loopback address; the driver binds 127.0.0.1 and advertises this one.
DRIVER_ADVERTISED_HOST = "127.0.0.2"


def toxiproxy(runtime: Runtime, ports: Ports) -> LaunchSpec:
    return LaunchSpec(
        name="toxiproxy",
        argv=[runtime.toxiproxy, "-host", LOOPBACK, "-port", str(ports.toxiproxy_api)],
        ready=lambda: http_ok(f"http://{LOOPBACK}:{ports.toxiproxy_api}/version"),
        timeout=30,
    )


def s3proxy(runtime: Runtime, ports: Ports, seed: int = 1) -> LaunchSpec:
    """The HTTP-level S3 fault proxy (infra/s3proxy/, docs/s3proxy.md): Toxiproxy `s3` -> s3proxy -> MinIO.

    Its readiness is its own API only: MinIO may come up after it (requests meanwhile get their connection closed,
    as Toxiproxy alone did with MinIO down).
    """
    return LaunchSpec(
        name="s3proxy",
        argv=[runtime.s3proxy, "-listen", f"{LOOPBACK}:{ports.s3proxy}", "-upstream", f"{LOOPBACK}:{ports.minio}",
              "-api", f"{LOOPBACK}:{ports.s3proxy_api}", "-seed", str(seed)],
        ready=lambda: http_ok(f"http://{LOOPBACK}:{ports.s3proxy_api}/health"),
        timeout=30,
    )


def minio(runtime: Runtime, ports: Ports, data_dir: Path, access_key: str, secret_key: str) -> LaunchSpec:
    return LaunchSpec(
        name="minio",
        argv=[runtime.minio, "server", "--quiet", "--address", f"{LOOPBACK}:{ports.minio}", str(data_dir)],
        # Credentials travel in the environment, never on a command line that `ps` shows.
        env={"MINIO_ROOT_USER": access_key, "MINIO_ROOT_PASSWORD": secret_key, "MINIO_BROWSER": "off",
             "MINIO_UPDATE": "off", "MINIO_CI_CD": "1"},
        ready=lambda: http_ok(f"http://{LOOPBACK}:{ports.minio}/minio/health/live"),
        timeout=60,
    )


KAFKA_LOG4J = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
logger.kafka.name = kafka
logger.kafka.level = info
logger.state.name = state.change.logger
logger.state.level = warn
"""


def kafka_properties(ports: Ports, data_dir: Path) -> str:
    # EXTERNAL is what clients use: it advertises the Toxiproxy listener, so every client connection,
    # reconnects included, crosses the `kafka` proxy. INTERNAL advertises itself and lets the harness
    # read offsets and lag while a fault cuts the proxy.
    return f"""\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@{LOOPBACK}:{ports.kafka_controller}
listeners=INTERNAL://{LOOPBACK}:{ports.kafka_internal},EXTERNAL://{LOOPBACK}:{ports.kafka_external},CONTROLLER://{LOOPBACK}:{ports.kafka_controller}
advertised.listeners=INTERNAL://{LOOPBACK}:{ports.kafka_internal},EXTERNAL://{LOOPBACK}:{ports.kafka_proxy}
listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=INTERNAL
controller.listener.names=CONTROLLER
log.dirs={data_dir}
num.partitions=4
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.flush.interval.messages=1000000
"""


def kafka(runtime: Runtime, ports: Ports, config_dir: Path, ready: Callable[[], bool]) -> LaunchSpec:
    properties = config_dir / "kafka.properties"
    log4j = config_dir / "kafka-log4j2.properties"
    java = [runtime.java, "-cp", runtime.kafka_classpath, f"-Dlog4j2.configurationFile={log4j}"]
    return LaunchSpec(
        name="kafka",
        prepare=[*java, *runtime.archives.jvm_options("kafka-format"), *QUICK_JVM, "kafka.tools.StorageTool", "format",
                 "--config", str(properties), "--cluster-id", "chaos-suite-kraft-01", "--ignore-formatted"],
        argv=[*java, *runtime.archives.jvm_options("kafka"), "-Xmx512m", "-XX:+UseSerialGC",
              "-Djava.awt.headless=true", "kafka.Kafka", str(properties)],
        ready=ready,
        timeout=90,
    )


def _spark_daemon(runtime: Runtime, role: str, main_class: str, args: list[str]) -> list[str]:
    return [runtime.java, "-cp", f"{runtime.spark_home}/jars/*", "-Xmx256m", *QUICK_JVM,
            *runtime.archives.jvm_options(role), main_class, *args]


def _spark_env(runtime: Runtime) -> dict[str, str]:
    # SPARK_LOCAL_IP makes the web UIs (which otherwise bind 0.0.0.0) and executors bind loopback.
    return {"SPARK_HOME": runtime.spark_home, "SPARK_LOCAL_IP": LOOPBACK, "SPARK_SCALA_VERSION": "2.13"}


def spark_master(runtime: Runtime, ports: Ports) -> LaunchSpec:
    return LaunchSpec(
        name="spark-master",
        argv=_spark_daemon(runtime, "spark-master", "org.apache.spark.deploy.master.Master",
                           ["--host", LOOPBACK, "--port", str(ports.spark_master),
                            "--webui-port", str(ports.spark_master_ui)]),
        env=_spark_env(runtime),
        ready=lambda: _master_alive_workers(ports) >= 0,
        timeout=90,
    )


def spark_worker(runtime: Runtime, ports: Ports, work_dir: Path, cores: int, memory: str,
                 env: dict[str, str] | None = None) -> LaunchSpec:
    """`env` (the S3 credentials) is inherited by every executor the worker starts."""
    return LaunchSpec(
        name="spark-worker",
        argv=_spark_daemon(runtime, "spark-worker", "org.apache.spark.deploy.worker.Worker",
                           [f"spark://{LOOPBACK}:{ports.spark_master}", "--host", LOOPBACK,
                            "--port", str(ports.spark_worker), "--webui-port", str(ports.spark_worker_ui),
                            "--cores", str(cores), "--memory", memory, "--work-dir", str(work_dir)]),
        env={**_spark_env(runtime), **(env or {})},
        ready=lambda: _master_alive_workers(ports) >= 1,
        timeout=90,
    )


def _master_alive_workers(ports: Ports) -> int:
    """-1 while the master's status page does not answer, else the number of ALIVE workers."""
    import requests

    status = requests.get(f"http://{LOOPBACK}:{ports.spark_master_ui}/json/", timeout=1.0)
    if status.status_code != 200:
        return -1
    body = status.json()
    if body.get("status") != "ALIVE":
        return -1
    return sum(1 for worker in body.get("workers", []) if worker.get("state") == "ALIVE")
