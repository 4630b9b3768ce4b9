"""Bad input refused as a class (issue 18): malformed specs, suites, stored runs and arguments, each run as the user
runs it (`python -m chaos.cli` in a subprocess). Every case must exit 2 with exactly one line on stderr, no
traceback, and start nothing: it is fast, the run store given with --out stays empty, and the artifact cache points
at an empty directory (a command that got as far as starting a stack would exit 3 there, not 2)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENT = ROOT / "experiments" / "checkpoint-commit-budget.yaml"
ABSURD = 99999999999999999999999


def _spec(**changes) -> Callable[[Path], list[str]]:
    """An experiment with `changes` applied (dotted keys), run by path."""
    def make(tmp: Path) -> list[str]:
        doc = yaml.safe_load(EXPERIMENT.read_text())
        for dotted, value in changes.items():
            node, *parts = doc, *dotted.split(".")
            for part in parts[:-1]:
                node = node[int(part)] if isinstance(node, list) else node[part]
            node[parts[-1]] = value
        path = tmp / "spec.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return ["run", str(path)]
    return make


def _file(text: str | bytes, name: str = "spec.yaml", command: tuple[str, ...] = ("run",)) -> Callable:
    def make(tmp: Path) -> list[str]:
        path = tmp / name
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        return [*command, str(path)]
    return make


def _suite(**changes) -> Callable[[Path], list[str]]:
    """A one-experiment suite with top-level `changes` (entry.KEY changes its entry)."""
    def make(tmp: Path) -> list[str]:
        entry: dict = {"path": str(EXPERIMENT)}
        doc: dict = {"name": "t-suite", "experiments": [entry]}
        for key, value in changes.items():
            if key.startswith("entry."):
                entry[key.removeprefix("entry.")] = value
            else:
                doc[key] = value
        path = tmp / "suite.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return ["run", "--suite", str(path)]
    return make


def _stored(mangle: Callable[[dict], None] | None = None, extra: tuple[str, ...] = ()) -> Callable:
    """A run's spec.json (as chaos/run.py writes it), mangled, run by path."""
    def make(tmp: Path) -> list[str]:
        from chaos.spec import load_experiment

        doc = load_experiment(EXPERIMENT).to_dict()
        if mangle:
            mangle(doc)
        path = tmp / "spec.json"
        path.write_text(json.dumps(doc))
        return ["run", str(path), *extra]
    return make


def _run_dir(files: dict[str, str], target: tuple[str, ...] = ()) -> Callable:
    """A stored run directory holding `files` (relative path -> text), rerun."""
    def make(tmp: Path) -> list[str]:
        from chaos.spec import load_experiment

        run = tmp / "stored-run"
        for relative, text in files.items():
            path = run / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text.replace("SPEC", json.dumps(load_experiment(EXPERIMENT).to_dict())))
        return ["rerun", str(run), *target]
    return make


def _args(*args: str) -> Callable[[Path], list[str]]:
    return lambda tmp: list(args)


RUN_JSON = json.dumps({"suite": "smoke", "backend": "local", "repeat": 1, "experiments": ["checkpoint-commit-budget"],
                       "argv": ["run", "--suite", "smoke"]})
LONG = "a" * 300

CASES = [
    # -- experiment specs: every number bounded, names, incidents, documents --------------------------------------
    ("keys absurd", _spec(**{"workload.keys": ABSURD}), "workload.keys: 9999999999"),
    ("rate absurd", _spec(**{"workload.rate": ABSURD}), "workload.rate: 9999999999"),
    ("partitions absurd", _spec(**{"workload.partitions": ABSURD}), "workload.partitions: "),
    ("payload absurd", _spec(**{"workload.payload_bytes": ABSURD}), "workload.payload_bytes: "),
    ("seed absurd", _spec(seed=ABSURD), "seed: 9999999999"),
    ("seed negative", _spec(seed=-1), "seed: -1 is not valid"),
    ("phase absurd", _spec(**{"phases.steady": "99999999h"}), "phases.steady: '99999999h' is too long"),
    ("phase 1e400", _spec(**{"phases.steady": "1" + "0" * 400}), "phases.steady: "),
    ("fault at absurd", _spec(**{"faults.0.at": ABSURD}), "faults.0.at: "),
    ("probe bound absurd", _spec(probes=[{"metric": "lag", "max": ABSURD}]), "probes.0.max: "),
    ("healthy samples absurd", _spec(**{"arms.hardened.targets.recovery": {"within": "10s", "lag_below": 100,
                                                                          "healthy_samples": ABSURD}}),
     "healthy_samples: "),
    ("lag bound absurd", _spec(**{"arms.hardened.targets.recovery": {"within": "10s", "lag_below": ABSURD}}),
     "lag_below: "),
    ("lost absurd", _spec(**{"arms.hardened.targets.lost": ABSURD}), "arms.hardened.targets.lost: "),
    ("a very long name", _spec(name=LONG), "name: 'aaaa"),
    ("a name with a slash", _spec(name="../escape"), "name: '../escape' is not a valid name"),
    ("a name in capitals", _spec(name="Budget"), "name: 'Budget' is not a valid name"),
    ("a missing incident file", _spec(**{"incident.file": "999-never-happened.txt"}),
     "incident.file: '999-never-happened.txt' is not in "),
    ("an incident that is no file name", _spec(**{"incident.file": "../../etc/passwd"}), "incident.file: "),
    ("a rate that is not a number", _spec(**{"workload.rate": "fast"}), "workload.rate: 'fast' is not valid"),
    ("keys as a boolean", _spec(**{"workload.keys": True}), "workload.keys: True is not valid"),
    ("an unknown field", _spec(colour="red"), "colour: unknown field"),
    ("ten thousand faults", _spec(faults=[{"fault": "network.down", "target": "kafka"}] * 10000),
     "is not a non-empty list of at most 100; allowed: a list of faults"),
    ("an unknown fault", _spec(**{"faults.0.fault": "network.nope"}), "faults.0.fault: unknown fault"),
    ("not YAML", _file("name: [unclosed\n"), "not valid YAML"),
    ("YAML that is a list", _file("- a\n- b\n"), "(document): must be a mapping"),
    ("YAML that is a string", _file("just words\n"), "(document): must be a mapping"),
    ("an empty file", _file(""), "(document): must be a mapping, got None"),
    ("not UTF-8", _file(b"name: \xff\xfe\n"), "not UTF-8 text"),
    ("a key twice", _file("name: a\nname: b\n"), "name: appears twice"),
    ("a missing file", _args("run", "/nonexistent/dir/spec.yaml"), "no experiment '/nonexistent/dir/spec.yaml'"),
    ("a directory as a spec", lambda tmp: (tmp / "d.yaml").mkdir() or ["run", str(tmp / "d.yaml")],
     "is not a file"),
    # -- a stored spec.json --------------------------------------------------------------------------------------
    ("spec.json with absurd keys", _stored(lambda d: d["workload"].update(keys=ABSURD)), "workload.keys: "),
    ("spec.json with a long name", _stored(lambda d: d.update(name=LONG)), "name: 'aaaa"),
    ("spec.json and --scale", _stored(extra=("--scale", "0.5")), "a stored spec.json is already scaled"),
    ("spec.json that is not JSON", _file("{not json", "spec.json"), "not JSON"),
    ("spec.json of another shape", _file('{"name": "x"}', "spec.json"), "not an ExperimentSpec.to_dict()"),
    # -- suites --------------------------------------------------------------------------------------------------
    ("suite repeat absurd", _suite(repeat=ABSURD), "repeat: 9999999999"),
    ("suite scale absurd", _suite(scale=ABSURD), "scale: 9999999999"),
    ("suite scale zero", _suite(scale=0), "scale: 0 is not valid"),
    ("suite entry scale absurd", _suite(**{"entry.scale": 1e30}), "experiments.0.scale: "),
    ("suite entry seed absurd", _suite(**{"entry.seed": ABSURD}), "experiments.0.seed: "),
    ("suite entry override absurd", _suite(**{"entry.overrides": {"workload": {"keys": ABSURD}}}),
     "experiments.0.overrides.workload.keys: "),
    ("suite name too long", _suite(name="n" * 100), "name: 'nnnn"),
    ("suite entry missing", _suite(**{"entry.path": "/nonexistent.yaml"}), "experiments.0.path: "),
    ("suite with no experiments", _suite(experiments=[]), "experiments: [] is not a non-empty list"),
    ("suite of a thousand entries", _suite(experiments=[{"path": str(EXPERIMENT)}] * 1000),
     "not a non-empty list of at most 100"),
    ("suite that is a list", _file("- x\n", "suite.yaml", ("run", "--suite")), "(document): must be a mapping"),
    # -- arguments -----------------------------------------------------------------------------------------------
    ("run with nothing to run", _args("run"), "give experiments (see: chaos list) or --suite NAME"),
    ("an unknown experiment", _args("run", "nope"), "no experiment 'nope'"),
    ("a very long experiment name", _args("run", LONG), "no experiment 'aaaa"),
    ("a very long spec file name", _args("run", "/tmp/" + LONG + ".yaml"), "no experiment '/tmp/aaaa"),
    ("an unknown suite", _args("run", "--suite", "nope"), "no suite 'nope'"),
    ("a very long suite name", _args("run", "--suite", LONG), "no suite 'aaaa"),
    ("a scale that is a word", _args("run", "x", "--scale", "abc"), "--scale: 'abc' is not a number"),
    ("a scale of zero", _args("run", "x", "--scale", "0"), "--scale: '0' must be greater than 0"),
    ("an infinite scale", _args("run", "x", "--scale", "1e400"), "--scale: '1e400' is not a finite number"),
    ("an absurd scale", _args("run", "x", "--scale", "1000"), "--scale: '1000' is too large"),
    ("a seed that is a word", _args("run", "x", "--seed", "abc"), "--seed: 'abc' is not an integer"),
    ("an absurd seed", _args("run", "x", "--seed", str(ABSURD)), "--seed: '9999999999"),
    ("an unknown arm", _args("run", "kafka-broker-disconnect", "--arms", "bogus"), "unknown arm 'bogus'"),
    ("an unknown backend", _args("run", "x", "--backend", "moon"), "--backend: invalid choice"),
    ("rerun of no run", _args("rerun", "/"), "/ is not a run directory (no run.json)"),
    ("rerun of a very long path", _args("rerun", "/tmp/" + LONG), "chaos: /tmp/aaaa"),
    ("check of a very long path", _args("check", "/tmp/" + LONG), "chaos: /tmp/aaaa"),
    ("bench for an absurd time", _args("bench", "job", "--seconds", "1e12"), "--seconds: '1e12' is too long"),
    ("bench with absurd rounds", _args("bench", "startup", "--rounds", str(ABSURD)), "--rounds: '9999999999"),
    ("bench with absurd batches", _args("bench", "startup", "--batches", str(ABSURD)), "--batches: '9999999999"),
    ("rerun of a broken run.json", _run_dir({"run.json": "{"}), "not a run's run.json"),
    ("rerun of an unknown experiment", _run_dir({"run.json": RUN_JSON, "checkpoint-commit-budget/spec.json": "SPEC"},
                                                ("nope",)), "ran no experiment 'nope'"),
    ("rerun of an unknown arm", _run_dir({"run.json": RUN_JSON, "checkpoint-commit-budget/spec.json": "SPEC"},
                                         ("checkpoint-commit-budget/naive",)), "has no arm 'naive'"),
    ("rerun of a run that never started", _run_dir({"run.json": RUN_JSON}), "never started (no spec.json)"),
    ("rerun of a broken spec.json", _run_dir({"run.json": RUN_JSON, "checkpoint-commit-budget/spec.json": "[1]"}),
     "not an ExperimentSpec.to_dict()"),
    ("reproduce an unknown incident", _args("reproduce", "999"), "no experiment reproduces incident '999'"),
    ("reproduce with a bad arm", _args("reproduce", "001", "--arms", "control"), "--arms: 'control' is not valid"),
    ("reproduce with a bad seed", _args("reproduce", "001", "--seed", "-1"), "--seed: '-1' must be 0 or greater"),
    ("validate a missing file", _args("validate", "/nonexistent.yaml"), "/nonexistent.yaml: (file): cannot read"),
    ("validate an unknown name", _args("validate", "nope"), "no suite 'nope'"),
    ("check of no run", _args("check", "/"), "/ is not a run directory"),
    ("mutate an unknown switch", _args("mutate", "--switch", "nope"), "unknown switch 'nope'"),
    ("an unknown option", _args("list", "--bogus"), "unrecognized arguments: --bogus"),
]


@pytest.mark.parametrize("make, fragment", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_exits_2_in_one_line_and_starts_nothing(tmp_path, make, fragment):
    args = make(tmp_path)
    out = tmp_path / "runs"
    if args[0] in ("run", "rerun", "reproduce", "mutate"):
        args += ["--out", str(out)]
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "chaos.cli", *args], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, env={**{k: v for k, v in os.environ.items() if k != "CHAOS_INCIDENTS_DIR"},
                                         "PYTHONPATH": str(ROOT), "CHAOS_CACHE_DIR": str(tmp_path / "empty-cache")})
    elapsed = time.monotonic() - started
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr and lines[0].startswith("chaos"), lines[0]
    assert fragment in lines[0], lines[0]
    assert not out.exists() or not any(out.iterdir()), "a run directory was made"
    assert elapsed < 20, f"took {elapsed:.1f} s: something was started"


def test_the_class_is_at_least_forty_cases():
    assert len(CASES) >= 40 and len({c[0] for c in CASES}) == len(CASES)
