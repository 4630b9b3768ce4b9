"""A running stack written as a target file (`chaos stack up --write-target FILE`): every endpoint through the stack's
proxies, its Toxiproxy as an existing one (`api:`), the S3 keys by the names of the variables that hold them, the
driver settings that put executor-to-driver traffic through the `spark-driver` proxies, and hooks this host can run
for process faults. The document is validated (chaos/target/model.py) before it is written, so a file this writes is
one `chaos doctor --target` reads.

Hooks find the stack's servers by their command lines (a broker by its own properties file, MinIO by its port,
executors inside the worker's session), so they still reach a server the stack has restarted; a restart hook asks
the `chaos stack up` process to start that server again (SIGUSR1 the broker, SIGUSR2 MinIO). `chaos stack up` removes
the file when it stops, so a stale hook can never signal the process that reused its number.
"""
from __future__ import annotations

import os
import re
import shlex
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from infra.access import KAFKA_PASSWORD_ENV, KAFKA_USERNAME_ENV
from infra.driver import S3_REGION, cluster_conf, sasl_kafka_options

from .model import Target, parse_target

if TYPE_CHECKING:
    from infra.stack import Stack

# The variables the job's S3 clients read (docs/job.md), and MinIO's keys for a stack that writes a target.
ACCESS_KEY_ENV, SECRET_KEY_ENV = "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"
EXECUTOR_MARKER = "CoarseGrainedExecutorBackend"
# What `chaos stack up` restarts on which signal (chaos/commands/stack.py): one server each, so a restart asked for one
# never cuts short another that a fault keeps down.
RESTART_SIGNALS = {"kafka": "USR1", "minio": "USR2"}


def _literal(text: str) -> str:
    """Text as it stands in a hook's template: its braces doubled, so format() gives them back unchanged."""
    return text.replace("{", "{{").replace("}", "}}")


def _pattern(words: list[str], node_one: str | None = None) -> str:
    """A `pkill -f` pattern matching these whole command-line words, quoted for the shell, as a hook's template
    (literal braces doubled). The first letter goes in brackets: the pattern then does not match itself, so the shell
    that runs a hook is never one of its targets; the end is anchored, so port 1000 is not port 10001. `node_one`: the
    text naming node 1 (kafka-1), which becomes node {node} (kafka-{node})."""
    text = _literal(" ".join(re.escape(word) for word in words))
    if node_one is not None:
        text = text.replace(re.escape(node_one), re.escape(node_one.removesuffix("1")) + "{node}")
    return shlex.quote(f"[{text[0]}]{text[1:]}( |$)")


def restart_requests(run_dir: Path) -> Path:
    """Where a restart hook names the server it asks `chaos stack up` (of this run directory) to bring back, one
    empty file per server, before it signals: a signal alone cannot say which broker of three."""
    return Path(run_dir) / "restart-requests"


def local_hooks(stack: Stack, pid: int | None = None) -> dict[str, dict[str, object]]:
    """Process-fault hooks for a stack whose servers are processes on this host (the local backend): a broker by
    its properties file, MinIO by its address, the executors inside their worker's session (a worker starts them in
    its own); a killed broker or MinIO comes back by a signal to `pid` (`chaos stack up`: SIGUSR1 restarts the brokers
    named under restart_requests(), or the one broker; SIGUSR2 MinIO). On a cluster the broker's and the executor's
    hooks have {node}: broker N (node id N) and the executor on worker N. None for a backend whose processes this
    host cannot signal."""
    if stack.backend.name != "local":
        return {}
    hooks: dict[str, dict[str, object]] = {}
    brokers, workers = stack.info.brokers, stack.info.workers
    if len(brokers) == 1:
        properties = stack.command_of(brokers[0])[-1]  # kafka.Kafka <properties>: this broker's alone
        hooks["broker"] = {"signal": f"pkill --signal {{signal}} -f {_pattern(['kafka.Kafka', properties])}",
                           **({"restart": f"kill -s {RESTART_SIGNALS['kafka']} {pid}"} if pid is not None else {})}
    else:
        # kafka-1.properties .. kafka-N.properties: the first broker's command line, its name made kafka-{node}
        first = stack.command_of(brokers[0])[-1]
        if brokers[0].endswith("-1") and all(stack.command_of(name)[-1] == first.replace(brokers[0], name)
                                             for name in brokers):
            requests = restart_requests(stack.run_dir)
            requests.mkdir(parents=True, exist_ok=True)
            asked = _literal(shlex.quote(str(requests / brokers[0].removesuffix("1")))) + "{node}"
            hooks["broker"] = {
                "signal": f"pkill --signal {{signal}} -f {_pattern(['kafka.Kafka', first], node_one=brokers[0])}",
                **({"restart": f"touch {asked} && kill -s {RESTART_SIGNALS['kafka']} {pid}"}
                   if pid is not None else {})}
    minio = stack.command_of("minio")
    address = minio[minio.index("--address") + 1]
    hooks["minio"] = {"signal": f"pkill --signal {{signal}} -f {_pattern(['server', '--quiet', '--address', address])}",
                      **({"restart": f"kill -s {RESTART_SIGNALS['minio']} {pid}"} if pid is not None else {})}
    sessions = [stack.handles[worker].pid for worker in workers]
    if len(sessions) == 1 and sessions[0] is not None:
        hooks["executor"] = {"signal": f"pkill --signal {{signal}} -s {sessions[0]} -f {EXECUTOR_MARKER}"}
    elif sessions and None not in sessions:
        # worker N's session: the Nth of the list (none past the end, which pkill refuses, exit 2)
        session = f"\"$(echo {' '.join(map(str, sessions))} | cut -d ' ' -f {{node}})\""
        hooks["executor"] = {"signal": f"pkill --signal {{signal}} -s {session} -f {EXECUTOR_MARKER}",
                             "nodes": len(sessions)}
    return hooks


def stack_target(stack: Stack, name: str, source: str) -> Target:
    """The running stack as a validated Target."""
    info = stack.info
    conf = {key: value for key, value in cluster_conf(info).items() if key != "spark.master"}
    doc = {
        "name": name,
        "kafka": {"bootstrap_servers": info.kafka_bootstrap.split(","),
                  **({"options": sasl_kafka_options(info.kafka_sasl_mechanism)} if info.kafka_sasl_mechanism else {}),
                  "direct_bootstrap_servers": info.kafka_internal_bootstrap.split(","),
                  "replication_factor": info.replication_factor, "min_insync_replicas": info.min_insync_replicas},
        "s3": {"endpoint": info.s3_endpoint, "tls": info.s3_endpoint.startswith("https://"), "bucket": info.bucket,
               "region": S3_REGION, **({"ca_bundle": info.s3_ca_bundle} if info.s3_ca_bundle else {}),
               "path_style": True, "direct_endpoint": info.s3_direct_endpoint,
               **({"fault_proxy": info.s3proxy_api} if info.s3proxy_api else {})},
        "spark": {"master": info.spark_master, "master_ui": info.spark_master_ui, "deploy_mode": "client",
                  "conf": conf},
        "credentials": {"s3_access_key": ACCESS_KEY_ENV, "s3_secret_key": SECRET_KEY_ENV,
                        **({"kafka_username": KAFKA_USERNAME_ENV, "kafka_password": KAFKA_PASSWORD_ENV}
                           if info.kafka_sasl_mechanism else {})},
        "toxiproxy": {"api": info.toxiproxy_api, "proxies": {name: name for name in info.proxies}},
        "hooks": local_hooks(stack, os.getpid()),
    }
    return parse_target(doc, source)


def write_target(stack: Stack, path: Path, name: str = "local-stack") -> Target:
    """Write the stack's target file at `path` (atomically: a reader never sees half a file)."""
    target = stack_target(stack, name, str(path))
    header = (f"# The stack of {stack.run_dir}, written by `chaos stack up` at "
              f"{datetime.now(UTC).isoformat(timespec='seconds')}.\n"
              f"# Valid while that command (pid {os.getpid()}) runs: its restart hooks signal it; it removes this file "
              "when it stops.\n"
              f"# Credentials are the variables {ACCESS_KEY_ENV} and {SECRET_KEY_ENV} of the environment it was "
              "started in.\n")
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(header + yaml.safe_dump(target.to_dict(), sort_keys=False, width=100))
    temporary.replace(path)
    return target
