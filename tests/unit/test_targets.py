"""Target files (chaos/target/model.py, docs/targets.md): the documented example loads and round-trips; a class of
malformed files is refused with the one line `<file>: <field>: <what>; allowed: ...`; a secret value is never
accepted nor echoed; and `chaos doctor --target` on a bad file exits 2 with one line, contacting nothing."""
from __future__ import annotations

import copy
import dataclasses
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from chaos.errors import SpecError
from chaos.target import load_target, parse_target

ROOT = Path(__file__).resolve().parents[2]
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def _documented() -> dict:
    """The example target of docs/targets.md (its first yaml block): the documentation is what is tested."""
    text = (ROOT / "docs" / "targets.md").read_text()
    block = re.search(r"```yaml\n(.*?)```", text, re.S)
    assert block, "docs/targets.md has no yaml example"
    return yaml.safe_load(block.group(1))


MINIMAL = {"kafka": {"bootstrap_servers": "127.0.0.1:9092"}, "s3": {"endpoint": "127.0.0.1:9000", "bucket": "chaos"},
           "spark": {"master": "local[2]"}}


def _write(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "target.yaml"
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False))
    return path


def test_the_documented_example_loads_and_round_trips(tmp_path):
    target = load_target(_write(tmp_path, _documented()))
    assert target.name == "staging-eu"
    assert target.kafka.bootstrap_servers == ("chaos-proxy-1:19092", "chaos-proxy-2:19092")
    assert target.s3.tls and target.s3.url == "https://s3.staging.internal:9000"
    assert target.s3.storage_uri == "s3a://sessions/chaos"
    assert target.toxiproxy.mode == "existing" and target.toxiproxy.proxy("kafka-1") == "chaos-kafka-1"
    assert target.toxiproxy.proxy("spark-driver") is None
    assert set(target.hooks) == {"broker", "executor"} and target.hooks["executor"].restart == "true"
    again = parse_target(target.to_dict(), "again.yaml")
    assert again.to_dict() == target.to_dict()


def test_defaults_of_a_minimal_target(tmp_path):
    target = load_target(_write(tmp_path, MINIMAL))
    assert target.name == "target"  # the file's name
    assert (target.s3.tls, target.s3.path_style, target.s3.region, target.s3.url) == \
        (False, True, "us-east-1", "http://127.0.0.1:9000")
    assert target.toxiproxy.mode == "start" and not target.toxiproxy.routes and not target.hooks
    assert target.spark.deploy_mode == "client"


def _with(path: str, value: object, base: dict | None = None) -> dict:
    doc = copy.deepcopy(base or MINIMAL)
    node = doc
    *parents, last = path.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value
    return doc


_DELETE = object()
BAD = [
    ("unknown top field", _with("kafkaa", {}), "kafkaa: unknown field"),
    ("missing section", _with("spark", _DELETE), "spark: missing"),
    ("unknown s3 field", _with("s3.secure", True), "s3.secure: unknown field"),
    ("no bootstrap", _with("kafka.bootstrap_servers", []), "kafka.bootstrap_servers: [] is not valid"),
    ("bootstrap without port", _with("kafka.bootstrap_servers", "broker-1"), "kafka.bootstrap_servers.0:"),
    ("port out of range", _with("kafka.bootstrap_servers", ["b:70000"]), "HOST:PORT with a port from 1 to 65535"),
    ("too many brokers", _with("kafka.bootstrap_servers", [f"b{i}:9092" for i in range(101)]), "at most 100"),
    ("bad master", _with("spark.master", "mesos://m:5050"), "spark.master: 'mesos://m:5050' is not valid"),
    ("bad deploy mode", _with("spark.deploy_mode", "remote"), "spark.deploy_mode:"),
    ("--conf in submit_args", _with("spark.submit_args", ["--conf", "a=b"]), "spark.submit_args.0:"),
    ("bad bucket", _with("s3.bucket", "Not_A_Bucket"), "s3.bucket:"),
    ("prefix escaping", _with("s3.prefix", "a/../b"), "s3.prefix:"),
    ("tls disagrees", _with("s3.endpoint", "https://h:9000", _with("s3.tls", False)), "s3.tls:"),
    ("ca bundle without tls", _with("s3.ca_bundle", "/etc/ca.pem"), "s3.ca_bundle: given without TLS"),
    ("relative ca bundle", _with("s3.endpoint", "https://h:9000", _with("s3.ca_bundle", "ca.pem")), "absolute path"),
    ("tls not a boolean", _with("s3.tls", "yes"), "s3.tls:"),
    ("ftp endpoint", _with("s3.endpoint", "ftp://h:21"), "s3.endpoint:"),
    ("overlong value", _with("spark.conf", {"spark.x": "a" * 8193}), "spark.conf.spark.x: is not one line"),
    ("multi-line value", _with("kafka.options", {"client.id": "a\nb"}), "kafka.options.client.id: is not one line"),
    ("option name", _with("kafka.options", {"a b": "c"}), "is not a valid option name"),
    ("too many options", _with("spark.conf", {f"spark.k{i}": "v" for i in range(101)}), "at most 100"),
    ("unknown credential", _with("credentials", {"token": "T"}), "credentials.token: unknown field"),
    ("half a key pair", _with("credentials", {"s3_access_key": "AWS_ACCESS_KEY_ID"}),
     "credentials.s3_secret_key: missing"),
    ("mode start with api", _with("toxiproxy", {"mode": "start", "api": "http://127.0.0.1:8474"}), "toxiproxy.api:"),
    ("api without port", _with("toxiproxy", {"api": "http://127.0.0.1"}), "toxiproxy.api:"),
    ("api with user", _with("toxiproxy", {"api": "http://u:p@127.0.0.1:1"}), "toxiproxy.api:"),
    ("existing without api", _with("toxiproxy", {"mode": "existing"}), "toxiproxy.api: missing"),
    ("unknown proxy role", _with("toxiproxy", {"api": "http://127.0.0.1:8474", "proxies": {"zk": "zk"}}),
     "toxiproxy.proxies.zk: unknown role"),
    ("route without upstream", _with("toxiproxy", {"routes": {"kafka": {"listen": "h:1"}}}),
     "toxiproxy.routes.kafka.upstream: missing"),
    ("routes with existing", _with("toxiproxy", {"api": "http://h:1", "routes": {}}), "toxiproxy.routes:"),
    ("unknown hook role", _with("hooks", {"zookeeper": "kill -{signal} 1"}), "hooks.zookeeper: unknown field"),
    ("hook without signal", _with("hooks", {"broker": "systemctl restart kafka"}),
     "hooks.broker.signal: has no {signal}"),
    ("hook placeholder", _with("hooks", {"broker": "kill -{signal} {pid}"}), "unknown placeholder {pid}"),
    ("hook brace", _with("hooks", {"broker": "kill -{signal"}), "not a valid template"),
    ("node on minio", _with("hooks", {"minio": "ssh s3-{node} pkill -{signal} minio"}),
     "hooks.minio.signal: has {node}, and a target has one minio"),
    ("nodes without node", _with("hooks", {"broker": {"signal": "kill -{signal} 1", "nodes": 3}}),
     "hooks.broker.nodes: is given, and signal has no {node}"),
    ("executor node without nodes", _with("hooks", {"executor": "ssh w{node} pkill -{signal} -f Executor"}),
     "hooks.executor: signal has {node}, and nodes is missing"),
    ("node in restart alone", _with("hooks", {"broker": {"signal": "kill -{signal} 1", "restart": "start b{node}"}}),
     "hooks.broker.restart: has {node}, and signal has not"),
    ("bad name", _with("name", "Staging EU"), "name:"),
]


@pytest.mark.parametrize("case,doc,fragment", BAD, ids=[case for case, _, _ in BAD])
def test_a_malformed_target_is_one_line_naming_file_and_field(tmp_path, case, doc, fragment):
    path = _write(tmp_path, doc)
    with pytest.raises(SpecError) as raised:
        load_target(path)
    message = str(raised.value)
    assert raised.value.exit_code == 2
    assert "\n" not in message and message.startswith(f"{path}: ") and "; allowed: " in message
    assert fragment in message, message


SECRETS = [
    ("a credential given as its value", _with("credentials", {"s3_access_key": "AWS_ACCESS_KEY_ID",
                                                              "s3_secret_key": SECRET}), "credentials.s3_secret_key"),
    ("an access key id as a name", _with("credentials", {"s3_access_key": "AKIAIOSFODNN7EXAMPLE",
                                                         "s3_secret_key": "S"}), "credentials.s3_access_key"),
    ("a secret-named option", _with("kafka.options", {"sasl.password": SECRET}), "kafka.options.sasl.password"),
    ("a spark secret", _with("spark.conf", {"spark.hadoop.fs.s3a.secret.key": SECRET}),
     "spark.conf.spark.hadoop.fs.s3a.secret.key"),
    ("a jaas literal", _with("kafka.options", {"sasl.jaas.config": f'x required username="u" password="{SECRET}";'}),
     "kafka.options.sasl.jaas.config"),
    ("a key id anywhere", _with("s3.prefix", "AKIAIOSFODNN7EXAMPLE/"), "s3.prefix"),
    ("a key id in a hook", _with("hooks", {"broker": "env K=AKIAIOSFODNN7EXAMPLE kill -{signal} 1"}),
     "hooks.broker.signal"),
]


@pytest.mark.parametrize("case,doc,field", SECRETS, ids=[case for case, _, _ in SECRETS])
def test_a_secret_value_is_refused_and_never_echoed(tmp_path, case, doc, field):
    with pytest.raises(SpecError) as raised:
        load_target(_write(tmp_path, doc))
    message = str(raised.value)
    assert f": {field}: " in message, message
    assert SECRET not in message and "AKIAIOSFODNN7EXAMPLE" not in message and "SFODNN7" not in message


def test_references_and_names_are_accepted(tmp_path):
    doc = _with("kafka.options", {"sasl.jaas.config": "${env:KAFKA_JAAS}", "security.protocol": "SASL_SSL"},
                _with("credentials", {"kafka_username": "KAFKA_USER", "kafka_password": "KAFKA_PASSWORD"}))
    target = load_target(_write(tmp_path, doc))
    assert target.credentials["kafka_password"] == "KAFKA_PASSWORD"


@pytest.mark.parametrize("text,fragment", [
    ("kafka: [1\n", "not valid YAML"), ("- a\n- b\n", "(document): must be a mapping"),
    ("kafka: {}\nkafka: {}\n", "kafka: appears twice"), ("", "(document): must be a mapping")])
def test_bad_yaml_is_one_line(tmp_path, text, fragment):
    with pytest.raises(SpecError, match=re.escape(fragment)):
        load_target(_write(tmp_path, text))


@pytest.mark.parametrize("case,doc,fragment", [BAD[0], BAD[24], SECRETS[0]], ids=["unknown", "api", "secret"])
def test_doctor_refuses_a_bad_target_with_exit_2_and_contacts_nothing(tmp_path, case, doc, fragment):
    """As a user runs it: one line on stderr, nothing on stdout (no check was made), fast."""
    path = _write(tmp_path, doc)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "chaos.cli", "doctor", "--target", str(path)], capture_output=True,
                          text=True, cwd=tmp_path, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert SECRET not in done.stderr and (fragment.split(":")[0] in done.stderr)
    assert time.monotonic() - started < 30


def test_doctor_on_a_missing_file_exits_2(tmp_path):
    done = subprocess.run([sys.executable, "-m", "chaos.cli", "doctor", "--target", str(tmp_path / "none.yaml")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "cannot read" in done.stderr and done.stdout == ""


# -- a running stack written as a target (chaos/target/from_stack.py), without starting one -----------------------

def _fake_stack(tmp_path: Path, backend: str = "local"):
    from types import SimpleNamespace

    from infra.access import DriverSlot, StackInfo

    info = StackInfo(backend=backend, run_dir=str(tmp_path), kafka_bootstrap="127.0.0.1:41001",
                     kafka_internal_bootstrap="127.0.0.1:41002", s3_endpoint="http://127.0.0.1:41003",
                     s3_direct_endpoint="http://127.0.0.1:41004", bucket="chaos",
                     toxiproxy_api="http://127.0.0.1:41005", spark_master="spark://127.0.0.1:41006",
                     spark_master_ui="http://127.0.0.1:41007", spark_jars=[f"/jars/j{i}.jar" for i in range(42)],
                     spark_home="/spark", driver=DriverSlot("127.0.0.1", "127.0.0.2", 41008, 41009),
                     proxies={name: {"listen": "127.0.0.1:1", "upstream": "127.0.0.1:2"}
                              for name in ("kafka", "s3", "spark-driver", "spark-driver-blocks")})
    handles = {name: SimpleNamespace(pid=pid) for name, pid in (("kafka", 101), ("minio", 102), ("spark-worker", 103))}
    commands = {"kafka": ["java", "-cp", "x", "kafka.Kafka", "/run/stack/kafka.properties"],
                "minio": ["/bin/minio", "server", "--quiet", "--address", "127.0.0.1:41010", "/run/stack/minio-data"]}
    return SimpleNamespace(info=info, backend=SimpleNamespace(name=backend), handles=handles, run_dir=tmp_path,
                           command_of=commands.__getitem__)


def test_a_stack_is_written_as_a_valid_target_with_names_and_hooks_only(tmp_path, monkeypatch):
    from chaos.target.from_stack import write_target

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    path = tmp_path / "t.yaml"
    written = write_target(_fake_stack(tmp_path), path)  # type: ignore[arg-type]
    target = load_target(path)
    assert target.to_dict() == written.to_dict()
    assert target.kafka.bootstrap_servers == ("127.0.0.1:41001",) and target.s3.url == "http://127.0.0.1:41003"
    assert target.toxiproxy.api == "http://127.0.0.1:41005" and target.toxiproxy.proxy("spark-driver") == "spark-driver"
    assert target.spark.conf["spark.driver.host"] == "127.0.0.2" and "spark.master" not in target.spark.conf
    # servers found by their command lines (a restarted one too), the pattern bracketed so it never matches the
    # shell that runs it; a killed one restarted by SIGUSR1 to the `chaos stack up` process (this one, here)
    assert target.hooks["broker"].signal == \
        r"pkill --signal {signal} -f '[k]afka\.Kafka /run/stack/kafka\.properties( |$)'"
    assert target.hooks["minio"].signal == \
        r"pkill --signal {signal} -f '[s]erver \-\-quiet \-\-address 127\.0\.0\.1:41010( |$)'"
    # one signal per server, so asking for one never restarts another that a fault keeps down
    assert target.hooks["broker"].restart == f"kill -s USR1 {os.getpid()}"
    assert target.hooks["minio"].restart == f"kill -s USR2 {os.getpid()}"
    assert target.hooks["executor"].signal == "pkill --signal {signal} -s 103 -f CoarseGrainedExecutorBackend"
    assert target.hooks["executor"].restart is None  # the worker relaunches its executors
    assert SECRET not in path.read_text() and not list(tmp_path.glob(".t.yaml.*"))


def _fake_cluster(tmp_path: Path):
    """_fake_stack with three brokers and two workers, as `--topology cluster` starts them."""
    from dataclasses import replace
    from types import SimpleNamespace

    stack = _fake_stack(tmp_path)
    brokers = ["kafka-1", "kafka-2", "kafka-3"]
    stack.info = replace(stack.info, topology="cluster", brokers=brokers, workers=["spark-worker-1", "spark-worker-2"],
                         kafka_bootstrap="127.0.0.1:41011,127.0.0.1:41012,127.0.0.1:41013",
                         kafka_internal_bootstrap="127.0.0.1:41021,127.0.0.1:41022,127.0.0.1:41023",
                         proxies={name: {"listen": "127.0.0.1:1", "upstream": "127.0.0.1:2"}
                                  for name in (*brokers, "s3", "spark-driver", "spark-driver-blocks")})
    stack.handles = {"spark-worker-1": SimpleNamespace(pid=201), "spark-worker-2": SimpleNamespace(pid=202)}
    commands = {name: ["java", "kafka.Kafka", f"/run/stack/config/{name}.properties"] for name in brokers}
    commands["minio"] = ["/bin/minio", "server", "--quiet", "--address", "127.0.0.1:41010", "/run/stack/minio-data"]
    stack.command_of = commands.__getitem__
    return stack


def test_a_cluster_is_written_with_hooks_that_aim_at_one_broker_or_one_workers_executor(tmp_path, monkeypatch):
    """{node} in the hooks: broker N by its own properties file, restarted by a request file naming it and SIGUSR1;
    the executor on worker N by that worker's session."""
    from chaos.target.from_stack import restart_requests, write_target

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    target = write_target(_fake_cluster(tmp_path), tmp_path / "t.yaml")  # type: ignore[arg-type]
    assert load_target(tmp_path / "t.yaml").to_dict() == target.to_dict()
    broker, executor = target.hooks["broker"], target.hooks["executor"]
    assert broker.per_node and broker.nodes is None  # the target's brokers: one per proxy
    assert broker.signal.format(signal="TERM", node=2) == \
        r"pkill --signal TERM -f '[k]afka\.Kafka /run/stack/config/kafka\-2\.properties( |$)'"
    requests = restart_requests(tmp_path)
    assert requests.is_dir()
    assert broker.restart is not None and \
        broker.restart.format(node=3) == f"touch {requests}/kafka-3 && kill -s USR1 {os.getpid()}"
    assert executor.per_node and executor.nodes == 2
    # the command a shell runs: worker 2's session, and an unknown node is an error rather than every executor
    assert executor.signal.format(signal="KILL", node=2) == \
        """pkill --signal KILL -s "$(echo 201 202 | cut -d ' ' -f 2)" -f CoarseGrainedExecutorBackend"""
    done = subprocess.run(executor.signal.format(signal="0", node=7), shell=True, capture_output=True)
    assert done.returncode == 2  # no such worker: pkill refuses, never every executor


def test_on_a_cluster_target_per_node_hooks_let_the_cluster_experiments_run():
    brokers = ["kafka-1", "kafka-2", "kafka-3"]
    cluster = _hooked(broker={"signal": "ssh b{node} pkill -{signal} -f kafka.Kafka", "restart": "ssh b{node} start"},
                      executor={"signal": "ssh w{node} pkill -{signal} -f Executor", "nodes": 2})
    cluster["toxiproxy"]["proxies"] = {"kafka-1": "k1", "kafka-2": "k2", "kafka-3": "k3", "s3": "s3",
                                       "spark-driver": "d", "spark-driver-blocks": "db"}
    cluster["kafka"]["direct_bootstrap_servers"] = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]
    for experiment in ("cluster-broker-lost", "cluster-executor-lost", "cluster-rolling-restart",
                       "cluster-leader-move"):
        assert _gate(cluster, experiment, brokers) is None, experiment
    # cluster-broker-lost's kill fires on a batch's commit, which only the S3 fault proxy sees
    assert "commit_written" in (_gate(cluster, "cluster-broker-lost", brokers, fault_proxy=False) or "")
    # a kill is told over by the killed broker's own endpoint: one per broker, or the arm cannot see it come back
    cluster["kafka"]["direct_bootstrap_servers"] = ["127.0.0.1:1"]
    assert "in node order" in (_gate(cluster, "cluster-broker-lost", brokers) or "")
    cluster["kafka"]["direct_bootstrap_servers"] = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]
    cluster["hooks"]["broker"]["nodes"] = 5
    assert "nodes is 5" in (_gate(cluster, "cluster-broker-lost", brokers) or "")


def test_one_workers_partition_runs_on_a_target_only_where_that_worker_has_its_own_driver_proxies():
    brokers = ["kafka-1", "kafka-2", "kafka-3"]
    cluster = _hooked()
    cluster["toxiproxy"]["proxies"] = {"kafka-1": "k1", "kafka-2": "k2", "kafka-3": "k3", "s3": "s3",
                                       "spark-driver": "d", "spark-driver-blocks": "db"}
    assert "no proxy for spark-driver-worker-2, spark-driver-blocks-worker-2" in \
        (_gate(cluster, "cluster-worker-partition", brokers) or "")
    cluster["toxiproxy"]["proxies"].update({"spark-driver-worker-2": "d2", "spark-driver-blocks-worker-2": "db2"})
    assert _gate(cluster, "cluster-worker-partition", brokers) is None


def test_one_workers_partition_is_skipped_on_a_stack_whose_workers_have_no_link_of_their_own():
    """The containers backend's workers preload no shim, so its cluster has no per-worker proxies: SKIPPED, not run
    with a fault that cannot act."""
    from chaos.spec.loading import load_experiment
    from chaos.target.gate import stack_skip_reason

    spec = load_experiment(EXPERIMENTS / "cluster-worker-partition.yaml")
    shared = ["kafka-1", "kafka-2", "kafka-3", "s3", "spark-driver", "spark-driver-blocks"]
    assert "no link of its own between the driver and worker-2" in \
        (stack_skip_reason(shared, spec, range(len(spec.faults))) or "")
    links = ["spark-driver-worker-1", "spark-driver-blocks-worker-1", "spark-driver-worker-2",
             "spark-driver-blocks-worker-2"]
    assert stack_skip_reason([*shared, *links], spec, range(len(spec.faults))) is None
    assert stack_skip_reason(shared, load_experiment(EXPERIMENTS / "cluster-executor-lost.yaml"), range(2)) is None


def test_a_per_node_hook_handle_signals_the_node_asked_for_or_every_node(tmp_path):
    import signal

    from chaos.target.model import Hook
    from chaos.target.stack import HookHandle

    marks = tmp_path / "marks"
    hook = Hook(f"echo {{role}}{{node}}={{signal}} >> {marks}", restart=f"echo up{{node}} >> {marks}", nodes=2)
    executors = HookHandle("executor", hook, [], tmp_path / "hooks.log")
    executors.signal(signal.SIGKILL, node=2)
    executors.signal(signal.SIGCONT)  # no node: each of them (a pause healed)
    broker = HookHandle("broker", hook, [], tmp_path / "hooks.log", node=1)
    broker.signal(signal.SIGTERM)
    broker.restart()
    assert marks.read_text().split() == ["executor2=KILL", "executor1=CONT", "executor2=CONT", "broker1=TERM", "up1"]


def test_a_restart_signal_asks_for_the_servers_a_hook_named_or_else_for_its_own(tmp_path):
    import signal

    from chaos.commands import stack as stack_command

    requests = tmp_path / "restart-requests"
    requests.mkdir()
    ask = stack_command._asker("kafka", requests)
    stack_command._restarts_asked.clear()
    try:
        (requests / "kafka-2").touch()
        ask(signal.SIGUSR1, None)
        assert set(stack_command._restarts_asked) == {"kafka-2"} and not list(requests.iterdir())
        stack_command._restarts_asked.clear()
        ask(signal.SIGUSR1, None)  # a one-broker stack's hook names none
        assert set(stack_command._restarts_asked) == {"kafka"}
    finally:
        stack_command._restarts_asked.clear()


def test_a_stack_whose_processes_this_host_cannot_signal_gets_no_hooks(tmp_path):
    from chaos.target.from_stack import stack_target

    assert stack_target(_fake_stack(tmp_path, "containers"), "t", "t.yaml").hooks == {}  # type: ignore[arg-type]


@pytest.mark.parametrize("env,target,fragment", [
    ({}, "t.yaml", "needs AWS_ACCESS_KEY_ID"),
    ({"AWS_ACCESS_KEY_ID": "abc", "AWS_SECRET_ACCESS_KEY": "short"}, "t.yaml", "at least 8"),
    ({"AWS_ACCESS_KEY_ID": "abc", "AWS_SECRET_ACCESS_KEY": "long-enough"}, "no/such/dir/t.yaml",
     "is not a writable directory")])
def test_stack_up_refuses_bad_input_with_exit_2_and_starts_nothing(tmp_path, env, target, fragment):
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    done = subprocess.run([sys.executable, "-m", "chaos.cli", "stack", "up", "--write-target", target, "--out",
                           str(tmp_path / "runs")], capture_output=True, text=True, cwd=tmp_path, timeout=60,
                          env={**base, **env})
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and fragment in done.stderr, done.stderr
    assert not (tmp_path / "runs").exists()
    assert "long-enough" not in done.stderr


START = _with("toxiproxy", {"routes": {"kafka": {"listen": "127.0.0.1:19092", "upstream": "broker-1:9092"},
                                       "s3": {"listen": "127.0.0.1:19000", "upstream": "s3.internal:9000"}}},
              _with("kafka.bootstrap_servers", "127.0.0.1:19092", _with("s3.endpoint", "127.0.0.1:19000")))


def test_mode_start_routes_name_the_endpoints_and_doctor_asks_their_upstreams(tmp_path):
    from chaos.target.doctor import _advertised
    from chaos.target.model import upstream

    target = load_target(_write(tmp_path, START))
    assert target.toxiproxy.proxy("kafka") == "kafka" and target.toxiproxy.proxy("spark-driver") is None
    direct = upstream(target)
    assert direct.kafka.bootstrap_servers == ("broker-1:9092",) and direct.s3.url == "http://s3.internal:9000"
    listens = {role: r.listen for role, r in target.toxiproxy.routes.items()}
    assert _advertised(target, ["127.0.0.1:19092"], listens).status == "ok"
    row = _advertised(target, ["broker-1:9092"], listens)
    assert row.status == "NO" and "advertise an address no proxy listens on" in row.detail


@pytest.mark.parametrize("path,value,fragment", [
    ("kafka.bootstrap_servers", "127.0.0.1:9092", "kafka.bootstrap_servers: 127.0.0.1:9092 is not a Kafka route's"),
    ("s3.endpoint", "127.0.0.1:9000", "s3.endpoint: 127.0.0.1:9000 is not the s3 route's listen address")])
def test_mode_start_endpoints_must_be_the_routes_listen_addresses(tmp_path, path, value, fragment):
    with pytest.raises(SpecError, match=re.escape(fragment)):
        load_target(_write(tmp_path, _with(path, value, START)))


# -- what `chaos run --target` takes from a file, and which arms it SKIPs (chaos/target/gate.py, stack.py) ------------
EXPERIMENTS = ROOT / "experiments"


def _stack_written(**changes) -> dict:
    """A target as `chaos stack up --write-target` writes one: an existing Toxiproxy, direct endpoints, a fault
    proxy."""
    doc = {"name": "local-stack",
           "kafka": {"bootstrap_servers": ["127.0.0.1:19092"], "direct_bootstrap_servers": ["127.0.0.1:9092"],
                     "replication_factor": 1, "min_insync_replicas": 1},
           "s3": {"endpoint": "http://127.0.0.1:19000", "bucket": "chaos", "direct_endpoint": "http://127.0.0.1:9000",
                  "fault_proxy": "http://127.0.0.1:9100"},
           "spark": {"master": "spark://127.0.0.1:7077"},
           "toxiproxy": {"api": "http://127.0.0.1:8474",
                         "proxies": {"kafka": "kafka", "s3": "s3", "spark-driver": "spark-driver",
                                     "spark-driver-blocks": "spark-driver-blocks"}}}
    for path, value in changes.items():
        section, _, key = path.partition(".")
        if value is None:
            doc[section].pop(key, None)
        else:
            doc[section][key] = value
    return doc


def test_a_stack_written_target_keeps_its_direct_endpoints_fault_proxy_and_replication(tmp_path):
    target = load_target(_write(tmp_path, _stack_written()))
    assert target.kafka.direct_bootstrap_servers == ("127.0.0.1:9092",)
    assert (target.kafka.replication_factor, target.kafka.min_insync_replicas) == (1, 1)
    assert target.s3.direct_url() == "http://127.0.0.1:9000" and target.s3.fault_proxy == "http://127.0.0.1:9100"
    assert parse_target(target.to_dict(), "again.yaml").to_dict() == target.to_dict()
    bare = load_target(_write(tmp_path, _stack_written(**{"s3.direct_endpoint": None, "s3.fault_proxy": None})))
    assert bare.s3.direct_url() == bare.s3.url and bare.s3.fault_proxy is None


@pytest.mark.parametrize("changes, field", [
    ({"s3.direct_endpoint": "https://127.0.0.1:9000"}, "s3.direct_endpoint"),  # TLS disagrees with the endpoint's
    ({"s3.fault_proxy": "127.0.0.1:9100"}, "s3.fault_proxy"),
    ({"kafka.replication_factor": 0}, "kafka.replication_factor"),
    ({"kafka.replication_factor": 2, "kafka.min_insync_replicas": 3}, "kafka.min_insync_replicas"),
    ({"kafka.direct_bootstrap_servers": []}, "kafka.direct_bootstrap_servers"),
])
def test_bad_run_fields_are_refused_with_their_path(tmp_path, changes, field):
    with pytest.raises(SpecError, match=rf"target\.yaml: {re.escape(field)}: "):
        load_target(_write(tmp_path, _stack_written(**changes)))


@pytest.mark.parametrize("changes, refused", [
    ({}, None),
    ({"s3.prefix": "chaos/"}, "s3.prefix"),
    ({"s3.endpoint": "https://127.0.0.1:19000", "s3.direct_endpoint": None, "s3.ca_bundle": "/etc/ca.pem"}, None),
    ({"spark.deploy_mode": "cluster"}, "deploy_mode"),
])
def test_what_chaos_run_cannot_use_yet_is_refused_when_the_run_starts(tmp_path, changes, refused):
    from chaos.target.stack import unsupported

    doc = _stack_written()
    for path, value in changes.items():
        section, _, key = path.partition(".")
        doc[section].pop(key, None) if value is None else doc[section].__setitem__(key, value)
    problem = unsupported(load_target(_write(tmp_path, doc)))
    assert problem is None if refused is None else refused in (problem or "")
    started = load_target(_write(tmp_path, MINIMAL))  # toxiproxy mode: start
    assert "mode: start" in (unsupported(started) or "")


def _gate(doc: dict, experiment: str, brokers: list[str], fault_proxy: bool = True) -> str | None:
    from chaos.spec.loading import load_experiment
    from chaos.target.gate import skip_reason

    target = parse_target(doc, "t.yaml")
    spec = load_experiment(EXPERIMENTS / f"{experiment}.yaml")
    return skip_reason(target, brokers, fault_proxy, spec, range(len(spec.faults)))


@pytest.mark.parametrize("experiment", ["kafka-broker-disconnect", "checkpoint-commit-failures", "slow-s3-put",
                                        "s3-slowdown-storm", "driver-latency", "checkpoint-collision", "corrupted-sst",
                                        "hot-key-session-growth", "key-rotation-state-leak"])
def test_network_s3_checkpoint_and_driver_faults_run_on_a_stack_written_target(experiment):
    assert _gate(_stack_written(), experiment, ["kafka"]) is None


def test_an_arm_whose_fault_cannot_act_on_the_target_is_skipped_with_the_reason():
    hooked = _stack_written()
    hooked["hooks"] = {"broker": "pkill --signal {signal} -f '[k]afka.Kafka /x'"}
    # no hook for the executor killed second: named
    assert "no hook for executor" in (_gate(_stack_written(), "process-crash", ["kafka"]) or "")
    # a hook is one command for every broker: on three brokers it cannot say which
    assert "cannot say which" in (_gate(hooked, "cluster-broker-lost", ["kafka-1", "kafka-2", "kafka-3"]) or "")
    # no S3 fault proxy: S3 rules and the lifecycle triggers that watch S3 requests cannot act
    assert "s3.fault_proxy" in (_gate(_stack_written(), "s3-slowdown-storm", ["kafka"], fault_proxy=False) or "")
    assert "trigger" in (_gate(_stack_written(), "crash-anywhere", ["kafka"], fault_proxy=False) or "")
    # a network fault on a role the target has no proxy for
    no_driver = _stack_written()
    no_driver["toxiproxy"]["proxies"] = {"kafka": "kafka", "s3": "s3"}
    assert "no proxy for spark-driver" in (_gate(no_driver, "driver-latency", ["kafka"]) or "")
    # a cluster experiment on a one-broker target
    assert "three brokers" in (_gate(_stack_written(), "cluster-leader-move", ["kafka"]) or "")


def test_on_a_cluster_target_kafka_means_every_brokers_proxy():
    cluster = _stack_written()
    cluster["toxiproxy"]["proxies"] = {"kafka-1": "k1", "kafka-2": "k2", "kafka-3": "k3", "s3": "s3",
                                       "spark-driver": "d", "spark-driver-blocks": "db"}
    brokers = ["kafka-1", "kafka-2", "kafka-3"]
    assert _gate(cluster, "kafka-broker-disconnect", brokers) is None
    assert _gate(cluster, "cluster-leader-move", brokers) is None
    cluster["toxiproxy"]["proxies"].pop("kafka-3")
    assert "three brokers" in (_gate(cluster, "cluster-leader-move", brokers[:2]) or "")


def _hooked(**hooks) -> dict:
    doc = _stack_written()
    doc["hooks"] = hooks
    return doc


SIGNAL = "pkill --signal {signal} -f '[x]'"


def test_a_hook_carries_out_a_process_fault_when_it_can_and_a_kill_needs_a_way_back():
    every = {"signal": SIGNAL, "restart": "kill -s USR1 1"}
    runs = _hooked(broker=every, minio=every, executor=SIGNAL)
    # process-crash: job-driver kills (the suite's own), an executor kill, a broker kill restarted by its hook
    assert _gate(runs, "process-crash", ["kafka"]) is None
    assert _gate(runs, "crash-anywhere", ["kafka"]) is None
    # a killed broker that no restart command brings back: SKIPPED (a paused one needs none)
    no_restart = _hooked(broker=SIGNAL, executor=SIGNAL)
    assert "no restart command" in (_gate(no_restart, "process-crash", ["kafka"]) or "")
    # one executor of several: a hook reaches every executor at once
    assert "every executor at once" in (_gate(runs, "cluster-executor-lost", ["kafka-1", "kafka-2", "kafka-3"]) or "")
    # a killed broker is told down by its own endpoint: behind the proxy alone it would always look alive
    no_direct = _hooked(broker=every, minio=every, executor=SIGNAL)
    no_direct["kafka"].pop("direct_bootstrap_servers")
    assert "kafka.direct_bootstrap_servers" in (_gate(no_direct, "process-crash", ["kafka"]) or "")


def test_a_pause_needs_no_restart_and_an_arm_is_gated_on_its_own_faults_only():
    from chaos.spec.loading import load_experiment
    from chaos.target.gate import skip_reason

    paused = _hooked(broker=SIGNAL)
    spec = load_experiment(EXPERIMENTS / "process-crash.yaml")
    pause = dataclasses.replace(spec, faults=(dataclasses.replace(spec.faults[2], fault="process.pause",
                                                                  params={"broker": "leader", "executors": "all"}),))
    assert skip_reason(parse_target(paused, "t.yaml"), ["kafka"], True, pause, [0]) is None
    bare = parse_target(_stack_written(), "t.yaml")
    assert skip_reason(bare, ["kafka"], True, spec, [0]) is None  # the job driver's kills alone: the suite's own
    assert "no hook for executor" in (skip_reason(bare, ["kafka"], True, spec, [0, 1]) or "")


def test_a_network_fault_on_a_broker_the_target_lacks_and_any_trigger_without_the_fault_proxy_are_skipped():
    from chaos.spec.loading import load_experiment
    from chaos.target.gate import skip_reason

    target = parse_target(_stack_written(), "t.yaml")
    spec = load_experiment(EXPERIMENTS / "kafka-broker-disconnect.yaml")
    on_two = dataclasses.replace(spec, faults=(dataclasses.replace(spec.faults[0], target="kafka-2"),))
    assert "no broker kafka-2" in (skip_reason(target, ["kafka"], True, on_two, [0]) or "")
    # a driver's start is told from the job's requests too (lifecycle-kills' first fault: job_started)
    kills = load_experiment(EXPERIMENTS / "lifecycle-kills.yaml")
    assert kills.faults[0].on is not None and kills.faults[0].on.events == ("job_started",)
    assert "s3.fault_proxy" in (skip_reason(target, ["kafka"], False, kills, [0]) or "")
    assert skip_reason(target, ["kafka"], True, kills, [0]) is None


def test_the_stack_written_hook_patterns_find_their_server_and_nothing_else(tmp_path):
    """The patterns against real processes (pgrep, as pkill matches): the broker by its own properties file (not one
    whose name extends it), MinIO by its whole port, and never the shell that runs the hook."""
    import shlex as _shlex
    import shutil

    from chaos.target.from_stack import _pattern

    if shutil.which("pgrep") is None:
        pytest.skip("pgrep is not installed")
    argvs = {"broker": ["kafka.Kafka", f"{tmp_path}/kafka.properties"],
             "broker-other": ["kafka.Kafka", f"{tmp_path}/kafka.properties2"],
             "minio": ["server", "--quiet", "--address", "127.0.0.1:1000", "/data"],
             "minio-other": ["server", "--quiet", "--address", "127.0.0.1:10001", "/data"]}
    sleepers = {name: subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *argv])
                for name, argv in argvs.items()}
    try:
        time.sleep(0.3)
        for name, words in (("broker", argvs["broker"]), ("minio", argvs["minio"][:4])):
            found = subprocess.run(["sh", "-c", f"pgrep -f {_pattern(words)}"], capture_output=True, text=True)
            assert [int(pid) for pid in found.stdout.split()] == [sleepers[name].pid], (name, found.stdout)
            assert _shlex.split(_pattern(words))[0].startswith("[")
    finally:
        for process in sleepers.values():
            process.kill()
            process.wait()


def test_a_hook_handle_runs_its_command_with_the_signal_and_is_alive_while_its_endpoint_accepts(tmp_path):
    import signal
    import socket

    from chaos.target.model import Hook
    from chaos.target.stack import HookHandle
    from infra.errors import InfraError

    marks = tmp_path / "marks"
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        hook = Hook(f"echo {{role}}={{signal}} >> {marks}", restart=f"echo restart >> {marks}")
        handle = HookHandle("broker", hook, [f"127.0.0.1:{port}"], tmp_path / "hooks.log")
        handle.signal(signal.SIGKILL)
        handle.signal(signal.SIGCONT)
        assert marks.read_text().split() == ["broker=KILL", "broker=CONT"]
        assert handle.alive() and handle.pid is None
        assert handle.restart() >= 0 and marks.read_text().split()[-1] == "restart"
    assert not handle.alive()  # nothing accepts on the port any more
    failing = HookHandle("minio", Hook("exit 3"), [], tmp_path / "hooks.log")
    with pytest.raises(InfraError, match=r"hook minio \(signal STOP\) exited 3; see .*hooks\.log"):
        failing.signal(signal.SIGSTOP)
    with pytest.raises(InfraError, match="no restart command"):
        failing.restart()
    assert "$ exit 3" in (tmp_path / "hooks.log").read_text()


def test_a_stacks_certificate_authority_signs_a_certificate_for_loopback_that_its_trust_store_trusts(tmp_path):
    """infra/tls.py: the CA and the server certificate verify with openssl (for 127.0.0.1), and the JVMs' trust
    store holds the CA."""
    import shutil

    from infra.tls import TRUSTSTORE_PASSWORD, make_certificates

    if shutil.which("openssl") is None or shutil.which("keytool") is None:
        pytest.skip("openssl or keytool is not installed")
    files = make_certificates(tmp_path / "tls")
    verified = subprocess.run(["openssl", "verify", "-CAfile", str(files.ca), "-verify_ip", "127.0.0.1",
                               str(files.cert)], capture_output=True, text=True)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    listed = subprocess.run(["keytool", "-list", "-keystore", str(files.truststore), "-storetype", "PKCS12",
                             "-storepass", TRUSTSTORE_PASSWORD], capture_output=True, text=True)
    assert "chaos-suite-ca" in listed.stdout and "trustedCertEntry" in listed.stdout, listed.stdout
    assert f"-Djavax.net.ssl.trustStore={files.truststore}" in files.jvm_options()
    again = make_certificates(tmp_path / "tls")  # a restart of `stack up` in the same directory: made anew
    assert again.ca.read_text() != "" and files.truststore.is_file()


def test_a_sasl_stack_is_written_with_its_login_by_name_and_the_jobs_jaas_line_by_reference(tmp_path, monkeypatch):
    """A stack whose brokers ask for a login (--kafka-sasl): the target names KAFKA_USERNAME/KAFKA_PASSWORD, the
    job's options carry a JAAS line of ${env:...} references (resolved by Kafka's EnvVarConfigProvider), and the
    file holds no value."""
    import dataclasses as _dc

    from chaos.target.from_stack import write_target
    from infra.driver import job_args

    monkeypatch.setenv("KAFKA_PASSWORD", SECRET)
    fake = _fake_stack(tmp_path)
    fake.info = _dc.replace(fake.info, kafka_sasl_mechanism="PLAIN", kafka_sasl_username="chaos-user")
    path = tmp_path / "t.yaml"
    target = write_target(fake, path)  # type: ignore[arg-type]
    assert target.credentials["kafka_username"] == "KAFKA_USERNAME"
    assert target.credentials["kafka_password"] == "KAFKA_PASSWORD"
    options = target.kafka.options
    assert options["security.protocol"] == "SASL_PLAINTEXT" and options["config.providers"] == "env"
    assert 'password="${env:KAFKA_PASSWORD}"' in options["sasl.jaas.config"]
    assert SECRET not in path.read_text() and "chaos-user" not in path.read_text()
    argv = job_args(fake.info, ["--profile", "hardened", "--topic", "t", "--deployment", "d"])
    jaas = next(a for a in argv if a.startswith("sasl.jaas.config="))
    assert 'username="${env:KAFKA_USERNAME}" password="${env:KAFKA_PASSWORD}"' in jaas


def test_a_jaas_line_is_accepted_only_when_every_password_in_it_is_a_reference(tmp_path):
    line = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="{}";'
    ok = _stack_written()
    ok["kafka"]["options"] = {"sasl.jaas.config": line.format("${env:KAFKA_PASSWORD}")}
    assert load_target(_write(tmp_path, ok)).kafka.options["sasl.jaas.config"].endswith('"${env:KAFKA_PASSWORD}";')
    for bad in (line.format("hunter2-literal"), 'x required username="u";'):
        doc = _stack_written()
        doc["kafka"]["options"] = {"sasl.jaas.config": bad}
        with pytest.raises(SpecError, match=r"kafka\.options\.sasl\.jaas\.config: (names a secret|holds a literal)"):
            load_target(_write(tmp_path, doc))
