"""The order `make test`'s shared session hands test modules to its two workers: longest first.

Under `--dist loadfile` a module is one unit of work, and a free worker takes the next unit in the order of the
workers' collection, as long as xdist does not reorder it (`--no-loadscope-reorder`, tests/run_parts.py: its default
puts the modules with the most tests first, which left the three-minute one-test modules to the end, where one worker
ran them while the other idled). Longest first leaves the short modules, the unit tests, to even out the end.

The costs only order the modules: a stale or missing figure costs balance, never a result. A module not listed counts
as DEFAULT_INTEGRATION_S under tests/integration, else 0 (after every listed module, in collection order).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

# Seconds of each module's tests in the clean-clone CI of ed0fb34 (2026-11-28, the shared session's --durations),
# less the tests issue 39 cut; test_checkpoint_damage_state's stack and first job start estimated (+90 s).
COSTS_S = {
    "tests/integration/test_checkpoint_damage_state.py": 320,
    "tests/integration/test_interrupts.py": 310,
    "tests/integration/test_checkpoint_damage_query.py": 300,
    "tests/integration/test_job.py": 280,
    "tests/integration/test_stack.py": 240,
    "tests/integration/test_reliability.py": 220,
    "tests/integration/test_restart.py": 200,
    "tests/integration/test_lifecycle.py": 170,
    "tests/integration/test_missing_partition.py": 170,
    "tests/integration/test_hardening.py": 90,
    "tests/integration/test_cluster.py": 60,
    "tests/unit/test_run_parts.py": 40,
}
DEFAULT_INTEGRATION_S = 60


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def cost_s(module: str) -> float:
    return COSTS_S.get(module, DEFAULT_INTEGRATION_S if module.startswith("tests/integration/") else 0)


class Collected(Protocol):
    nodeid: str


Item = TypeVar("Item", bound=Collected)


def longest_first(items: Sequence[Item]) -> list[Item]:
    """`items` (anything with a `nodeid`) with their modules longest first; a module's items keep their order and stay
    together (its module-scoped stack is set up once), and modules of equal cost keep the order they had."""
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        first.setdefault(module_of(item.nodeid), index)
    return sorted(items, key=lambda item: (-cost_s(module_of(item.nodeid)), first[module_of(item.nodeid)]))
