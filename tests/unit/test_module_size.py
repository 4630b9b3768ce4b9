"""No module of chaos/, infra/ or job/ grows past MAX_LINES: one that does holds more than one concept and is split
by concept (as infra/access.py out of infra/stack.py, chaos/arm/schedule.py out of chaos/arm/steps.py)."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("chaos", "infra", "job")
MAX_LINES = 600


def oversized(root: Path, packages: tuple[str, ...] = PACKAGES, limit: int = MAX_LINES) -> dict[str, int]:
    """Each .py file under `packages` (at any depth) with more than `limit` lines, by its path from `root`."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            lines = len(path.read_text().splitlines())
            if lines > limit:
                found[path.relative_to(root).as_posix()] = lines
    return found


def test_no_module_of_chaos_infra_or_job_has_more_than_600_lines():
    assert len(list((ROOT / "chaos").rglob("*.py"))) > 50  # the tree is really walked
    found = oversized(ROOT)
    assert not found, (f"module(s) over {MAX_LINES} lines; split each by concept: "
                       + ", ".join(f"{path} ({lines} lines)" for path, lines in found.items()))


def test_the_size_rule_names_every_module_past_the_limit_at_any_depth(tmp_path):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "small.py").write_text("x = 1\n" * 3)
    (tmp_path / "pkg" / "at_limit.py").write_text("x = 1\n" * 4)
    (tmp_path / "pkg" / "big.py").write_text("x = 1\n" * 5)
    (tmp_path / "pkg" / "sub" / "deep.py").write_text("x = 1\n" * 6)
    (tmp_path / "pkg" / "notes.txt").write_text("x\n" * 9)
    assert oversized(tmp_path, ("pkg",), limit=4) == {"pkg/big.py": 5, "pkg/sub/deep.py": 6}
