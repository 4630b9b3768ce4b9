"""What each stack component runs: command lines, configuration files and readiness checks.

This is the one place that knows how to run Kafka, MinIO, Toxiproxy, the S3 fault proxy and Spark. Backends
only decide *where* a command runs (a local process, a container); they never build commands themselves, so
the two backends cannot drift apart.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .cds import OFF, ClassArchives
from .errors import InfraError
from .health import http_ok
from .tls import TlsFiles

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
class Topology:
    """How many brokers and Spark workers a stack runs, and the replication its topics get.

    `single` is the one-node stack every incident experiment was written for. `cluster` is shaped like what users
    run: three KRaft nodes (each broker and controller, so losing one keeps the quorum), topics with replication
    factor 3 and min.insync.replicas 2 (acks=all still succeeds with one broker down), two Spark workers.
    """

    name: str
    brokers: int
    workers: int
    replication_factor: int
    min_insync_replicas: int

    @property
    def broker_names(self) -> list[str]:
        """Component (and proxy) names of the brokers: `kafka` alone, or kafka-1 .. kafka-N."""
        return ["kafka"] if self.brokers == 1 else [f"kafka-{n}" for n in range(1, self.brokers + 1)]

    @property
    def worker_names(self) -> list[str]:
        return ["spark-worker"] if self.workers == 1 else [f"spark-worker-{n}" for n in range(1, self.workers + 1)]


TOPOLOGIES = {
    "single": Topology("single", brokers=1, workers=1, replication_factor=1, min_insync_replicas=1),
    "cluster": Topology("cluster", brokers=3, workers=2, replication_factor=3, min_insync_replicas=2),
}


def topology(name: str) -> Topology:
    if name not in TOPOLOGIES:
        raise InfraError(f"unknown topology {name!r}; allowed: {', '.join(TOPOLOGIES)}")
    return TOPOLOGIES[name]


def role_of(component: str) -> str:
    """The role a component name plays: kafka-2 is a `kafka`, spark-worker-1 a `spark-worker`."""
    head, _, tail = component.rpartition("-")
    return head if head and tail.isdigit() else component


@dataclass(frozen=True)
class BrokerPorts:
    proxy: int       # the broker's Toxiproxy proxy: what it advertises to clients (EXTERNAL)
    internal: int    # straight to the broker: inter-broker traffic and harness probes
    external: int    # the proxy's upstream
    controller: int  # its KRaft controller listener


@dataclass(frozen=True)
class WorkerPorts:
    port: int
    ui: int
    # Its own proxies to the driver's RPC and block-manager ports (a cluster's workers: driver_link)
    driver_rpc_proxy: int
    driver_blocks_proxy: int


WORKER_PORTS = len(WorkerPorts.__dataclass_fields__)


@dataclass(frozen=True)
class Ports:
    toxiproxy_api: int
    s3_proxy: int
    minio: int
    spark_master: int
    spark_master_ui: int
    driver_rpc: int
    driver_blocks: int
    s3proxy: int        # the S3 fault proxy's S3 listener: the `s3` Toxiproxy proxy's upstream
    s3proxy_api: int
    brokers: tuple[BrokerPorts, ...] = ()
    workers: tuple[WorkerPorts, ...] = ()

    SCALARS = 9  # the fields before `brokers`, in the order allocate() fills them

    @classmethod
    def count(cls, shape: Topology | None = None) -> int:
        shape = shape or TOPOLOGIES["single"]
        return cls.SCALARS + 4 * shape.brokers + WORKER_PORTS * shape.workers

    @classmethod
    def allocate(cls, numbers: list[int], shape: Topology | None = None) -> Ports:
        """Ports from `count(shape)` free port numbers: the scalars first (index 2 is MinIO's), then 4 per broker
        and 4 per worker."""
        shape = shape or TOPOLOGIES["single"]
        rest = numbers[cls.SCALARS:]
        brokers = tuple(BrokerPorts(*rest[4 * n:4 * n + 4]) for n in range(shape.brokers))
        rest = rest[4 * shape.brokers:]
        workers = tuple(WorkerPorts(*rest[WORKER_PORTS * n:WORKER_PORTS * (n + 1)]) for n in range(shape.workers))
        scalars = [f for f in cls.__dataclass_fields__ if f not in ("brokers", "workers")]
        return cls(**dict(zip(scalars, numbers)), brokers=brokers, workers=workers)


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
# Connections to a loopback port A go to port B instead, for CHAOS_REDIRECT="A:B,..." (infra/shims/redirect.c)
REDIRECT_ENV = "CHAOS_REDIRECT"


def driver_link(worker: str) -> tuple[str, str]:
    """The proxies one worker of a cluster, and every executor it launches, reach the driver's RPC and block-manager
    ports through (the redirect shim sends them there): a fault on them cuts the driver off from that worker alone."""
    node = worker.rpartition("-")[2]
    return f"spark-driver-worker-{node}", f"spark-driver-blocks-worker-{node}"


def redirect_to_link(ports: Ports, node: int) -> dict[str, str]:
    """The redirect shim's setting for worker `node`: the driver's advertised ports to its own proxies'."""
    mine = ports.workers[node - 1]
    pairs = ((ports.driver_rpc, mine.driver_rpc_proxy), (ports.driver_blocks, mine.driver_blocks_proxy))
    return {REDIRECT_ENV: ",".join(f"{advertised}:{own}" for advertised, own in pairs)}



def toxiproxy(runtime: Runtime, ports: Ports) -> LaunchSpec:
    return LaunchSpec(
        name="toxiproxy",
        argv=[runtime.toxiproxy, "-host", LOOPBACK, "-port", str(ports.toxiproxy_api)],
        ready=lambda: http_ok(f"http://{LOOPBACK}:{ports.toxiproxy_api}/version"),
        timeout=30,
    )


def s3proxy(runtime: Runtime, ports: Ports, seed: int = 1, tls: TlsFiles | None = None) -> LaunchSpec:
    """The HTTP-level S3 fault proxy (infra/s3proxy/, docs/s3proxy.md): Toxiproxy `s3` -> s3proxy -> MinIO.

    Its readiness is its own API only: MinIO may come up after it (requests meanwhile get their connection closed,
    as Toxiproxy alone did with MinIO down). With `tls` it talks HTTPS to MinIO and serves HTTPS itself, with the
    stack's certificate, so it still sees every request.
    """
    secure = ["-upstream-ca", str(tls.ca), "-tls-cert", str(tls.cert), "-tls-key", str(tls.key)] if tls else []
    return LaunchSpec(
        name="s3proxy",
        argv=[runtime.s3proxy, "-listen", f"{LOOPBACK}:{ports.s3proxy}", "-upstream",
              f"{'https' if tls else 'http'}://{LOOPBACK}:{ports.minio}", "-api", f"{LOOPBACK}:{ports.s3proxy_api}",
              "-seed", str(seed), *secure],
        ready=lambda: http_ok(f"http://{LOOPBACK}:{ports.s3proxy_api}/health"),
        timeout=30,
    )


def minio(runtime: Runtime, ports: Ports, data_dir: Path, access_key: str, secret_key: str,
          tls: TlsFiles | None = None) -> LaunchSpec:
    """MinIO; with `tls` it serves HTTPS only, with the stack's certificate (its --certs-dir)."""
    scheme = "https" if tls else "http"
    return LaunchSpec(
        name="minio",
        argv=[runtime.minio, "server", "--quiet", "--address", f"{LOOPBACK}:{ports.minio}",
              *(["--certs-dir", str(tls.directory)] if tls else []), str(data_dir)],
        # Credentials travel in the environment, never on a command line that `ps` shows.
        env={"MINIO_ROOT_USER": access_key, "MINIO_ROOT_PASSWORD": secret_key, "MINIO_BROWSER": "off",
             "MINIO_UPDATE": "off", "MINIO_CI_CD": "1"},
        ready=lambda: http_ok(f"{scheme}://{LOOPBACK}:{ports.minio}/minio/health/live",
                              verify=str(tls.ca) if tls else True),
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


# SASL on the brokers' client listener (Stack(kafka_sasl=True)): PLAIN, the one login's password read from the
# broker's environment by Kafka's EnvVarConfigProvider, so it is in no file; the username is no secret.
SASL_MECHANISM = "PLAIN"
SASL_PASSWORD_ENV = "CHAOS_KAFKA_SASL_PASSWORD"


def _sasl_properties(username: str) -> str:
    return (f"listener.name.external.sasl.enabled.mechanisms={SASL_MECHANISM}\n"
            "listener.name.external.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
            f'required user_{username}="${{env:{SASL_PASSWORD_ENV}}}";\n'
            "config.providers=env\n"
            "config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider\n")


def kafka_properties(ports: Ports, node: int, data_dir: Path, shape: Topology, sasl_username: str | None = None) -> str:
    """Broker `node` (1-based) of `shape`: each node is broker and controller, voters are all nodes. With
    `sasl_username`, clients log in on EXTERNAL (SASL_PLAINTEXT, PLAIN); INTERNAL and CONTROLLER stay plaintext."""
    # EXTERNAL is what clients use: it advertises the broker's own Toxiproxy listener, so every client connection,
    # reconnects included, crosses that broker's proxy. INTERNAL advertises itself: brokers replicate over it and
    # the harness reads offsets and lag through it while a fault cuts a proxy.
    me = ports.brokers[node - 1]
    voters = ",".join(f"{n}@{LOOPBACK}:{b.controller}" for n, b in enumerate(ports.brokers, start=1))
    rf, isr = shape.replication_factor, shape.min_insync_replicas
    external_protocol = "SASL_PLAINTEXT" if sasl_username else "PLAINTEXT"
    return f"""\
process.roles=broker,controller
node.id={node}
controller.quorum.voters={voters}
listeners=INTERNAL://{LOOPBACK}:{me.internal},EXTERNAL://{LOOPBACK}:{me.external},CONTROLLER://{LOOPBACK}:{me.controller}
advertised.listeners=INTERNAL://{LOOPBACK}:{me.internal},EXTERNAL://{LOOPBACK}:{me.proxy}
listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:{external_protocol},CONTROLLER:PLAINTEXT
inter.broker.listener.name=INTERNAL
controller.listener.names=CONTROLLER
log.dirs={data_dir}
num.partitions=4
auto.create.topics.enable=false
default.replication.factor={rf}
min.insync.replicas={isr}
offsets.topic.replication.factor={rf}
offsets.topic.num.partitions=4
transaction.state.log.replication.factor={rf}
transaction.state.log.min.isr={isr}
share.coordinator.state.topic.replication.factor={rf}
share.coordinator.state.topic.min.isr={isr}
group.initial.rebalance.delay.ms=0
log.flush.interval.messages=1000000
""" + (_sasl_properties(sasl_username) if sasl_username else "")


def kafka(runtime: Runtime, config_dir: Path, ready: Callable[[], bool], name: str = "kafka",
          sasl_password: str | None = None) -> LaunchSpec:
    """Broker `name`, configured by config_dir/<name>.properties (kafka_properties); `sasl_password`: its clients'
    login's, in its environment only."""
    properties = config_dir / f"{name}.properties"
    log4j = config_dir / "kafka-log4j2.properties"
    java = [runtime.java, "-cp", runtime.kafka_classpath, f"-Dlog4j2.configurationFile={log4j}"]
    return LaunchSpec(
        name=name,
        prepare=[*java, *runtime.archives.jvm_options("kafka-format"), *QUICK_JVM, "kafka.tools.StorageTool", "format",
                 "--config", str(properties), "--cluster-id", "chaos-suite-kraft-01", "--ignore-formatted"],
        argv=[*java, *runtime.archives.jvm_options("kafka"), "-Xmx512m", "-XX:+UseSerialGC",
              "-Djava.awt.headless=true", "kafka.Kafka", str(properties)],
        ready=ready,
        env={SASL_PASSWORD_ENV: sasl_password} if sasl_password else {},
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
                 env: dict[str, str] | None = None, node: int = 1, name: str = "spark-worker") -> LaunchSpec:
    """Worker `node` (1-based) of the stack. `env` (the S3 credentials) is inherited by every executor it starts."""
    mine = ports.workers[node - 1]
    return LaunchSpec(
        name=name,
        argv=_spark_daemon(runtime, "spark-worker", "org.apache.spark.deploy.worker.Worker",
                           [f"spark://{LOOPBACK}:{ports.spark_master}", "--host", LOOPBACK,
                            "--port", str(mine.port), "--webui-port", str(mine.ui),
                            "--cores", str(cores), "--memory", memory, "--work-dir", str(work_dir)]),
        env={**_spark_env(runtime), **(env or {})},
        ready=lambda: _worker_alive(ports, mine),
        timeout=90,
    )


def _worker_alive(ports: Ports, worker: WorkerPorts) -> bool:
    """This worker has registered with the master and is ALIVE there."""
    return _master_alive_workers(ports, port=worker.port) >= 1


def _master_alive_workers(ports: Ports, port: int | None = None) -> int:
    """-1 while the master's status page does not answer, else the number of ALIVE workers."""
    import requests

    status = requests.get(f"http://{LOOPBACK}:{ports.spark_master_ui}/json/", timeout=1.0)
    if status.status_code != 200:
        return -1
    body = status.json()
    if body.get("status") != "ALIVE":
        return -1
    return sum(1 for worker in body.get("workers", []) if worker.get("state") == "ALIVE"
               and (port is None or worker.get("port") == port))
