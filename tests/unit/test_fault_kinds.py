"""The fault registry (chaos/faults/): every kind declared once, in its family's module, with what the rest of the
harness reads from it."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from chaos.checks.recovery import momentary
from chaos.faults import registry
from chaos.faults.base import BaseFault

ROOT = Path(__file__).resolve().parents[2]


def test_every_kind_is_found_by_name_in_its_family_module():
    for family in registry.FAMILIES:
        prefix = family.__name__.rpartition(".")[2] + "."
        for kind in family.KINDS:
            assert kind.name.startswith(prefix), (family.__name__, kind.name)
            assert registry.FAULTS[kind.name] is kind
            assert kind.implementation is not None and issubclass(kind.implementation, BaseFault)
            assert kind.targets and kind.summary


def test_the_recovery_check_takes_momentary_kinds_from_the_kinds():
    # chaos/checks/recovery.py asks the registry (tests/unit/test_fault_kind_declares.py: a kind of its own)
    assert {name for name in registry.FAULTS if momentary({"name": name})} == \
        {name for name, kind in registry.FAULTS.items() if kind.momentary}
    assert not momentary({"name": "network.explode"}) and not momentary({})  # a name no kind declares: lasting


def test_a_kind_on_the_workload_reshapes_it_and_no_other_does():
    for name, kind in registry.FAULTS.items():
        assert (kind.reshape is not None) == (kind.targets == ("workload",)), name


def test_instant_kinds_are_triggerable_and_momentary():
    assert registry.INSTANT and all(registry.FAULTS[name].triggerable and registry.FAULTS[name].momentary
                                    for name in registry.INSTANT)


def test_the_families_keep_their_order():
    # the order of `allowed:` in an unknown fault's error and of the schema's faults
    assert [f.__name__.rpartition(".")[2] for f in registry.FAMILIES] == ["network", "process", "broker",
                                                                          "checkpoint", "data", "s3", "disk", "clock"]


def test_s3_slow_get_delays_reads_of_the_arms_own_keys_only(tmp_path):
    """The kind added by following docs/architecture.md alone: chaos/faults/s3.py, this test, and the docs."""
    from types import SimpleNamespace

    from chaos.spec import SpecError, load_experiment

    base = (ROOT / "experiments" / "slow-s3-put.yaml").read_text()
    doc = yaml.safe_load(base)
    doc["faults"] = [{"fault": "s3.slow_get", "at": "0s", "duration": "5s",
                      "params": {"delay": "800ms", "keys": "checkpoint/state/*"}}]
    path = tmp_path / "slow-s3-get.yaml"
    path.write_text(yaml.safe_dump(doc))
    fault = load_experiment(path).faults[0]
    assert fault.target == "s3" and fault.params["ops"] == ["GET", "HEAD"] and fault.params["jitter"] == 0.0
    ctx = SimpleNamespace(arm=SimpleNamespace(state=SimpleNamespace(deployment="hardened-1a2b")))
    rule = registry.FAULTS["s3.slow_get"].implementation(fault, ctx)._rule()  # type: ignore[misc, arg-type]
    assert rule == {"key": r"^hardened\-1a2b/checkpoint/state/.*$", "ops": ["GET", "HEAD"], "action": "delay",
                    "delay_ms": 800, "jitter_ms": 0}
    doc["faults"][0]["params"]["ops"] = ["PUT"]  # writes are s3.slow_put's
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(SpecError, match=r"faults\.0\.params\.ops\.0: 'PUT' is not valid; allowed: GET \| HEAD$"):
        load_experiment(path)


def test_s3_silent_holds_every_operation_of_the_arm_unanswered_by_default(tmp_path):
    """A silent S3 endpoint: every operation on the arm's keys waits `hold` from its arrival, past the heal."""
    from types import SimpleNamespace

    from chaos.spec import SpecError, load_experiment

    doc = yaml.safe_load((ROOT / "experiments" / "slow-s3-put.yaml").read_text())
    doc["faults"] = [{"fault": "s3.silent", "at": "0s", "duration": "5s"}]
    path = tmp_path / "silent.yaml"
    path.write_text(yaml.safe_dump(doc))
    fault = load_experiment(path).faults[0]
    assert fault.params["hold"] == 900.0 and fault.params["ops"] == ["PUT", "COPY", "GET", "HEAD", "DELETE", "LIST",
                                                                     "POST"]
    ctx = SimpleNamespace(arm=SimpleNamespace(state=SimpleNamespace(deployment="naive-9f")))
    rule = registry.FAULTS["s3.silent"].implementation(fault, ctx)._rule()  # type: ignore[misc, arg-type]
    assert rule == {"key": r"^naive\-9f/.*$", "ops": list(fault.params["ops"]), "action": "delay",
                    "delay_ms": 900_000, "jitter_ms": 0}
    doc["faults"][0]["params"] = {"hold": "0s"}
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(SpecError, match=r"faults\.0\.params\.hold"):
        load_experiment(path)


def test_the_fault_kinds_never_read_a_checkpoint_with_the_jobs_code():
    # a fault that chose its targets with the job's own checkpoint parser would land only where the hardening looks
    from tests.unit.test_import_cycles import graph

    edges = graph()
    ours = [name for name in edges
            if name.startswith("chaos.faults") or name in ("chaos.checkpoint_tools", "chaos.checkpoint_damage")]
    assert "chaos.faults.checkpoint" in ours
    assert not {target for name in ours for target in edges[name] if target.startswith("job")}
