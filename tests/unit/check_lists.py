"""Assertions over a list of checks (an arm's, a discrimination's) that hold what a test is about — these checks, in
this order, with these verdicts or figures — without pinning the whole list: a check added to the registry later may
appear beside them (issue 20: adding a check breaks no unrelated test). What may appear is bounded: only the name of
a registered check, never one the test already names a second time."""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from chaos.checks.registry import CHECKS


def registered(name: str) -> bool:
    return any(name == c.name or name.startswith(f"{c.name}:") for c in CHECKS)


def assert_checks(checks: Iterable[Mapping[str, object]], expected: Mapping[str, object], field: str = "verdict",
                  where: str = "") -> None:
    """Each check `expected` names is there, once, in that relative order, with `field` equal to its value (a tuple
    of fields for a tuple `field`); any other check is a registered one."""
    checks = list(checks)
    names = [str(c["name"]) for c in checks]
    assert len(names) == len(set(names)), (where, names)
    assert [n for n in names if n in expected] == list(expected), (where, names, list(expected))
    fields = field.split(",")
    got = {str(c["name"]): (c[fields[0]] if len(fields) == 1 else tuple(c[f] for f in fields)) for c in checks}
    assert {n: got[n] for n in expected} == dict(expected), where
    assert all(registered(n) for n in names if n not in expected), (where, names)


def assert_recorded(checks: Iterable[Mapping[str, object]], recorded: Iterable[Mapping[str, object]],
                    where: str = "") -> None:
    """Re-judged checks against a stored list: every recorded check is judged again the same (verdict, expected,
    measured), in the same order; a check the registry gained since may appear beside them."""
    assert_checks(checks, {str(c["name"]): (c["verdict"], c["expected"], c["measured"]) for c in recorded},
                  "verdict,expected,measured", where)
