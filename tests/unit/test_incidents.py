"""The incidents live in the repository (incidents/, one summary per incident), and every spec's `incident.file`
is checked against that folder in any clone: a copy of the repository away from the development layout refuses
a spec naming a missing incident with one line, exit 2 (it used to print "ok" there). $CHAOS_INCIDENTS_DIR
points elsewhere."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from chaos.commands.mutate import incident_summary
from chaos.spec import INCIDENT_FILE_RE, load_experiment

ROOT = Path(__file__).resolve().parents[2]
INCIDENTS = ROOT / "incidents"
EXPERIMENT = ROOT / "experiments" / "checkpoint-commit-budget.yaml"
# What the command line needs to load and validate a spec: the packages, the experiments and the incidents.
CLONE_PARTS = ("chaos", "infra", "job", "experiments", "incidents")


def _named_incidents() -> set[str]:
    return {load_experiment(path).incident.file for path in sorted((ROOT / "experiments").glob("*.yaml"))}


def test_every_incident_an_experiment_names_is_in_the_repository_and_every_summary_is_named():
    files = {p.name for p in INCIDENTS.glob("*.txt")}
    assert _named_incidents() == files
    assert all(re.fullmatch(INCIDENT_FILE_RE, name) for name in files)


@pytest.mark.parametrize("name", sorted(p.name for p in INCIDENTS.glob("*.txt")))
def test_each_summary_gives_the_failure_its_error_its_configuration_and_its_spark_counterpart(name):
    text = (INCIDENTS / name).read_text(encoding="utf-8").lower()
    assert text.startswith(f"incident {name[:3]}: "), "the first line is the title `chaos reproduce` shows"
    for part in ("the failure", "the error text", "the configuration", "the spark counterpart"):
        assert part in text, f"{name}: no '{part}'"
    assert len(text) < 4000, f"{name}: a summary, not the source"


def _copy(tmp_path: Path, parts: tuple[str, ...] = CLONE_PARTS) -> Path:
    """The repository copied outside the development layout: no shared/incidents/ beside it or above it."""
    clone = tmp_path / "clone"
    for part in parts:
        shutil.copytree(ROOT / part, clone / part, ignore=shutil.ignore_patterns("__pycache__"))
    assert not any((d / "shared" / "incidents").is_dir() for d in clone.resolve().parents)
    return clone


def _validate(clone: Path, tmp_path: Path, incident: str, env: dict[str, str] | None = None):
    doc = yaml.safe_load(EXPERIMENT.read_text())
    doc["incident"]["file"] = incident
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    environment = {k: v for k, v in os.environ.items() if k != "CHAOS_INCIDENTS_DIR"}
    return subprocess.run([sys.executable, "-m", "chaos.cli", "validate", str(spec)], capture_output=True, text=True,
                          timeout=60, cwd=clone, env={**environment, "PYTHONPATH": str(clone), **(env or {})})


def test_a_copy_away_from_the_development_layout_refuses_a_missing_incident_in_one_line(tmp_path):
    clone = _copy(tmp_path)
    named = _validate(clone, tmp_path, load_experiment(EXPERIMENT).incident.file)
    assert named.returncode == 0 and named.stdout.startswith("ok  "), named.stderr
    missing = _validate(clone, tmp_path, "999-none.txt")
    assert missing.returncode == 2 and missing.stdout == "", missing.stdout
    assert missing.stderr.splitlines() == [missing.stderr.strip()], missing.stderr
    assert f"incident.file: '999-none.txt' is not in {clone / 'incidents'}" in missing.stderr, missing.stderr


def test_a_copy_without_the_incidents_folder_refuses_every_spec(tmp_path):
    clone = _copy(tmp_path, tuple(p for p in CLONE_PARTS if p != "incidents"))
    done = _validate(clone, tmp_path, load_experiment(EXPERIMENT).incident.file)
    assert done.returncode == 2 and "(none found)" in done.stderr, done.stderr


def test_the_variable_points_the_check_elsewhere(tmp_path):
    clone = _copy(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "999-none.txt").write_text("Incident 999: a test's own\n")
    assert _validate(clone, tmp_path, "999-none.txt", {"CHAOS_INCIDENTS_DIR": str(elsewhere)}).returncode == 0
    named = load_experiment(EXPERIMENT).incident.file
    refused = _validate(clone, tmp_path, named, {"CHAOS_INCIDENTS_DIR": str(elsewhere)})
    assert refused.returncode == 2 and f"is not in {elsewhere}; allowed: an incident file there (999)" in refused.stderr


def test_reproduce_shows_the_incident_from_the_repositorys_folder(monkeypatch):
    monkeypatch.delenv("CHAOS_INCIDENTS_DIR", raising=False)
    spec = load_experiment(ROOT / "experiments" / "corrupted-sst.yaml")
    shown = incident_summary(spec)
    assert shown.startswith(f"{INCIDENTS / spec.incident.file}: Incident 001: "), shown
