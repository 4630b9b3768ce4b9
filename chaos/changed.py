"""Which experiments a change can affect: `chaos run --changed-since REF`.

An experiment depends on its spec file, the suite file that shaped it, the code of its fault kinds (their own code in
their family module, and the files outside chaos/faults/ each kind names in `needs.code`; and the code of lifecycle
triggers when a fault has `on:`), and on everything every run uses: the job, the stack, the harness's run loop and
checkers. The rules below are deliberately conservative: a changed file the table does not know makes every
experiment run, and so does a change to the fault kinds' shared code (chaos/faults/base.py, registry.py). Only files
that cannot change what a run does or how it is judged (docs, tests, the report, benches) are skipped.

`select` is pure (files and changed lines in, decisions out), so the rules are unit-tested without git.
"""
from __future__ import annotations

import ast
import fnmatch
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import errors
from .faults import registry as fault_registry  # by module: its kinds are read when a change is judged
from .spec import ExperimentSpec

# Changing one of these cannot change a run or its verdict (chaos/target/: files and runs of a target, never a run on
# the suite's own stack).
INERT = ("docs/*", "*.md", "tests/*", "reports/*", ".ci/*", "chaos/report/*", "chaos/bench/job.py",
         "chaos/mutate.py", "chaos/bench/crash_tally.py", "chaos/bench/suite_timing.py",
         "chaos/bench/recoveries.py", "chaos/changed.py",
         ".gitignore", "LICENSE", "experiments/README.md", "experiments/schema.json", "chaos/target/*")

# Code that lifecycle triggers (`on:`) run on; s3proxy sees the job's requests for them.
TRIGGER_FILES = ("chaos/triggers.py", "chaos/arm/lifecycle.py", "infra/s3proxy.py", "infra/s3proxy/*")
# Fault kinds live in one module per family (chaos/faults/network.py, ...): a changed line inside a kind's own code
# reruns the experiments using that kind, any other line of the module those using a kind of the family. The
# package's other modules (base.py, registry.py, __init__.py) are shared by every kind.
FAULTS_DIR = "chaos/faults/"
SHARED_FAULT_MODULES = ("__init__.py", "base.py", "registry.py")


def is_family_module(path: str) -> bool:
    name = path[len(FAULTS_DIR):]
    return (path.startswith(FAULTS_DIR) and "/" not in name and name.endswith(".py")
            and name not in SHARED_FAULT_MODULES)


Spans = tuple[tuple[int, int], ...]


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


def section_kinds(source: str, path: str = "") -> Mapping[str, Spans] | None:
    """Fault kind -> the (first line, last line) spans of the code that belongs to it in a family module: its
    `FaultKind("kind", ...)` declaration and every class or function of the module the declaration names (its
    implementation, validate, reshape, a params helper). Code named by several kinds (the toxics' one class) belongs to
    each of them. None when the module declares no kind."""
    tree = ast.parse(source)
    defs = {n.name: (n.lineno, n.end_lineno or n.lineno) for n in tree.body
            if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    spans: dict[str, list[tuple[int, int]]] = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "FaultKind" and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            own = spans.setdefault(node.args[0].value, [])
            own.append((node.lineno, node.end_lineno or node.lineno))
            own += sorted({defs[n.id] for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in defs})
    return {kind: tuple(found) for kind, found in spans.items()} or None


def kinds_of_change(change: Change, sections: Mapping[str, Spans] | None) -> set[str] | None:
    """The fault kinds a change to a family module touches: the kinds whose own code holds a changed line, and every
    kind of the module for a line of none (the family's shared code); None when the module's kinds are not known
    (it could not be parsed, or was deleted): then every experiment may depend on it."""
    if not sections:
        return None
    if not change.lines:
        return set(sections)
    touched: set[str] = set()
    for line in change.lines:
        owners = {kind for kind, spans in sections.items() if any(first <= line <= last for first, last in spans)}
        touched |= owners or set(sections)
    return touched


def served_kinds(path: str) -> set[str]:
    """The fault kinds whose `needs.code` names `path`: code outside chaos/faults/ that only they use, so a change to
    it reruns the experiments that use one of them."""
    return {name for name, kind in fault_registry.FAULTS.items() if _matches(path, kind.needs.code)}


def select(specs: Sequence[ExperimentSpec], changes: Sequence[Change], suite_source: str | None,
           sections: Mapping[str, Mapping[str, Spans] | None], root: Path) -> list[Decision]:
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
        if is_family_module(path):
            kinds = kinds_of_change(change, sections.get(path))
            if kinds is None:
                everyone = everyone or f"{path} changed and its fault kinds are not known"
                continue
            for spec in specs:
                used = sorted({f.fault for f in spec.faults} & kinds)
                if used:
                    by_name.setdefault(spec.name, f"{path}: the code of {', '.join(used)} changed")
            continue
        owned = served_kinds(path)
        if owned or _matches(path, TRIGGER_FILES):
            for spec in specs:
                served = sorted({f.fault for f in spec.faults} & owned)
                if served:
                    by_name.setdefault(spec.name, f"{path} changed (it serves {', '.join(served)} faults)")
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
    lines of the current version of each fault family module."""
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
        if is_family_module(path) and (root / path).is_file():
            for row in _git(root, "diff", "-U0", ref, "--", path).splitlines():
                m = _HUNK.match(row)
                if m:
                    start, count = int(m.group(1)), int(m.group(2) or 1)
                    # A pure deletion (count 0) is between lines start and start + 1.
                    lines.extend(range(start, start + count) if count else (start, start + 1))
        changes.append(Change(path, tuple(lines)))
    return changes


def sections_at(root: Path) -> dict[str, Mapping[str, Spans] | None]:
    """The kinds' own code in each fault family module of the tree at `root`."""
    found: dict[str, Mapping[str, Spans] | None] = {}
    for module in sorted((root / FAULTS_DIR).glob("*.py")):
        path = f"{FAULTS_DIR}{module.name}"
        if not is_family_module(path):
            continue
        try:
            found[path] = section_kinds(module.read_text(), path)
        except (OSError, SyntaxError):
            found[path] = None
    return found
