"""Which experiments a change can affect: `chaos run --changed-since REF`.

An experiment depends on its spec file, the suite file that shaped it, the code of its fault kinds (and of lifecycle
triggers when a fault has `on:`), and on everything every run uses: the job, the stack, the harness's run loop and
checkers. The rules below are deliberately conservative: a changed file the table does not know makes every
experiment run, and so does a change to a fault module outside one fault kind's own code. Only files that cannot
change what a run does or how it is judged (docs, tests, the report, benches) are skipped.

`select` is pure (files and changed lines in, decisions out), so the rules are unit-tested without git.
"""
from __future__ import annotations

import ast
import fnmatch
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from . import errors
from .spec import ExperimentSpec

# Changing one of these cannot change a run or its verdict.
INERT = ("docs/*", "*.md", "tests/*", "reports/*", ".ci/*", "chaos/report.py", "chaos/report/*", "chaos/bench.py",
         "chaos/mutate.py", "chaos/crash_tally.py", "chaos/suite_timing.py", "chaos/changed.py", ".gitignore",
         "LICENSE", "experiments/README.md", "experiments/schema.json")

# Code owned by some fault kinds only: a change to it reruns the experiments that use one of those kinds.
KIND_FILES: Mapping[str, tuple[str, ...]] = {
    "infra/toxiproxy.py": ("network.",),
    "chaos/checkpoint_tools.py": ("checkpoint.corrupt",),
    "infra/s3proxy.py": ("s3.",),
    "infra/s3proxy/*": ("s3.",),
}
# Code that lifecycle triggers (`on:`) run on; s3proxy sees the job's requests for them.
TRIGGER_FILES = ("chaos/triggers.py", "chaos/lifecycle.py", "infra/s3proxy.py", "infra/s3proxy/*")
# Modules with one section per fault kind: a changed line inside a kind's own section reruns only that kind.
SECTIONED = ("chaos/faults.py", "chaos/faults_catalog.py")


@dataclass(frozen=True)
class Decision:
    name: str
    run: bool
    reason: str


@dataclass(frozen=True)
class Change:
    path: str  # relative to the repository root, forward slashes
    lines: tuple[int, ...] = ()  # changed lines of the current file (empty: the whole file, e.g. deleted)


def _matches(path: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatch(path, p) for p in patterns)


def section_kinds(source: str, path: str) -> Mapping[str, tuple[int, int]] | None:
    """Fault kind -> (first line, last line) of the code that belongs to it alone in one of SECTIONED.

    chaos/faults.py: a kind's implementation class (from IMPLEMENTATIONS; a class that serves several kinds, such as
    the toxics, gives each of them the same span). A base class is not in the registry, so its lines are shared code.
    chaos/faults_catalog.py: a kind's `FaultType("kind", ...)` call.
    """
    tree = ast.parse(source)
    spans: dict[str, list[tuple[int, int]]] = {}
    if path.endswith("faults_catalog.py"):
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "FaultType" and node.args
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                spans.setdefault(node.args[0].value, []).append((node.lineno, node.end_lineno or node.lineno))
        return {k: v[0] for k, v in spans.items() if len(v) == 1}
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    registry: dict[str, str] = {}
    for node in tree.body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target
        if getattr(target, "id", None) != "IMPLEMENTATIONS" or not isinstance(node.value, ast.Dict):
            continue
        for key, value in zip(node.value.keys, node.value.values):
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and isinstance(value, ast.Name):
                registry[key.value] = value.id
            elif key is None and isinstance(value, ast.DictComp) and isinstance(value.value, ast.Name):
                # **{name: Cls for name in NAMES}: NAMES is a tuple of strings or a module-level dict's keys
                for name in _constant_strings(tree, value.generators[0].iter):
                    registry[name] = value.value.id
    if not registry:
        return None
    return {kind: (classes[cls].lineno, classes[cls].end_lineno or classes[cls].lineno)
            for kind, cls in registry.items() if cls in classes}


def _constant_strings(tree: ast.Module, node: ast.expr) -> list[str]:
    if isinstance(node, ast.Name):
        for stmt in tree.body:
            if (isinstance(stmt, ast.Assign) and getattr(stmt.targets[0], "id", None) == node.id
                    and isinstance(stmt.value, ast.Dict)):
                node = ast.Tuple(elts=[k for k in stmt.value.keys if k is not None])
                break
    elts = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else []
    return [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]


def kinds_of_change(change: Change, sections: Mapping[str, tuple[int, int]] | None) -> set[str] | None:
    """The fault kinds a change to a SECTIONED module touches; None when it touches shared code (every kind)."""
    if not change.lines or not sections:
        return None
    touched: set[str] = set()
    for line in change.lines:
        owners = {kind for kind, (first, last) in sections.items() if first <= line <= last}
        if not owners:
            return None  # imports, helpers, base classes, the registry itself: shared by every kind
        touched |= owners
    return touched


def _uses(spec: ExperimentSpec, prefixes: Iterable[str]) -> bool:
    return any(f.fault.startswith(p) or f.fault == p for f in spec.faults for p in prefixes)


def select(specs: Sequence[ExperimentSpec], changes: Sequence[Change], suite_source: str | None,
           sections: Mapping[str, Mapping[str, tuple[int, int]] | None], root: Path) -> list[Decision]:
    """Which of `specs` to run for `changes` (paths relative to `root`), each with the reason."""
    def rel(source: str) -> str:
        try:
            return Path(source).resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            return source

    everyone: str | None = None
    by_name: dict[str, str] = {}
    for change in changes:
        path = change.path
        if suite_source and path == rel(suite_source):
            everyone = everyone or f"{path} (the suite) changed"
            continue
        spec_hits = [s.name for s in specs if rel(s.source) == path]
        if spec_hits:
            for name in spec_hits:
                by_name.setdefault(name, f"{path} changed")
            continue
        if path.startswith("experiments/") and path.endswith((".yaml", ".yml")):
            continue  # another experiment's spec, or a suite not being run
        if _matches(path, INERT):
            continue
        if path in SECTIONED:
            kinds = kinds_of_change(change, sections.get(path))
            if kinds is None:
                everyone = everyone or f"{path} changed outside one fault kind's own code"
                continue
            for spec in specs:
                used = sorted({f.fault for f in spec.faults} & kinds)
                if used:
                    by_name.setdefault(spec.name, f"{path}: the code of {', '.join(used)} changed")
            continue
        owned = next((prefixes for pattern, prefixes in KIND_FILES.items() if fnmatch.fnmatch(path, pattern)), None)
        if owned is not None or _matches(path, TRIGGER_FILES):
            for spec in specs:
                if owned is not None and _uses(spec, owned):
                    by_name.setdefault(spec.name, f"{path} changed (it serves {', '.join(owned)} faults)")
                elif _matches(path, TRIGGER_FILES) and any(f.on is not None for f in spec.faults):
                    by_name.setdefault(spec.name, f"{path} changed (it serves lifecycle triggers)")
            continue
        everyone = everyone or f"{path} changed: every experiment may depend on it"
    decisions = []
    for spec in specs:
        if everyone:
            decisions.append(Decision(spec.name, True, everyone))
        elif spec.name in by_name:
            decisions.append(Decision(spec.name, True, by_name[spec.name]))
        else:
            decisions.append(Decision(spec.name, False, "nothing it depends on changed"))
    return decisions


_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    if done.returncode != 0:
        line = (done.stderr.strip().splitlines() or ["git failed"])[-1]
        raise errors.ChaosError(f"--changed-since: git {' '.join(args[:2])}: {line}", errors.USAGE)
    return done.stdout


def changes_since(ref: str, root: Path) -> list[Change]:
    """Files changed between REF and the working tree (committed, staged, unstaged, untracked), with the changed
    lines of the current version of each SECTIONED module."""
    if ref.startswith("-"):
        raise errors.ChaosError(f"--changed-since: {ref!r} is not a git revision", errors.USAGE)
    try:
        _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except errors.ChaosError:
        raise errors.ChaosError(f"--changed-since: {ref!r} is not a commit of {root}; give a commit, branch or tag",
                                errors.USAGE) from None
    paths = set(_git(root, "diff", "--name-only", ref, "--").split())
    paths |= set(_git(root, "ls-files", "--others", "--exclude-standard").split())
    changes = []
    for path in sorted(paths):
        lines: list[int] = []
        if path in SECTIONED and (root / path).is_file():
            for row in _git(root, "diff", "-U0", ref, "--", path).splitlines():
                m = _HUNK.match(row)
                if m:
                    start, count = int(m.group(1)), int(m.group(2) or 1)
                    # A pure deletion (count 0) is between lines start and start + 1.
                    lines.extend(range(start, start + count) if count else (start, start + 1))
        changes.append(Change(path, tuple(lines)))
    return changes


def sections_at(root: Path) -> dict[str, Mapping[str, tuple[int, int]] | None]:
    found: dict[str, Mapping[str, tuple[int, int]] | None] = {}
    for path in SECTIONED:
        try:
            found[path] = section_kinds((root / path).read_text(), path)
        except (OSError, SyntaxError):
            found[path] = None
    return found
