"""Spark drivers against a stack: the session settings every driver uses, and launching one as a process.

A driver always runs on this host as its own process (for both backends), so the harness can kill,
pause and restart it. Inside the driver, `spark_conf()` turns the stack description into Spark settings; the
credentials reach Spark through the environment only (Stack.job_env), so no secret appears on a command line.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from .cds import ClassArchives
from .procs import ManagedProcess
from .stack import Stack, StackInfo

# AWS SDK v2 (hadoop-aws 3.5 and the SDK 2.x bundle pinned in infra/artifacts.lock.json): reads
# AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) from the process's environment.
ENV_CREDENTIALS_PROVIDER = "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
# Drivers and executors live for minutes and are restarted by the faults: on two cores the JIT's C2 compiler
# threads compete with start-up, and C1 alone brings a job to its first batch ~11 s sooner (`chaos bench
# startup`: 30.9 s vs 41.7 s, docs/benchmarks.md). A query stopped mid-batch died with StackOverflowError deep in
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
    return {"spark.driver.extraJavaOptions": " ".join([DRIVER_JAVA_OPTIONS, *driver]),
            "spark.executor.extraJavaOptions": " ".join([EXECUTOR_JAVA_OPTIONS, *executor])}


def spark_conf(info: StackInfo, app_name: str, proxied_driver: bool = True,
               profile: str = "hardened") -> dict[str, str]:
    """Settings for a driver on `info`'s stack, running the job's `profile` (which archives its JVMs map).

    With proxied_driver, executors reach the driver through the `spark-driver` proxies; a second driver at
    the same time (a colliding deployment) must pass False and gets ports of its own.
    """
    driver = info.driver
    conf = {
        "spark.master": info.spark_master,
        "spark.app.name": app_name,
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
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.hadoop.fs.s3a.endpoint": info.s3_endpoint,
        "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        # Credentials from the environment (Stack.job_env for the driver, the worker's for executors): pyspark hands
        # every session setting to spark-submit as `--conf`, which `ps` shows to every user of the machine.
        "spark.hadoop.fs.s3a.aws.credentials.provider": ENV_CREDENTIALS_PROVIDER,
    }
    return conf


def spark_session(info: StackInfo, app_name: str, extra_conf: dict[str, str] | None = None, **kwargs):
    """A session on the stack; `extra_conf` (e.g. a job profile's fs.s3a settings) goes in before the context
    starts, since Hadoop settings are read once per filesystem instance."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in {**spark_conf(info, app_name, **kwargs), **(extra_conf or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def launch_driver(stack: Stack, name: str, module: str, args: list[str], env: dict[str, str] | None = None
                  ) -> ManagedProcess:
    """Start `python -m module args...` as a driver process logging to the run's logs/<name>.log."""
    # The run's credentials replace whatever AWS identity this shell has: a session token or profile of its own
    # would be mixed with the stack's keys.
    inherited = {k: v for k, v in os.environ.items() if k not in ("AWS_SESSION_TOKEN", "AWS_PROFILE")}
    environment = {**inherited, **stack.job_env(), **(env or {})}
    return stack.adopt(lambda: ManagedProcess(name, [sys.executable, "-m", module, *args],
                                              stack.log_dir / f"{name}.log", env=environment))
