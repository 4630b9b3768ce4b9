"""No import circle among the modules of chaos/, infra/ and job/: every import counts, at the top of a module or inside
a function (a function-level import only hides a circle until the day it runs first). Imports under
`if TYPE_CHECKING:` never run and are left out."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("chaos", "infra", "job")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _type_checking_only(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of ours `name` imports, anywhere in its body."""
    tree = ast.parse(path.read_text(), str(path))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if _type_checking_only(node, parents):
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            # `from pkg import sub` imports the submodule pkg.sub when there is one, else a name of pkg
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in modules else module for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:  # `import a.b.c` of ours: its deepest module of ours
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: imports(name, path, modules) for name, path in modules.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One circle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_among_chaos_infra_and_job():
    edges = graph()
    assert len(edges) > 50 and "infra.stack" in edges["infra.driver"]  # the graph is really built
    assert cycles(edges) == [], "import circle(s): " + "; ".join(" <-> ".join(c) for c in cycles(edges))


def test_the_cycle_finder_finds_a_function_level_circle(tmp_path):
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    (tmp_path / "one.py").write_text("def f():\n    from .two import g\n")
    assert imports("pkg.one", tmp_path / "one.py", {"pkg.one": tmp_path, "pkg.two": tmp_path}) == {"pkg.two"}
    (tmp_path / "three.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import two\n")
    assert imports("pkg.three", tmp_path / "three.py", {"pkg.two": tmp_path}) == set()


def test_the_checks_never_reach_infra_and_the_job_never_reaches_the_harness():
    edges = graph()
    checks = [name for name in edges if name.startswith(("chaos.checks", "chaos.verdicts"))]
    assert checks and not any(t.startswith("infra") for name in checks for t in edges[name])
    assert not any(t.startswith(("chaos", "infra")) for name in edges if name.startswith("job") for t in edges[name])
