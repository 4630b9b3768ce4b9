"""Where the job runs, as a deployer says it: Kafka, S3, the checkpoint and output URIs, extra Spark settings; and
the job's Spark session built from them.

Every option has an environment fallback (docs/job.md lists them). Credentials are never options: S3A and the
job's own S3 client read them from the standard AWS providers (by default the environment, AWS_ACCESS_KEY_ID /
AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, then the shared credentials file, AWS_PROFILE), and a Kafka or Spark
option that carries a secret is refused: a command line is visible to every user of the machine (`ps`).

This module imports nothing outside `job/`: the harness (infra/driver.py) passes these options like any deployer.
"""
from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

# The AWS SDK v2 classes (hadoop-aws 3.4+ is built on SDK v2; v1 names are only mapped for a few classes).
ENV_CREDENTIALS_PROVIDER = "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider"
PROFILE_CREDENTIALS_PROVIDER = "software.amazon.awssdk.auth.credentials.ProfileCredentialsProvider"
DEFAULT_CREDENTIALS_PROVIDERS = f"{ENV_CREDENTIALS_PROVIDER},{PROFILE_CREDENTIALS_PROVIDER}"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
DEFAULT_REGION = "us-east-1"

# Option keys whose value is a secret: they belong in the environment, a credentials file or a Kafka config
# provider (`${env:NAME}`), never on a command line.
_SECRET_KEY = re.compile(r"(secret\.key|access\.key|session\.token|password|secret)$", re.IGNORECASE)
_LITERAL_PASSWORD = re.compile(r"password\s*=\s*\"(?!\$\{)", re.IGNORECASE)
_PROVIDER_REFERENCE = re.compile(r"^\$\{[^}]+\}$")  # a Kafka config provider's ${env:NAME}: a name, not a value


class OptionError(ValueError):
    """A deployment option is missing or malformed (exit 2)."""


@dataclass(frozen=True)
class S3Options:
    endpoint: str | None = None  # URL or host[:port]; None: AWS's regional endpoint
    region: str = DEFAULT_REGION
    path_style: bool = False
    tls: bool = True
    credentials_providers: str = DEFAULT_CREDENTIALS_PROVIDERS

    def hadoop_conf(self) -> dict[str, str]:
        """fs.s3a.* settings (no credentials: S3A asks the providers)."""
        conf = {"fs.s3a.endpoint.region": self.region,
                "fs.s3a.path.style.access": str(self.path_style).lower(),
                "fs.s3a.connection.ssl.enabled": str(self.tls).lower(),
                "fs.s3a.aws.credentials.provider": self.credentials_providers}
        if self.endpoint:
            conf["fs.s3a.endpoint"] = self.endpoint
        return conf

    def spark_conf(self) -> dict[str, str]:
        return {f"spark.hadoop.{key}": value for key, value in self.hadoop_conf().items()}

    @property
    def host(self) -> str:
        """host[:port] for the job's own S3 client."""
        if not self.endpoint:
            return f"s3.{self.region}.amazonaws.com"
        return urlsplit(self.endpoint).netloc if "://" in self.endpoint else self.endpoint


@dataclass(frozen=True)
class Deployment:
    kafka_bootstrap_servers: str
    s3: S3Options
    checkpoint_uri: str
    output_uri: str
    kafka_options: dict[str, str] = field(default_factory=dict)  # kafka.* source options (security included)
    spark_conf: dict[str, str] = field(default_factory=dict)     # set on the session (master, ports, JVM options)

    @property
    def bucket(self) -> str:
        """The bucket of the checkpoint, which the lease and the integrity manifests share with the output."""
        return bucket_and_key(self.checkpoint_uri)[0]


def bucket_and_key(uri: str) -> tuple[str, str]:
    """s3a://bucket/some/key -> ("bucket", "some/key")."""
    parts = urlsplit(uri)
    if parts.scheme != "s3a" or not parts.netloc:
        raise OptionError(f"{uri!r} is not an s3a://BUCKET/PATH URI")
    return parts.netloc, parts.path.strip("/")


def _env_bool(value: str | None) -> bool | None:
    if value is None or value == "":
        return None
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise OptionError(f"{value!r} is not a boolean (true/false)")


def _pairs(values: list[str] | None, what: str) -> dict[str, str]:
    pairs = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise OptionError(f"{what}: {item!r} is not KEY=VALUE")
        key = key.strip()
        if (_SECRET_KEY.search(key) and not _PROVIDER_REFERENCE.match(value)) or _LITERAL_PASSWORD.search(value):
            raise OptionError(f"{what}: {key} carries a secret, which must not be on a command line; use the "
                              f"environment or a credentials provider (for Kafka: a config provider, "
                              f"e.g. ${{env:NAME}}; docs/job.md)")
        pairs[key] = value
    return pairs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("deployment", "where the job runs; each option falls back to the environment "
                                      "variable named in its help, and credentials are never options")
    group.add_argument("--kafka-bootstrap-servers", help="host:port,... (JOB_KAFKA_BOOTSTRAP_SERVERS)")
    group.add_argument("--kafka-option", action="append", metavar="KEY=VALUE",
                       help="a Kafka client setting for the source, e.g. security.protocol=SASL_SSL; the kafka. "
                            "prefix is added if missing; repeatable")
    group.add_argument("--s3-endpoint", help="S3 endpoint URL or host[:port] (JOB_S3_ENDPOINT, AWS_ENDPOINT_URL_S3, "
                                             "AWS_ENDPOINT_URL; default: AWS)")
    group.add_argument("--s3-region", help=f"(AWS_REGION, AWS_DEFAULT_REGION; default {DEFAULT_REGION})")
    group.add_argument("--s3-path-style", action=argparse.BooleanOptionalAction, default=None,
                       help="path-style requests, as MinIO needs (JOB_S3_PATH_STYLE; default off)")
    group.add_argument("--s3-tls", action=argparse.BooleanOptionalAction, default=None,
                       help="HTTPS to S3 (JOB_S3_TLS; default: the endpoint URL's scheme, else on)")
    group.add_argument("--s3-credentials-provider",
                       help="S3A's fs.s3a.aws.credentials.provider list (JOB_S3_CREDENTIALS_PROVIDER; default: the "
                            "environment, then the shared credentials file)")
    group.add_argument("--storage-uri", help="s3a://BUCKET[/PREFIX] under which the checkpoint and output go, at "
                                             "<deployment>/checkpoint and <deployment>/output (JOB_STORAGE_URI)")
    group.add_argument("--checkpoint-uri", help="s3a:// URI of the checkpoint (JOB_CHECKPOINT_URI; overrides "
                                                "--storage-uri)")
    group.add_argument("--output-uri", help="s3a:// URI of the output (JOB_OUTPUT_URI; overrides --storage-uri)")
    group.add_argument("--spark-conf", action="append", metavar="KEY=VALUE",
                       help="a Spark setting for the session (under spark-submit, its own --conf does the same); "
                            "repeatable")


def deployment_from(args: argparse.Namespace, checkpoint_suffix: str, output_suffix: str,
                    environ: Mapping[str, str] = os.environ) -> Deployment:
    """The deployment from parsed options, the environment filling in what they leave out. Raises OptionError."""
    def first(*names: str) -> str | None:
        return next((environ[name] for name in names if environ.get(name)), None)

    bootstrap = args.kafka_bootstrap_servers or first("JOB_KAFKA_BOOTSTRAP_SERVERS")
    if not bootstrap:
        raise OptionError("no Kafka: give --kafka-bootstrap-servers (or JOB_KAFKA_BOOTSTRAP_SERVERS)")
    endpoint = args.s3_endpoint or first("JOB_S3_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
    scheme = urlsplit(endpoint).scheme if endpoint and "://" in endpoint else None
    if scheme not in (None, "http", "https"):
        raise OptionError(f"--s3-endpoint {endpoint!r}: the scheme must be http or https")
    tls = args.s3_tls if args.s3_tls is not None else _env_bool(environ.get("JOB_S3_TLS"))
    if tls is None:
        tls = scheme != "http"
    elif scheme is not None and tls != (scheme == "https"):
        raise OptionError(f"--s3-endpoint {endpoint!r} contradicts TLS {'on' if tls else 'off'}")
    path_style = args.s3_path_style if args.s3_path_style is not None else _env_bool(environ.get("JOB_S3_PATH_STYLE"))
    s3 = S3Options(endpoint=endpoint, region=args.s3_region or first("AWS_REGION", "AWS_DEFAULT_REGION")
                   or DEFAULT_REGION, path_style=bool(path_style), tls=tls,
                   credentials_providers=args.s3_credentials_provider or first("JOB_S3_CREDENTIALS_PROVIDER")
                   or DEFAULT_CREDENTIALS_PROVIDERS)
    storage = args.storage_uri or first("JOB_STORAGE_URI")
    checkpoint = args.checkpoint_uri or first("JOB_CHECKPOINT_URI")
    output = args.output_uri or first("JOB_OUTPUT_URI")
    if storage:
        bucket_and_key(storage)
        checkpoint = checkpoint or f"{storage.rstrip('/')}/{checkpoint_suffix}"
        output = output or f"{storage.rstrip('/')}/{output_suffix}"
    if not checkpoint or not output:
        raise OptionError("no storage: give --storage-uri, or both --checkpoint-uri and --output-uri")
    if bucket_and_key(checkpoint)[0] != bucket_and_key(output)[0]:
        raise OptionError(f"the checkpoint ({checkpoint}) and the output ({output}) must be in one bucket")
    kafka = {key if key.startswith("kafka.") else f"kafka.{key}": value
             for key, value in _pairs(args.kafka_option, "--kafka-option").items()}
    if "kafka.bootstrap.servers" in kafka:
        raise OptionError("--kafka-option: give the brokers with --kafka-bootstrap-servers")
    return Deployment(kafka_bootstrap_servers=bootstrap, s3=s3, checkpoint_uri=checkpoint, output_uri=output,
                      kafka_options=kafka, spark_conf=_pairs(args.spark_conf, "--spark-conf"))


def session_conf(app_name: str, s3: S3Options, spark_conf: Mapping[str, str] = {},
                 s3a_options: Mapping[str, str] = {}, spark_options: Mapping[str, str] = {}) -> dict[str, str]:
    """The session's settings, later ones winning: the job's defaults, the deployer's --spark-conf, the S3 options,
    then the job profile's own fs.s3a.* and Spark settings."""
    return {"spark.app.name": app_name,
            "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
            **spark_conf,
            **s3.spark_conf(),
            **{f"spark.hadoop.fs.s3a.{key}": value for key, value in s3a_options.items()},
            **spark_options}


def session(conf: Mapping[str, str]):
    """The Spark session with `conf`, set before the context starts (Hadoop settings are read once per filesystem).
    Under spark-submit the context does not exist yet either: these settings go over spark-submit's --conf."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
