"""The fault registry (chaos/faults/): every kind declared once, in its family's module, with what the rest of the
harness reads from it."""
from __future__ import annotations

from chaos.checks.recovery import MOMENTARY_FAULTS
from chaos.faults import registry
from chaos.faults.base import BaseFault


def test_every_kind_is_found_by_name_in_its_family_module():
    for family in registry.FAMILIES:
        prefix = family.__name__.rpartition(".")[2] + "."
        for kind in family.KINDS:
            assert kind.name.startswith(prefix), (family.__name__, kind.name)
            assert registry.FAULTS[kind.name] is kind
            assert kind.implementation is not None and issubclass(kind.implementation, BaseFault)
            assert kind.targets and kind.summary


def test_the_checks_own_list_of_momentary_kinds_agrees_with_the_kinds():
    # chaos/checks/ judge stored files and import no fault code; their list must say what the kinds declare
    assert set(MOMENTARY_FAULTS) == {name for name, kind in registry.FAULTS.items() if kind.momentary}


def test_a_kind_on_the_workload_reshapes_it_and_no_other_does():
    for name, kind in registry.FAULTS.items():
        assert (kind.reshape is not None) == (kind.targets == ("workload",)), name


def test_instant_kinds_are_triggerable_and_momentary():
    assert registry.INSTANT and all(registry.FAULTS[name].triggerable and registry.FAULTS[name].momentary
                                    for name in registry.INSTANT)


def test_the_former_modules_still_import():
    from chaos.faults import IMPLEMENTATIONS, FaultContext, Toxic, build  # noqa: F401
    from chaos.faults_catalog import FAULTS, INSTANT, TRIGGERABLE, FaultType, Param  # noqa: F401

    assert FAULTS is registry.FAULTS and set(IMPLEMENTATIONS) == set(FAULTS)


def test_the_families_keep_their_order():
    # the order of `allowed:` in an unknown fault's error and of the schema's faults
    assert [f.__name__.rpartition(".")[2] for f in registry.FAMILIES] == ["network", "process", "checkpoint", "data",
                                                                          "s3"]
