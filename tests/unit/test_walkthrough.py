"""docs/adding-an-experiment.md cannot rot: its YAML blocks are loaded by the real spec loader (the experiment, and
the smoke entry inside a suite), the incident it names is in incidents/, the switches it claims exist, the commands
name its experiment, and the files and links it points to are in the repository."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from chaos.spec import check_incident, load_experiment, load_suite
from chaos.switches import SWITCHES

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "adding-an-experiment.md"


def _blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)


@pytest.fixture
def walkthrough(tmp_path, monkeypatch):
    """The page's experiment written where it would go (experiments/<name>.yaml, in a scratch tree) and loaded."""
    monkeypatch.delenv("CHAOS_INCIDENTS_DIR", raising=False)
    experiment, _entry = _blocks("yaml")
    name = yaml.safe_load(experiment)["name"]
    path = tmp_path / "experiments" / f"{name}.yaml"
    path.parent.mkdir()
    path.write_text(experiment, encoding="utf-8")
    return path, load_experiment(path)


def test_the_page_has_the_experiment_and_its_smoke_entry():
    assert len(_blocks("yaml")) == 2


def test_the_experiment_validates_and_names_an_incident_the_repository_holds(walkthrough):
    path, spec = walkthrough
    check_incident(spec)
    assert (ROOT / "incidents" / spec.incident.file).is_file()
    assert spec.incident.file in PAGE.read_text(encoding="utf-8")
    assert {arm.profile for arm in spec.arms} == {"hardened", "naive"}
    assert spec.arm("naive").expect == "incident", "the walkthrough ends on a control that shows its incident"
    assert spec.claims and set(spec.claims) <= set(SWITCHES)


def test_the_smoke_entry_loads_in_a_suite(walkthrough, tmp_path):
    path, spec = walkthrough
    entry = yaml.safe_load(_blocks("yaml")[1])
    suite = tmp_path / "experiments" / "suites" / "smoke-part.yaml"
    suite.parent.mkdir()
    suite.write_text(yaml.safe_dump({"name": "walkthrough", "description": "the page's smoke entry", "scale": 0.25,
                                     "experiments": entry}), encoding="utf-8")
    assert [e.spec.name for e in load_suite(suite).entries] == [spec.name]


def test_the_commands_run_the_pages_experiment(walkthrough):
    _path, spec = walkthrough
    commands = "\n".join(_blocks("sh"))
    named = set(re.findall(r"chaos (?:run --suite smoke --only|run|validate|mutate) (?:experiments/)?([a-z0-9-]+)",
                           commands))
    assert named == {spec.name}, named


def test_every_file_and_link_it_points_to_exists():
    text = PAGE.read_text(encoding="utf-8")
    files = {f for f in re.findall(r"`([a-z_./-]+\.(?:py|md|yaml))`", text) if "/" in f}
    links = {(PAGE.parent / link).resolve() for link in re.findall(r"\]\(([^)#]+)\)", text)}
    assert files and links
    assert [f for f in files if not (ROOT / f).exists()] == []
    assert [str(link) for link in links if not link.exists()] == []
