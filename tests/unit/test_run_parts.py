"""make test's two pytest sessions (tests/run_parts.py): which tests each part selects, and the exit code of both."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.run_parts import NOTHING_SELECTED, combined

ROOT = Path(__file__).resolve().parents[2]


def collected(*args: str) -> list[str]:
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, NOTHING_SELECTED), done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_the_alone_part_is_the_timing_bound_tests_and_the_shared_part_the_rest():
    files = ["tests/integration/test_targets.py", "tests/integration/test_hardening.py"]
    alone, shared, every = (collected("--chaos-part", part, *files) for part in ("alone", "shared", "all"))
    assert alone and all(item.startswith("tests/integration/test_targets.py::") for item in alone)
    assert shared and all(item.startswith("tests/integration/test_hardening.py::") for item in shared)
    assert sorted(alone + shared) == sorted(every)
    smoke = collected("--chaos-part", "alone", "tests/integration/test_experiments.py")
    assert any("checkpoint-commit-failures/hardened" in item for item in smoke)
    assert collected("--chaos-part", "shared", "tests/integration/test_experiments.py") == []


def test_make_test_leaves_out_the_slow_tests_and_make_test_all_runs_them():
    interrupts = ["--backend", "local", "tests/integration/test_interrupts.py"]
    every, kept = collected(*interrupts), collected("--deselect-slow", *interrupts)
    slow = sorted(set(every) - set(kept))
    assert [item.rsplit("[", 1)[1] for item in slow] == ["local-recover]", "local-steady]"]
    assert any(item.endswith("[local-fault]") for item in kept)
    makefile = (ROOT / "Makefile").read_text()
    test, test_all = (re.search(rf"^{target}:.*\n(\t.*\n)+", makefile, re.M).group(0) for target in ("test", "test-all"))
    assert "tests.run_parts --deselect-slow" in test and "tests.run_parts" in test_all and "slow" not in test_all


def test_a_part_that_selects_nothing_is_no_failure_unless_neither_selects_a_test():
    assert combined([0, 0]) == 0
    assert combined([NOTHING_SELECTED, 0]) == 0 and combined([0, NOTHING_SELECTED]) == 0
    assert combined([NOTHING_SELECTED, NOTHING_SELECTED]) == NOTHING_SELECTED
    assert combined([1, 0]) == 1 and combined([0, 1]) == 1 and combined([NOTHING_SELECTED, 1]) == 1
    assert combined([3, 1]) == 3
