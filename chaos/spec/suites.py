"""Suites: a named list of experiments, each with overrides merged into its document (`key!` replaces a mapping
whole), the arms it runs, its seed and scale, all validated as one experiment is (`load_suite`)."""
from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from ..errors import SpecError
from .experiment import TOP_FIELDS, parse_experiment
from .fields import (
    LIMITS,
    MAX_ITEMS,
    NAME_HELP,
    NAME_RE,
    Invalid,
    Path_,
    check_scale,
    dotted,
    integer,
    is_int,
    mapping_of,
    nonempty_text,
    num,
    number,
    show,
)
from .loading import load_yaml
from .model import ARM_PROFILES, Suite, SuiteEntry

REPLACE_MARK = "!"  # `targets!: {...}` in an override replaces the mapping instead of merging into it


def _merge(base: object, overrides: object) -> object:
    """Mappings merge key by key, unless the override's key ends in `!` (then its value replaces the base's
    whole); anything else (lists included) is replaced whole."""
    if isinstance(base, dict) and isinstance(overrides, dict):
        merged = dict(base)
        for key, value in overrides.items():
            if isinstance(key, str) and key.endswith(REPLACE_MARK):
                merged[key[: -len(REPLACE_MARK)]] = copy.deepcopy(_unmarked(value))
            else:
                merged[key] = _merge(base.get(key), value) if key in base else copy.deepcopy(_unmarked(value))
        return merged
    return copy.deepcopy(_unmarked(overrides))


def _unmarked(value: object) -> object:
    """A value as the spec sees it: `key!` marks inside a value that replaces whole are just `key`."""
    if isinstance(value, dict):
        return {(k[: -len(REPLACE_MARK)] if isinstance(k, str) and k.endswith(REPLACE_MARK) else k): _unmarked(v)
                for k, v in value.items()}
    return value


def _from_overrides(overrides: object, path: Path_) -> bool:
    """Did the value at `path` (or the branch holding it) come from the overrides?"""
    node = overrides
    for key in path:
        if not isinstance(node, dict):  # a value (a list included) the overrides replaced whole
            return True
        if key + REPLACE_MARK in node:
            return True
        if key not in node and not (key.isdigit() and int(key) in node):
            return False
        node = node[key] if key in node else node[int(key)]
    return True


SUITE_FIELDS = ("name", "description", "scale", "repeat", "require_discrimination", "lanes", "experiments")


def _only_arms(merged: Mapping, raw: object, path: Path, epath: Path_) -> dict:
    """The experiment document with only the arms a suite entry runs (before validation: an arm left out is not
    judged at the suite's scale either, e.g. a recovery bound that only fits the nightly recover phase)."""
    arms = merged.get("arms")
    if not isinstance(arms, Mapping):
        arms = {}
    have = [name for name in ARM_PROFILES if name in arms]
    if not isinstance(raw, list) or not raw or any(name not in have for name in raw) or len(set(raw)) != len(raw):
        raise SpecError(f"{path}: {dotted(epath)}: {show(raw)} is not valid; allowed: a non-empty list of "
                        f"distinct arms of {merged.get('name')}: {', '.join(have)}")
    return {**merged, "arms": {name: arms[name] for name in have if name in raw}}


def _entry_seed(value: object, path: Path_) -> int | None:
    """A suite entry's `seed`: an integer >= 0, or `random` (a new one each run: the nightly draws new moments every
    night; the seed it drew is in the run's spec.json, and `chaos run --seed N` reruns it)."""
    if value is None:
        return None
    if value == "random":
        import secrets

        return secrets.randbelow(2**31)
    return integer(value, path, minimum=0)


def load_suite(path: str | Path, scale: float | None = None) -> Suite:
    """Load a suite: every experiment with the suite's overrides merged in and its scale applied, all validated.
    An error caused by an override names the suite file and the override's path. `scale` replaces the suite's
    own (the command line's --scale); an entry's own `scale` is kept either way: it is the shortest that entry
    runs and still shows its mechanism."""
    path = Path(path)
    doc = load_yaml(path)
    try:
        top = mapping_of(doc, (), SUITE_FIELDS, required=("name", "experiments"))
        name = nonempty_text(top["name"], ("name",))
        if not NAME_RE.match(name):
            raise Invalid(("name",), f"{show(name)} is not a valid name", NAME_HELP)
        description = nonempty_text(top["description"], ("description",)) if "description" in top else ""
        raw_entries = top["experiments"]
        if not isinstance(raw_entries, list) or not raw_entries or len(raw_entries) > MAX_ITEMS:
            raise Invalid(("experiments",), f"{show(raw_entries)} is not a non-empty list of at most {MAX_ITEMS}",
                           "a list of {path, overrides}")
    except Invalid as exc:
        raise SpecError(f"{path}: {dotted(exc.path)}: {exc.what}; allowed: {exc.allowed}") from None
    suite_scale = check_scale(top.get("scale", 1.0), str(path), ("scale",))
    if scale is not None:
        suite_scale = check_scale(scale, "--scale", ("scale",))
    repeat = top.get("repeat", 1)
    if not is_int(repeat) or not 1 <= repeat <= LIMITS["repeat"]:
        raise SpecError(f"{path}: repeat: {show(repeat)} is not valid; allowed: an integer >= 1 and <= "
                        f"{num(LIMITS['repeat'])}")
    require = top.get("require_discrimination", False)
    if not isinstance(require, bool):
        raise SpecError(f"{path}: require_discrimination: {show(require)} is not valid; allowed: true | false")
    lanes = top.get("lanes", 1)
    if not is_int(lanes) or not 1 <= lanes <= LIMITS["lanes"]:
        raise SpecError(f"{path}: lanes: {show(lanes)} is not valid; allowed: an integer >= 1 and <= "
                        f"{num(LIMITS['lanes'])}")

    entries: list[SuiteEntry] = []
    names: dict[str, int] = {}
    for i, raw in enumerate(raw_entries):
        epath = ("experiments", str(i))
        try:
            entry = mapping_of(raw, epath, ("path", "scale", "overrides", "arms", "seed"), required=("path",))
            entry_seed = _entry_seed(entry.get("seed"), epath + ("seed",))
            relative = nonempty_text(entry["path"], epath + ("path",))
            overrides = mapping_of(entry.get("overrides", {}), epath + ("overrides",), TOP_FIELDS)
            entry_scale = (number(entry["scale"], epath + ("scale",), above=0) if "scale" in entry else None)
        except Invalid as exc:
            raise SpecError(f"{path}: {dotted(exc.path)}: {exc.what}; allowed: {exc.allowed}") from None
        experiment_path = path.parent / relative
        if not experiment_path.is_file():
            raise SpecError(f"{path}: {dotted(epath + ('path',))}: {experiment_path} is not a file; allowed: a "
                            "path relative to the suite file")
        merged = _merge(load_yaml(experiment_path), overrides)
        if "arms" in entry and isinstance(merged, Mapping):  # the arms this entry runs (default: all)
            merged = _only_arms(merged, entry["arms"], path, epath + ("arms",))
        try:
            spec = parse_experiment(merged, str(experiment_path), entry_scale or suite_scale)
        except Invalid as exc:
            if _from_overrides(overrides, exc.path):
                raise SpecError(f"{path}: {dotted(epath + ('overrides',) + exc.path)}: {exc.what}; "
                                f"allowed: {exc.allowed}") from None
            raise SpecError(f"{experiment_path}: {dotted(exc.path)}: {exc.what}; allowed: {exc.allowed}") from None
        if spec.name in names:
            raise SpecError(f"{path}: {dotted(epath)}: experiment name {spec.name!r} is already used by "
                            f"experiments.{names[spec.name]}; allowed: unique names (override name)")
        names[spec.name] = i
        if require:
            spec = dataclasses.replace(spec, require_discrimination=True)
        if entry_seed is not None:  # the seed drawn or given here is the one spec.json records
            spec = dataclasses.replace(spec, seed=entry_seed)
        entries.append(SuiteEntry(spec=spec, overrides=MappingProxyType(overrides), scale=entry_scale))
    return Suite(source=str(path), name=name, description=description, scale=suite_scale, entries=tuple(entries),
                 repeat=repeat, require_discrimination=require, lanes=lanes)
