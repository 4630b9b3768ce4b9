"""tests/verdict_digest.py, the verdict-equivalence check docs/architecture.md calls: a digest keyed so that one
changed verdict is one difference, every difference printed, a stored run never modified."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tests import verdict_digest
from tests.verdict_digest import differences, flatten

RUN = verdict_digest.FIXTURE_RUNS / "20261123T081854-smoke-13866"


def test_objects_in_a_list_are_keyed_by_their_name_so_an_added_check_is_one_difference():
    before = flatten({"arms": [{"profile": "hardened", "checks": [{"name": "lost", "verdict": "PASSED"}]}]}, "r", {})
    after = flatten({"arms": [{"profile": "hardened", "checks": [{"name": "new", "verdict": "FAILED"},
                                                                  {"name": "lost", "verdict": "PASSED"}]}]}, "r", {})
    assert before == {"r/arms/hardened/profile": "hardened", "r/arms/hardened/checks/lost/name": "lost",
                      "r/arms/hardened/checks/lost/verdict": "PASSED"}
    assert differences(before, after) == ['r/arms/hardened/checks/new/name: "(absent)" -> "new"',
                                          'r/arms/hardened/checks/new/verdict: "(absent)" -> "FAILED"']
    # names that repeat (or are missing) cannot key a list: its position does; empty containers are leaves
    assert flatten({"a": [{"name": "x"}, {"name": "x"}], "b": [], "c": {}}, "r", {}) == {
        "r/a/0/name": "x", "r/a/1/name": "x", "r/b": [], "r/c": {}}


def test_every_difference_is_printed_and_the_exit_code_says_whether_there_was_one(tmp_path, monkeypatch, capsys):
    judged = {"run/exit": 1, "run/results.json/verdict": "FAILED", "run/results.json/experiments/e/verdict": "FAILED"}
    monkeypatch.setattr(verdict_digest, "digest_of", lambda runs, code: dict(judged))
    baseline = tmp_path / "digest.json"
    assert verdict_digest.main(["--write", str(baseline), str(RUN)]) == 0
    assert json.loads(baseline.read_text()) == judged
    assert verdict_digest.main(["--compare", str(baseline), str(RUN)]) == 0
    assert "IDENTICAL: 3 entries" in capsys.readouterr().out
    baseline.write_text(json.dumps({**judged, "run/exit": 0, "run/results.json/verdict": "PASSED", "run/gone": 1}))
    assert verdict_digest.main(["--compare", str(baseline), str(RUN)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-4:] == ['run/exit: 0 -> 1', 'run/gone: 1 -> "(absent)"',
                        'run/results.json/verdict: "PASSED" -> "FAILED"', "3 differences from the baseline"]


def _tree(run_dir: Path) -> dict[str, str]:
    return {str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run_dir.rglob("*")) if p.is_file()}


def test_a_stored_run_judged_with_this_commits_code_and_this_trees_is_identical_and_left_untouched(capsys):
    stored = _tree(RUN)
    assert verdict_digest.main(["--base", "HEAD", str(RUN)]) == 0
    out = capsys.readouterr().out
    assert "20261123T081854-smoke-13866: exit 1, FAILED" in out and "IDENTICAL: " in out
    assert _tree(RUN) == stored  # judged on copies: no results.json rewritten, no report written beside it
