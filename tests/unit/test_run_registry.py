"""Where live runs record what they started (infra/registry.py): the user's cache, or CHAOS_RUN_REGISTRY."""
from __future__ import annotations

import subprocess
import sys

from infra.registry import REGISTRY_ENV, RunRecord, cleanup_dead, owner_label, registry_dir


def test_the_registry_is_under_the_cache_unless_a_directory_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("CHAOS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(REGISTRY_ENV, raising=False)
    assert registry_dir() == tmp_path / "cache" / "active-runs"
    monkeypatch.setenv(REGISTRY_ENV, str(tmp_path / "own"))
    assert registry_dir() == tmp_path / "own"


def test_a_record_saved_under_a_named_registry_is_cleaned_only_from_there(tmp_path, monkeypatch):
    monkeypatch.setenv("CHAOS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(REGISTRY_ENV, str(tmp_path / "own"))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    owner = owner_label(dead.pid)  # read while it is a zombie, as a run's owner label is read while it lives
    dead.wait()
    record = RunRecord(owner=owner, pid=dead.pid, run_dir=str(tmp_path / "run"), backend="local")
    record.save()
    assert record.path.parent == tmp_path / "own" and record.path.exists()
    monkeypatch.delenv(REGISTRY_ENV)
    # (a run directory of "" is a dead run's container, which any registry's clean-up removes)
    assert [run for run, _line in cleanup_dead() if run] == []  # the shared registry does not see it
    monkeypatch.setenv(REGISTRY_ENV, str(tmp_path / "own"))
    assert [run for run, _line in cleanup_dead() if run] == [str(tmp_path / "run")] and not record.path.exists()
