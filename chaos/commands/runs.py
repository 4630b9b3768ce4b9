"""`chaos run`, `chaos check`, `chaos clean` and the internal `chaos lane`: experiments into a run directory, and a
stored run judged again."""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from .. import errors
from ..store import RunStore, is_run_dir, new_run_dir
from ..verdicts import EXIT as VERDICT_EXIT  # the one owner of verdicts and their exit codes
from .common import _experiment_path, _print_results, _suite_path, require_run_dir
from .common import progress as _progress


def _resolve(names: list[str], suite: str | None, scale: float | None):
    """Experiment names or YAML paths (or a run's spec.json), or a suite name/path -> (run name, validated specs,
    repeat, lanes: the suite's own, else 1). Nothing is run by default: the nightly suite takes about an hour, so it
    is asked for by name."""
    from ..spec import check_incident, load_experiment, load_suite

    if suite and names:
        raise errors.ChaosError("give experiments or --suite, not both", errors.USAGE)
    if not names and not suite:
        raise errors.ChaosError("give experiments (see: chaos list) or --suite NAME; nothing runs by default "
                                "(--suite nightly: every experiment at full length, about an hour)", errors.USAGE)
    if suite:  # the same as `not names` here: exactly one of them was given
        loaded = load_suite(_suite_path(suite), scale)  # a scale on the command line replaces the suite's
        specs = [entry.spec for entry in loaded.entries]
        for spec in specs:
            check_incident(spec)
        return loaded.name, specs, loaded.repeat, loaded.lanes
    specs = []
    for name in names:
        spec = load_experiment(_experiment_path(name), scale or 1.0)
        check_incident(spec)
        specs.append(spec)
    return (specs[0].name if len(specs) == 1 else "experiments"), specs, 1, 1


def _changed_only(specs: list, ref: str, suite: str | None) -> list:
    from ..changed import changes_since, sections_at, select

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
        changed_since: str | None = None, lanes: int | None = None, target=None) -> int:
    """`lanes` None: the suite's own (experiments/suites/*.yaml `lanes`), one lane for experiments by name or on a
    target (one environment: its arms run one after another)."""
    name, specs, repeat, suite_lanes = _resolve(names, suite, scale)
    if lanes is None:
        lanes = 1 if target is not None else suite_lanes
    if changed_since:  # only the experiments a change since REF can affect (chaos/changed.py)
        specs = _changed_only(specs, changed_since, suite)
        if not specs:
            return errors.PASSED
    if only:  # a part of the suite, each experiment as the suite runs it (chaos/selection.py)
        from ..selection import parse_only, select

        specs = select(specs, parse_only(only))
    if seed is not None:  # the same experiments on another workload and fault schedule
        specs = [dataclasses.replace(spec, seed=seed) for spec in specs]
    return _execute(name, name, specs, repeat, backend, arms, out, argv, lanes, target)


def _execute(name: str, directory: str, specs: list, repeat: int, backend: str, arms: list[str] | None,
             out: Path | None, argv: list[str], lanes: int = 1, target=None) -> int:
    """The run itself, once the specs are settled (chaos run, chaos rerun): a run directory, the stack, the
    verdicts; exit code of the worst."""
    from ..run import run_experiments

    clean_dead_runs()
    run_dir = new_run_dir(directory, out)
    _progress(f"run directory: {run_dir}")
    results = run_experiments(specs, run_dir, name, backend=backend, arms=arms, argv=argv, say=_progress,
                              repeat=repeat, lanes=lanes, target=target)
    _print_results(results, run_dir)
    return VERDICT_EXIT.get(results["verdict"], errors.FAILED)


def lane(run_dir: Path, name: str, backend: str, arms: list[str] | None, directories: list[str],
         queue: bool = False) -> int:
    """One lane of a `--lanes` run (chaos/lanes/launch.py), on a stack of the lane's own: one-node experiments from the
    run's shared queue (`queue`), or these experiment directories of RUN_DIR. The parent wrote their spec.json and
    judges the run."""
    from ..run import run_planned, run_queued
    from ..spec import load_stored

    def say(message: str) -> None:
        _progress(f"{name} | {message}")

    if queue == bool(directories):
        raise errors.ChaosError("chaos lane takes --queue or experiment directories, one of them", errors.USAGE)
    if queue:
        from ..lanes.queue import queue_dir

        run_queued(run_dir, queue_dir(run_dir), backend, arms, say, lane=name)
        return errors.PASSED
    planned = [(directory, load_stored(run_dir / directory / "spec.json")) for directory in directories]
    run_planned(run_dir, planned, backend, arms, say, lane=name)
    return errors.PASSED


def clean_dead_runs() -> list[tuple[str, str]]:
    """Stop what runs killed with SIGKILL left running (infra/registry.py) and close their run directories:
    status interrupted (killed), judged again, so their results say what happened."""
    from infra import registry

    cleaned = registry.cleanup_dead(_progress)
    for run_dir, line in cleaned:
        if not run_dir or not is_run_dir(Path(run_dir)):
            continue
        store = RunStore(Path(run_dir))
        try:
            if not store.close_killed(line):
                continue
            from ..rejudge import rejudge

            rejudge(store.dir, _progress)
        except (OSError, ValueError) as error:
            _progress(f"could not close {run_dir}: {error}")
    return cleaned


def clean() -> int:
    if not clean_dead_runs():
        print("nothing to clean: no dead run left anything running")
    return errors.PASSED


def check(run_dir: Path) -> int:
    from ..rejudge import rejudge

    require_run_dir(run_dir)
    results = rejudge(run_dir, _progress)  # junit.xml and index.html from the new verdicts, never left stale
    _print_results(results, run_dir)
    return VERDICT_EXIT.get(results["verdict"], errors.FAILED)
