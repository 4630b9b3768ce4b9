"""Bad input to the `chaos` command: each case is one line on stderr saying what is wrong and what to do, the
documented exit code, and no traceback. Run as the user runs it (a subprocess); nothing here starts a service —
every case fails before a stack would start, which is part of what is tested."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def chaos(*args: str, env: dict | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "chaos.cli", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env={**os.environ, **(env or {})})


CASES = [
    ("an unknown experiment", ["run", "nope"], 2, "chaos: no experiment 'nope' (", "known experiments: "),
    ("an unknown suite", ["run", "--suite", "nope"], 2, "chaos: no suite 'nope' (", "known suites: "),
    ("experiments and a suite", ["run", "kafka-broker-disconnect", "--suite", "smoke"], 2,
     "chaos: give experiments or --suite, not both", ""),
    ("a negative scale", ["run", "--scale", "-1", "x"], 2,
     "chaos run: argument --scale: '-1' must be greater than 0", "see: chaos run --help"),
    ("a scale that is not a number", ["run", "--scale", "fast", "x"], 2,
     "chaos run: argument --scale: 'fast' is not a number", "see: chaos run --help"),
    ("a negative seed", ["run", "--seed", "-3", "x"], 2,
     "chaos run: argument --seed: '-3' must be 0 or greater", "see: chaos run --help"),
    ("an unknown arm", ["run", "--arms", "hardened,bogus", "kafka-broker-disconnect"], 2,
     "chaos: unknown arm 'bogus'; allowed: hardened, naive", ""),
    ("an --only experiment the suite lacks", ["run", "--suite", "smoke", "--only", "nope"], 2,
     "chaos: --only: no experiment 'nope' in this run; known: checkpoint-collision, ", ""),
    ("an --only arm the suite does not run",
     ["run", "--suite", "smoke", "--only", "checkpoint-commit-failures/naive"], 2,
     "chaos: --only: checkpoint-commit-failures runs no arm 'naive' here; allowed: hardened", ""),
    ("an unknown backend", ["run", "--backend", "moon", "x"], 2, "chaos run: argument --backend: invalid choice",
     "see: chaos run --help"),
    ("an unknown command", ["frobnicate"], 2, "chaos: argument command: invalid choice: 'frobnicate'",
     "see: chaos --help"),
    ("check of a directory that is no run", ["check", "/"], 2,
     "chaos: / is not a run directory (no run.json)", "give reports/runs/<run>"),
    ("report of a missing directory", ["report", "/nonexistent/run"], 2,
     "chaos report: /nonexistent/run is not a directory", ""),
    ("an incident no experiment reproduces", ["reproduce", "999"], 2,
     "chaos: no experiment reproduces incident '999'; known incidents: ", ""),
    ("an unknown bench variant", ["bench", "job", "--variants", "x"], 2, "chaos: unknown bench variant 'x'", ""),
    ("no start-up rounds", ["bench", "startup", "--rounds", "0"], 2,
     "chaos bench startup: argument --rounds: '0' must be greater than 0", "see: chaos bench startup --help"),
    ("an unknown start-up variant", ["bench", "startup", "--variants", "archives,c2"], 2,
     "chaos bench startup: argument --variants: 'c2' is not a start-up variant; allowed: archives, c1, tiered, "
     "serial-gc, in-driver", ""),
    ("no batches to measure", ["bench", "startup", "--batches", "0"], 2,
     "chaos bench startup: argument --batches: '0' must be greater than 0", "see: chaos bench startup --help"),
]


@pytest.mark.parametrize("case, args, code, starts, contains", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_its_exit_code(tmp_path, case, args, code, starts, contains):
    done = chaos(*args, "--out", str(tmp_path)) if args[0] == "run" and "--scale" not in args \
        and "--backend" not in args else chaos(*args)
    lines = [line for line in done.stderr.splitlines() if not line.startswith("[")]  # [time] progress lines
    assert done.returncode == code, done.stderr
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(starts) and contains in lines[0], lines[0]
    assert "Traceback" not in done.stderr


def test_a_bad_spec_file_is_one_line_naming_file_and_field(tmp_path):
    spec = tmp_path / "broken.yaml"
    text = (ROOT / "experiments" / "checkpoint-commit-budget.yaml").read_text()
    broken = re.sub(r"phases: \{steady: \d+s", "phases: {steady: 20 parsecs", text)
    assert broken != text, "the spec's phases line changed: update this test, or it runs a real experiment"
    spec.write_text(broken)
    done = chaos("run", str(spec), "--out", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.strip() == (f"chaos: {spec}: phases.steady: '20 parsecs' is not a duration; allowed: a "
                                   "duration like 500ms, 30s, 2m, 1h or a number of seconds")
    assert not list(tmp_path.glob("*/run.json"))  # nothing was started


def test_a_missing_artifact_is_an_environment_error_naming_it_and_the_fix(tmp_path):
    done = chaos("run", "checkpoint-commit-budget", "--out", str(tmp_path / "runs"),
                 env={"CHAOS_CACHE_DIR": str(tmp_path / "empty-cache")})
    errors = [line for line in done.stderr.splitlines() if line.startswith("chaos:")]
    assert done.returncode == 3, done.stderr
    assert len(errors) == 1 and "is missing from" in errors[0] and errors[0].endswith("run: make setup")
    assert "Traceback" not in done.stderr


def test_no_docker_engine_for_the_containers_backend_is_an_environment_error(tmp_path):
    done = chaos("run", "checkpoint-commit-budget", "--backend", "containers", "--out", str(tmp_path),
                 env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    errors = [line for line in done.stderr.splitlines() if line.startswith("chaos:")]
    assert done.returncode == 3, done.stderr
    assert len(errors) == 1 and "no Docker engine answers" in errors[0] and "infra/engine.sh --install" in errors[0]


def test_debug_shows_the_traceback_of_an_error(tmp_path):
    done = chaos("--debug", "run", "checkpoint-commit-budget", "--out", str(tmp_path / "runs"),
                 env={"CHAOS_CACHE_DIR": str(tmp_path / "empty-cache")})
    assert done.returncode == 3 and "Traceback" in done.stderr
