"""A fault kind describes itself (chaos/faults/base.py `FaultKind`): the modules that ask something of a fault ask its
kind, through the registry, and never its name or family. A throwaway kind registered in one place (the registry's
FAULTS) is treated by the target gate, the lane queue, the change selection, the spec's validation, the recovery
and outage checks and the crash tally as its declarations say, and the same kind declaring nothing is not; and no
module outside chaos/faults/ writes a kind's name."""
from __future__ import annotations

import ast
import dataclasses
import json
import re
from pathlib import Path
from types import MappingProxyType

import pytest

from chaos.bench.crash_tally import arm_tally
from chaos.changed import Change, select, served_kinds
from chaos.checks.outage import outage_start
from chaos.checks.recovery import _interruptions, disruptions, momentary, shapes_workload
from chaos.checks.timeline import timeline
from chaos.errors import SpecError
from chaos.faults import registry
from chaos.faults.base import BaseFault, FaultKind, Needs
from chaos.history import HistoryWriter
from chaos.lanes.queue import restarts_processes
from chaos.spec import load_experiment
from chaos.target import parse_target
from chaos.target.gate import skip_reason

from .test_spec import base, write
from .test_targets import SIGNAL, _hooked, _stack_written

ROOT = Path(__file__).resolve().parents[2]
WOBBLE = "throwaway.wobble"


class _Wobble(BaseFault):
    def inject(self) -> None:
        pass

    def heal(self) -> None:
        pass


# The same kind twice: declaring everything the other modules ask, and declaring nothing.
EVERYTHING = FaultKind(WOBBLE, "a kind only this test declares", ("broker",), implementation=_Wobble, momentary=True,
                       restarts_processes=True, kills=True, starts_deployment=True, min_brokers=2,
                       needs=Needs(s3_fault_proxy=True, hook=True, code=("infra/wobble.py", "infra/wobble/*")))
NOTHING = FaultKind(WOBBLE, "a kind only this test declares", ("broker",), implementation=_Wobble)
SHAPING = dataclasses.replace(NOTHING, momentary=True, reshape=lambda p: {"shape": "hot_key", "hot_key_share": 0.5})


@pytest.fixture()
def register(monkeypatch):
    """Register a kind in the one place every module reads: the registry's FAULTS."""
    def put(kind: FaultKind) -> None:
        monkeypatch.setattr(registry, "FAULTS", MappingProxyType({**registry.FAULTS, kind.name: kind}))
    return put


def _doc(name: str = "t-spec", wobble: bool = True, topology: str = "cluster", refused: bool = False) -> dict:
    doc = base()
    doc["name"], doc["topology"] = name, topology
    if wobble:
        doc["faults"].append({"fault": WOBBLE, "at": "6s", "duration": "5s"})
        doc["arms"]["hardened"]["targets"]["recovery"]["grouped"] = True  # 1 s after the outage: closer than a recovery
    if refused:
        doc["arms"]["hardened"]["targets"]["refused_within"] = "5s"
    return doc


# -- spec validation ----------------------------------------------------------------------------------------------
def test_the_spec_asks_the_kind_how_many_brokers_it_needs_and_whether_it_starts_a_deployment(tmp_path, register):
    register(EVERYTHING)
    with pytest.raises(SpecError) as caught:
        load_experiment(write(tmp_path, _doc(topology="single", refused=True)))
    assert str(caught.value).endswith(f"faults.1.fault: {WOBBLE} needs at least 2 brokers, and this experiment runs "
                                      "on a single stack of 1 broker; allowed: topology: cluster")
    spec = load_experiment(write(tmp_path, _doc(refused=True)))
    assert spec.faults[1].fault == WOBBLE and spec.arm("hardened").targets.refused_within == 5.0

    register(dataclasses.replace(EVERYTHING, min_brokers=4))  # more than any topology has
    with pytest.raises(SpecError, match="needs at least 4 brokers, .* stack of 3 brokers; allowed: a topology of 4"):
        load_experiment(write(tmp_path, _doc()))

    register(NOTHING)
    assert load_experiment(write(tmp_path, _doc(topology="single"))).topology == "single"
    with pytest.raises(SpecError) as caught:
        load_experiment(write(tmp_path, _doc(refused=True)))
    assert str(caught.value).endswith("arms.hardened.targets.refused_within: no fault starts a second deployment; "
                                      "allowed: a checkpoint.second_deployment fault in faults")


def test_a_compact_schedule_refuses_a_kind_that_shapes_the_workload(tmp_path, register):
    doc = _doc(topology="single")
    doc["schedule"] = "compact"
    doc["faults"][1]["target"] = "broker"
    register(NOTHING)
    assert load_experiment(write(tmp_path, doc)).schedule == "compact"
    register(dataclasses.replace(SHAPING, targets=("broker",)))
    with pytest.raises(SpecError, match=f"faults.1.fault: {WOBBLE} shapes the workload"):
        load_experiment(write(tmp_path, doc))


# -- the lane queue and the change selection ----------------------------------------------------------------------
def test_the_lane_queue_keeps_a_kind_that_restarts_processes_apart(tmp_path, register):
    register(EVERYTHING)
    spec = load_experiment(write(tmp_path, _doc()))
    assert restarts_processes(spec)
    assert not restarts_processes(load_experiment(write(tmp_path, _doc(wobble=False), "other.yaml")))
    register(NOTHING)
    assert not restarts_processes(spec)


def test_a_change_to_the_code_a_kind_names_reruns_its_users_only(tmp_path, register):
    register(EVERYTHING)
    specs = [load_experiment(write(tmp_path, _doc("user"), "user.yaml")),
             load_experiment(write(tmp_path, _doc("bystander", wobble=False), "bystander.yaml"))]
    for path in ("infra/wobble.py", "infra/wobble/Main.java"):
        assert served_kinds(path) == {WOBBLE}
        decisions = {d.name: d for d in select(specs, [Change(path)], None, {}, tmp_path)}
        assert decisions["user"].run and not decisions["bystander"].run, path
        assert decisions["user"].reason == f"{path} changed (it serves {WOBBLE} faults)"
    register(NOTHING)  # the file is no kind's: every experiment may depend on it
    assert served_kinds("infra/wobble.py") == set()
    decisions = select(specs, [Change("infra/wobble.py")], None, {}, tmp_path)
    assert all(d.run and "every experiment may depend on it" in d.reason for d in decisions)


# -- the target gate ----------------------------------------------------------------------------------------------
def test_the_gate_asks_what_the_kind_acts_through_and_whether_it_kills(tmp_path, register):
    register(EVERYTHING)
    spec = dataclasses.replace(load_experiment(write(tmp_path, _doc())), topology="single")
    wobble = [1]

    def gate(doc: dict, fault_proxy: bool = True) -> str | None:
        return skip_reason(parse_target(doc, "t.yaml"), ["kafka"], fault_proxy, spec, wobble)

    assert "has no S3 fault proxy" in (gate(_hooked(broker=SIGNAL), fault_proxy=False) or "")
    assert "has no hook for broker" in (gate(_stack_written()) or "")
    assert "no restart command" in (gate(_hooked(broker=SIGNAL)) or "")  # a kill needs a way back
    assert gate(_hooked(broker={"signal": SIGNAL, "restart": "kill -s USR1 1"})) is None
    register(dataclasses.replace(EVERYTHING, kills=False))
    assert gate(_hooked(broker=SIGNAL)) is None  # signalled, not killed: nothing to bring back
    register(NOTHING)
    assert gate(_stack_written(), fault_proxy=False) is None


# -- the recovery and outage checks, and the crash tally ----------------------------------------------------------
def _story() -> list[dict]:
    """The throwaway kind acts from 11 s to 15 s; a proxy is down from 12 s to 14 s, inside that window."""
    def fault(t: float, name: str, target: str, state: str) -> dict:
        return {"t": t, "type": "fault", "name": name, "target": target, "state": state, "params": {}}
    return [{"t": 0.0, "type": "phase", "name": "steady", "boundary": "start"},
            {"t": 10.0, "type": "phase", "name": "steady", "boundary": "end"},
            {"t": 10.0, "type": "phase", "name": "inject", "boundary": "start"},
            fault(11.0, WOBBLE, "broker", "injecting"), fault(11.1, WOBBLE, "broker", "injected"),
            fault(12.0, "network.down", "kafka", "injecting"), fault(12.1, "network.down", "kafka", "injected"),
            fault(14.0, "network.down", "kafka", "healed"), fault(15.0, WOBBLE, "broker", "healed"),
            {"t": 20.0, "type": "phase", "name": "inject", "boundary": "end"}]


def _heals(records) -> list[tuple[object, object]]:
    return [(r.get("name"), r.get("t")) for r in records]


def test_the_recovery_and_outage_checks_ask_whether_the_kind_lasts_or_shapes_the_workload(register):
    tl = timeline(_story())
    wobble = tl.faults[0]
    register(EVERYTHING)  # momentary: its heal does nothing for the job, and its window holds nothing back
    assert momentary(wobble) and not shapes_workload(wobble)
    assert _heals(disruptions(tl)) == [("network.down", 14.0)]
    assert outage_start(tl) is wobble and _interruptions(tl) == [11.0, 12.0]
    register(NOTHING)  # lasting: the proxy's heal inside its window is no recovery; its own heal is
    assert not momentary(wobble)
    assert _heals(disruptions(tl)) == [(WOBBLE, 15.0)]
    register(SHAPING)  # a workload shape: its heal is a disruption; its start is no outage and no hit
    assert momentary(wobble) and shapes_workload(wobble)
    assert _heals(disruptions(tl)) == [("network.down", 14.0), (WOBBLE, 15.0)]
    assert outage_start(tl) is tl.faults[2] and _interruptions(tl) == [12.0]


def test_the_crash_tally_counts_the_firings_of_a_kind_that_kills(tmp_path, register):
    arm = tmp_path / "run" / "x" / "hardened"
    arm.mkdir(parents=True)
    (arm.parent / "spec.json").write_text(json.dumps({"seed": 1}))
    with HistoryWriter(arm / "history.jsonl") as history:
        history.trigger(0, WOBBLE, "job-driver", 1, 1, event="job_started", last_commit=None, in_flight=[],
                        released="drop")
    register(EVERYTHING)
    assert (arm_tally(arm)["kills"], arm_tally(arm)["driver_kills"]) == (1, 1)
    register(NOTHING)
    assert (arm_tally(arm)["triggers"], arm_tally(arm)["kills"]) == (1, 0)


# -- the declarations say what the names said ---------------------------------------------------------------------
def test_every_kind_declares_what_its_name_used_to_say():
    """The callers once tested names and families; the declarations must keep every answer (this pins the kinds
    that existed then: a new kind declares its own)."""
    before = {"network.down", "network.latency", "network.bandwidth", "network.timeout", "network.reset_peer",
              "network.slicer", "network.limit_data", "network.flap", "process.kill", "process.pause",
              "broker.leader_move", "checkpoint.second_deployment", "checkpoint.corrupt", "data.hot_key",
              "data.key_rotation", "s3.slow_put", "s3.error", "s3.drop_response", "s3.list_latency", "s3.slow_get"}
    kinds = {name: registry.FAULTS[name] for name in before}

    def declaring(attribute) -> set[str]:
        return {name for name, kind in kinds.items() if attribute(kind)}

    def family(*prefixes: str) -> set[str]:
        return {name for name in before if name.startswith(prefixes)}

    assert declaring(lambda k: k.restarts_processes) == family("process.", "checkpoint.")  # chaos/lanes/queue.py
    assert declaring(lambda k: k.momentary) == {"process.kill", "broker.leader_move", "checkpoint.corrupt",
                                                "data.hot_key", "data.key_rotation"}  # checks/recovery
    assert declaring(lambda k: k.shapes_workload) == family("data.")  # checks/recovery, checks/outage, spec
    assert declaring(lambda k: k.kills) == {"process.kill"}  # target/gate, crash_tally
    assert declaring(lambda k: k.starts_deployment) == {"checkpoint.second_deployment"}  # spec: refused_within
    assert declaring(lambda k: k.min_brokers > 1) == {"broker.leader_move"}  # spec: topology
    assert declaring(lambda k: k.needs.toxiproxy) == family("network.")  # target/gate
    assert declaring(lambda k: k.needs.s3_fault_proxy) == family("s3.")
    assert declaring(lambda k: k.needs.hook) == family("process.")
    served = {"infra/toxiproxy.py": family("network."), "chaos/checkpoint_tools.py": {"checkpoint.corrupt"},
              "chaos/checkpoint_damage.py": {"checkpoint.corrupt"}, "infra/s3proxy.py": family("s3."),
              "infra/s3proxy/main.go": family("s3."), "infra/kafka_admin.py": {"broker.leader_move"},
              "infra/kafka_admin/LeaderMove.java": {"broker.leader_move"}}
    for path, owners in served.items():  # changed.py
        assert served_kinds(path) & before == owners, path


# -- no kind named outside chaos/faults/ --------------------------------------------------------------------------
# String literals outside chaos/faults/ that may name a kind or a family, each with the reason. None today: every
# caller asks the kind what it declares.
ALLOWED: dict[tuple[str, str], str] = {}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _literals(source: str) -> list[str]:
    """The string literals of a module (an f-string as one text, `{}` for what it formats), docstrings aside."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    texts = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            texts.append("".join(part.value if isinstance(part, ast.Constant) else "{}" for part in node.values))
            skip.update(id(part) for part in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            texts.append(node.value)
    return texts


def kind_names_in(root: Path) -> list[tuple[str, str]]:
    """(module, literal) for every string literal of chaos/, infra/ and job/ outside chaos/faults/ that names a
    kind (`process.kill`) or a family as a prefix (`process.`, `data.*`)."""
    names = sorted(registry.FAULTS, key=len, reverse=True)
    families = sorted({name.split(".", 1)[0] for name in names})
    pattern = re.compile(r"(?<![\w.])(?:" + "|".join(re.escape(n) for n in names) + r")(?![\w])"
                         r"|(?<![\w.])(?:" + "|".join(families) + r")\.(?![\w{])")
    found = []
    for package in ("chaos", "infra", "job"):
        for path in sorted((root / package).rglob("*.py")):
            module = path.relative_to(root).as_posix()
            if module.startswith("chaos/faults/"):
                continue
            found += [(module, text) for text in _literals(path.read_text()) if pattern.search(text)]
    return found


def test_no_module_outside_the_fault_families_names_a_kind():
    found = [hit for hit in kind_names_in(ROOT) if hit not in ALLOWED]
    assert found == [], "ask the kind what it declares (chaos/faults/base.py FaultKind) instead: " + repr(found)


def test_the_name_finder_finds_names_and_family_prefixes(tmp_path):
    (tmp_path / "chaos" / "faults").mkdir(parents=True)
    (tmp_path / "chaos" / "x.py").write_text(
        '"""A docstring may say process.kill."""\n'
        'A = "process.kill"\nB = ("process.", "checkpoint.")\nC = f"no data.* fault for {A}"\n'
        'D = f"s3.{A}.amazonaws.com"\nE = "s3.direct_endpoint"\nF = "network.downs"\n')
    (tmp_path / "chaos" / "faults" / "y.py").write_text('A = "process.kill"\n')
    assert sorted(kind_names_in(tmp_path)) == [("chaos/x.py", "checkpoint."), ("chaos/x.py", "no data.* fault for {}"),
                                               ("chaos/x.py", "process."), ("chaos/x.py", "process.kill")]
