"""The `chaos` command line. Exit codes are in chaos/errors.py and the README."""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from infra import artifacts
from infra.errors import InfraError
from infra.paths import REPORTS_DIR, cache_dir

from . import errors
from .verdicts import EXIT as VERDICT_EXIT  # the one owner of verdicts and their exit codes

if TYPE_CHECKING:  # chaos.spec is imported where used (it is not needed by every command)
    from .spec import ExperimentSpec

BACKENDS = ("local", "containers")
MAX_SEED = 2**31 - 1  # a seed's bound (chaos/spec/fields.py LIMITS); `--seed random` draws below it
MAX_BENCH_SECONDS = 24 * 3600.0  # bench job --seconds: a variant's run, like any spec duration
MAX_ROUNDS = 100  # bench startup --rounds: each round starts a job per variant


def _progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def new_run_dir(name: str, out: Path | None = None) -> Path:
    """reports/runs/<timestamp>-<name>/, with reports/runs/latest pointing at it."""
    runs = (out or REPORTS_DIR / "runs").resolve()
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    run_dir = runs / f"{stamp}-{name}-{os.getpid()}"
    run_dir.mkdir(parents=True, exist_ok=False)
    latest = runs / "latest"
    temporary = runs / f".latest-{os.getpid()}"
    temporary.unlink(missing_ok=True)
    temporary.symlink_to(run_dir.name)
    temporary.replace(latest)  # atomic, so a concurrent run never sees a missing link
    return run_dir


# -- doctor -----------------------------------------------------------------------------------------------
def _java_major() -> int | None:
    java = shutil.which("java")
    if not java:
        return None
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    try:
        version = out.split('"')[1]
        return int(version.split(".")[0])
    except (IndexError, ValueError):
        return None


def doctor(backend: str) -> int:
    rows: list[tuple[str, bool, str]] = []
    rows.append(("python", sys.version_info >= (3, 11), sys.version.split()[0]))
    for module in ("pyspark", "confluent_kafka", "minio", "toxiproxy", "testcontainers", "yaml", "pyarrow"):
        try:
            imported = __import__(module)
            rows.append((module, True, str(getattr(imported, "__version__", "installed"))))
        except ImportError as error:
            rows.append((module, False, f"not importable ({error}); run: make setup"))
    major = _java_major()
    rows.append(("java", major is not None and major >= 17, f"{major or 'missing'} (17 or newer needed)"))
    rows.append(("mvn (set-up only)", shutil.which("mvn") is not None, shutil.which("mvn") or "missing"))
    rows.append(("go (set-up only)", shutil.which("go") is not None, shutil.which("go") or "missing"))
    found = artifacts.problems(artifacts.load_lock())
    rows.append(("artifacts", not found, f"verified in {cache_dir()}" if not found
                 else f"{found[0]}; run: make setup"))
    if not found:
        rows.append(_class_archives_row())
    if backend == "containers":
        try:
            from infra.containers import engine_status

            ok, detail = engine_status()
        except ImportError:
            ok, detail = False, "the containers backend is not available in this version"
        rows.append(("docker engine", ok, detail))
        if ok and not found:
            rows.append(_images_row())
    width = max(len(name) for name, _, _ in rows)
    for name, ok, detail in rows:
        print(f"{'ok ' if ok else 'NO '} {name:<{width}}  {detail}")
    ready = all(ok for name, ok, _ in rows if "set-up only" not in name and "optional" not in name)
    print(f"backend {backend}: {'ready' if ready else 'not ready'}")
    return errors.PASSED if ready else errors.ENVIRONMENT


def _images_row() -> tuple[str, bool, str]:
    """Which image each component runs; missing local builds are made by the first stack start (set-up)."""
    from infra import images

    try:
        refs = images.resolve(artifacts.verify(), build=False)
        return "images", True, ", ".join(sorted(set(refs.values())))
    except InfraError as error:
        return "images (set-up only)", False, f"{error} (the first containers stack start builds them, ≈ 70 s)"


def _class_archives_row() -> tuple[str, bool, str]:
    """The JVMs' class-data archives (infra/cds.py): without them every JVM starts slower, nothing fails."""
    from infra import cds
    from infra.stack import host_spark_home

    archive_set = cds.ArchiveSet.for_host(artifacts.verify(), host_spark_home())
    found = archive_set.problems()
    if found:
        return "class-data archives (optional)", False, f"{found[0]}: JVMs start ~7 s slower; run: make setup"
    return "class-data archives (optional)", True, f"{len(cds.ROLES)} roles in {archive_set.directory}"


# -- setup / smoke ----------------------------------------------------------------------------------------
def setup() -> int:
    from .class_archives import ensure

    artifacts.fetch(progress=_progress)
    _progress(f"every pinned artifact is verified under {cache_dir()}")
    try:
        ensure(progress=_progress)
    except InfraError as error:  # an optimisation: without archives every JVM still starts, only slower
        _progress(f"warning: {error}; JVMs will start without class-data archives")
    return errors.PASSED


def _measured(kind: str, out: Path | None, as_json: bool, measure: Callable[[Path], dict]) -> tuple[Path, dict]:
    """A new run directory for `kind`, what `measure` found there stored as its results.json (and printed as one
    JSON line with --json): the shared part of the stack smoke and the benchmarks."""
    run_dir = new_run_dir(kind, out)
    result = measure(run_dir)
    (run_dir / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    if as_json:
        print(json.dumps(result))
    return run_dir, result


def stack_smoke(backend: str, as_json: bool, out: Path | None) -> int:
    from .smoke import run_smoke

    run_dir, result = _measured("stack-smoke", out, as_json,
                                lambda run_dir: run_smoke(run_dir, backend=backend, progress=_progress))
    if not as_json:
        _progress(f"{'PASSED' if result['ok'] else 'FAILED'}: {result.get('error', 'every check held')}")
        _progress(f"results: {run_dir / 'results.json'}; logs: {run_dir / 'logs'}")
    if result["ok"]:
        return errors.PASSED
    return errors.ENVIRONMENT if result.get("error_kind") == "environment" else errors.FAILED


def bench(what: str, seconds: float, as_json: bool, out: Path | None, variants: list[str] | None) -> int:
    from .bench import bench_job

    _run_dir, result = _measured(f"bench-{what}", out, as_json, lambda run_dir: bench_job(
        run_dir, seconds=seconds, variants=variants, progress=_progress))
    if not as_json:
        for name, measured in result["variants"].items():
            print(f"{name:<22} {measured['eps']:>10.0f} events/s  batch p50 {measured['batch_p50_ms']} ms  "
                  f"state {measured['state_rows_per_key']} rows/key, SST {measured['state_sst_bytes_per_key']} B/key, "
                  f"memory {measured['state_memory_bytes_per_key']} B/key")
        if "ratio_hardened_to_baseline" in result:
            print(f"hardened / baseline = {result['ratio_hardened_to_baseline']}")
    return errors.PASSED


def bench_startup(rounds: int, variants: list[str], as_json: bool, out: Path | None) -> int:
    from .bench import STARTUP_BATCHES, bench_startup as measure

    _run_dir, result = _measured("bench-startup", out, as_json,
                                 lambda run_dir: measure(run_dir, rounds=rounds, variants=tuple(variants),
                                                         progress=_progress))
    if as_json:
        return errors.PASSED
    for name, measured in result["variants"].items():
        print(f"{name:<8} median of {len(measured['starts'])}: query started {measured['median_query_started_s']} s, "
              f"first batch done {measured['median_first_batch_s']} s, batch {STARTUP_BATCHES} done "
              f"{measured[f'median_batch_{STARTUP_BATCHES}_s']} s (that batch {measured['median_later_batch_ms']} ms) "
              "after launch")
    for key, ratio in result.items():
        if key.startswith("ratio_first_batch_"):
            print(f"first batch, {key.removeprefix('ratio_first_batch_').replace('_to_', ' / ')} = {ratio}")
    return errors.PASSED


# -- run / check / list -------------------------------------------------------------------------------------
EXPERIMENTS_DIR = Path(__file__).resolve().parent.parent / "experiments"


def _is_file(path: Path) -> bool:
    """Path.is_file, but a name the file system refuses (too long: ENAMETOOLONG) is no file, not an OSError."""
    try:
        return path.is_file()
    except OSError:
        return False


def _short(text: object) -> str:
    """A path from the command line in a one-line message, cut at 60 characters."""
    text = str(text)
    return text if len(text) <= 60 else text[:57] + "..."


def _shown(name: str) -> str:
    """A name from the command line in a one-line message: quoted, cut at 60 characters."""
    return repr(name) if len(name) <= 60 else repr(name[:57] + "...")


def _suite_path(suite: str) -> Path:
    path = Path(suite)
    if not path.suffix:
        path = EXPERIMENTS_DIR / "suites" / f"{suite}.yaml"
    if not _is_file(path):
        known = ", ".join(sorted(p.stem for p in (EXPERIMENTS_DIR / "suites").glob("*.yaml")))
        raise errors.SpecError(f"no suite {_shown(suite)} ({_shown(str(path))} is not a file); known suites: {known}")
    return path


def _experiment_path(name: str) -> Path:
    path = Path(name)
    if not path.suffix:
        path = EXPERIMENTS_DIR / f"{name}.yaml"
    if not _is_file(path):
        known = ", ".join(sorted(p.stem for p in EXPERIMENTS_DIR.glob("*.yaml")))
        raise errors.SpecError(f"no experiment {_shown(name)} ({_shown(str(path))} is not a file); known "
                               f"experiments: {known}")
    return path


def _resolve(names: list[str], suite: str | None, scale: float | None):
    """Experiment names or YAML paths (or a run's spec.json), or a suite name/path -> (run name, validated specs,
    repeat). Nothing is run by default: the nightly suite takes ~45 minutes, so it is asked for by name."""
    from .spec import check_incident, load_experiment, load_suite

    if suite and names:
        raise errors.ChaosError("give experiments or --suite, not both", errors.USAGE)
    if not names and not suite:
        raise errors.ChaosError("give experiments (see: chaos list) or --suite NAME; nothing runs by default "
                                "(--suite nightly: every experiment at full length, ~45 min)", errors.USAGE)
    if suite:  # the same as `not names` here: exactly one of them was given
        loaded = load_suite(_suite_path(suite), scale)  # a scale on the command line replaces the suite's
        specs = [entry.spec for entry in loaded.entries]
        for spec in specs:
            check_incident(spec)
        return loaded.name, specs, loaded.repeat
    specs = []
    for name in names:
        spec = load_experiment(_experiment_path(name), scale or 1.0)
        check_incident(spec)
        specs.append(spec)
    return (specs[0].name if len(specs) == 1 else "experiments"), specs, 1


def _changed_only(specs: list, ref: str, suite: str | None) -> list:
    from .changed import changes_since, sections_at, select

    root = Path(__file__).resolve().parent.parent
    suite_path = Path(suite) if suite and Path(suite).is_file() else root / "experiments" / "suites" / f"{suite}.yaml"
    decisions = select(specs, changes_since(ref, root), str(suite_path) if suite else None, sections_at(root), root)
    for decision in decisions:
        print(f"{'run ' if decision.run else 'skip'}  {decision.name}: {decision.reason}", file=sys.stderr)
    chosen = {d.name for d in decisions if d.run}
    if not chosen:
        print(f"nothing to run: no change since {ref} can affect these experiments", file=sys.stderr)
    return [spec for spec in specs if spec.name in chosen]


def run(names: list[str], suite: str | None, scale: float | None, backend: str, arms: list[str] | None,
        out: Path | None, argv: list[str], seed: int | None = None, only: str | None = None,
        changed_since: str | None = None, lanes: int = 1) -> int:
    name, specs, repeat = _resolve(names, suite, scale)
    if changed_since:  # only the experiments a change since REF can affect (chaos/changed.py)
        specs = _changed_only(specs, changed_since, suite)
        if not specs:
            return errors.PASSED
    if only:  # a part of the suite, each experiment as the suite runs it (chaos/selection.py)
        from .selection import parse_only, select

        specs = select(specs, parse_only(only))
    if seed is not None:  # the same experiments on another workload and fault schedule
        specs = [dataclasses.replace(spec, seed=seed) for spec in specs]
    return _execute(name, name, specs, repeat, backend, arms, out, argv, lanes)


def _execute(name: str, directory: str, specs: list, repeat: int, backend: str, arms: list[str] | None,
             out: Path | None, argv: list[str], lanes: int = 1) -> int:
    """The run itself, once the specs are settled (chaos run, chaos rerun): a run directory, the stack, the
    verdicts; exit code of the worst."""
    from .run import run_experiments

    clean_dead_runs()
    run_dir = new_run_dir(directory, out)
    _progress(f"run directory: {run_dir}")
    results = run_experiments(specs, run_dir, name, backend=backend, arms=arms, argv=argv, say=_progress,
                              repeat=repeat, lanes=lanes)
    _print_results(results, run_dir)
    return VERDICT_EXIT.get(results["verdict"], errors.FAILED)


_REPEAT_SUFFIX = re.compile(r"\.r\d+$")  # <name>.r1, <name>.r2: the repeats of a suite (chaos/run.py)


def rerun_plan(run_dir: Path, target: str | None) -> dict:
    """What a stored run ran, to run it again: every experiment's spec.json (its scale and seed already in it), the
    suite's repeat, the arms it ran (the arm directories it wrote) and its backend. `target` narrows it to one
    EXPERIMENT or EXPERIMENT/ARM. Every problem is one usage or spec error line, before anything starts."""
    from .spec import load_stored

    if not _is_file(run_dir / "run.json"):
        raise errors.ChaosError(f"{_short(run_dir)} is not a run directory (no run.json); give reports/runs/<run>",
                                errors.USAGE)
    try:
        run = json.loads((run_dir / "run.json").read_text())
        if not isinstance(run, dict):
            raise ValueError("not a JSON object")
    except (ValueError, OSError) as exc:
        raise errors.ChaosError(f"{run_dir / 'run.json'}: not a run's run.json ({str(exc).splitlines()[0]}); give "
                                "reports/runs/<run>", errors.USAGE) from None
    directories = [d for d in run.get("experiments") or [] if isinstance(d, str) and d and "/" not in d
                   and d not in (".", "..")] or sorted(
        d.parent.name for d in run_dir.glob("*/spec.json"))
    experiment, _, arm = (target or "").partition("/")
    if experiment:
        known = sorted({_REPEAT_SUFFIX.sub("", d) for d in directories})
        directories = [d for d in directories if experiment in (d, _REPEAT_SUFFIX.sub("", d))]
        if not directories:
            raise errors.ChaosError(f"{run_dir} ran no experiment {_shown(experiment)}; it ran: "
                                    f"{', '.join(known) or 'none'}", errors.USAGE)
    specs: dict[str, ExperimentSpec] = {}
    dirs: dict[str, list[Path]] = {}
    for directory in directories:
        base = _REPEAT_SUFFIX.sub("", directory)
        dirs.setdefault(base, []).append(run_dir / directory)
        if base not in specs and (run_dir / directory / "spec.json").is_file():
            specs[base] = load_stored(run_dir / directory / "spec.json")
    missing = [base for base in dirs if base not in specs]
    if not specs or (experiment and missing):
        raise errors.ChaosError(f"{run_dir}: {', '.join(missing) or 'no experiment'} never started (no spec.json): "
                                "nothing to rerun", errors.USAGE)
    arms: list[str] | None
    if arm:
        have = sorted({a.profile for spec in specs.values() for a in spec.arms})
        if arm not in have:
            raise errors.ChaosError(f"{experiment} has no arm {_shown(arm)}; it has: {', '.join(have)}", errors.USAGE)
        arms = [arm]
    else:  # the arms it ran: their directories, else (none started) what its command line asked for
        ran = {a.profile for base, spec in specs.items() for a in spec.arms
               for d in dirs[base] if (d / a.profile).is_dir()}
        arms = sorted(ran) if ran else _arms_of_argv(run.get("argv") or [])
        if arms and {a.profile for spec in specs.values() for a in spec.arms} <= set(arms):
            arms = None  # every arm: the same as not narrowing
    # one repeat of a suite's (<name>.r2) once; an experiment by name as often as the run repeated it
    repeat = run.get("repeat", 1) if isinstance(run.get("repeat", 1), int) and experiment not in directories else 1
    name = str(run.get("suite") or "rerun")
    return {"name": name, "directory": "rerun-" + (re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:48]
                                                   or "run"),
            "specs": list(specs.values()), "missing": missing, "repeat": max(1, repeat), "arms": arms,
            "backend": run.get("backend") if run.get("backend") in BACKENDS else "local"}


def _arms_of_argv(argv: list) -> list[str] | None:
    """The --arms a stored command line gave (`reproduce`: the control, unless it said otherwise)."""
    argv = [str(a) for a in argv] if isinstance(argv, list) else []
    for index, word in enumerate(argv):
        given = argv[index + 1] if word == "--arms" and index + 1 < len(argv) else (
            word.split("=", 1)[1] if word.startswith("--arms=") else None)
        if given is not None:
            arms = [a for a in given.split(",") if a in ("hardened", "naive")]
            return arms or None
    return ["naive"] if argv[:1] == ["reproduce"] else None


def rerun(run_dir: Path, target: str | None, backend: str | None, out: Path | None, argv: list[str],
          lanes: int = 1) -> int:
    """Run again exactly what a stored run ran (chaos rerun RUN_DIR [EXPERIMENT[/ARM]])."""
    plan = rerun_plan(run_dir, target)
    if plan["missing"]:
        _progress(f"not rerun (never started in {run_dir}): {', '.join(plan['missing'])}")
    _progress(f"rerunning {', '.join(s.name for s in plan['specs'])} of {run_dir} (seeds "
              f"{', '.join(str(s.seed) for s in plan['specs'])}, arms {','.join(plan['arms'] or ['all'])})")
    return _execute(plan["name"], plan["directory"], plan["specs"], plan["repeat"], backend or plan["backend"],
                    plan["arms"], out, argv, lanes)


def lane(run_dir: Path, name: str, backend: str, arms: list[str] | None, directories: list[str]) -> int:
    """One lane of a `--lanes` run (chaos/lanes.py): these experiment directories of RUN_DIR, whose spec.json the
    parent wrote, on a stack of the lane's own. The parent judges the run."""
    from .run import run_planned
    from .spec import load_stored

    planned = [(directory, load_stored(run_dir / directory / "spec.json")) for directory in directories]
    run_planned(run_dir, planned, backend, arms, lambda message: _progress(f"{name} | {message}"), lane=name)
    return errors.PASSED



def mutate(names: list[str], suite: str | None, scale: float | None, switches: list[str] | None, backend: str,
           out: Path | None, argv: list[str], seed: int | None = None) -> int:
    """Every claimed hardening switch off in turn (chaos/mutate.py); exit 0 when every switch run is killed."""
    from .mutate import headline, plan, write_plan
    from .run import run_experiments
    from .switches import SWITCHES

    unknown = [s for s in switches or [] if s not in SWITCHES]
    if unknown:
        raise errors.ChaosError(f"unknown switch {unknown[0]!r}; allowed: {', '.join(SWITCHES)}", errors.USAGE)
    _name, specs, _repeat = _resolve(names, suite or (None if names else "smoke"), scale)
    if seed is not None:
        specs = [dataclasses.replace(spec, seed=seed) for spec in specs]
    rows = plan(specs, switches)
    if not rows:
        raise errors.ChaosError("no experiment here claims a hardening switch (its spec's `claims`); nothing to "
                                "mutate", errors.USAGE)
    clean_dead_runs()
    run_dir = new_run_dir("mutate", out)
    _progress(f"run directory: {run_dir}")
    _progress(f"{len(rows)} mutants: " + ", ".join(f"{r['experiment']} without {r['switch']}" for r in rows))
    write_plan(run_dir, rows)
    results = run_experiments([r["mutant"] for r in rows], run_dir, "mutate", backend=backend, argv=argv,
                              say=_progress)
    mutation = results.get("mutation") or {}
    for cell in mutation.get("cells", []):
        print(f"{cell['status'].upper():<9} {cell['experiment']} without {cell['switch']}: {cell['why']}")
    print(headline(mutation) if mutation else "no mutation matrix (the run did not complete)")
    print(f"report: {run_dir / 'index.html'}")
    return VERDICT_EXIT.get(results["verdict"], errors.FAILED)


def reproducing(incident: str, scale: float | None, arms: list[str], seed: int | None = None) -> list:
    """The experiments that reproduce `incident` and have one of `arms`, on `seed` if given (usage error if none)."""
    from .spec import check_incident, load_experiment

    specs = [load_experiment(path, scale or 1.0) for path in sorted(EXPERIMENTS_DIR.glob("*.yaml"))]
    incidents = sorted({spec.incident.file for spec in specs})
    matching = [spec for spec in specs if incident in spec.incident.file
                and any(arm.profile in arms for arm in spec.arms)]
    if not matching:
        raise errors.ChaosError(f"no experiment reproduces incident {_shown(incident)}; known incidents: "
                                f"{', '.join(incidents)}", errors.USAGE)
    for spec in matching:
        check_incident(spec)
    return matching if seed is None else [dataclasses.replace(spec, seed=seed) for spec in matching]


def reproduce(incident: str, scale: float | None, backend: str, out: Path | None, argv: list[str],
              seed: int | None = None, arms: list[str] | None = None) -> int:
    """Run the control (naive) arm of every experiment that reproduces `incident` (its number, e.g. 001, or a
    part of its file name) and show what was observed next to what the incident showed. `arms` ["hardened"]
    verifies the fix instead: the hardened arms of the same experiments, on the same seed."""
    from .run import run_experiments

    arms = arms or ["naive"]
    matching = reproducing(incident, scale, arms, seed)
    which = " and ".join({"naive": "control", "hardened": "hardened"}[a] for a in arms)
    _progress(f"incident {incident}: the {which} arms of {', '.join(s.name for s in matching)}")
    run_dir = new_run_dir(f"reproduce-{incident.split('-')[0]}", out)
    _progress(f"run directory: {run_dir}")
    results = run_experiments(matching, run_dir, f"reproduce {incident}", backend=backend, arms=arms, argv=argv,
                              say=_progress)
    print()
    for spec, experiment in zip(matching, results.get("experiments", [])):
        print(f"{experiment['name']} ({spec.incident.file})")
        print(f"  the incident showed: {spec.incident.error}")
        fixed = next((a for a in experiment.get("arms", []) if a.get("profile") == "hardened"), None)
        if "hardened" in arms:
            failed = [c for c in (fixed or {}).get("checks", []) if c.get("verdict") != "PASSED"]
            why = "; ".join(f"{c['name']}: {c.get('message') or c.get('measured')}" for c in failed)
            verdict = (fixed or {}).get("verdict", "UNKNOWN")
            print(f"  the fix ({verdict}):{' ' * max(1, 7 - len(verdict))}"
                  + ("every target held" if verdict == "PASSED" else why or "no hardened arm ran"))
        if "naive" not in arms:
            continue
        arm: dict = next((a for a in experiment.get("arms", []) if a.get("profile") == "naive"), {})
        if arm.get("signature"):
            print(f"  reproduced:          {arm['signature']}")
        elif arm.get("verdict") == "PASSED":
            print(f"  not reproduced:      the control survived this fault too ({spec.arm('naive').note})")
        else:
            failed = [c for c in arm.get("checks", []) if c.get("verdict") != "PASSED"]
            why = "; ".join(f"{c['name']}: {c.get('message') or c.get('measured')}" for c in failed) or "no arm ran"
            print(f"  NOT reproduced ({arm.get('verdict', 'UNKNOWN')}): {why}")
    _print_results(results, run_dir)
    return VERDICT_EXIT.get(results["verdict"], errors.FAILED)


def clean_dead_runs() -> list[tuple[str, str]]:
    """Stop what runs killed with SIGKILL left running (infra/registry.py) and close their run directories:
    status interrupted (killed), judged again, so their results say what happened."""
    from infra import registry

    cleaned = registry.cleanup_dead(_progress)
    for run_dir, line in cleaned:
        meta_path = Path(run_dir) / "run.json" if run_dir else None
        if meta_path is None or not meta_path.is_file():
            continue
        try:
            meta = json.loads(meta_path.read_text())
            if meta.get("status") != "running":
                continue
            meta.update(status="interrupted", killed=True, ended=datetime.now(timezone.utc).isoformat(
                timespec="seconds"), cleaned_up=line)
            meta_path.write_text(json.dumps(meta, indent=2) + "\n")
            from .checkers import judge_run
            from .run import write_report

            (Path(run_dir) / "results.json").write_text(json.dumps(judge_run(Path(run_dir)), indent=2) + "\n")
            write_report(Path(run_dir), _progress)
        except (OSError, ValueError) as error:
            _progress(f"could not close {run_dir}: {error}")
    return cleaned


def clean() -> int:
    if not clean_dead_runs():
        print("nothing to clean: no dead run left anything running")
    return errors.PASSED


def _print_results(results: dict, run_dir: Path) -> None:
    for experiment in results.get("experiments", []):
        for arm in experiment.get("arms", []):
            failed = [c["name"] for c in arm.get("checks", []) if c.get("verdict") != "PASSED"]
            extra = f"  (not passed: {', '.join(failed)})" if failed else ""
            if arm.get("role") == "control" and arm.get("signature"):
                extra += f"  control reproduced: {arm['signature']}"
            print(f"{arm['verdict']:<11} {experiment['name']} / {arm['profile']}{extra}")
    _print_discrimination(results)
    print(f"{results['verdict']}: {run_dir}")
    if (run_dir / "index.html").exists():
        print(f"report: {run_dir / 'index.html'}")


def _print_discrimination(results: dict) -> None:
    """One count line, then every experiment a job without the hardening passes (loudly), and the inconclusive."""
    judged = [(e["name"], e["discrimination"]) for e in results.get("experiments", [])
              if isinstance(e.get("discrimination"), dict)]
    if not judged:
        return
    counts = {status: sum(d.get("status") == status for _, d in judged) for status in
              ("discriminating", "not_discriminating", "inconclusive", "waived", "not_run")}
    print("discrimination (the control judged by the hardened targets): "
          + ", ".join(f"{n} {status.replace('_', ' ')}" for status, n in counts.items() if n))
    for name, discrimination in judged:
        status = discrimination.get("status")
        if status == "not_discriminating":
            consequence = ("required by this suite: FAILED" if discrimination.get("verdict") == "FAILED"
                           else "reported only: this suite does not require discrimination")
            print(f"NOT DISCRIMINATING  {name}: a job without the hardening passes every hardened target "
                  f"({consequence})")
        elif status == "inconclusive":
            print(f"INCONCLUSIVE        {name}: {discrimination.get('message')}")


def check(run_dir: Path) -> int:
    from .checkers import judge_run

    if not _is_file(run_dir / "run.json"):
        raise errors.ChaosError(f"{_short(run_dir)} is not a run directory (no run.json); give reports/runs/<run>",
                                errors.USAGE)
    from .run import write_report

    results = judge_run(run_dir)
    (run_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    write_report(run_dir, _progress)  # junit.xml and index.html from the new verdicts, never left stale
    _print_results(results, run_dir)
    return VERDICT_EXIT.get(results["verdict"], errors.FAILED)


def catalogue() -> list[dict]:
    """Every experiment and suite under experiments/, each with what it runs, or its one-line error: a broken file
    is listed with its error, not a reason for the others to go unlisted."""
    from .spec import check_incident, load_experiment, load_suite

    rows: list[dict] = []
    for path in sorted(EXPERIMENTS_DIR.glob("*.yaml")):
        row: dict = {"kind": "experiment", "name": path.stem, "path": str(path), "error": None}
        try:
            spec = load_experiment(path)
            check_incident(spec)
            row.update(name=spec.name, seconds=spec.phases.total, arms=[a.profile for a in spec.arms],
                       incident=spec.incident.file, seed=spec.seed)
        except errors.ChaosError as error:
            row["error"] = str(error)
        rows.append(row)
    for path in sorted((EXPERIMENTS_DIR / "suites").glob("*.yaml")):
        row = {"kind": "suite", "name": path.stem, "path": str(path), "error": None}
        try:
            suite = load_suite(path)
            for entry in suite.entries:
                check_incident(entry.spec)
            row.update(name=suite.name, scale=suite.scale, repeat=suite.repeat,
                       experiments=[entry.spec.name for entry in suite.entries],
                       seconds=suite.repeat * sum(entry.spec.phases_of(arm.profile).total
                                                  for entry in suite.entries for arm in entry.spec.arms))
        except errors.ChaosError as error:
            row["error"] = str(error)
        rows.append(row)
    return rows


def list_experiments(as_json: bool = False) -> int:
    rows = catalogue()
    if as_json:
        print(json.dumps(rows, indent=2))
        return errors.PASSED
    for row in rows:
        if row["error"]:
            print(f"{'suite ' if row['kind'] == 'suite' else ''}{row['name']:<28} BROKEN: {row['error']}")
        elif row["kind"] == "experiment":
            print(f"{row['name']:<28} {row['seconds']:>5.0f} s  arms: {', '.join(row['arms']):<16} "
                  f"incident {row['incident']}")
        else:
            repeats = f", {row['repeat']} times" if row["repeat"] > 1 else ""
            print(f"suite {row['name']:<22} phases up to {row['seconds'] / 60:.0f} min, {len(row['experiments'])} "
                  f"experiments{repeats}")
    return errors.PASSED


def validate(files: list[str]) -> int:
    """Each file (or experiment/suite name; none: every one under experiments/) loaded as chaos run would load it,
    nothing started: `ok` lines on stdout, one `chaos:` line per bad file on stderr; exit 2 if any is bad."""
    from .spec import check_incident, load_experiment, load_suite

    targets = files or [str(p) for p in sorted(EXPERIMENTS_DIR.glob("*.yaml"))] + [
        str(p) for p in sorted((EXPERIMENTS_DIR / "suites").glob("*.yaml"))]
    bad = 0
    for target in targets:
        path = Path(target)
        try:
            if not path.suffix and not _is_file(path):  # a name
                named = EXPERIMENTS_DIR / f"{target}.yaml"
                path = named if _is_file(named) else _suite_path(target)
            if _is_suite(path):
                suite = load_suite(path)
                for entry in suite.entries:
                    check_incident(entry.spec)
                print(f"ok  {path}: suite {suite.name}, {len(suite.entries)} experiments")
            else:
                spec = load_experiment(path)
                check_incident(spec)
                print(f"ok  {path}: experiment {spec.name}, {', '.join(a.profile for a in spec.arms)}")
        except errors.ChaosError as error:
            print(f"chaos: {error}", file=sys.stderr)
            bad += 1
    return errors.USAGE if bad else errors.PASSED


def _is_suite(path: Path) -> bool:
    """A suite file (a mapping with `experiments`), as opposed to an experiment or a run's spec.json."""
    if path.suffix == ".json" or not _is_file(path):
        return False
    import yaml

    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError, OSError, RecursionError):
        return False  # the experiment loader says what is wrong with it
    return isinstance(doc, dict) and "experiments" in doc and "phases" not in doc


# -- entry point ------------------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (what is wrong, where to look) and exit 2, not a usage block."""

    def error(self, message: str):
        self.exit(errors.USAGE, f"{self.prog}: {message}; see: {self.prog} --help\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="chaos", description="Chaos and fault-injection suite for streaming state.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    commands = parser.add_subparsers(dest="command", required=True)

    doctor_cmd = commands.add_parser("doctor", help="what is installed, what is missing (exit 0 when ready)")
    doctor_cmd.add_argument("--backend", choices=BACKENDS, default="local")

    commands.add_parser("setup", help="fetch, build and verify every pinned artifact (idempotent)")

    stack_cmd = commands.add_parser("stack", help="the Kafka + MinIO + Toxiproxy + Spark stack")
    stack_commands = stack_cmd.add_subparsers(dest="stack_command", required=True)
    smoke_cmd = stack_commands.add_parser("smoke", help="start the stack, prove each part works, tear down")
    smoke_cmd.add_argument("--backend", choices=BACKENDS, default="local")
    smoke_cmd.add_argument("--json", action="store_true", help="print one JSON object with the measurements")
    smoke_cmd.add_argument("--out", type=Path, help="run store directory (default reports/runs)")

    run_cmd = commands.add_parser("run", help="run experiments or a suite (--suite nightly: ~45 min) and judge them")
    run_cmd.add_argument("experiments", nargs="*", help="experiment names (see chaos list), YAML paths, or a stored "
                         "run's <experiment>/spec.json")
    run_cmd.add_argument("--suite", help="a suite name (experiments/suites/NAME.yaml) or path")
    run_cmd.add_argument("--scale", type=_scale, help="multiply every phase and fault time by this")
    run_cmd.add_argument("--backend", choices=BACKENDS, default="local")
    run_cmd.add_argument("--arms", type=lambda text: text.split(","), help="only these arms (hardened,naive)")
    run_cmd.add_argument("--seed", type=_seed, help="replace every experiment's seed (workload, fault jitter and "
                         "lifecycle-trigger draws), or `random`; "
                         "the seed used is in each experiment's spec.json")
    run_cmd.add_argument("--only", metavar="EXP[/ARM],...", help="only these experiments (or arms) of the suite, "
                         "each with the suite's scale, overrides and arms")
    run_cmd.add_argument("--changed-since", metavar="REF", help="only the experiments that a change since the git "
                         "revision REF (committed or not) can affect; says what it skips and why")
    run_cmd.add_argument("--lanes", type=_lanes, default=1, help="run the experiments side by side on this many "
                         "stacks (default 1; docs/benchmarks.md says what running side by side does to the figures)")
    run_cmd.add_argument("--out", type=Path, help="run store directory (default reports/runs)")

    check_cmd = commands.add_parser("check", help="re-judge a stored run offline from its files")
    check_cmd.add_argument("run_dir", type=Path)

    list_cmd = commands.add_parser("list", help="the experiments and suites (a broken file: listed with its error)")
    list_cmd.add_argument("--json", action="store_true", help="one JSON array: name, path, arms, seconds, error, ...")

    validate_cmd = commands.add_parser("validate", help="check experiment and suite files without starting anything "
                                       "(exit 0: all valid; 2: one line per bad file)")
    validate_cmd.add_argument("files", nargs="*", help="YAML files, experiment or suite names, or a run's spec.json "
                              "(default: every file under experiments/)")

    commands.add_parser("schema", help="print the JSON Schema of an experiment spec (docs/spec.schema.json)")

    rerun_cmd = commands.add_parser("rerun", help="run again exactly what a stored run ran: its specs (scale, seed) "
                                    "and arms")
    rerun_cmd.add_argument("run_dir", type=Path, help="a run directory (reports/runs/<run>)")
    rerun_cmd.add_argument("target", nargs="?", help="only this EXPERIMENT or EXPERIMENT/ARM of it")
    rerun_cmd.add_argument("--backend", choices=BACKENDS, help="default: the stored run's")
    rerun_cmd.add_argument("--lanes", type=_lanes, default=1, help="experiments side by side (see chaos run)")
    rerun_cmd.add_argument("--out", type=Path, help="run store directory (default reports/runs)")
    lane_cmd = commands.add_parser("lane", help="internal: one lane of `chaos run --lanes` (chaos/lanes.py)")
    lane_cmd.add_argument("run_dir", type=Path)
    lane_cmd.add_argument("--lane", required=True)
    lane_cmd.add_argument("--backend", choices=BACKENDS, default="local")
    lane_cmd.add_argument("--arms", type=lambda text: text.split(","))
    lane_cmd.add_argument("directories", nargs="+")
    commands.add_parser("clean", help="stop what runs killed with SIGKILL left running, and close their results")

    mutate_cmd = commands.add_parser(
        "mutate", help="each hardening switch an experiment claims turned off in turn: the hardened arm must then fail "
                       "an outcome check (default: the smoke suite's experiments)")
    mutate_cmd.add_argument("experiments", nargs="*", help="experiment names or YAML paths (default: --suite)")
    mutate_cmd.add_argument("--suite", help="smoke (default), nightly, pre-release or a suite file")
    mutate_cmd.add_argument("--switch", dest="switches", action="append",
                            help="only this switch (repeatable; default: every claimed one)")
    mutate_cmd.add_argument("--scale", type=_scale, help="replace the suite's scale")
    mutate_cmd.add_argument("--seed", type=_seed, help="replace every experiment's seed, or `random`")
    mutate_cmd.add_argument("--backend", choices=BACKENDS, default="local")
    mutate_cmd.add_argument("--out", type=Path, help="run store directory (default reports/runs)")
    reproduce_cmd = commands.add_parser("reproduce", help="run the control arm of the experiments that reproduce an "
                                        "incident; show the observed error next to the incident's")
    reproduce_cmd.add_argument("incident", help="incident number (e.g. 001) or part of its file name")
    reproduce_cmd.add_argument("--scale", type=_scale, help="multiply every phase and fault time by this")
    reproduce_cmd.add_argument("--seed", type=_seed, help="replace the experiments' seeds, or `random`")
    reproduce_cmd.add_argument("--arms", type=_arms, default=["naive"],
                               help="naive (default: reproduce the incident), hardened (verify the fix), or both")
    reproduce_cmd.add_argument("--backend", choices=BACKENDS, default="local")
    reproduce_cmd.add_argument("--out", type=Path, help="run store directory (default reports/runs)")

    report_cmd = commands.add_parser("report", help="write index.html and junit.xml of a run, or a trend page")
    report_cmd.add_argument("report_args", nargs=argparse.REMAINDER)

    bench_cmd = commands.add_parser("bench", help="benchmarks that print figures")
    bench_commands = bench_cmd.add_subparsers(dest="bench_command", required=True)
    job_bench = bench_commands.add_parser("job", help="sustained throughput of the job's profiles and state choices")
    job_bench.add_argument("--seconds", type=_bench_seconds, default=60.0, help="run time per variant")
    job_bench.add_argument("--variants", type=lambda text: text.split(","),
                           help="comma list (default all: baseline,hardened,hardened_tws_rows,hardened_tws_pandas,naive)")
    job_bench.add_argument("--json", action="store_true")
    job_bench.add_argument("--out", type=Path)
    startup_bench = bench_commands.add_parser(
        "startup", help="the job's start-up (query start, first batch) with the suite's JVM options vs without archives")
    startup_bench.add_argument("--rounds", type=_rounds, default=3, help="starts per variant, alternating")
    startup_bench.add_argument("--variants", type=_startup_variants, default=["archives", "c1"],
                               help="comma-separated, of: archives (the suite's: C1 and class-data archives), c1 (C1, "
                                    "no archives), tiered (the JDK's JIT, no archives); default archives,c1")
    startup_bench.add_argument("--json", action="store_true")
    startup_bench.add_argument("--out", type=Path)
    crashes_bench = bench_commands.add_parser(
        "crashes", help="what stored runs' lifecycle-triggered faults hit (kills before the first commit, in a "
                        "batch) and how each arm came out (docs/benchmarks.md)")
    crashes_bench.add_argument("run_dirs", type=Path, nargs="+")
    crashes_bench.add_argument("--json", action="store_true")
    suite_bench = bench_commands.add_parser("suite", help="where a stored suite run's wall time went (from its files)")
    suite_bench.add_argument("run_dir", type=Path)
    suite_bench.add_argument("--json", action="store_true")
    return parser


def version() -> str:
    """The installed package's version (pyproject.toml's when run from a checkout that is not installed)."""
    from importlib import metadata

    try:
        return metadata.version("streaming-state-chaos")
    except metadata.PackageNotFoundError:
        import tomllib

        try:
            return tomllib.loads((EXPERIMENTS_DIR.parent / "pyproject.toml").read_text())["project"]["version"]
        except (OSError, KeyError, ValueError):
            return "unknown"


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a finite number")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{_shown(text)} must be greater than 0")
    return value


def _scale(text: str) -> float:
    from .spec import MAX_SCALE

    value = _positive_float(text)
    if value > MAX_SCALE:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is too large; allowed: a number > 0 and <= {MAX_SCALE:g}")
    return value


def _bench_seconds(text: str) -> float:
    value = _positive_float(text)
    if value > MAX_BENCH_SECONDS:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is too long; allowed: seconds > 0 and <= "
                                         f"{MAX_BENCH_SECONDS:g}")
    return value


def _rounds(text: str) -> int:
    value = _positive_int(text)
    if value > MAX_ROUNDS:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is too many; allowed: 1 to {MAX_ROUNDS}")
    return value


def _arms(text: str) -> list[str]:
    arms = [a.strip() for a in text.split(",")]
    bad = [a for a in arms if a not in ("hardened", "naive")]
    if bad or len(set(arms)) != len(arms):
        raise argparse.ArgumentTypeError(f"{_shown((bad or [text])[0])} is not valid; allowed: hardened, naive or "
                                         "hardened,naive")
    return arms


def _startup_variants(text: str) -> list[str]:
    from .bench import STARTUP_VARIANTS

    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in STARTUP_VARIANTS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"{(unknown or [text])[0]!r} is not a start-up variant; allowed: "
                                         f"{', '.join(STARTUP_VARIANTS)}")
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"{text!r} names a variant twice")
    return names


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{_shown(text)} must be greater than 0")
    return value


def _lanes(text: str) -> int:
    from .lanes import MAX_LANES

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not an integer") from None
    if not 1 <= value <= MAX_LANES:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is out of range; allowed: 1 to {MAX_LANES}")
    return value


def _seed(text: str) -> int:
    if text == "random":  # a new schedule; the seed drawn is in each experiment's spec.json (and printed)
        import secrets

        value = secrets.randbelow(2**31)
        print(f"chaos: --seed random drew {value}", file=sys.stderr)
        return value
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{_shown(text)} must be 0 or greater")
    if value > MAX_SEED:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is too large; allowed: 0 to {MAX_SEED}")
    return value


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "doctor":
        return doctor(args.backend)
    if args.command == "setup":
        return setup()
    if args.command == "stack" and args.stack_command == "smoke":
        return stack_smoke(args.backend, args.json, args.out)
    if args.command == "run":
        bad = [a for a in args.arms or [] if a not in ("hardened", "naive")]
        if bad:
            raise errors.ChaosError(f"unknown arm {bad[0]!r}; allowed: hardened, naive", errors.USAGE)
        return run(args.experiments, args.suite, args.scale, args.backend, args.arms, args.out, sys.argv[1:],
                   seed=args.seed, only=args.only, changed_since=args.changed_since, lanes=args.lanes)
    if args.command == "check":
        return check(args.run_dir)
    if args.command == "list":
        return list_experiments(args.json)
    if args.command == "validate":
        return validate(args.files)
    if args.command == "schema":
        from .schema import spec_schema

        print(json.dumps(spec_schema(), indent=2))
        return errors.PASSED
    if args.command == "rerun":
        return rerun(args.run_dir, args.target, args.backend, args.out, sys.argv[1:], lanes=args.lanes)
    if args.command == "lane":
        return lane(args.run_dir, args.lane, args.backend, args.arms, args.directories)
    if args.command == "clean":
        return clean()
    if args.command == "mutate":
        return mutate(args.experiments, args.suite, args.scale, args.switches, args.backend, args.out, sys.argv[1:],
                      seed=args.seed)
    if args.command == "reproduce":
        return reproduce(args.incident, args.scale, args.backend, args.out, sys.argv[1:], seed=args.seed,
                         arms=args.arms)
    if args.command == "report":
        from .report import main_report

        return main_report(args.report_args)
    if args.command == "bench" and args.bench_command == "suite":
        from .suite_timing import print_timing, suite_timing

        if not _is_file(args.run_dir / "run.json"):
            raise errors.ChaosError(f"{_short(args.run_dir)} is not a run directory (no run.json); give reports/runs/<run>",
                                    errors.USAGE)
        timing = suite_timing(args.run_dir)
        print(json.dumps(timing)) if args.json else print_timing(timing)
        return errors.PASSED
    if args.command == "bench" and args.bench_command == "startup":
        return bench_startup(args.rounds, args.variants, args.json, args.out)
    if args.command == "bench" and args.bench_command == "crashes":
        from .crash_tally import print_tally, tally

        missing = [_short(d) for d in args.run_dirs if not _is_file(d / "run.json")]
        if missing:
            raise errors.ChaosError(f"{missing[0]} is not a run directory (no run.json); give reports/runs/<run>",
                                    errors.USAGE)
        result = tally(args.run_dirs)
        print(json.dumps(result)) if args.json else print_tally(result)
        return errors.PASSED
    if args.command == "bench":
        from .bench import VARIANTS

        unknown = [v for v in args.variants or [] if v not in VARIANTS]
        if unknown:
            raise errors.ChaosError(f"unknown bench variant {unknown[0]!r}; allowed: {', '.join(VARIANTS)}",
                                    errors.USAGE)
        return bench(args.bench_command, args.seconds, args.json, args.out, args.variants)
    raise AssertionError(args)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    raw = list(sys.argv[1:] if argv is None else argv)
    if raw[:1] == ["report"]:
        # `report` has options of its own (--trend, --out, --margin): argparse's REMAINDER does not take an option
        # first ("unrecognized arguments: --trend"), so its own parser gets everything after the word.
        from .report import main_report

        return main_report(raw[1:])
    args = parser.parse_args(argv)  # exits 2 with argparse's one-line message on bad usage

    def _terminate(signum, frame):
        raise KeyboardInterrupt  # SIGTERM takes the same path as Ctrl-C: finally blocks tear down

    signal.signal(signal.SIGTERM, _terminate)
    try:
        return _dispatch(args)
    except KeyboardInterrupt:
        print("chaos: interrupted; everything the run started has been stopped", file=sys.stderr)
        return errors.INTERRUPTED
    except InfraError as error:
        if args.debug:
            traceback.print_exc()
        print(f"chaos: environment error: {error}", file=sys.stderr)
        return errors.ENVIRONMENT
    except errors.ChaosError as error:
        if args.debug:
            traceback.print_exc()
        print(f"chaos: {error}", file=sys.stderr)
        return error.exit_code
    except OSError as error:  # the run directory's disk is full, unwritable, ...: the environment, not the job
        if args.debug:
            traceback.print_exc()
        where = f" ({error.filename})" if error.filename else ""
        print(f"chaos: environment error: {error.strerror or error}{where}; free space or fix permissions, or give "
              f"--out another directory", file=sys.stderr)
        return errors.ENVIRONMENT


if __name__ == "__main__":
    sys.exit(main())
