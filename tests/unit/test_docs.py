"""The newcomer's pages stay what issue 38 made them: a README of at most 8 KB that keeps the two commands CI and a
user type, and pages whose relative links all lead somewhere in the repository."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("README.md", "docs/setup.md", "docs/commands.md", "docs/testing.md", "docs/figures.md",
         "docs/adding-an-experiment.md")


def test_the_readme_fits_in_8_kb_and_keeps_the_two_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.encode()) <= 8192, f"README.md is {len(text.encode())} bytes; move detail to docs/"
    assert "make run    # " in text and "make test   # " in text


@pytest.mark.parametrize("page", PAGES)
def test_every_relative_link_leads_to_a_file(page):
    path = ROOT / page
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text(encoding="utf-8"))
    broken = [link for link in links if "://" not in link and not (path.parent / link).exists()]
    assert broken == [], f"{page}: {broken}"


def test_every_figure_has_its_command_date_and_commit():
    rows = [line for line in (ROOT / "docs" / "figures.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("| ") and not line.startswith(("| figure", "|---"))]
    assert rows
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        figure, value, command, date, commit, _notes = cells
        assert figure and value and command, row
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", date), row
        assert re.fullmatch(r"[0-9a-f]{7}( †)?", commit), row
