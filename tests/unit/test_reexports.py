"""No unused re-export (issue 38): every name a package's `__init__.py` of chaos/, infra/ or job/ imports is imported
through the package by another module of chaos/, infra/, job/ or tests/ (`from chaos.spec import Arm`,
`from .spec import Arm`, `chaos.spec.Arm`, `spec.Arm` after `from chaos import spec`, or a dotted string such as a
monkeypatch target), is used by the `__init__` itself, or is in ALLOWED with why. A submodule an `__init__` imports
is a load for its side effect, not a re-export: the import binds it on its package anyway."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("chaos", "infra", "job")
IMPORTERS = (*PACKAGES, "tests")

# (package, name) -> why it stays with no importer through the package.
ALLOWED: dict[tuple[str, str], str] = {}

DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources(root: Path, importers: tuple[str, ...]) -> dict[str, Path]:
    found = {}
    for top in importers:
        for path in sorted((root / top).rglob("*.py")):
            if "fixtures" not in path.relative_to(root).parts:
                found[module_name(path, root)] = path
    return found


def _is_module(dotted: str, root: Path) -> bool:
    path = root.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imported_from(node: ast.ImportFrom, name: str, path: Path) -> str:
    """The module an ImportFrom in module `name` (at `path`) reads from, relative levels resolved."""
    if not node.level:
        return node.module or ""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    base = package[:len(package) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def reexports(name: str, path: Path, root: Path) -> set[str]:
    """The names the package `name`'s __init__ imports and neither loads as a submodule nor uses itself."""
    tree = ast.parse(path.read_text(), str(path))
    bound = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            source = imported_from(node, name, path)
            bound |= {alias.asname or alias.name for alias in node.names
                      if not _is_module(f"{source}.{alias.name}", root)}
    used_inside = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    return bound - used_inside


def _dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def uses(name: str, path: Path) -> set[str]:
    """Every dotted name module `name` reaches: `pkg.Name` for `from pkg import Name`, attribute chains with their
    head resolved (`spec.Arm` after `from chaos import spec` is `chaos.spec.Arm`), and dotted string constants."""
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    aliases: dict[str, str] = {}  # local name -> the module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    head = alias.name.split(".")[0]
                    aliases[head] = head
        elif isinstance(node, ast.ImportFrom):
            source = imported_from(node, name, path)
            for alias in node.names:
                found.add(f"{source}.{alias.name}")
                aliases[alias.asname or alias.name] = f"{source}.{alias.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):  # every link of a chain: `a.b.c` adds `a.b` too, harmlessly
            dotted = _dotted(node)
            if dotted:
                head, _, rest = dotted.partition(".")
                found.add(f"{aliases.get(head, head)}.{rest}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and DOTTED.fullmatch(node.value):
            found.add(node.value)
    return found


def unused_reexports(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES, importers: tuple[str, ...] = IMPORTERS,
                     allowed: dict[tuple[str, str], str] = ALLOWED) -> list[str]:
    """`<__init__ path>: <name>` for each unused re-export, and for each `allowed` entry that names no re-export."""
    sources = _sources(root, importers)
    reached: dict[str, set[str]] = {name: uses(name, path) for name, path in sources.items()}
    unused = []
    exported_names = set()
    for package, path in sources.items():
        if path.name != "__init__.py" or package.split(".")[0] not in packages:
            continue
        for exported in sorted(reexports(package, path, root)):
            exported_names.add((package, exported))
            prefix = f"{package}.{exported}"
            if (package, exported) in allowed:
                continue
            if not any(dotted == prefix or dotted.startswith(prefix + ".")
                       for user, dotteds in reached.items() if user != package for dotted in dotteds):
                unused.append(f"{path.relative_to(root)}: {exported}")
    unused += [f"ALLOWED: {package}.{name} is no re-export; drop it from ALLOWED"
               for package, name in sorted(set(allowed) - exported_names)]
    return unused


def test_every_reexport_is_imported_through_its_package():
    unused = unused_reexports()
    assert not unused, ("re-exported but never imported through the package; import it from its defining module "
                        "and drop it from the __init__ (or add it to ALLOWED with why):\n  " + "\n  ".join(unused))


def test_each_way_of_importing_through_a_package_counts(tmp_path):
    """The rule on a small tree: five names re-exported, four imported through the package in four ways, one not; a
    submodule loaded by the __init__ is no re-export; a stale ALLOWED entry is named too."""
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub" / "__init__.py").write_text(
        "from . import loaded\nfrom .defs import Direct, Aliased, Dotted, Relative, Unused\n")
    (tmp_path / "pkg" / "sub" / "defs.py").write_text("Direct = Aliased = Dotted = Relative = Unused = 1\n")
    (tmp_path / "pkg" / "sub" / "loaded.py").write_text("")
    (tmp_path / "pkg" / "user.py").write_text(
        "from pkg.sub import Direct\nfrom pkg import sub\nfrom . import sub as s\nsub.Aliased\n"
        "TARGET = 'pkg.sub.Dotted'\n")
    (tmp_path / "pkg" / "sub" / "defs_user.py").write_text("from . import Relative\n")
    allowed = {("pkg.sub", "Gone"): "no longer re-exported"}
    assert unused_reexports(tmp_path, ("pkg",), ("pkg",), allowed) == [
        "pkg/sub/__init__.py: Unused", "ALLOWED: pkg.sub.Gone is no re-export; drop it from ALLOWED"]
