"""The Stack: one context manager that starts Kafka, MinIO, Toxiproxy, the S3 fault proxy and Spark, says where
they are, and tears them down on success, failure and interrupt.

    with Stack(run_dir, backend="local") as stack:
        stack.info.kafka_bootstrap      # through the `kafka` proxy
        stack.toxiproxy.add_toxic(...)  # TCP-level faults
        stack.s3proxy.add_rule(...)     # HTTP-level S3 faults (docs/s3proxy.md)
        stack.handles["kafka"].signal(SIGSTOP)

S3 traffic: clients -> Toxiproxy `s3` (s3_endpoint) -> s3proxy -> MinIO; s3_direct_endpoint bypasses both.

Backends (infra/local.py, infra/containers.py) only launch commands that infra/components.py builds;
everything else — ports, credentials, proxies, readiness order, teardown — lives here, once. What clients reach the
stack by (StackInfo) and log in with (Credentials, KafkaLogin) is defined in infra/access.py.
"""
from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol, Self, TypeVar

from . import artifacts, components, preloads, registry
from .access import Credentials, DriverSlot, KafkaLogin, StackInfo
from .artifacts import ArtifactPaths
from .cds import ArchiveSet, ClassArchives
from .components import DRIVER_ADVERTISED_HOST, LOOPBACK, LaunchSpec, Ports, Runtime
from .errors import ComponentError, InfraError
from .health import wait_until
from .ports import free_ports
from .procs import ManagedProcess
from .s3proxy import S3ProxyClient
from .tls import TlsFiles, make_certificates
from .toxiproxy import ToxiproxyClient

_T = TypeVar("_T")

# Proxies besides one per broker (named like the broker: `kafka`, or kafka-1 .. kafka-3 in a cluster).
PROXIES = ("s3", "spark-driver", "spark-driver-blocks")
# Launch order where it matters. A worker that registers while the master is still in STANDBY gets
# MasterInStandby, ignores it and retries only after 5-15 s (Spark's fixed, fuzzed interval): that race
# made stack starts take 6 s or 16-20 s at random, on both backends. Keyed by role (infra.components.role_of).
STARTS_AFTER = {"spark-worker": "spark-master"}
BUCKET = "chaos"


class Handle(Protocol):
    """A running component as a backend sees it: a process group or a container."""

    name: str
    log_path: Path
    @property
    def pid(self) -> int | None:
        """The process's pid (a container's: its command as the host sees it); None where this host cannot see it."""

    def alive(self) -> bool: ...
    def signal(self, signum: int) -> None: ...
    def stop(self, grace: float = 5.0) -> None: ...


_H = TypeVar("_H", bound=Handle)  # adopt() gives back the handle it was given, as its own type


class Backend(Protocol):
    name: str

    def runtime(self, host_artifacts: ArtifactPaths, host_archives: ClassArchives) -> Runtime:
        """Program paths for this backend's commands, and which of the host's class-data archives its JVMs
        can map (those running on this host's JDK and jars)."""
    def launch(self, spec: LaunchSpec, log_path: Path) -> Handle: ...
    def run_to_completion(self, spec_name: str, argv: list[str], env: dict[str, str], log_path: Path,
                          timeout: float) -> int: ...
    def close(self) -> None: ...


class StackLike(Protocol):
    """What a run uses of a stack: the stack this module starts (`Stack`, on the local or containers backend), or an
    environment described by a target file (chaos/target/stack.py, `chaos run --target`). Faults, probes and the
    job's launch go through these members only."""

    run_dir: Path
    handles: dict[str, Handle]  # the servers the suite may signal and restart (none on a target)

    @property
    def log_dir(self) -> Path: ...
    @property
    def info(self) -> StackInfo: ...
    @property
    def toxiproxy(self) -> ToxiproxyClient: ...
    @property
    def s3proxy(self) -> S3ProxyClient | None: ...
    def s3_client(self, direct: bool = False, endpoint: str | None = None): ...
    def job_env(self) -> dict[str, str]: ...
    def job_deployment(self, args: list[str]) -> list[str] | None: ...
    def kafka_client_login(self) -> dict[str, str]: ...
    def adopt(self, launch: Callable[[], _H], component: str | None = None) -> _H: ...
    def restart(self, component: str, grace: float = 5.0) -> float: ...
    def reset(self) -> None: ...


def _backend(name: str, run_dir: Path) -> Backend:
    if name == "local":
        from .local import LocalBackend

        return LocalBackend()
    if name == "containers":
        from .containers import ContainersBackend

        # Told the run directory, not left to guess it from a log path: a lane's or a cluster's logs are a level
        # deeper (logs/<lane>/), and the whole run directory must be mounted and labelled.
        return ContainersBackend(run_dir=run_dir)
    raise InfraError(f"unknown backend {name!r}; allowed: local, containers")


class StartedInContext:
    """`with X(...) as x:` runs x.start() and always x.close() on the way out, also when start() fails part way (what
    it started is torn down)."""

    def start(self) -> object:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Stack(StartedInContext):
    # 4 worker cores on a 2-core machine: slots, not CPUs. Each driver takes 2 (spark.cores.max), so a second
    # driver at the same time (a colliding deployment) gets executors instead of waiting forever for cores.
    def __init__(self, run_dir: Path, backend: str | Backend = "local", worker_cores: int = 4,
                 worker_memory: str = "3g", keep_data: bool = False,
                 progress: Callable[[str], None] = lambda message: None,
                 class_archives: ClassArchives | None = None, lane: str | None = None,
                 credentials: Credentials | None = None, topology: str = "single", s3_tls: bool = False,
                 kafka_login: KafkaLogin | None = None):
        self.run_dir = Path(run_dir).resolve()
        # A run's lanes (chaos run --lanes) each start a stack in the same run directory: its files and logs go
        # under stack/<lane>/ and logs/<lane>/; paths recorded relative to the run directory stay valid.
        self.lane = lane
        self.backend = _backend(backend, self.run_dir) if isinstance(backend, str) else backend
        self.shape = components.topology(topology)
        # The worker slots are shared out: a cluster's two workers hold as many slots as the single one
        self.worker_cores = max(1, worker_cores // self.shape.workers)
        self.worker_memory = worker_memory
        self.keep_data = keep_data
        self.progress = progress
        self.class_archives = class_archives  # None: the host's recorded archives; the training passes `record`
        # MinIO's keys: random per run, or given (`chaos stack up --write-target`: from its environment, so another
        # process with the same environment can use the stack; they are still never written anywhere)
        self.credentials = credentials or Credentials.random()
        self.s3_tls = s3_tls  # MinIO and the S3 fault proxy serve HTTPS with a CA made for this stack (infra/tls.py)
        # SASL on the brokers' proxied listener, with this login (never written anywhere); None: plaintext
        self.kafka_login = kafka_login
        self._tls: TlsFiles | None = None
        self.handles: dict[str, Handle] = {}
        self._info: StackInfo | None = None  # set by start(); `info`, `toxiproxy`, `s3proxy` raise before it
        self._toxiproxy: ToxiproxyClient | None = None
        self._s3proxy: S3ProxyClient | None = None
        self.children: list[Handle] = []  # drivers and other processes started against the stack
        self._specs: dict[str, LaunchSpec] = {}  # what start() launched, for restart()
        self._ports: Ports | None = None
        self._linked: list[str] = []  # the workers that reach the driver through proxies of their own
        self._lock = threading.Lock()
        self._closing = False

    # -- lifecycle -------------------------------------------------------------------------------------
    @property
    def stack_dir(self) -> Path:
        return self.run_dir / "stack" / self.lane if self.lane else self.run_dir / "stack"

    @property
    def log_dir(self) -> Path:
        return self.run_dir / "logs" / self.lane if self.lane else self.run_dir / "logs"

    def start(self) -> StackInfo:
        started = time.monotonic()
        _check_free_space(self.run_dir)
        # What runs killed with SIGKILL left running is stopped first; this run records what it starts.
        registry.cleanup_dead(self.progress)
        self._record = registry.RunRecord(owner=registry.owner_label(), pid=os.getpid(), run_dir=str(self.run_dir),
                                          backend=self.backend.name)
        self._record.save()
        # The driver always runs on this host, so the jars it passes to Spark are host paths.
        host_artifacts = artifacts.verify()
        host_archives = (self.class_archives if self.class_archives is not None
                         else ArchiveSet.for_host(host_artifacts, host_spark_home()).archives())
        runtime = self.backend.runtime(host_artifacts, host_archives)
        # Drivers always run on this host; executors run where the backend runs the Spark worker.
        driver_archives = host_archives.only(("driver-",)).merged(runtime.archives.only(("executor-",)))
        shape = self.shape
        ports = Ports.allocate(free_ports(Ports.count(shape), hosts=(LOOPBACK, DRIVER_ADVERTISED_HOST)), shape)
        for directory in ("kafka-data", "minio-data", "spark-work", "config"):
            (self.stack_dir / directory).mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        config = self.stack_dir / "config"
        for node, broker in enumerate(shape.broker_names, start=1):
            self._broker_data(broker).mkdir(parents=True, exist_ok=True)
            (config / f"{broker}.properties").write_text(components.kafka_properties(
                ports, node, self._broker_data(broker), shape,
                sasl_username=self.kafka_login.username if self.kafka_login else None))
        (config / "kafka-log4j2.properties").write_text(components.KAFKA_LOG4J)
        for worker in shape.worker_names:
            self._worker_dir(worker).mkdir(parents=True, exist_ok=True)
        # The shims a local worker preloads (infra/preloads.py); a worker in a container runs without them.
        # In a cluster each worker reaches the driver through proxies of its own (components.driver_link), through
        # the redirect shim.
        preload_env = {worker: preloads.worker_env(host_artifacts.shims, self.stack_dir, worker,
                                                   redirect=components.redirect_to_link(ports, node)
                                                   if shape.workers > 1 else None)
                       if self.backend.name == "local" else {}
                       for node, worker in enumerate(shape.worker_names, start=1)}
        disk_fault_controls = {worker: env["FSFAULT_CONTROL"] for worker, env in preload_env.items()
                               if "FSFAULT_CONTROL" in env}
        for worker, control in disk_fault_controls.items():
            Path(control).parent.mkdir(parents=True, exist_ok=True)
            preloads.local_dir(self.stack_dir, worker).mkdir(parents=True, exist_ok=True)
        self._toxiproxy = ToxiproxyClient(LOOPBACK, ports.toxiproxy_api)
        self._s3proxy = S3ProxyClient(f"http://{LOOPBACK}:{ports.s3proxy_api}")
        if self.s3_tls:
            self._tls = make_certificates(self.stack_dir / "tls", keytool=str(Path(runtime.java).parent / "keytool")
                                          if (Path(runtime.java).parent / "keytool").exists() else None)
        tls, scheme = self._tls, "https" if self._tls else "http"

        specs = [
            components.s3proxy(runtime, ports, tls=tls),
            components.toxiproxy(runtime, ports),
            components.minio(runtime, ports, self.stack_dir / "minio-data", self.credentials.access_key,
                             self.credentials.secret_key, tls=tls),
            *(components.kafka(runtime, config, ready=self._kafka_ready(ports, node), name=broker,
                               sasl_password=self.kafka_login.password if self.kafka_login else None)
              for node, broker in enumerate(shape.broker_names, start=1)),
            components.spark_master(runtime, ports),
            # Executors inherit the worker's environment: that is how they get the S3 credentials and the shims.
            *(components.spark_worker(runtime, ports, self._worker_dir(worker), self.worker_cores,
                                      self.worker_memory, env={**self._secrets_env(), **preload_env[worker]},
                                      node=node, name=worker)
              for node, worker in enumerate(shape.worker_names, start=1)),
        ]
        self._linked = [worker for worker, env in preload_env.items() if components.REDIRECT_ENV in env]
        seconds: dict[str, float] = {}
        ready = {spec.name: threading.Event() for spec in specs}
        self._ports = ports
        self._specs = {spec.name: spec for spec in specs}

        def bring_up(spec: LaunchSpec) -> None:
            try:
                seconds[spec.name] = self._bring_up(spec, ports, ready)
            finally:
                ready[spec.name].set()  # also on failure: nothing waits for a component that will not come

        with ThreadPoolExecutor(max_workers=len(specs)) as pool:
            futures = [pool.submit(bring_up, spec) for spec in specs]
            errors = [e for f in futures if (e := f.exception()) is not None]
        if errors:
            raise next((e for e in errors if isinstance(e, InfraError)), errors[0])

        self._create_bucket(ports)
        seconds["total"] = round(time.monotonic() - started, 2)
        self._info = StackInfo(
            backend=self.backend.name,
            run_dir=str(self.run_dir),
            kafka_bootstrap=",".join(f"{LOOPBACK}:{b.proxy}" for b in ports.brokers),
            kafka_internal_bootstrap=",".join(f"{LOOPBACK}:{b.internal}" for b in ports.brokers),
            s3_endpoint=f"{scheme}://{LOOPBACK}:{ports.s3_proxy}",
            s3_direct_endpoint=f"{scheme}://{LOOPBACK}:{ports.minio}",
            s3_ca_bundle=str(tls.ca) if tls else "",
            s3_truststore=str(tls.truststore) if tls else "",
            kafka_sasl_mechanism=components.SASL_MECHANISM if self.kafka_login else "",
            kafka_sasl_username=self.kafka_login.username if self.kafka_login else "",
            bucket=BUCKET,
            toxiproxy_api=f"http://{LOOPBACK}:{ports.toxiproxy_api}",
            spark_master=f"spark://{LOOPBACK}:{ports.spark_master}",
            spark_master_ui=f"http://{LOOPBACK}:{ports.spark_master_ui}",
            spark_jars=[str(p) for p in host_artifacts.spark_jars],
            # For drivers, which always run on this host: the host's Spark, whatever the servers run from.
            spark_home=host_spark_home(),
            driver=DriverSlot(LOOPBACK, DRIVER_ADVERTISED_HOST, ports.driver_rpc, ports.driver_blocks),
            proxies={name: {"listen": p.listen, "upstream": p.upstream}
                     for name, p in self.toxiproxy.proxies().items()},
            s3proxy_api=self.s3proxy.api,
            start_seconds=seconds,
            class_archives=driver_archives.to_dict(),
            topology=shape.name,
            brokers=shape.broker_names,
            workers=shape.worker_names,
            replication_factor=shape.replication_factor,
            min_insync_replicas=shape.min_insync_replicas,
            preloaded=preloads.preloaded(host_artifacts.shims, preload_env),
            disk_fault_controls=disk_fault_controls,
        )
        (self.stack_dir / "stack.json").write_text(self.info.to_json())
        return self.info

    def _bring_up(self, spec: LaunchSpec, ports: Ports, ready: dict[str, threading.Event]) -> float:
        """Prepare, launch and wait until ready; seconds it took. Shared by start() and restart().

        `ready` holds an event per component, set once it is ready (Toxiproxy's once its proxies exist).
        """
        t0 = time.monotonic()
        log_path = self.log_dir / f"{spec.name}.log"
        role = components.role_of(spec.name)
        if role in STARTS_AFTER:
            ready[STARTS_AFTER[role]].wait(spec.timeout)
        if spec.prepare and not self._closing:
            code = self.backend.run_to_completion(spec.name + "-prepare", spec.prepare, spec.env, log_path,
                                                  timeout=spec.timeout)
            if code != 0:
                raise ComponentError(f"{spec.name} preparation failed with exit {code}; see {log_path}")
        handle = self.adopt(lambda: self.backend.launch(spec, log_path), spec.name)
        self.progress(f"started {spec.name}, waiting until it is ready")
        if role == "kafka":  # its readiness goes through its proxy
            ready["toxiproxy"].wait(spec.timeout)
        wait_until(spec.name, spec.ready, spec.timeout, log_path,
                   alive=lambda: handle.alive() and not self._closing)
        if spec.name == "toxiproxy":
            # The `s3` proxy's upstream is s3proxy: it must answer before the proxy can carry traffic.
            ready["s3proxy"].wait(spec.timeout)
            self._create_proxies(ports)
        seconds = round(time.monotonic() - t0, 2)
        self.progress(f"{spec.name} ready in {seconds:.1f} s")
        return seconds

    def restart(self, component: str, grace: float = 5.0) -> float:
        """Stop one server component and start it again in place; seconds until it is ready again.

        Same command, ports, configuration and data directory, so clients reconnect to the same address and
        find their data (a broker killed with SIGKILL that comes back). Works on a component that is already
        dead. A restarted Toxiproxy gets its proxies again, without toxics; a restarted s3proxy starts without
        rules (its held requests were dropped with it). Drivers are not components:
        restart them with infra.driver.launch_driver.
        """
        specs = self._specs
        if component not in specs:
            raise InfraError(f"cannot restart {component!r}: not a component of this stack "
                             f"(components: {', '.join(specs) or 'none, the stack is not started'})")
        if self._closing:
            raise InfraError(f"cannot restart {component}: the stack is shutting down")
        self.progress(f"restarting {component}")
        old = self.handles.get(component)
        if old is not None:
            old.stop(grace)
        ready = {name: threading.Event() for name in specs}
        for event in ready.values():
            event.set()  # every other component is up (a restarted Toxiproxy recreates its proxies itself)
        if self._ports is None:
            raise InfraError(f"cannot restart {component}: the stack was never started")
        return self._bring_up(specs[component], self._ports, ready)

    def _broker_data(self, broker: str) -> Path:
        return self.stack_dir / "kafka-data" / broker if self.shape.brokers > 1 else self.stack_dir / "kafka-data"

    def _worker_dir(self, worker: str) -> Path:
        return self.stack_dir / "spark-work" / worker if self.shape.workers > 1 else self.stack_dir / "spark-work"

    def _create_proxies(self, ports: Ports) -> None:
        routes = {
            **{broker: (f"{LOOPBACK}:{b.proxy}", f"{LOOPBACK}:{b.external}")
               for broker, b in zip(self.shape.broker_names, ports.brokers)},
            "s3": (f"{LOOPBACK}:{ports.s3_proxy}", f"{LOOPBACK}:{ports.s3proxy}"),
            "spark-driver": (f"{DRIVER_ADVERTISED_HOST}:{ports.driver_rpc}", f"{LOOPBACK}:{ports.driver_rpc}"),
            "spark-driver-blocks": (f"{DRIVER_ADVERTISED_HOST}:{ports.driver_blocks}",
                                    f"{LOOPBACK}:{ports.driver_blocks}"),
        }
        # A worker's own link ends at the shared proxies, so a fault on `spark-driver` still reaches every executor.
        for worker in self._linked:
            mine = ports.workers[self.shape.worker_names.index(worker)]
            rpc, blocks = components.driver_link(worker)
            routes[rpc] = (f"{DRIVER_ADVERTISED_HOST}:{mine.driver_rpc_proxy}", routes["spark-driver"][0])
            routes[blocks] = (f"{DRIVER_ADVERTISED_HOST}:{mine.driver_blocks_proxy}", routes["spark-driver-blocks"][0])
        for name in [*self.shape.broker_names, *PROXIES, *(p for w in self._linked for p in components.driver_link(w))]:
            listen, upstream = routes[name]
            self.toxiproxy.create_proxy(name, listen=listen, upstream=upstream)

    def _kafka_ready(self, ports: Ports, node: int) -> Callable[[], bool]:
        """Broker `node` answers through its proxy and the cluster's metadata lists it (it has joined)."""
        def ready() -> bool:
            from confluent_kafka.admin import AdminClient

            admin = AdminClient({"bootstrap.servers": f"{LOOPBACK}:{ports.brokers[node - 1].proxy}",
                                 "log_level": 0, **self.kafka_client_login()})
            metadata = admin.list_topics(timeout=2)
            return node in metadata.brokers
        return ready

    def _create_bucket(self, ports: Ports) -> None:
        client = self.s3_client(direct=True,
                                endpoint=f"{'https' if self._tls else 'http'}://{LOOPBACK}:{ports.minio}")
        if not client.bucket_exists(BUCKET):
            client.make_bucket(BUCKET)

    def s3_client(self, direct: bool = False, endpoint: str | None = None):
        """A MinIO client through the `s3` proxy (or straight to MinIO for harness probes)."""
        from minio import Minio

        endpoint = endpoint or (self.info.s3_direct_endpoint if direct else self.info.s3_endpoint)
        secure = endpoint.startswith("https://")
        return Minio(endpoint.split("://", 1)[-1], access_key=self.credentials.access_key,
                     secret_key=self.credentials.secret_key, secure=secure,
                     http_client=trusting(self._tls.ca) if secure and self._tls else None)

    def job_env(self) -> dict[str, str]:
        """Environment for a Spark driver process running against this stack (secrets only here)."""
        # Python workers (also the driver-side ones transformWithState starts) must be this interpreter,
        # which has the pinned packages; a bare `python3` on PATH may lack pandas.
        # With TLS on S3 the job's own S3 client (minio, urllib3) trusts the stack's CA through SSL_CERT_FILE; its
        # JVMs through the trust store in their options (infra/driver.py java_options).
        return {**self._secrets_env(), "CHAOS_STACK_JSON": str(self.stack_dir / "stack.json"),
                "SPARK_LOCAL_IP": LOOPBACK, "SPARK_HOME": self.info.spark_home,
                "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
                **({"SSL_CERT_FILE": self.info.s3_ca_bundle} if self.info.s3_ca_bundle else {})}

    def command_of(self, component: str) -> list[str]:
        """The command line `component` was started with (what a hook can find its process by)."""
        if component not in self._specs:
            raise InfraError(f"{component!r} is not a component of this stack")
        return list(self._specs[component].argv)

    def kafka_client_login(self) -> dict[str, str]:
        """librdkafka settings for the brokers' proxied listener (what the job and the producer use): the SASL login
        when the brokers ask for one, else none."""
        return self.kafka_login.client_config() if self.kafka_login else {}

    def _secrets_env(self) -> dict[str, str]:
        """What drivers and executors read their secrets from: the S3 keys, and the Kafka login if there is one."""
        return {**self.credentials.as_env(), **(self.kafka_login.as_env() if self.kafka_login else {})}

    def job_deployment(self, args: list[str]) -> list[str] | None:
        """The job's deployment options for `args`: None, since this stack is described by its StackInfo alone and
        infra.driver.job_args makes them from it (a target makes its own: chaos/target/stack.py)."""
        return None

    def adopt(self, launch: Callable[[], _H], component: str | None = None) -> _H:
        """Launch under the stack's lock and register the result, so teardown always sees it.

        Once teardown has begun nothing new starts: an interrupt during start-up cannot race a launch.
        """
        with self._lock:
            if self._closing:
                raise InfraError("the stack is shutting down; nothing new is started")
            handle = launch()
            if component is None:
                self.children.append(handle)
            else:
                self.handles[component] = handle
            record = getattr(self, "_record", None)
            if record is not None and isinstance(handle, ManagedProcess):  # containers are cleaned by label
                record.groups[f"{component or handle.name}-{handle.pid}"] = handle.pid
                record.save()
            return handle

    @property
    def info(self) -> StackInfo:
        """Where the started stack's servers listen; InfraError before start() has made it."""
        return self._started(self._info, "info")

    @property
    def toxiproxy(self) -> ToxiproxyClient:
        return self._started(self._toxiproxy, "toxiproxy")

    @property
    def s3proxy(self) -> S3ProxyClient:
        return self._started(self._s3proxy, "s3proxy")

    @staticmethod
    def _started(value: _T | None, name: str) -> _T:
        if value is None:
            raise InfraError(f"the stack's {name} is not there yet: start the stack first (with Stack(...) as stack)")
        return value

    def reset(self) -> None:
        """Between experiments: every toxic removed, every proxy enabled, every s3proxy rule removed and every
        request it holds released (forwarded), every disk fault switched off; processes keep running. All are tried;
        the first failure is raised."""
        failures: list[InfraError] = []
        if self._info is not None:
            for control in self._info.disk_fault_controls.values():
                Path(control).unlink(missing_ok=True)
        if self._toxiproxy is not None:
            try:
                self.toxiproxy.reset()
            except InfraError as error:
                failures.append(error)
        if self._s3proxy is not None:
            try:
                self.s3proxy.clear()
            except InfraError as error:
                failures.append(error)
        if failures:
            raise failures[0]

    def close(self) -> None:
        with self._lock:
            if self._closing:
                return
            self._closing = True
        with signals_deferred():
            try:
                if self._toxiproxy is not None and ("toxiproxy" in self.handles or "s3proxy" in self.handles):
                    try:
                        self.reset()  # also releases requests s3proxy holds, so drivers can stop cleanly
                    except InfraError:
                        pass  # the proxy servers die with the stack anyway
                for group in (self.children, list(self.handles.values())):  # drivers before servers
                    with ThreadPoolExecutor(max_workers=max(1, len(group))) as pool:
                        list(pool.map(lambda h: h.stop(), group))
                self.backend.close()
            finally:
                if not self.keep_data:
                    for directory in ("kafka-data", "minio-data", "spark-work"):
                        shutil.rmtree(self.stack_dir / directory, ignore_errors=True)
                record = getattr(self, "_record", None)
                if record is not None and not any(h.alive() for h in [*self.children, *self.handles.values()]):
                    record.remove()  # kept if something survived teardown: the next start stops it


def trusting(ca_bundle: Path | str):
    """An HTTP client for the minio package that trusts this CA (the package's own default trusts certifi's)."""
    import urllib3

    return urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_certs=str(ca_bundle),
                               retries=urllib3.Retry(total=5, backoff_factor=0.2,
                                                     status_forcelist=[500, 502, 503, 504]))


def host_spark_home() -> str:
    """The Spark home of this venv's pyspark: the classpath drivers and local daemons run with, and the key of the
    class-data archives recorded for it."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise InfraError("pyspark is not installed in this environment; run: make setup")
    return str(Path(spec.origin).parent)


# Kafka's and MinIO's data, Spark's work directories and every log of a suite run live in the run directory.
MIN_FREE_BYTES = 512 * 1024 * 1024


def _check_free_space(run_dir: Path) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(run_dir).free
    if free < MIN_FREE_BYTES:
        raise InfraError(f"only {free / 2**20:.0f} MB free for the run directory {run_dir}; a run needs at least "
                         f"{MIN_FREE_BYTES / 2**20:.0f} MB (broker and MinIO data, Spark work, logs): free space or "
                         f"give --out another directory")


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM while tearing down, so a second Ctrl-C cannot leave processes behind.

    The signals are re-delivered once teardown is done. Only the main thread may change handlers.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: pending.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for signum in pending[:1]:
            signal.raise_signal(signum)
