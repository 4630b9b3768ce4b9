"""How a client reaches a stack: where its servers listen (StackInfo, written to stack.json, so it holds no secret)
and the secrets it logs in with, which reach processes only through their environment (Credentials: MinIO's keys;
KafkaLogin: the brokers' SASL login). A Stack (infra/stack.py) and a target's TargetStack (chaos/target/stack.py)
both describe themselves with these.
"""
from __future__ import annotations

import json
import secrets
from dataclasses import asdict, astuple, dataclass, field
from typing import ClassVar, Self

from . import components


@dataclass(frozen=True)
class DriverSlot:
    """Ports a Spark driver binds, and the address executors are told to use (the `spark-driver` proxy)."""

    bind_host: str
    advertised_host: str
    rpc_port: int
    block_manager_port: int


@dataclass(frozen=True)
class StackInfo:
    """Where everything is. Safe to write to disk: it holds no secret."""

    backend: str
    run_dir: str
    kafka_bootstrap: str          # through the brokers' proxies: what the job and the workload use
    kafka_internal_bootstrap: str  # straight to the brokers: harness probes that must work during faults
    s3_endpoint: str              # through the `s3` proxy (and s3proxy behind it)
    s3_direct_endpoint: str       # straight to MinIO: harness reads that must work during faults
    bucket: str
    toxiproxy_api: str
    spark_master: str
    spark_master_ui: str
    spark_jars: list[str]
    spark_home: str
    driver: DriverSlot
    proxies: dict[str, dict[str, str]]
    s3proxy_api: str = ""         # the S3 fault proxy's control API (infra/s3proxy.py)
    start_seconds: dict[str, float] = field(default_factory=dict)
    # Class-data archives for the JVMs drivers start (the driver's own, the executors'): ClassArchives.to_dict()
    class_archives: dict = field(default_factory=dict)
    topology: str = "single"
    # TLS on S3 (Stack(s3_tls=True)): the PEM of the CA MinIO's and s3proxy's certificate is signed by, and the PKCS12
    # trust store of it the JVMs use (infra/tls.py); "" when S3 is plain HTTP
    s3_ca_bundle: str = ""
    s3_truststore: str = ""
    # SASL on the brokers' proxied listener (Stack(kafka_sasl=True)): the mechanism and the login's username; the
    # password is the stack's, never here. "" when clients connect without a login.
    kafka_sasl_mechanism: str = ""
    kafka_sasl_username: str = ""
    brokers: list[str] = field(default_factory=lambda: ["kafka"])  # component and proxy names, node 1 first
    workers: list[str] = field(default_factory=lambda: ["spark-worker"])
    replication_factor: int = 1   # what the harness creates topics with
    min_insync_replicas: int = 1
    # shim -> the workers that preload it (infra/preloads.py); empty where workers preload nothing (the containers
    # backend, a target): faults that act through a shim cannot act there
    preloaded: dict[str, list[str]] = field(default_factory=dict)
    # worker -> the control file of the fsfault shim its executors preload (disk faults switch it on and off)
    disk_fault_controls: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> StackInfo:
        raw = json.loads(text)
        raw["driver"] = DriverSlot(**raw["driver"])
        return cls(**raw)


@dataclass(frozen=True)
class _Secret:
    """A name and its secret that processes get only through their environment (ENV: the two variables), never on
    a command line; random() makes a fresh one for a stack of its own."""
    ENV: ClassVar[tuple[str, str]]
    NAME_BYTES: ClassVar[int] = 6

    @classmethod
    def random(cls) -> Self:
        return cls("chaos-" + secrets.token_hex(cls.NAME_BYTES), secrets.token_urlsafe(24))  # type: ignore[call-arg]

    def as_env(self) -> dict[str, str]:
        return dict(zip(self.ENV, astuple(self)))


@dataclass(frozen=True)
class Credentials(_Secret):
    """MinIO's keys, as the standard AWS variables, which the S3A connector's EnvironmentVariableCredentialsProvider
    (AWS SDK v2) and the job's own S3 client read."""
    ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    access_key: str
    secret_key: str = field(repr=False)  # never in a log line or a traceback


@dataclass(frozen=True)
class KafkaLogin(_Secret):
    """The one SASL login of a stack whose brokers ask for one (Stack(kafka_login=...)), as the variables the job's
    Kafka clients read it from (their JAAS line names them: infra/driver.py)."""
    ENV = ("KAFKA_USERNAME", "KAFKA_PASSWORD")
    NAME_BYTES = 4
    username: str
    password: str = field(repr=False)

    def client_config(self) -> dict[str, str]:
        """librdkafka settings that log in with it."""
        return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": components.SASL_MECHANISM,
                "sasl.username": self.username, "sasl.password": self.password}


KAFKA_USERNAME_ENV, KAFKA_PASSWORD_ENV = KafkaLogin.ENV
