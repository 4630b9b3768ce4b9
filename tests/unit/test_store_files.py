"""Every file of a run that is written whole goes through the run store (chaos/store.py), byte for byte as before:
no other module of chaos/ writes one of its files by name."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from chaos import store
from chaos.store import RunStore, write_arm_summary, write_lineage, write_oracle, write_result, write_sessions

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "runs"
FILE_NAMES = {name: value for name, value in vars(store).items() if name.endswith("_FILE")}


@pytest.mark.parametrize("name, write", [("oracle.json", write_oracle), ("lineage.json", write_lineage),
                                         ("arm.json", write_arm_summary), ("result.json", write_result)])
def test_an_arm_file_written_through_the_store_is_the_stored_file_byte_for_byte(tmp_path, name, write):
    stored = sorted(FIXTURES.glob(f"*/*/*/{name}"))
    assert stored
    for path in stored:
        write(tmp_path, json.loads(path.read_text()))
        assert (tmp_path / name).read_bytes() == path.read_bytes(), path
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no temporary file left behind


def test_sessions_and_the_mutation_plan_keep_their_format(tmp_path):
    write_sessions(tmp_path, [{"key": "a", "count": 2}, {"key": "b", "count": 1}])
    assert (tmp_path / "sessions.jsonl").read_text() == '{"key": "a", "count": 2}\n{"key": "b", "count": 1}\n'
    write_sessions(tmp_path, [])
    assert (tmp_path / "sessions.jsonl").read_text() == ""
    RunStore(tmp_path).write_mutation([{"experiment": "e", "switch": "s", "mutant": "e--s"}])
    assert (tmp_path / "mutation.json").read_text() == (
        '[\n {\n  "experiment": "e",\n  "switch": "s",\n  "mutant": "e--s"\n }\n]\n')


def _writes(tree: ast.AST) -> list[ast.Call]:
    """Calls that write a file: Path.write_text/write_bytes, open(..., "w"/"a"/"x"), json.dump."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name == "open":
            modes = list(node.args[1:2]) + [k.value for k in node.keywords if k.arg == "mode"]
            if any(isinstance(m, ast.Constant) and set(str(m.value)) & set("wax") for m in modes):
                found.append(node)
        elif name in ("write_text", "write_bytes") or (name == "dump" and ast.unparse(func) == "json.dump"):
            found.append(node)
    return found


def test_no_module_but_the_store_writes_a_run_file_by_name():
    offenders = []
    for path in sorted((ROOT / "chaos").rglob("*.py")):
        if path == ROOT / "chaos" / "store.py":
            continue
        source = path.read_text()
        for call in _writes(ast.parse(source)):
            text = ast.get_source_segment(source, call) or ""
            named = [value for n, value in FILE_NAMES.items() if n in text or f'"{value}"' in text]
            if named:
                offenders.append(f"{path.relative_to(ROOT)}:{call.lineno} writes {', '.join(named)}")
    assert offenders == []
