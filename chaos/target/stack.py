"""A target as the stack of a run (`chaos run --target FILE`): the same members a run uses of infra.stack.Stack
(infra.stack.StackLike), made of an environment the suite did not start.

- Kafka and S3 are the target's, through its proxies; the harness's probes use the direct endpoints the file gives
  (`kafka.direct_bootstrap_servers`, `s3.direct_endpoint`), else the proxied ones.
- Network faults go through the target's existing Toxiproxy (`toxiproxy.api`), by role (`toxiproxy.proxies`); only
  those proxies are ever changed or reset, since the server may carry other people's proxies.
- S3 faults and lifecycle triggers go through the S3 fault proxy the file names (`s3.fault_proxy`), if any.
- The job's driver runs on this host, as for the local stack, with the target's master, Spark settings and
  spark-submit arguments (through pyspark's PYSPARK_SUBMIT_ARGS), and the credentials read from the variables the
  file names: a value never reaches a command line or a file.
- The target's servers are reached through its hooks only (`HookHandle`): a process fault signals one by running
  the hook's command, a killed broker or MinIO comes back by its `restart` command, and it counts as alive while its
  direct endpoint accepts connections. A process fault that no hook can carry out is SKIPPED before its arm starts
  (chaos/target/gate.py).

What a target file can say and `chaos run` does not use yet is refused when the run starts, with one line: a key
prefix, a CA bundle, a SASL login, a `mode: start` Toxiproxy, cluster deploy mode.
"""
from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit

from infra.access import DriverSlot, StackInfo
from infra.driver import ENV_CREDENTIALS_PROVIDER
from infra.errors import InfraError
from infra.s3proxy import S3ProxyClient
from infra.stack import Handle, StartedInContext, host_spark_home, signals_deferred
from infra.toxiproxy import ToxiproxyClient
from job.settings import from_args

from .. import errors
from .model import Hook, Target

_H = TypeVar("_H", bound=Handle)

# The driver's ports, which executors reach it on: a second driver at the same time (a colliding deployment) must
# bind ports of its own.
DRIVER_PORT_KEYS = ("spark.driver.port", "spark.driver.blockManager.port")


def unsupported(target: Target) -> str | None:
    """What this target asks for that `chaos run --target` cannot do yet (docs/targets.md), or None."""
    if target.s3.prefix.strip("/"):
        return "s3.prefix: chaos run keeps each deployment at the bucket's top level; give a bucket of its own"
    if target.toxiproxy.mode != "existing":
        return "toxiproxy mode: start: chaos run does not start a Toxiproxy yet; give an existing one (api, proxies)"
    if target.spark.deploy_mode != "client":
        return "spark.deploy_mode: cluster: chaos run starts the job's driver itself, on this host (client mode)"
    return None


class RoleProxies(ToxiproxyClient):
    """An existing Toxiproxy seen by role: `kafka`, `s3`, ... name the target's proxies (`toxiproxy.proxies`), and a
    reset touches those proxies only."""

    def __init__(self, api: str, names: dict[str, str], timeout: float = 5.0):
        parts = urlsplit(api)
        super().__init__(parts.hostname or "", parts.port or 8474, timeout)
        self.names = names

    def proxy(self, name: str):
        if name not in self.names:  # never another proxy of a shared server, whatever its name
            raise InfraError(f"the target names no proxy for {name!r} (toxiproxy.proxies: {', '.join(self.names)})")
        return super().proxy(self.names[name])

    def reset(self) -> None:
        """Every toxic removed from the target's proxies and each of them enabled; other proxies left alone."""
        for role in self.names:
            for toxic in self.toxics(role):
                self.remove_toxic(role, toxic)
            if not self.proxy(role).enabled:
                self.set_enabled(role, True)


HOOK_TIMEOUT_S = 60.0     # one hook command (an ssh or kubectl line)
READY_TIMEOUT_S = 180.0   # a restarted server's endpoint accepting connections again


def _accepts(addresses: list[str], timeout: float = 2.0) -> bool:
    """Whether any of these HOST:PORT addresses accepts a TCP connection: a killed server's does not; a paused one's
    still does (its kernel accepts), and a paused server is alive."""
    for address in addresses:
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return True
        except OSError:
            continue
    return False


class HookHandle:
    """A server of the target as the process faults see it (infra.stack.Handle): signalled by running its role's
    hook, restarted by the hook's `restart` command, alive while its direct endpoint accepts connections (`addresses`;
    none: taken as alive, e.g. executors, which their worker relaunches). `node`: the node a per-node hook aims at
    (a broker of several); none for a hook that acts on the whole role, or on the node each signal names."""

    def __init__(self, role: str, hook: Hook, addresses: list[str], log_path: Path, node: int | None = None):
        self.name, self.role, self.hook, self.addresses, self.log_path = role, role, hook, addresses, log_path
        self.node = node

    @property
    def pid(self) -> int | None:
        return None  # on the target's hosts, not this one

    def alive(self) -> bool:
        return _accepts(self.addresses) if self.addresses else True

    def _run(self, command: str, what: str) -> None:
        # A hook is a shell line from the target file (ssh, kubectl, kill); its output goes to the run's log, never to
        # the console, since a platform's tool may print more than the operator wants shown.
        with open(self.log_path, "a") as log:
            log.write(f"$ {command}\n")
            log.flush()
            try:
                done = subprocess.run(command, shell=True, stdout=log, stderr=subprocess.STDOUT, timeout=HOOK_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise InfraError(f"hook {self.role} ({what}) did not finish in {HOOK_TIMEOUT_S:.0f} s; see "
                                 f"{self.log_path}") from None
        if done.returncode != 0:
            raise InfraError(f"hook {self.role} ({what}) exited {done.returncode}; see {self.log_path}")

    def nodes_for(self, node: int | None) -> list[int | None]:
        """The nodes one signal reaches: the one asked for or this handle's; a per-node hook with neither runs once
        per node (every executor); a hook without {node} runs once."""
        if not self.hook.per_node:
            return [None]
        if node is not None or self.node is not None:
            return [node if node is not None else self.node]
        return list(range(1, (self.hook.nodes or 1) + 1))

    def signal(self, signum: int, node: int | None = None) -> None:
        name = signal.Signals(signum).name.removeprefix("SIG")
        for each in self.nodes_for(node):
            self._run(self.hook.signal.format(signal=name, role=self.role, node=each or ""),
                      f"signal {name}" + (f", node {each}" if each else ""))

    def restart(self) -> float:
        """Run the restart command and wait until the endpoint accepts connections; seconds it took."""
        if self.hook.restart is None:
            raise InfraError(f"hook {self.role} has no restart command: a killed {self.role} stays down")
        started = time.monotonic()
        self._run(self.hook.restart.format(role=self.role, node=self.node or ""), "restart")
        while not self.alive():
            if time.monotonic() - started > READY_TIMEOUT_S:
                raise InfraError(f"{self.role} did not accept connections {READY_TIMEOUT_S:.0f} s after its restart "
                                 "hook")
            time.sleep(0.5)
        return time.monotonic() - started

    def stop(self, grace: float = 5.0) -> None:
        pass  # the target's servers outlive the run


class TargetStack(StartedInContext):
    """infra.stack.StackLike on a target. `with TargetStack(run_dir, target) as stack:` checks what the run needs
    (the credentials' variables, the proxies), and tears down what the run started (drivers) on the way out."""

    def __init__(self, run_dir: Path, target: Target, progress: Callable[[str], None] = lambda message: None):
        self.run_dir = Path(run_dir).resolve()
        self.target = target
        self.progress = progress
        self.handles: dict[str, Handle] = {}  # the target's servers that have hooks (HookHandle), by component
        self.children: list[Handle] = []
        self._info: StackInfo | None = None
        self._toxiproxy: RoleProxies | None = None
        self._s3proxy: S3ProxyClient | None = None
        self._lock = threading.Lock()
        self._closing = False

    # -- lifecycle -------------------------------------------------------------------------------------------------
    def start(self) -> StackInfo:
        target = self.target
        problem = unsupported(target)
        if problem is not None:
            raise errors.ChaosError(f"{target.source}: {problem}", errors.USAGE)
        unset = [name for name in target.credentials.values() if not os.environ.get(name)]
        if unset:
            raise errors.ChaosError(f"{target.source}: the environment variable(s) {', '.join(unset)} named under "
                                    "credentials are not set; set them in the environment of chaos run",
                                    errors.USAGE)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        proxies = dict(target.toxiproxy.proxies)
        assert target.toxiproxy.api is not None  # an existing Toxiproxy has its api (model.py)
        self._toxiproxy = RoleProxies(target.toxiproxy.api, proxies)
        missing = [f"{role} ({name})" for role, name in proxies.items() if name not in self._toxiproxy.proxies()]
        if missing:
            raise InfraError(f"{target.source}: the Toxiproxy at {target.toxiproxy.api} has no proxy for "
                             f"{', '.join(missing)}; run chaos doctor --target {target.source}")
        self._toxiproxy.reset()
        if target.s3.fault_proxy:
            self._s3proxy = S3ProxyClient(target.s3.fault_proxy)
            self._s3proxy.clear()
        brokers = sorted((role for role in proxies if role.startswith("kafka-")), key=lambda r: int(r[6:]))
        kafka = target.kafka
        conf = target.spark.conf
        self._info = StackInfo(
            backend="target", run_dir=str(self.run_dir),
            kafka_bootstrap=",".join(kafka.bootstrap_servers),
            kafka_internal_bootstrap=",".join(kafka.direct_bootstrap_servers or kafka.bootstrap_servers),
            s3_endpoint=target.s3.url, s3_direct_endpoint=target.s3.direct_url(), bucket=target.s3.bucket,
            toxiproxy_api=target.toxiproxy.api, spark_master=target.spark.master,
            spark_master_ui=target.spark.master_ui or "", spark_jars=[], spark_home=host_spark_home(),
            # Where executors reach the driver, as the target's Spark settings say (nothing: Spark's defaults).
            driver=DriverSlot(conf.get("spark.driver.bindAddress", ""), conf.get("spark.driver.host", ""),
                              int(conf.get("spark.driver.port", "0") or 0),
                              int(conf.get("spark.driver.blockManager.port", "0") or 0)),
            proxies={role: {"name": name} for role, name in proxies.items()},
            s3proxy_api=target.s3.fault_proxy or "",
            topology="cluster" if len(brokers) >= 3 else "single",
            brokers=brokers if len(brokers) >= 2 else ["kafka"], workers=[],
            replication_factor=kafka.replication_factor or -1,  # -1: the brokers' default
            min_insync_replicas=kafka.min_insync_replicas or 1)
        self._adopt_hooks()
        self.progress(f"target {target.name}: Kafka {self._info.kafka_bootstrap}, S3 {self._info.s3_endpoint}, "
                      f"Spark {target.spark.master}, Toxiproxy {target.toxiproxy.api} ({', '.join(proxies)})"
                      + (f", S3 fault proxy {target.s3.fault_proxy}" if target.s3.fault_proxy else ""))
        return self._info

    def _adopt_hooks(self) -> None:
        """A HookHandle per server with a hook, under the component names the process faults use: `kafka` for a
        single broker, kafka-1 .. kafka-N for several when the hook has {node} (alive by kafka.direct_bootstrap_servers,
        in node order), `minio`, `executor` (every executor at once, or the one on the worker a signal names)."""
        info, hooks, log = self.info, self.target.hooks, self.log_dir / "hooks.log"
        broker = hooks.get("broker")
        direct = info.kafka_internal_bootstrap.split(",")
        if broker is not None and info.brokers == ["kafka"]:
            self.handles["kafka"] = HookHandle("broker", broker, direct, log)
        elif broker is not None and broker.per_node:
            for node, name in enumerate(info.brokers, start=1):
                # a broker's own endpoint when the file gives one per broker; else none, and a kill is SKIPPED (gate)
                own = [direct[node - 1]] if len(direct) == len(info.brokers) else []
                self.handles[name] = HookHandle("broker", broker, own, log, node=node)
        if "minio" in hooks:
            endpoint = urlsplit(info.s3_direct_endpoint)
            self.handles["minio"] = HookHandle(
                "minio", hooks["minio"],
                [f"{endpoint.hostname}:{endpoint.port or (443 if endpoint.scheme == 'https' else 80)}"], log)
        if "executor" in hooks:
            self.handles["executor"] = HookHandle("executor", hooks["executor"], [], log)

    def close(self) -> None:
        with self._lock:
            if self._closing:
                return
            self._closing = True
        with signals_deferred():  # a second Ctrl-C must not leave a driver running
            try:
                self.reset()  # heals whatever a fault left, and releases requests the S3 fault proxy holds
            except InfraError:
                pass
            finally:
                for child in self.children:
                    child.stop()

    # -- what a run uses -------------------------------------------------------------------------------------------
    @property
    def log_dir(self) -> Path:
        return self.run_dir / "logs"

    @property
    def info(self) -> StackInfo:
        if self._info is None:
            raise InfraError("the target is not started yet (with TargetStack(...) as stack)")
        return self._info

    @property
    def toxiproxy(self) -> ToxiproxyClient:
        if self._toxiproxy is None:
            raise InfraError("the target is not started yet (with TargetStack(...) as stack)")
        return self._toxiproxy

    @property
    def s3proxy(self) -> S3ProxyClient | None:
        return self._s3proxy

    def reset(self) -> None:
        """Between arms: the target's proxies healed and the fault proxy's rules cleared; both are tried, the first
        failure is raised."""
        failures: list[InfraError] = []
        for client in (self._toxiproxy, self._s3proxy):
            if client is not None:
                try:
                    client.reset() if isinstance(client, RoleProxies) else client.clear()
                except InfraError as error:
                    failures.append(error)
        if failures:
            raise failures[0]

    def restart(self, component: str, grace: float = 5.0) -> float:
        """A killed server back through its hook's restart command; seconds until it accepts connections."""
        handle = self.handles.get(component)
        if not isinstance(handle, HookHandle):
            raise InfraError(f"cannot restart {component!r}: the target has no hook for it")
        self.progress(f"restarting {component} (hook {handle.role})")
        seconds = handle.restart()
        # a new handle, as the suite's own stack gives a restarted server: a fault tells the one it killed from this
        self.handles[component] = HookHandle(handle.role, handle.hook, handle.addresses, handle.log_path, handle.node)
        return seconds

    def _credential(self, purpose: str) -> str | None:
        name = self.target.credentials.get(purpose)
        return os.environ.get(name) if name else None

    def s3_client(self, direct: bool = False, endpoint: str | None = None):
        """A MinIO client on the target's S3 (through its proxies, or direct for the harness's reads), with the
        credentials the file names, else the standard AWS providers (environment, profile)."""
        from minio import Minio
        from minio.credentials import AWSConfigProvider, ChainedProvider, EnvAWSProvider

        from infra.stack import trusting

        url = endpoint or (self.info.s3_direct_endpoint if direct else self.info.s3_endpoint)
        parts = urlsplit(url if "://" in url else f"http://{url}")
        secure, ca_bundle = parts.scheme == "https", self.target.s3.ca_bundle
        http_client = trusting(ca_bundle) if secure and ca_bundle else None
        access, secret = self._credential("s3_access_key"), self._credential("s3_secret_key")
        if access and secret:
            return Minio(parts.netloc, access_key=access, secret_key=secret,
                         session_token=self._credential("s3_session_token"), secure=secure,
                         region=self.target.s3.region, http_client=http_client)
        return Minio(parts.netloc, credentials=ChainedProvider([EnvAWSProvider(), AWSConfigProvider()]),
                     secure=secure, region=self.target.s3.region, http_client=http_client)

    def job_env(self) -> dict[str, str]:
        """The driver's environment: the credentials from the variables the file names (as the AWS variables the
        job's S3 clients read), pyspark's interpreter, and the file's spark-submit arguments."""
        env = {"SPARK_HOME": self.info.spark_home, "PYSPARK_PYTHON": sys.executable,
               "PYSPARK_DRIVER_PYTHON": sys.executable}
        bind = self.target.spark.conf.get("spark.driver.bindAddress")
        if bind:  # Spark's own idea of this host's address otherwise: the first interface's, not the bound one
            env["SPARK_LOCAL_IP"] = bind
        if self.target.s3.ca_bundle:
            # the job's own S3 client (minio, urllib3) trusts the CA through this; its JVMs need the CA in their
            # trust store, which the target's spark.conf gives (docs/targets.md)
            env["SSL_CERT_FILE"] = self.target.s3.ca_bundle
        for purpose, variable in (("s3_access_key", "AWS_ACCESS_KEY_ID"), ("s3_secret_key", "AWS_SECRET_ACCESS_KEY"),
                                  ("s3_session_token", "AWS_SESSION_TOKEN")):
            value = self._credential(purpose)
            if value:
                env[variable] = value
        if self.target.spark.submit_args:
            # pyspark starts its JVM with spark-submit and these arguments (they must end with `pyspark-shell`)
            env["PYSPARK_SUBMIT_ARGS"] = " ".join(shlex.quote(a) for a in self.target.spark.submit_args) \
                + " pyspark-shell"
        return env

    def kafka_client_login(self) -> dict[str, str]:
        """librdkafka settings for the harness's clients on the proxied listener: the SASL login the file names
        (`credentials.kafka_username`/`kafka_password`, protocol and mechanism from `kafka.options`), else none."""
        username, password = self._credential("kafka_username"), self._credential("kafka_password")
        if not (username and password):
            return {}
        options = self.target.kafka.options
        return {"security.protocol": options.get("security.protocol", "SASL_PLAINTEXT"),
                "sasl.mechanism": options.get("sasl.mechanism", "PLAIN"), "sasl.username": username,
                "sasl.password": password}

    def job_deployment(self, args: list[str]) -> list[str] | None:
        """The job's options (`args`: profile, topic, deployment, settings) plus the target's deployment, as docs/job.md
        gives them: Kafka and its client options, S3 (endpoint, region, path style, TLS, credentials from the
        environment when the file names them), the bucket, and the target's Spark settings with its master."""
        target, settings = self.target, from_args(args)
        conf = {**target.spark.conf, "spark.master": target.spark.master}
        if not settings.proxied_driver:  # a second driver at the same time binds ports of its own
            conf.update({key: "0" for key in DRIVER_PORT_KEYS})
            if "spark.driver.bindAddress" in conf:
                conf["spark.driver.host"] = conf["spark.driver.bindAddress"]
        s3 = target.s3
        return [*args,
                "--kafka-bootstrap-servers", ",".join(target.kafka.bootstrap_servers),
                *[item for key, value in target.kafka.options.items() for item in ("--kafka-option", f"{key}={value}")],
                "--s3-endpoint", s3.url, "--s3-region", s3.region,
                "--s3-path-style" if s3.path_style else "--no-s3-path-style",
                "--s3-tls" if s3.tls else "--no-s3-tls",
                *(["--s3-credentials-provider", ENV_CREDENTIALS_PROVIDER] if "s3_access_key" in target.credentials
                  else []),
                "--storage-uri", s3.storage_uri,
                *[item for key, value in conf.items() for item in ("--spark-conf", f"{key}={value}")]]

    def adopt(self, launch: Callable[[], _H], component: str | None = None) -> _H:
        """Launch under the lock and register the result, so teardown always sees it; nothing starts once it has
        begun."""
        with self._lock:
            if self._closing:
                raise InfraError("the run is shutting down; nothing new is started")
            handle = launch()
            (self.children.append(handle) if component is None else self.handles.__setitem__(component, handle))
            return handle
