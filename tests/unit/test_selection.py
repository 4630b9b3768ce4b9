"""`chaos run --only`: a part of a suite keeps each experiment as the suite runs it (scale, overrides, arms)."""
from __future__ import annotations

from pathlib import Path

import pytest

from chaos import errors
from chaos.selection import parse_only, select
from chaos.spec import load_suite

SMOKE = Path(__file__).resolve().parents[2] / "experiments" / "suites" / "smoke.yaml"


@pytest.fixture(scope="module")
def smoke():
    return [entry.spec for entry in load_suite(SMOKE).entries]


def test_parse_only():
    assert parse_only("a, b/hardened,,c/") == [("a", None), ("b", "hardened"), ("c", None)]
    with pytest.raises(errors.ChaosError):
        parse_only(" , ")


def test_a_subset_keeps_the_suite_entries_as_they_are(smoke):
    by_name = {spec.name: spec for spec in smoke}
    picked = select(smoke, parse_only("hot-key-session-growth/naive,checkpoint-collision"))
    # the suite's order, not the option's; each spec is the suite's (its scale and overrides), fewer arms at most
    assert [spec.name for spec in picked] == ["checkpoint-collision", "hot-key-session-growth"]
    assert picked[0] is by_name["checkpoint-collision"]
    assert [a.profile for a in picked[1].arms] == ["naive"]
    assert picked[1].scale == by_name["hot-key-session-growth"].scale == 0.4
    assert picked[1].phases == by_name["hot-key-session-growth"].phases
    assert picked[1].arms[0] == by_name["hot-key-session-growth"].arms[1]


def test_an_arm_and_its_whole_experiment_is_the_whole_experiment(smoke):
    picked = select(smoke, parse_only("hot-key-session-growth/hardened,hot-key-session-growth,"
                                      "hot-key-session-growth/naive"))
    assert [a.profile for a in picked[0].arms] == ["hardened", "naive"]


@pytest.mark.parametrize("only, says", [
    ("nope", "no experiment 'nope' in this run; known: checkpoint-collision, "),
    ("checkpoint-commit-failures/naive", "checkpoint-commit-failures runs no arm 'naive' here; allowed: hardened"),
])
def test_what_the_run_does_not_have_is_a_usage_error(smoke, only, says):
    with pytest.raises(errors.ChaosError) as raised:
        select(smoke, parse_only(only))
    assert raised.value.exit_code == errors.USAGE and says in str(raised.value)
