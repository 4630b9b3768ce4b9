"""Spark drivers against a stack: the session settings every driver uses, and launching one as a process.

A driver always runs on this host as its own process (for both backends), so the harness can kill,
pause and restart it. The job (`python -m job`) is launched like any deployer would run it: `job_args()` turns
the stack description into the job's deployment options (job/spark.py), and the harness's own Spark settings
(master, driver ports, JVM options) into `--spark-conf` options. Credentials reach Spark and the job through the
environment only (Stack.job_env), so no secret appears on a command line.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from job import spark as job_spark
from job.settings import from_args

from .access import KAFKA_PASSWORD_ENV, KAFKA_USERNAME_ENV, StackInfo
from .cds import ClassArchives
from .procs import ManagedProcess
from .stack import StackLike
from .tls import TlsFiles

# AWS SDK v2 (hadoop-aws 3.5 and the SDK 2.x bundle pinned in infra/artifacts.lock.json): reads
# AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) from the process's environment.
ENV_CREDENTIALS_PROVIDER = job_spark.ENV_CREDENTIALS_PROVIDER
ROCKSDB_PROVIDER = job_spark.ROCKSDB_PROVIDER
S3_REGION = "us-east-1"  # MinIO's default
# Drivers and executors live for minutes and are restarted by the faults: on two cores the JIT's C2 compiler
# threads compete with start-up, and C1 alone brings a job to its first batch ~11 s sooner (`chaos bench
# startup`: 30.9 s vs 41.7 s, docs/lab-notes.md). A query stopped mid-batch died with StackOverflowError deep in
# java.util.regex (the default 1 MB thread stack): a larger stack for the driver's threads lets the stop finish.
QUICK_START_JIT = "-XX:TieredStopAtLevel=1"
DRIVER_JAVA_OPTIONS = f"-Xss16m {QUICK_START_JIT}"
EXECUTOR_JAVA_OPTIONS = QUICK_START_JIT


def load_stack_info(environ=os.environ) -> StackInfo:
    return StackInfo.from_json(Path(environ["CHAOS_STACK_JSON"]).read_text())


def java_options(info: StackInfo, profile: str = "hardened") -> dict[str, str]:
    """The driver's and the executors' JVM options: quick start-up, and the class-data archives recorded for this
    job profile where the stack has them (infra/cds.py; another profile maps the hardened job's archives)."""
    archives = ClassArchives.from_dict(info.class_archives)
    driver = archives.jvm_options(f"driver-{profile}", fallback="driver-hardened")
    executor = archives.jvm_options(f"executor-{profile}", fallback="executor-hardened")
    if info.s3_truststore:  # TLS on S3: S3A's HTTP client trusts the stack's CA (infra/tls.py)
        trust = TlsFiles(Path(info.s3_truststore).parent).jvm_options()
        driver, executor = [*driver, *trust], [*executor, *trust]
    return {"spark.driver.extraJavaOptions": " ".join([DRIVER_JAVA_OPTIONS, *driver]),
            "spark.executor.extraJavaOptions": " ".join([EXECUTOR_JAVA_OPTIONS, *executor])}


def s3_options(info: StackInfo) -> job_spark.S3Options:
    """The stack's S3 (MinIO through the `s3` proxy), credentials from the environment only."""
    return job_spark.S3Options(endpoint=info.s3_endpoint, region=S3_REGION, path_style=True,
                               tls=info.s3_endpoint.startswith("https://"),
                               credentials_providers=ENV_CREDENTIALS_PROVIDER)


def cluster_conf(info: StackInfo, proxied_driver: bool = True, profile: str = "hardened") -> dict[str, str]:
    """The harness's Spark settings for a driver on `info`'s stack, running the job's `profile` (which archives
    its JVMs map): where the master is, the driver's ports, memory, JVM options. What a deployer would give
    spark-submit; nothing about Kafka or S3.

    With proxied_driver, executors reach the driver through the `spark-driver` proxies; a second driver at
    the same time (a colliding deployment) must pass False and gets ports of its own.
    """
    driver = info.driver
    return {
        "spark.master": info.spark_master,
        "spark.jars": ",".join(info.spark_jars),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.bindAddress": driver.bind_host,
        "spark.driver.host": driver.advertised_host if proxied_driver else driver.bind_host,
        "spark.driver.port": str(driver.rpc_port) if proxied_driver else "0",
        "spark.driver.blockManager.port": str(driver.block_manager_port) if proxied_driver else "0",
        "spark.driver.memory": "1g",
        "spark.executor.memory": "1g",
        **java_options(info, profile),
        "spark.cores.max": "2",
        "spark.sql.shuffle.partitions": "4",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
    }


def spark_conf(info: StackInfo, app_name: str, proxied_driver: bool = True,
               profile: str = "hardened") -> dict[str, str]:
    """Settings for a harness driver (the stack probe) on `info`'s stack: the session settings the job would
    make of the options job_args() gives it."""
    return job_spark.session_conf(app_name, s3_options(info), cluster_conf(info, proxied_driver, profile))


def spark_session(info: StackInfo, app_name: str, extra_conf: dict[str, str] | None = None, **kwargs):
    """A session on the stack; `extra_conf` goes in before the context starts, since Hadoop settings are read once
    per filesystem instance."""
    return job_spark.session({**spark_conf(info, app_name, **kwargs), **(extra_conf or {})})


def sasl_kafka_options(mechanism: str) -> dict[str, str]:
    """The job's Kafka client settings for a SASL login whose username and password its JVMs read from their
    environment (KAFKA_USERNAME, KAFKA_PASSWORD: the stack's KafkaLogin.as_env) through Kafka's EnvVarConfigProvider,
    so the command line carries references only (docs/job.md)."""
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "config.providers": "env",
            "config.providers.env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
            "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
                                f'username="${{env:{KAFKA_USERNAME_ENV}}}" password="${{env:{KAFKA_PASSWORD_ENV}}}";'}


def job_args(info: StackInfo, args: list[str]) -> list[str]:
    """The job's options (`args`: profile, topic, deployment, settings) plus its deployment on this stack, as a
    deployer passes them: Kafka through the `kafka` proxy, S3 through the `s3` proxy, the run's bucket, and the
    harness's Spark settings (the job's settings say which profile's JVM archives and which driver ports)."""
    settings = from_args(args)
    s3 = s3_options(info)
    return [*args,
            "--kafka-bootstrap-servers", info.kafka_bootstrap,
            *[item for key, value in (sasl_kafka_options(info.kafka_sasl_mechanism).items()
                                      if info.kafka_sasl_mechanism else ())
              for item in ("--kafka-option", f"{key}={value}")],
            "--s3-endpoint", info.s3_endpoint, "--s3-region", s3.region,  # s3.endpoint: this, never None
            "--s3-path-style" if s3.path_style else "--no-s3-path-style",
            "--s3-tls" if s3.tls else "--no-s3-tls",
            "--s3-credentials-provider", s3.credentials_providers,
            "--storage-uri", f"s3a://{info.bucket}",
            *[item for key, value in cluster_conf(info, settings.proxied_driver, settings.profile).items()
              for item in ("--spark-conf", f"{key}={value}")]]


def launch_driver(stack: StackLike, name: str, module: str, args: list[str], env: dict[str, str] | None = None
                  ) -> ManagedProcess:
    """Start `python -m module args...` as a driver process logging to the run's logs/<name>.log. The job (module
    `job`) also gets its deployment options: the target's own (a target run), or job_args of the stack's info."""
    if module == "job":
        deployment = stack.job_deployment(args)
        args = job_args(stack.info, args) if deployment is None else deployment
    # The run's credentials replace whatever AWS identity this shell has: a session token or profile of its own
    # would be mixed with the stack's keys.
    given = stack.job_env()
    inherited = {k: v for k, v in os.environ.items()
                 if "AWS_ACCESS_KEY_ID" not in given or k not in ("AWS_SESSION_TOKEN", "AWS_PROFILE")}
    environment = {**inherited, **given, **(env or {})}
    return stack.adopt(lambda: ManagedProcess(name, [sys.executable, "-m", module, *args],
                                              stack.log_dir / f"{name}.log", env=environment))
