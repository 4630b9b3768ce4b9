"""`chaos run --only EXP[/ARM],...`: a part of a suite (or of the experiments given), each experiment as the suite
runs it — its scale, overrides and arms from the suite file — so a subset is judged exactly as the whole suite
judges it. The pytest plugin (chaos/pytest_plugin.py) runs the arms a `pytest -k` selects this way."""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from . import errors
from .spec import ExperimentSpec


def parse_only(text: str) -> list[tuple[str, str | None]]:
    """'a,b/hardened' -> [('a', None), ('b', 'hardened')] (None: every arm the suite runs of that experiment)."""
    picked: list[tuple[str, str | None]] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, _, arm = item.partition("/")
        picked.append((name.strip(), arm.strip() or None))
    if not picked:
        raise errors.ChaosError("--only needs EXPERIMENT[/ARM],...", errors.USAGE)
    return picked


def select(specs: Sequence[ExperimentSpec], only: Sequence[tuple[str, str | None]]) -> list[ExperimentSpec]:
    """The specs named in `only`, in their own (the suite's) order, each with only the arms asked for. An experiment
    or arm that is not in `specs` is a usage error naming what is there."""
    by_name = {spec.name: spec for spec in specs}
    wanted: dict[str, set[str] | None] = {}
    for name, arm in only:
        spec = by_name.get(name)
        if spec is None:
            raise errors.ChaosError(f"--only: no experiment {name!r} in this run; known: {', '.join(by_name)}",
                                    errors.USAGE)
        have = [a.profile for a in spec.arms]
        if arm is not None and arm not in have:
            raise errors.ChaosError(f"--only: {name} runs no arm {arm!r} here; allowed: {', '.join(have)}",
                                    errors.USAGE)
        if arm is None or wanted.get(name, set()) is None:
            wanted[name] = None
        else:
            wanted.setdefault(name, set()).add(arm)  # type: ignore[union-attr]
    selected = []
    for spec in specs:
        if spec.name not in wanted:
            continue
        arms = wanted[spec.name]
        selected.append(spec if arms is None else
                        dataclasses.replace(spec, arms=tuple(a for a in spec.arms if a.profile in arms)))
    return selected
