"""A target file: an existing environment the suite can run against (issue 19, docs/targets.md), YAML in, a validated
frozen `Target` out. Validated like experiment specs (chaos/spec/fields.py): unknown fields refused, every number and
string bounded, and any error the one line `<file>: <field path>: <what>; allowed: <what is allowed>` with exit 2.

Credentials are only ever the NAME of an environment variable. A value that looks like a secret is refused wherever
it appears (a credential that is not a variable name, an option whose key names a secret and whose value is not a
`${env:NAME}` reference, a literal `password="..."`, an AWS access key id), so no secret can be in the file, and
nothing here ever reads a variable's value: `chaos doctor --target` does, and prints only whether it is set.
"""
from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from urllib.parse import urlsplit

from ..errors import SpecError
from ..faults.process import TARGETS as PROCESS_ROLES
from ..spec.fields import MAX_ITEMS, Invalid, Path_, boolean, choice, dotted, integer, mapping_of, nonempty_text, show
from ..spec.loading import load_yaml

TOP_FIELDS = ("name", "kafka", "s3", "spark", "credentials", "toxiproxy", "hooks")
TOP_REQUIRED = ("kafka", "s3", "spark")
KAFKA_FIELDS = ("bootstrap_servers", "direct_bootstrap_servers", "options", "replication_factor", "min_insync_replicas")
S3_FIELDS = ("endpoint", "tls", "ca_bundle", "bucket", "prefix", "region", "path_style", "direct_endpoint",
             "fault_proxy")
SPARK_FIELDS = ("master", "master_ui", "deploy_mode", "conf", "submit_args")
TOXIPROXY_FIELDS = ("mode", "api", "proxies", "routes")
ROUTE_FIELDS = ("listen", "upstream")
# What a credential is for: the S3 keys (the job reads them as AWS_* from its environment) and a SASL login.
CREDENTIALS = ("s3_access_key", "s3_secret_key", "s3_session_token", "kafka_username", "kafka_password")
MODES = ("start", "existing")
DEPLOY_MODES = ("client", "cluster")
# The proxies a target can name, by role: the network faults' targets (chaos/faults/network.py), and one Kafka
# proxy per broker of a multi-broker cluster (kafka-1, kafka-2, ...).
PROXY_ROLES = ("kafka", "s3", "spark-driver", "spark-driver-blocks")
PROXY_ROLE_RE = re.compile(r"^(kafka|s3|spark-driver|spark-driver-blocks|kafka-[1-9][0-9]?"
                           r"|spark-driver-worker-[1-9]|spark-driver-blocks-worker-[1-9])$")
PROXY_ROLE_HELP = (f"{', '.join(PROXY_ROLES)}, kafka-N (one per broker) or spark-driver-worker-N and "
                   "spark-driver-blocks-worker-N (worker N's own link to the driver)")
ROUTE_ROLE_RE = re.compile(r"^(kafka|s3|kafka-[1-9][0-9]?)$")  # what the suite can put a proxy in front of
# A hook's placeholders: the signal by name (KILL, TERM, STOP, CONT), the role it acts on, and the node (1..N): the
# broker with that node id, or the executor on that worker. A hook with {node} aims at one node of several.
HOOK_PLACEHOLDERS = ("signal", "role", "node")
HOOK_FIELDS = ("signal", "restart", "nodes")
NODE_ROLES = ("broker", "executor")  # the roles of which a target has several
MAX_NODES = 99

MAX_TEXT = 8192          # any one string: a URL, a path, an option's value (a jar list), a hook's command
MAX_NAME_TEXT = 200      # a key, a host name, a bucket, an option's name
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
HOST_PORT_RE = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]{1,253}):([0-9]{1,5})$")
BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
PREFIX_RE = re.compile(r"^[A-Za-z0-9!_.*'()/-]{0,512}$")
REGION_RE = re.compile(r"^[a-z0-9-]{1,64}$")
OPTION_KEY_RE = re.compile(r"^[A-Za-z0-9_.-]{1,200}$")
SPARK_MASTER_RE = re.compile(r"^(spark://[A-Za-z0-9._-]+:[0-9]{1,5}(,[A-Za-z0-9._-]+:[0-9]{1,5})*|k8s://https?://\S+|"
                             r"yarn|local(\[([1-9][0-9]{0,3}|\*)(,[0-9]{1,4})?\])?)$")
SPARK_MASTER_HELP = "spark://HOST:PORT, k8s://https://HOST[:PORT], yarn or local[N]"

# -- secrets: refused wherever they appear ---------------------------------------------------------------------
SECRET_KEY_RE = re.compile(r"(secret\.key|access\.key|session\.token|password|secret|jaas\.config|token)$",
                           re.IGNORECASE)
LITERAL_PASSWORD_RE = re.compile(r"password\s*=\s*\"(?!\$\{)", re.IGNORECASE)
ENV_REFERENCE_RE = re.compile(r"^\$\{env:[A-Za-z_][A-Za-z0-9_]*\}$")
AWS_KEY_ID_RE = re.compile(r"(?<![A-Z0-9])(AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])")
SECRET_HELP = "the NAME of an environment variable (credentials:), or a ${env:NAME} reference for an option"


@dataclass(frozen=True)
class Kafka:
    bootstrap_servers: tuple[str, ...]
    options: Mapping[str, str] = field(default_factory=dict)  # client options (kafka.* passthrough for the job)
    # The brokers past the proxies, for the harness's probes (lag, leaders) while a network fault cuts the proxied
    # path; () = the bootstrap servers (the probes then go dark during such a fault).
    direct_bootstrap_servers: tuple[str, ...] = ()
    replication_factor: int | None = None   # of the topics the suite creates; None = the brokers' default
    min_insync_replicas: int | None = None  # of those topics, with a replication factor above 1


@dataclass(frozen=True)
class S3:
    endpoint: str                # URL (scheme optional: `tls` decides) or host:port
    bucket: str
    prefix: str = ""
    region: str = "us-east-1"
    path_style: bool = True
    tls: bool = False
    ca_bundle: str | None = None  # a PEM file of the CA that signed the endpoint's certificate
    direct_endpoint: str | None = None  # past the proxies, for the harness's reads during faults; None = endpoint
    fault_proxy: str | None = None      # the control API of an S3 fault proxy in the S3 path (docs/s3proxy.md)

    def direct_url(self) -> str:
        """The endpoint the harness reads through, as a URL with the scheme `tls` says."""
        host = (self.direct_endpoint or self.endpoint).split("://", 1)[-1]
        return f"{'https' if self.tls else 'http'}://{host}"

    @property
    def url(self) -> str:
        """The endpoint as a URL with the scheme `tls` says."""
        host = self.endpoint.split("://", 1)[-1]
        return f"{'https' if self.tls else 'http'}://{host}"

    @property
    def host_port(self) -> str:
        parts = urlsplit(self.url)
        return f"{parts.hostname}:{parts.port or (443 if self.tls else 80)}"

    @property
    def storage_uri(self) -> str:
        return f"s3a://{self.bucket}" + (f"/{self.prefix.strip('/')}" if self.prefix.strip("/") else "")


@dataclass(frozen=True)
class Spark:
    master: str
    master_ui: str | None = None   # the standalone master's web UI (its /json says which workers are alive)
    deploy_mode: str = "client"
    conf: Mapping[str, str] = field(default_factory=dict)  # spark-submit --conf KEY=VALUE
    submit_args: tuple[str, ...] = ()  # other spark-submit arguments (--jars, --packages, --num-executors, ...)


@dataclass(frozen=True)
class Route:
    listen: str    # host:port the suite's Toxiproxy listens on (what clients and the broker's advertised listener use)
    upstream: str  # host:port of the real server


@dataclass(frozen=True)
class Toxiproxy:
    mode: str = "start"          # start: the suite starts one with `routes`; existing: `api` with `proxies`
    api: str | None = None
    proxies: Mapping[str, str] = field(default_factory=dict)  # role -> proxy name on the server
    routes: Mapping[str, Route] = field(default_factory=dict)  # role -> what the suite's proxy forwards (start)

    def proxy(self, role: str) -> str | None:
        """The proxy name for a role, or None when the target has no proxy in that path."""
        if self.mode == "start":
            return role if role in self.routes else None
        return self.proxies.get(role)


@dataclass(frozen=True)
class Hook:
    signal: str                 # command template: `{signal}` (KILL, TERM, STOP, CONT), `{role}` and `{node}`
    restart: str | None = None  # command that brings a killed process back, if the platform does not
    nodes: int | None = None    # how many nodes `{node}` ranges over (1..nodes); brokers: the target's by default

    @property
    def per_node(self) -> bool:
        """Whether the hook aims at one node (its command has `{node}`), not at every process of its role."""
        return "{node}" in self.signal


@dataclass(frozen=True)
class Target:
    source: str
    name: str
    kafka: Kafka
    s3: S3
    spark: Spark
    credentials: Mapping[str, str] = field(default_factory=dict)  # purpose -> environment variable NAME
    toxiproxy: Toxiproxy = field(default_factory=Toxiproxy)
    hooks: Mapping[str, Hook] = field(default_factory=dict)       # process role -> hook

    def to_dict(self) -> dict:
        """The YAML document of this target (names of variables only: a Target holds no value)."""
        doc: dict = {"name": self.name,
                     "kafka": {"bootstrap_servers": list(self.kafka.bootstrap_servers)},
                     "s3": {"endpoint": self.s3.endpoint, "tls": self.s3.tls, "bucket": self.s3.bucket,
                            "prefix": self.s3.prefix, "region": self.s3.region, "path_style": self.s3.path_style},
                     "spark": {"master": self.spark.master, "deploy_mode": self.spark.deploy_mode}}
        if self.kafka.options:
            doc["kafka"]["options"] = dict(self.kafka.options)
        if self.kafka.direct_bootstrap_servers:
            doc["kafka"]["direct_bootstrap_servers"] = list(self.kafka.direct_bootstrap_servers)
        for key in ("replication_factor", "min_insync_replicas"):
            if getattr(self.kafka, key) is not None:
                doc["kafka"][key] = getattr(self.kafka, key)
        if self.s3.ca_bundle:
            doc["s3"]["ca_bundle"] = self.s3.ca_bundle
        for key in ("direct_endpoint", "fault_proxy"):
            if getattr(self.s3, key):
                doc["s3"][key] = getattr(self.s3, key)
        if self.spark.master_ui:
            doc["spark"]["master_ui"] = self.spark.master_ui
        if self.spark.conf:
            doc["spark"]["conf"] = dict(self.spark.conf)
        if self.spark.submit_args:
            doc["spark"]["submit_args"] = list(self.spark.submit_args)
        if self.credentials:
            doc["credentials"] = dict(self.credentials)
        tp = self.toxiproxy
        doc["toxiproxy"] = ({"mode": "existing", "api": tp.api, "proxies": dict(tp.proxies)} if tp.mode == "existing"
                            else {"mode": "start", "routes": {role: {"listen": r.listen, "upstream": r.upstream}
                                                              for role, r in tp.routes.items()}})
        if self.hooks:
            doc["hooks"] = {role: {"signal": h.signal, **({"restart": h.restart} if h.restart else {}),
                                   **({"nodes": h.nodes} if h.nodes is not None else {})}
                            for role, h in self.hooks.items()}
        return doc


# -- fields ----------------------------------------------------------------------------------------------------

def _text(value: object, path: Path_, limit: int = MAX_TEXT) -> str:
    text = nonempty_text(value, path)
    if len(text) > limit or "\n" in text or "\x00" in text:  # not echoed: a value may hold a secret
        raise Invalid(path, f"is not one line of at most {limit} characters ({len(text)} characters)",
                      f"one line of at most {limit} characters")
    if AWS_KEY_ID_RE.search(text):
        raise Invalid(path, "holds what looks like an AWS access key id", SECRET_HELP)
    if LITERAL_PASSWORD_RE.search(text):
        raise Invalid(path, "holds a literal password=\"...\"", SECRET_HELP)
    return text


def _host_port(value: object, path: Path_) -> str:
    text = _text(value, path, MAX_NAME_TEXT)
    match = HOST_PORT_RE.match(text)
    if not match or not 1 <= int(match.group(2)) <= 65535:
        raise Invalid(path, f"{show(text)} is not valid", "HOST:PORT with a port from 1 to 65535")
    return text


def _http_url(value: object, path: Path_) -> str:
    text = _text(value, path)
    parts = urlsplit(text)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme not in ("http", "https") or not parts.hostname or port is None or parts.username or parts.password:
        raise Invalid(path, f"{show(text)} is not valid", "http(s)://HOST:PORT, without user or password")
    return text.rstrip("/")


def _options(value: object, path: Path_, limit: int = MAX_ITEMS) -> dict[str, str]:
    """KEY: VALUE options passed through to a client; a key that names a secret takes only a ${env:NAME}."""
    if not isinstance(value, dict):
        raise Invalid(path, f"must be a mapping, got {show(value)}", "a mapping of option names to values")
    if len(value) > limit:
        raise Invalid(path, f"{len(value)} options", f"at most {limit}")
    options = {}
    for key, raw in value.items():
        where = path + (str(key),)
        if not isinstance(key, str) or not OPTION_KEY_RE.match(key):
            raise Invalid(where, f"{show(key)} is not a valid option name", "letters, digits, . _ - (at most 200)")
        if isinstance(raw, bool):
            raw = "true" if raw else "false"
        elif isinstance(raw, (int, float)):
            raw = str(raw)
        text = _text(raw, where)
        if SECRET_KEY_RE.search(key) and not _by_reference(key, text):
            raise Invalid(where, "names a secret, and its value is not a ${env:NAME} reference", SECRET_HELP)
        options[key] = text
    return options


def _by_reference(key: str, text: str) -> bool:
    """A secret-named option's value holds its secret by reference only: `${env:NAME}`, or a JAAS line (`*jaas.config`)
    whose every password is one (Kafka's EnvVarConfigProvider resolves them in the client: docs/job.md)."""
    if ENV_REFERENCE_RE.match(text):
        return True
    if key.lower().endswith("jaas.config"):
        passwords = re.findall(r'password\s*=\s*"([^"]*)"', text, re.IGNORECASE)
        return bool(passwords) and all(ENV_REFERENCE_RE.match(value) for value in passwords)
    return False


def _servers(raw: object, where: Path_) -> tuple[str, ...]:
    servers = raw.split(",") if isinstance(raw, str) else raw
    if not isinstance(servers, list) or not servers or len(servers) > MAX_ITEMS:
        raise Invalid(where, f"{show(raw)} is not valid",
                      f"HOST:PORT[,HOST:PORT...] or a list of 1 to at most {MAX_ITEMS}")
    return tuple(_host_port(s.strip() if isinstance(s, str) else s, where + (str(i),)) for i, s in enumerate(servers))


def _kafka(value: object, path: Path_) -> Kafka:
    section = mapping_of(value, path, KAFKA_FIELDS, required=("bootstrap_servers",))
    hosts = _servers(section["bootstrap_servers"], path + ("bootstrap_servers",))
    direct = (_servers(section["direct_bootstrap_servers"], path + ("direct_bootstrap_servers",))
              if "direct_bootstrap_servers" in section else ())
    replication = (integer(section["replication_factor"], path + ("replication_factor",), 1, 32)
                   if "replication_factor" in section else None)
    min_insync = (integer(section["min_insync_replicas"], path + ("min_insync_replicas",), 1, replication or 32)
                  if "min_insync_replicas" in section else None)
    return Kafka(hosts, MappingProxyType(_options(section.get("options", {}), path + ("options",))), direct,
                 replication, min_insync)


def _s3(value: object, path: Path_) -> S3:
    section = mapping_of(value, path, S3_FIELDS, required=("endpoint", "bucket"))
    endpoint = _text(section["endpoint"], path + ("endpoint",))
    scheme = endpoint.split("://", 1)[0] if "://" in endpoint else None
    if scheme not in (None, "http", "https"):
        raise Invalid(path + ("endpoint",), f"{show(endpoint)} is not valid", "http(s)://HOST:PORT or HOST:PORT")
    if "://" not in endpoint:
        _host_port(endpoint, path + ("endpoint",))
    else:
        _http_url(endpoint, path + ("endpoint",))
    tls = boolean(section["tls"], path + ("tls",)) if "tls" in section else scheme == "https"
    if scheme is not None and tls != (scheme == "https"):
        raise Invalid(path + ("tls",), f"{tls} disagrees with the endpoint's {scheme}://",
                      "the endpoint's scheme, or no scheme in the endpoint")
    ca_bundle = _text(section["ca_bundle"], path + ("ca_bundle",)) if "ca_bundle" in section else None
    if ca_bundle is not None and not tls:
        raise Invalid(path + ("ca_bundle",), "given without TLS", "a CA bundle only with tls: true (https://)")
    if ca_bundle is not None and not Path(ca_bundle).is_absolute():
        raise Invalid(path + ("ca_bundle",), f"{show(ca_bundle)} is not an absolute path",
                      "an absolute path to a PEM file")
    bucket = _text(section["bucket"], path + ("bucket",), 63)
    if not BUCKET_RE.match(bucket):
        raise Invalid(path + ("bucket",), f"{show(bucket)} is not valid", "an S3 bucket name: 3-63 of a-z 0-9 . -")
    prefix = section.get("prefix", "")
    if prefix != "":
        _text(prefix, path + ("prefix",))
    if not isinstance(prefix, str) or not PREFIX_RE.match(prefix) or ".." in prefix.split("/"):
        raise Invalid(path + ("prefix",), f"{show(prefix)} is not valid",
                      "a key prefix: letters, digits, ! _ . * ' ( ) / -")
    region = section.get("region", "us-east-1")
    if not isinstance(region, str) or not REGION_RE.match(region):
        raise Invalid(path + ("region",), f"{show(region)} is not valid", "a region name like us-east-1")
    path_style = boolean(section["path_style"], path + ("path_style",)) if "path_style" in section else True
    direct = None
    if "direct_endpoint" in section:
        direct = _text(section["direct_endpoint"], path + ("direct_endpoint",))
        if "://" in direct:
            if direct.split("://", 1)[0] != ("https" if tls else "http"):
                raise Invalid(path + ("direct_endpoint",), f"{show(direct)} disagrees with tls: {str(tls).lower()}",
                              "the same scheme as the endpoint, or HOST:PORT")
            _http_url(direct, path + ("direct_endpoint",))
        else:
            _host_port(direct, path + ("direct_endpoint",))
    fault_proxy = _http_url(section["fault_proxy"], path + ("fault_proxy",)) if "fault_proxy" in section else None
    return S3(endpoint, bucket, prefix, region, path_style, tls, ca_bundle, direct, fault_proxy)


def _spark(value: object, path: Path_) -> Spark:
    section = mapping_of(value, path, SPARK_FIELDS, required=("master",))
    master = _text(section["master"], path + ("master",))
    if not SPARK_MASTER_RE.match(master):
        raise Invalid(path + ("master",), f"{show(master)} is not valid", SPARK_MASTER_HELP)
    ui = _http_url(section["master_ui"], path + ("master_ui",)) if "master_ui" in section else None
    deploy_mode = choice(section.get("deploy_mode", "client"), path + ("deploy_mode",), DEPLOY_MODES)
    conf = _options(section.get("conf", {}), path + ("conf",))
    raw = section.get("submit_args", [])
    if not isinstance(raw, list) or len(raw) > MAX_ITEMS:
        raise Invalid(path + ("submit_args",), f"{show(raw)} is not valid", f"a list of at most {MAX_ITEMS} strings")
    args = tuple(_text(a, path + ("submit_args", str(i))) for i, a in enumerate(raw))
    for i, arg in enumerate(args):
        if arg in ("--conf", "-c") or arg.startswith("--conf="):
            raise Invalid(path + ("submit_args", str(i)), f"{show(arg)} is not valid here",
                          "spark settings under spark.conf (checked for secrets there)")
        if arg in ("--master", "--deploy-mode") or arg.startswith(("--master=", "--deploy-mode=")):
            raise Invalid(path + ("submit_args", str(i)), f"{show(arg)} is not valid here",
                          "spark.master and spark.deploy_mode")
    return Spark(master, ui, deploy_mode, MappingProxyType(conf), args)


def _credentials(value: object, path: Path_) -> dict[str, str]:
    section = mapping_of(value, path, CREDENTIALS)
    names = {}
    for purpose, raw in section.items():
        where = path + (purpose,)
        if not isinstance(raw, str) or not ENV_NAME_RE.match(raw) or AWS_KEY_ID_RE.search(raw):
            # never echo the value: it may be the secret itself
            raise Invalid(where, "is not the name of an environment variable (the value is not shown: it may be a "
                                 "secret)", "an environment variable NAME like AWS_SECRET_ACCESS_KEY, never its value")
        names[purpose] = raw
    for first, second in (("s3_access_key", "s3_secret_key"), ("s3_secret_key", "s3_access_key"),
                          ("kafka_password", "kafka_username"), ("kafka_username", "kafka_password")):
        if first in names and second not in names:
            raise Invalid(path + (second,), "missing", f"{second} together with {first}")
    return names


def _toxiproxy(value: object, path: Path_) -> Toxiproxy:
    section = mapping_of(value, path, TOXIPROXY_FIELDS)
    mode = choice(section.get("mode", "existing" if "api" in section else "start"), path + ("mode",), MODES)
    if mode == "start":
        for key in ("api", "proxies"):
            if key in section:
                raise Invalid(path + (key,), "given with mode: start",
                              "routes with mode: start (the suite starts Toxiproxy); "
                              "api and proxies with an existing one")
        raw = section.get("routes", {})
        if not isinstance(raw, dict) or len(raw) > MAX_ITEMS:
            raise Invalid(path + ("routes",), f"{show(raw)} is not valid", "a mapping of role to {listen, upstream}")
        routes = {}
        for role, route in raw.items():
            where = path + ("routes", str(role))
            if not isinstance(role, str) or not ROUTE_ROLE_RE.match(role):
                raise Invalid(where, "unknown role", "kafka, s3 or kafka-N (one per broker)")
            entry = mapping_of(route, where, ROUTE_FIELDS, required=ROUTE_FIELDS)
            routes[role] = Route(_host_port(entry["listen"], where + ("listen",)),
                                 _host_port(entry["upstream"], where + ("upstream",)))
        return Toxiproxy("start", None, MappingProxyType({}), MappingProxyType(routes))
    if "routes" in section:
        raise Invalid(path + ("routes",), "given with an existing Toxiproxy", "proxies (role: proxy name) with api")
    if "api" not in section:
        raise Invalid(path + ("api",), "missing", "api: http://HOST:PORT of the existing Toxiproxy")
    api = _http_url(section["api"], path + ("api",))
    raw = section.get("proxies", {role: role for role in ("kafka", "s3")})
    if not isinstance(raw, dict) or not raw or len(raw) > MAX_ITEMS:
        raise Invalid(path + ("proxies",), f"{show(raw)} is not valid", f"a mapping of role ({PROXY_ROLE_HELP}) to "
                      "proxy name")
    proxies = {}
    for role, name in raw.items():
        where = path + ("proxies", str(role))
        if not isinstance(role, str) or not PROXY_ROLE_RE.match(role):
            raise Invalid(where, "unknown role", PROXY_ROLE_HELP)
        proxies[role] = _text(name, where, MAX_NAME_TEXT)
    return Toxiproxy("existing", api, MappingProxyType(proxies), MappingProxyType({}))


def _template(value: object, path: Path_) -> str:
    text = _text(value, path)
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError as exc:
        raise Invalid(path, f"not a valid template ({exc})",
                      "a command with {signal}, {role}, {node}; {{ for a brace") from None
    for name in fields:
        if name not in HOOK_PLACEHOLDERS:
            raise Invalid(path, f"unknown placeholder {{{name}}}", ", ".join(f"{{{p}}}" for p in HOOK_PLACEHOLDERS))
    return text


def _hooks(value: object, path: Path_) -> dict[str, Hook]:
    section = mapping_of(value, path, PROCESS_ROLES)
    hooks = {}
    for role, raw in section.items():
        where = path + (role,)
        entry = mapping_of({"signal": raw} if isinstance(raw, str) else raw, where, HOOK_FIELDS, required=("signal",))
        command = _template(entry["signal"], where + ("signal",))
        if "{signal}" not in command:
            raise Invalid(where + ("signal",), "has no {signal}", "a command with {signal} (KILL, TERM, STOP, CONT)")
        restart = _template(entry["restart"], where + ("restart",)) if "restart" in entry else None
        hook = Hook(command, restart,
                    integer(entry["nodes"], where + ("nodes",), 1, MAX_NODES) if "nodes" in entry else None)
        if hook.per_node and role not in NODE_ROLES:
            raise Invalid(where + ("signal",), f"has {{node}}, and a target has one {role}",
                          f"{{node}} only in the hooks of {' and '.join(NODE_ROLES)}")
        if restart is not None and "{node}" in restart and not hook.per_node:
            raise Invalid(where + ("restart",), "has {node}, and signal has not",
                          "{node} in signal too: the restart brings back the node that signal stopped")
        if hook.nodes is not None and not hook.per_node:
            raise Invalid(where + ("nodes",), "is given, and signal has no {node}", "a signal command with {node}")
        if role == "executor" and hook.per_node and hook.nodes is None:
            raise Invalid(where, "signal has {node}, and nodes is missing",
                          "nodes: how many workers there are (the executor on worker 1..nodes)")
        hooks[role] = hook
    return hooks


def _routes_match(kafka: Kafka, s3: S3, toxiproxy: Toxiproxy) -> None:
    """With `mode: start` the endpoints are where the suite's proxies will listen: a route per endpoint it names."""
    kafka_listens = {r.listen for role, r in toxiproxy.routes.items() if role != "s3"}
    if kafka_listens:
        outside = [s for s in kafka.bootstrap_servers if s not in kafka_listens]
        if outside:
            raise Invalid(("kafka", "bootstrap_servers"), f"{outside[0]} is not a Kafka route's listen address",
                          "with toxiproxy routes, the addresses the proxies listen on: "
                          f"{', '.join(sorted(kafka_listens))}")
    s3_route = toxiproxy.routes.get("s3")
    if s3_route is not None and s3.host_port != s3_route.listen:
        raise Invalid(("s3", "endpoint"), f"{s3.host_port} is not the s3 route's listen address",
                      f"with an s3 route, its listen address {s3_route.listen}")


def parse_target(doc: object, source: str) -> Target:
    top = mapping_of(doc, (), TOP_FIELDS, required=TOP_REQUIRED)
    name = top.get("name", Path(source).stem)
    if not isinstance(name, str) or not re.match(r"^[a-z0-9][a-z0-9-]{0,63}$", name):
        raise Invalid(("name",), f"{show(name)} is not valid", "lowercase letters, digits and dashes, at most 64")
    kafka, s3 = _kafka(top["kafka"], ("kafka",)), _s3(top["s3"], ("s3",))
    toxiproxy = _toxiproxy(top.get("toxiproxy", {}), ("toxiproxy",))
    _routes_match(kafka, s3, toxiproxy)
    return Target(source, name, kafka, s3, _spark(top["spark"], ("spark",)),
                  MappingProxyType(_credentials(top.get("credentials", {}), ("credentials",))), toxiproxy,
                  MappingProxyType(_hooks(top.get("hooks", {}), ("hooks",))))


def upstream(target: Target) -> Target:
    """The target as it is before the suite starts its proxies (`mode: start`): Kafka and S3 at their routes'
    upstreams, which `chaos doctor` can reach while nothing listens on the routes' addresses yet. An existing
    Toxiproxy's target is returned as it is."""
    routes = target.toxiproxy.routes
    if target.toxiproxy.mode != "start" or not routes:
        return target
    kafka = target.kafka
    kafka_routes = {r.listen: r.upstream for role, r in routes.items() if role != "s3"}
    if kafka_routes:
        kafka = replace(kafka, bootstrap_servers=tuple(kafka_routes.get(s, s) for s in kafka.bootstrap_servers))
    s3 = target.s3
    if "s3" in routes:
        s3 = replace(s3, endpoint=f"{'https' if s3.tls else 'http'}://{routes['s3'].upstream}")
    return replace(target, kafka=kafka, s3=s3)


def load_target(path: str | Path) -> Target:
    """A target file, validated; SpecError (exit 2, one line) otherwise. Starts and contacts nothing."""
    path = Path(path)
    try:
        return parse_target(load_yaml(path), str(path))
    except Invalid as exc:
        raise SpecError(f"{path}: {dotted(exc.path)}: {exc.what}; allowed: {exc.allowed}") from None
