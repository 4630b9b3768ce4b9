"""The command line's own commands (issue 18): --version, validate, schema, list --json, rerun's plan, check's
rewritten report, and `chaos run` refusing to start the nightly unasked. Nothing here starts a service."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from chaos import cli
from chaos.commands import catalog
from chaos.errors import ChaosError
from chaos.schema import spec_schema
from chaos.spec import ExperimentSpec, load_experiment

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = sorted((ROOT / "experiments").glob("*.yaml"))
SUITES = sorted((ROOT / "experiments" / "suites").glob("*.yaml"))
FIXTURE_RUN = ROOT / "tests" / "fixtures" / "runs" / "20261123T081854-smoke-13866"


def chaos(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "chaos.cli", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_version_prints_the_package_version():
    done = chaos("--version")
    version = re.search(r'^version = "(.+)"$', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    assert done.returncode == 0 and done.stdout.strip() == f"chaos {version}"


def test_both_console_names_are_installed_scripts():
    scripts = re.search(r"\[project\.scripts\]\n((?:.+\n)+)", (ROOT / "pyproject.toml").read_text()).group(1)
    assert 'chaos = "chaos.cli:main"' in scripts and 'stream-chaos = "chaos.cli:main"' in scripts


# -- validate ------------------------------------------------------------------------------------------------------
def test_validate_accepts_every_checked_in_file():
    done = chaos("validate")
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == len(EXPERIMENTS) + len(SUITES) and not done.stderr


def test_validate_says_one_line_per_bad_file_and_exits_2(tmp_path):
    bad_yaml = tmp_path / "a.yaml"
    bad_yaml.write_text("name: [\n")
    absurd = tmp_path / "b.yaml"
    doc = yaml.safe_load(EXPERIMENTS[0].read_text())
    doc["workload"]["keys"] = 99999999999999999999999
    absurd.write_text(yaml.safe_dump(doc))
    done = chaos("validate", str(bad_yaml), str(EXPERIMENTS[0]), str(absurd), "smoke")
    assert done.returncode == 2
    errors = done.stderr.splitlines()
    assert len(errors) == 2 and errors[0].startswith(f"chaos: {bad_yaml}: ") and "workload.keys" in errors[1]
    assert len(done.stdout.splitlines()) == 2  # the good experiment and the smoke suite
    assert "Traceback" not in done.stderr


def test_validate_takes_a_runs_spec_json(tmp_path):
    stored = tmp_path / "spec.json"
    stored.write_text(json.dumps(load_experiment(EXPERIMENTS[0]).to_dict()))
    assert chaos("validate", str(stored)).returncode == 0


# -- the JSON Schema -----------------------------------------------------------------------------------------------
def test_the_committed_schema_is_the_one_the_code_builds():
    committed = (ROOT / "docs" / "spec.schema.json").read_text()
    assert committed == json.dumps(spec_schema(), indent=2) + "\n", \
        "docs/spec.schema.json is stale: chaos schema > docs/spec.schema.json"
    assert chaos("schema").stdout == committed


def _check(value: object, schema: dict, path: str = "") -> list[str]:
    """The subset of JSON Schema that chaos/schema.py uses (no jsonschema package is installed)."""
    wrong: list[str] = []
    if "anyOf" in schema or "oneOf" in schema:
        options = schema.get("anyOf") or schema["oneOf"]
        fits = sum(not _check(value, option, path) for option in options)
        return [] if (fits >= 1 if "anyOf" in schema else fits == 1) else [f"{path}: {value!r} fits no option"]
    if "const" in schema and value != schema["const"]:
        wrong.append(f"{path}: not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        wrong.append(f"{path}: {value!r} not in enum")
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind else []
    types = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}
    ok = not kinds or any((k == "integer" and isinstance(value, int) and not isinstance(value, bool))
                          or (k == "number" and isinstance(value, (int, float)) and not isinstance(value, bool))
                          or (k in types and isinstance(value, types[k])) for k in kinds)
    if not ok:
        return [f"{path}: {value!r} is not {kind}"]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"] or "maximum" in schema and value > schema["maximum"]:
            wrong.append(f"{path}: {value!r} out of bounds")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            wrong.append(f"{path}: {value!r} out of bounds")
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        wrong.append(f"{path}: {value!r} does not match")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                wrong.append(f"{path}.{key}: missing")
        for key, item in value.items():
            if key in properties:
                wrong += _check(item, properties[key], f"{path}.{key}")
            elif schema.get("additionalProperties") is False:
                wrong.append(f"{path}.{key}: unknown")
            elif isinstance(schema.get("additionalProperties"), dict):
                wrong += _check(item, schema["additionalProperties"], f"{path}.{key}")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            wrong += _check(item, schema["items"], f"{path}.{index}")
    return wrong


def _yaml_on(doc: dict) -> dict:
    """YAML 1.1 reads a fault's `on:` key as true; the spec loader (and an editor's YAML 1.2) read `on`."""
    for fault in doc.get("faults", []):
        if True in fault:
            fault["on"] = fault.pop(True)
    return doc


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.stem)
def test_every_experiment_fits_the_schema(path):
    assert _check(_yaml_on(yaml.safe_load(path.read_text())), spec_schema()) == []


def test_the_schema_refuses_an_absurd_number_and_an_unknown_field():
    doc = _yaml_on(yaml.safe_load(EXPERIMENTS[0].read_text()))
    doc["workload"]["keys"] = 99999999999999999999999
    doc["colour"] = "red"
    wrong = _check(doc, spec_schema())
    assert any(w.startswith(".workload.keys") for w in wrong) and ".colour: unknown" in wrong


# -- list ----------------------------------------------------------------------------------------------------------
def test_list_json_names_every_experiment_and_suite():
    done = chaos("list", "--json")
    rows = json.loads(done.stdout)
    assert done.returncode == 0 and all(row["error"] is None for row in rows)
    assert [r["name"] for r in rows if r["kind"] == "experiment"] == [p.stem for p in EXPERIMENTS]
    assert {r["name"] for r in rows if r["kind"] == "suite"} == {p.stem for p in SUITES}


def test_a_broken_spec_is_listed_with_its_error_not_a_crash(tmp_path, monkeypatch, capsys):
    (tmp_path / "suites").mkdir()
    shutil.copy(EXPERIMENTS[0], tmp_path / EXPERIMENTS[0].name)
    (tmp_path / "broken.yaml").write_text("name: [\n")
    (tmp_path / "suites" / "s.yaml").write_text("name: s\nexperiments: [{path: ../missing.yaml}]\n")
    monkeypatch.setattr(catalog, "EXPERIMENTS_DIR", tmp_path)  # chaos list lives in chaos/commands/catalog.py
    assert cli.list_experiments(as_json=True) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["broken"]["error"].startswith(f"{tmp_path / 'broken.yaml'}: line 2: not valid YAML")
    assert rows[EXPERIMENTS[0].stem]["error"] is None and rows["s"]["error"]
    assert cli.list_experiments() == 0
    text = capsys.readouterr().out
    assert "broken" in text and "BROKEN: " in text and EXPERIMENTS[0].stem in text


# -- run: nothing by default ---------------------------------------------------------------------------------------
def test_run_without_experiments_or_suite_starts_nothing(tmp_path):
    done = chaos("run", "--out", str(tmp_path))
    assert done.returncode == 2 and not any(tmp_path.iterdir())
    assert done.stderr.strip() == ("chaos: give experiments (see: chaos list) or --suite NAME; nothing runs by default "
                                   "(--suite nightly: every experiment at full length, about an hour)")


def test_make_run_asks_for_the_nightly_by_name_unless_given_run_args():
    makefile = (ROOT / "Makefile").read_text()
    assert "$(BIN)/chaos run --backend local $(or $(RUN_ARGS),--suite nightly)" in makefile


# -- rerun -------------------------------------------------------------------------------------------------------
def test_rerun_plans_exactly_what_the_stored_run_ran():
    plan = cli.rerun_plan(FIXTURE_RUN, None)
    stored = json.loads((FIXTURE_RUN / "run.json").read_text())
    assert [s.name for s in plan["specs"]] == stored["experiments"]
    for spec in plan["specs"]:
        stored_spec = json.loads((FIXTURE_RUN / spec.name / "spec.json").read_text())
        assert spec == ExperimentSpec.from_dict(stored_spec)
        assert (spec.seed, spec.scale) == (stored_spec["seed"], stored_spec["scale"])
    assert plan["arms"] is None and plan["repeat"] == 1 and plan["backend"] == "local" and plan["name"] == "smoke"
    assert plan["directory"] == "rerun-smoke"


def test_rerun_of_one_experiment_and_arm():
    plan = cli.rerun_plan(FIXTURE_RUN, "kafka-broker-disconnect/hardened")
    assert [s.name for s in plan["specs"]] == ["kafka-broker-disconnect"] and plan["arms"] == ["hardened"]
    seed = json.loads((FIXTURE_RUN / "kafka-broker-disconnect" / "spec.json").read_text())["seed"]
    assert plan["specs"][0].seed == seed


def test_rerun_takes_the_arms_the_run_wrote(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(FIXTURE_RUN, run)
    plan = cli.rerun_plan(run, "kafka-broker-disconnect")  # its fixture holds the hardened arm only
    assert plan["arms"] == ["hardened"]


def test_a_run_on_a_target_is_never_rerun_on_a_stack_of_the_suites_own(tmp_path):
    from chaos.commands.rerun import rerun

    run = tmp_path / "run"
    shutil.copytree(FIXTURE_RUN, run)
    stored = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**stored, "backend": "target:staging-eu"}))
    with pytest.raises(ChaosError) as caught:
        rerun(run, None, None, tmp_path / "out", [])
    assert caught.value.exit_code == 2 and "ran against target:staging-eu" in str(caught.value)
    assert "chaos run --target FILE" in str(caught.value) and not (tmp_path / "out").exists()


@pytest.mark.parametrize("target, message", [
    ("nope", "ran no experiment 'nope'; it ran: corrupted-sst, driver-latency, kafka-broker-disconnect"),
    ("driver-latency/control", "driver-latency has no arm 'control'; it has: hardened, naive"),
])
def test_rerun_argument_errors(target, message):
    with pytest.raises(ChaosError) as caught:
        cli.rerun_plan(FIXTURE_RUN, target)
    assert caught.value.exit_code == 2 and message in str(caught.value)


def test_rerun_of_repeats_reruns_each_spec_once_repeated(tmp_path):
    run = tmp_path / "run"
    spec = load_experiment(EXPERIMENTS[0])
    for n in (1, 2):
        (run / f"{spec.name}.r{n}").mkdir(parents=True)
        (run / f"{spec.name}.r{n}" / "spec.json").write_text(json.dumps(spec.to_dict()))
    (run / "run.json").write_text(json.dumps({"suite": "pre-release", "backend": "containers", "repeat": 2,
                                              "experiments": [f"{spec.name}.r1", f"{spec.name}.r2"], "argv": []}))
    plan = cli.rerun_plan(run, None)
    assert [s.name for s in plan["specs"]] == [spec.name] and plan["repeat"] == 2
    assert plan["backend"] == "containers" and plan["specs"][0] == spec


# -- check -------------------------------------------------------------------------------------------------------
def test_check_rewrites_the_report_with_the_results(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(FIXTURE_RUN, run)
    for name in ("index.html", "junit.xml"):
        (run / name).write_text("stale")
    done = chaos("check", str(run))
    assert done.returncode in (0, 1), done.stderr
    assert (run / "junit.xml").read_text().startswith("<?xml")
    assert (run / "index.html").read_text() != "stale" and "<html" in (run / "index.html").read_text().lower()


# -- reproduce -----------------------------------------------------------------------------------------------------
def test_reproduce_verifies_the_fix_on_a_given_seed():
    controls = cli.reproducing("001", None, ["naive"])
    fixes = cli.reproducing("001", None, ["hardened"], seed=7)
    assert controls and all(any(a.profile == "naive" for a in s.arms) for s in controls)
    assert {s.name for s in controls} <= {s.name for s in fixes}  # a hardened-only experiment verifies the fix too
    assert all(s.seed == 7 and "001-" in s.incident.file for s in fixes)
    parsed = cli._parser().parse_args(["reproduce", "001", "--arms", "hardened", "--seed", "7"])
    assert parsed.arms == ["hardened"] and parsed.seed == 7
    assert cli._parser().parse_args(["reproduce", "001"]).arms == ["naive"]


def test_rerun_of_one_repeat_runs_it_once_and_arms_come_from_the_command_line_before_any_arm_ran(tmp_path):
    run = tmp_path / "run"
    spec = load_experiment(ROOT / "experiments" / "kafka-broker-disconnect.yaml")
    for n in (1, 2):
        (run / f"{spec.name}.r{n}").mkdir(parents=True)
        (run / f"{spec.name}.r{n}" / "spec.json").write_text(json.dumps(spec.to_dict()))
    (run / "run.json").write_text(json.dumps({"suite": "reproduce 001", "repeat": 2, "argv": ["reproduce", "001"],
                                              "experiments": [f"{spec.name}.r1", f"{spec.name}.r2", "../../etc"]}))
    assert cli.rerun_plan(run, f"{spec.name}.r2")["repeat"] == 1
    whole = cli.rerun_plan(run, spec.name)
    assert whole["repeat"] == 2 and whole["arms"] == ["naive"] and whole["directory"] == "rerun-reproduce-001"
    (run / "run.json").write_text(json.dumps({"suite": "x", "argv": ["run", "--arms", "hardened,bogus"],
                                              "experiments": [f"{spec.name}.r1"]}))
    assert cli.rerun_plan(run, None)["arms"] == ["hardened"]
