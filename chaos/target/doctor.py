"""`chaos doctor --target FILE`: does the target answer, and does its traffic really cross the proxies the faults go
through? One line per check (`ok`, `NO` or `--` for a check that does not apply, with why); exit 0 when nothing is
`NO`, 3 (environment) otherwise.

Crossing is proved, not assumed: with an existing Toxiproxy, each Kafka and S3 proxy is disabled for a moment, the
endpoint must stop answering, and the proxy is enabled again (in a finally, also on Ctrl-C) and must answer again.
A broker must advertise the proxy's address, or clients reconnect around it after bootstrap: every broker address
in the metadata must be a proxy's listen address.

Credentials are read from the environment variables the target names; only whether each is set is printed.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from urllib.parse import urlsplit

from infra.errors import InfraError
from infra.toxiproxy import ToxiproxyClient

from .model import Target, upstream

OK, NO, NOT_APPLICABLE = "ok", "NO", "--"
TIMEOUT_S = 5.0
DOWN_TIMEOUT_S = 3.0  # how long a disabled proxy's endpoint is given to (wrongly) answer


@dataclass(frozen=True)
class Row:
    status: str
    name: str
    detail: str

    def line(self, width: int) -> str:
        return f"{self.status:<3} {self.name:<{width}}  {self.detail}"


def _env(target: Target, purpose: str) -> str | None:
    name = target.credentials.get(purpose)
    return os.environ.get(name) if name else None


# -- clients built from a target -----------------------------------------------------------------------------

# librdkafka (the harness's client) and the JVM client (the job's) share these option names; the others
# (ssl.truststore.*, sasl.jaas.config) are the job's only.
SHARED_KAFKA_OPTIONS = ("security.protocol", "sasl.mechanism", "client.id", "ssl.endpoint.identification.algorithm")


def kafka_config(target: Target) -> dict[str, str | int | float | bool]:
    config: dict[str, str | int | float | bool] = {"bootstrap.servers": ",".join(target.kafka.bootstrap_servers),
                                                   "log_level": 0}
    for key in SHARED_KAFKA_OPTIONS:
        if key in target.kafka.options:
            config["sasl.mechanisms" if key == "sasl.mechanism" else key] = target.kafka.options[key]
    user, password = _env(target, "kafka_username"), _env(target, "kafka_password")
    if user is not None and password is not None:
        config.update({"sasl.username": user, "sasl.password": password})
    return config


def kafka_brokers(target: Target, timeout: float = TIMEOUT_S) -> list[str]:
    """host:port of each broker the cluster's metadata advertises; raises when the cluster does not answer."""
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient(kafka_config(target)).list_topics(timeout=timeout)
    return sorted(f"{b.host}:{b.port}" for b in metadata.brokers.values())


def s3_bucket(target: Target, timeout: float = TIMEOUT_S) -> bool:
    """Whether the target's bucket exists, asked through its endpoint with its credentials (no retries)."""
    import urllib3
    from minio import Minio

    http = urllib3.PoolManager(timeout=urllib3.Timeout(connect=timeout, read=timeout),
                               retries=urllib3.Retry(total=0), cert_reqs="CERT_REQUIRED" if target.s3.tls else None,
                               ca_certs=target.s3.ca_bundle)
    client = Minio(target.s3.host_port, access_key=_env(target, "s3_access_key"),
                   secret_key=_env(target, "s3_secret_key"), session_token=_env(target, "s3_session_token"),
                   secure=target.s3.tls, region=target.s3.region, http_client=http)
    return client.bucket_exists(target.s3.bucket)


def toxiproxy_client(target: Target) -> ToxiproxyClient:
    api = urlsplit(target.toxiproxy.api or "")
    return ToxiproxyClient(api.hostname or "", api.port or 8474, timeout=TIMEOUT_S)


def _answers(probe: Callable[[], object]) -> tuple[bool, str]:
    try:
        probe()
        return True, ""
    except Exception as error:  # any failure is "does not answer": the detail says which
        return False, f"{type(error).__name__}: {str(error).splitlines()[0][:160] if str(error) else ''}"


# -- the checks ------------------------------------------------------------------------------------------------

def _credentials(target: Target) -> Row:
    if not target.credentials:
        return Row(NOT_APPLICABLE, "credentials", "none named (the standard providers: profile, instance role)")
    missing = [name for name in target.credentials.values() if not os.environ.get(name)]
    named = ", ".join(f"{p}={n}" for p, n in target.credentials.items())
    if missing:
        return Row(NO, "credentials", f"not set in this environment: {', '.join(missing)} (named: {named})")
    return Row(OK, "credentials", f"set (values not shown): {named}")


def _kafka(target: Target) -> tuple[Row, list[str]]:
    brokers: list[str] = []

    def probe() -> None:
        brokers.extend(kafka_brokers(target))

    ok, why = _answers(probe)
    servers = ",".join(target.kafka.bootstrap_servers)
    if not ok:
        return Row(NO, "kafka metadata", f"{servers} did not answer ({why})"), []
    return Row(OK, "kafka metadata", f"{servers}: {len(brokers)} broker(s) advertised: {', '.join(brokers)}"), brokers


def _proxy_listens(target: Target, client: ToxiproxyClient | None) -> dict[str, str]:
    """role -> the address its proxy listens on."""
    tp = target.toxiproxy
    if tp.mode == "start":
        return {role: route.listen for role, route in tp.routes.items()}
    assert client is not None
    found = client.proxies()
    return {role: found[name].listen for role, name in tp.proxies.items() if name in found}


def _advertised(target: Target, brokers: list[str], listens: dict[str, str]) -> Row:
    kafka_listens = {addr for role, addr in listens.items() if role == "kafka" or role.startswith("kafka-")}
    if not kafka_listens:
        return Row(NOT_APPLICABLE, "kafka advertises proxy", "no Kafka proxy in the target: network faults on kafka "
                   "cannot act (SKIPPED)")
    outside = [b for b in brokers if b not in kafka_listens]
    if outside:
        return Row(NO, "kafka advertises proxy", f"broker(s) {', '.join(outside)} advertise an address no proxy "
                   f"listens on ({', '.join(sorted(kafka_listens))}): clients would go around the proxy after "
                   "bootstrap; add a listener that advertises the proxy (docs/targets.md)")
    bootstrap_outside = [s for s in target.kafka.bootstrap_servers if s not in kafka_listens]
    if bootstrap_outside:
        return Row(NO, "kafka advertises proxy", f"bootstrap server(s) {', '.join(bootstrap_outside)} are not a "
                   "proxy's listen address: bootstrap would go around the proxy")
    return Row(OK, "kafka advertises proxy", f"every broker advertises a proxy: {', '.join(brokers)}")


def _s3(target: Target) -> Row:
    where = f"{target.s3.url} bucket {target.s3.bucket}"
    result: list[bool] = []
    ok, why = _answers(lambda: result.append(s3_bucket(target)))
    if not ok:
        return Row(NO, "s3 bucket", f"{where}: no answer ({why})")
    if not result[0]:
        return Row(NO, "s3 bucket", f"{where}: the endpoint answers, the bucket does not exist")
    return Row(OK, "s3 bucket", f"{where} exists" + (f" (TLS, CA {target.s3.ca_bundle})" if target.s3.ca_bundle
                                                    else " (TLS)" if target.s3.tls else ""))


def _tcp(address: str) -> None:
    host, _, port = address.rpartition(":")
    with socket.create_connection((host.strip("[]"), int(port)), timeout=TIMEOUT_S):
        pass


def _spark(target: Target) -> Row:
    master = target.spark.master
    if master.startswith("local"):
        return Row(OK, "spark master", f"{master}: runs in the driver")
    if master == "yarn":
        return Row(NOT_APPLICABLE, "spark master", "yarn: reached through HADOOP_CONF_DIR by spark-submit, not checked")
    if master.startswith("k8s://"):
        api = urlsplit(master.removeprefix("k8s://"))
        ok, why = _answers(lambda: _tcp(f"{api.hostname}:{api.port or 443}"))
        return Row(OK if ok else NO, "spark master", f"{master}: " + ("API server accepts connections" if ok else why))
    addresses = master.removeprefix("spark://").split(",")
    for address in addresses:
        ok, why = _answers(partial(_tcp, address))
        if not ok:
            return Row(NO, "spark master", f"{address} does not accept connections ({why})")
    if not target.spark.master_ui:
        return Row(OK, "spark master", f"{master} accepts connections (no master_ui: workers not checked)")
    import requests

    status: dict = {}
    ok, why = _answers(lambda: status.update(requests.get(f"{target.spark.master_ui}/json", timeout=TIMEOUT_S).json()))
    if not ok:
        return Row(NO, "spark master", f"{target.spark.master_ui}/json did not answer ({why})")
    workers = status.get("aliveworkers", 0)
    if status.get("status") != "ALIVE" or not workers:
        return Row(NO, "spark master", f"{master}: status {status.get('status')}, {workers} worker(s) alive")
    return Row(OK, "spark master", f"{master}: ALIVE, {workers} worker(s), {status.get('cores', '?')} cores")


def _version(text: str) -> str:
    """Toxiproxy's /version: a JSON object in 2.6+ ({"version": "2.9.0"}), plain text before."""
    try:
        found = json.loads(text)
    except ValueError:
        return text
    return str(found.get("version", text)) if isinstance(found, dict) else text


def _toxiproxy(target: Target) -> tuple[Row, ToxiproxyClient | None]:
    tp = target.toxiproxy
    if tp.mode == "start":
        return Row(NOT_APPLICABLE, "toxiproxy", "mode start: chaos run starts it with the routes "
                   f"({', '.join(tp.routes) or 'none'})"), None
    client = toxiproxy_client(target)
    try:
        version = _version(client.version())
        found = client.proxies()
    except InfraError as error:
        return Row(NO, "toxiproxy", f"{tp.api}: {error}"), None
    missing = [f"{role}={name}" for role, name in tp.proxies.items() if name not in found]
    if missing:
        return Row(NO, "toxiproxy", f"{tp.api} (version {version}) has no proxy {', '.join(missing)} "
                   f"(it has: {', '.join(sorted(found)) or 'none'})"), None
    disabled = [name for name in tp.proxies.values() if not found[name].enabled]
    if disabled:
        return Row(NO, "toxiproxy", f"proxy {', '.join(disabled)} is disabled; enable it (or reset the server)"), None
    return Row(OK, "toxiproxy", f"{tp.api} version {version}: " + ", ".join(
        f"{role}={name} ({found[name].listen} -> {found[name].upstream})" for role, name in tp.proxies.items())), client


def _crossing(target: Target, client: ToxiproxyClient, role: str, probe: Callable[[], object]) -> Row:
    """Disable the role's proxies (Kafka's: `kafka`, or every broker's kafka-N), the endpoint must stop answering;
    enable them again (always), it must answer."""
    proxies = target.toxiproxy.proxies
    names = [proxies[r] for r in _roles_of(target, role)]
    name = ", ".join(names)
    check = f"{role} crosses proxy"
    try:
        for each in names:
            client.set_enabled(each, False)
        down, _ = _answers(probe)
    finally:
        for each in names:
            client.set_enabled(each, True)
    up, why = _answers(probe)
    if down:
        return Row(NO, check, f"the endpoint still answered with proxy {name!r} disabled: its traffic goes around "
                   "the proxy, so faults on it would not act")
    if not up:
        return Row(NO, check, f"the endpoint did not answer again once proxy {name!r} was enabled ({why})")
    return Row(OK, check, f"with proxy {name!r} disabled the endpoint stopped answering; enabled again, it answers")


def _hook(target: Target, role: str) -> Row:
    hook = target.hooks.get(role)
    if hook is None:
        return Row(NOT_APPLICABLE, f"hook {role}", f"none: process faults on {role} will be SKIPPED")
    try:
        program = shlex.split(hook.signal)[0]
    except (ValueError, IndexError):
        return Row(NO, f"hook {role}", "its command does not split into words (unbalanced quotes?)")
    found = shutil.which(program)
    return Row(OK if found else NO, f"hook {role}",
               f"{program} is {found} (not run by doctor)" if found else f"{program} is not on PATH")


def _roles_of(target: Target, role: str) -> list[str]:
    """The proxy roles that carry `role`'s traffic: Kafka's is `kafka`, or on a cluster every broker's kafka-N."""
    proxies = target.toxiproxy.proxies
    if role == "kafka" and "kafka" not in proxies:
        return sorted((r for r in proxies if r.startswith("kafka-")), key=lambda r: int(r[6:]))
    return [role] if role in proxies else []


# The suite starts the job's driver itself and signals it directly: only the servers' processes need hooks.
HOOK_ROLES = ("broker", "executor", "minio")


def rows(target: Target) -> Iterator[Row]:
    """Every check, in order, as it is made (the ones that disable proxies come last). With `mode: start` no proxy
    runs yet: Kafka and S3 are asked at their routes' upstreams, and the brokers must advertise the routes'
    addresses."""
    yield _credentials(target)
    kafka_row, brokers = _kafka(upstream(target))
    yield kafka_row
    s3_row = _s3(upstream(target))
    yield s3_row
    yield _spark(target)
    toxi_row, client = _toxiproxy(target)
    yield toxi_row
    if brokers and (target.toxiproxy.mode == "start" or client is not None):
        yield _advertised(target, brokers, _proxy_listens(target, client))
    if client is None and target.toxiproxy.mode == "existing":
        for role in ("kafka", "s3"):
            yield Row(NO, f"{role} crosses proxy", "not tried: the Toxiproxy check above did not pass")
    if client is not None:
        endpoints: dict[str, tuple[Row, Callable[[], object]]] = {
            "kafka": (kafka_row, lambda: kafka_brokers(target, timeout=DOWN_TIMEOUT_S)),
            "s3": (s3_row, lambda: s3_bucket(target, timeout=DOWN_TIMEOUT_S))}
        for role, (row, probe) in endpoints.items():
            if not _roles_of(target, role):
                yield Row(NOT_APPLICABLE, f"{role} crosses proxy", f"no {role} proxy named: network faults on "
                          f"{role} cannot act (SKIPPED)")
            elif row.status != OK:
                yield Row(NO, f"{role} crosses proxy", "not tried: the endpoint does not answer")
            else:
                yield _crossing(target, client, role, probe)
    for role in HOOK_ROLES:
        yield _hook(target, role)
