"""`chaos stack smoke` and `chaos bench ...`: measurements, each stored as a run directory's results.json."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from .. import errors
from ..store import RunStore, new_run_dir
from .common import progress as _progress
from .common import require_run_dir


def _measured(kind: str, out: Path | None, as_json: bool, measure: Callable[[Path], dict]) -> tuple[Path, dict]:
    """A new run directory for `kind`, what `measure` found there stored as its results.json (and printed as one
    JSON line with --json): the shared part of the stack smoke and the benchmarks."""
    run_dir = new_run_dir(kind, out)
    result = measure(run_dir)
    RunStore(run_dir).write_results(result)
    if as_json:
        print(json.dumps(result))
    return run_dir, result


def stack_smoke(backend: str, as_json: bool, out: Path | None) -> int:
    from ..smoke import run_smoke

    run_dir, result = _measured("stack-smoke", out, as_json,
                                lambda run_dir: run_smoke(run_dir, backend=backend, progress=_progress))
    if not as_json:
        _progress(f"{'PASSED' if result['ok'] else 'FAILED'}: {result.get('error', 'every check held')}")
        _progress(f"results: {run_dir / 'results.json'}; logs: {run_dir / 'logs'}")
    if result["ok"]:
        return errors.PASSED
    return errors.ENVIRONMENT if result.get("error_kind") == "environment" else errors.FAILED


def bench(what: str, seconds: float, as_json: bool, out: Path | None, variants: list[str] | None) -> int:
    from ..bench.job import bench_job

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


def bench_startup(rounds: int, variants: list[str], batches: int, as_json: bool, out: Path | None) -> int:
    from ..bench.job import bench_startup as measure

    _run_dir, result = _measured("bench-startup", out, as_json,
                                 lambda run_dir: measure(run_dir, rounds=rounds, variants=tuple(variants),
                                                         progress=_progress, batches=batches))
    if as_json:
        return errors.PASSED
    for name, measured in result["variants"].items():
        print(f"{name:<9} median of {len(measured['starts'])}: query started {measured['median_query_started_s']} s, "
              f"first batch done {measured['median_first_batch_s']} s, batch {batches} done "
              f"{measured[f'median_batch_{batches}_s']} s (that batch {measured['median_later_batch_ms']} ms) "
              f"after launch; the JVMs' CPU until then {measured['median_cpu_s']} s (driver "
              f"{measured['median_cpu_driver_s']}, executor {measured['median_cpu_executor_s']})")
    for key, ratio in result.items():
        if key.startswith("ratio_first_batch_"):
            print(f"first batch, {key.removeprefix('ratio_first_batch_').replace('_to_', ' / ')} = {ratio}")
        if key.startswith("ratio_cpu_"):
            print(f"JVM CPU, {key.removeprefix('ratio_cpu_').replace('_to_', ' / ')} = {ratio}")
    return errors.PASSED


def bench_suite(run_dir: Path, as_json: bool) -> int:
    from ..bench.suite_timing import print_timing, suite_timing

    require_run_dir(run_dir)
    timing = suite_timing(run_dir)
    print(json.dumps(timing)) if as_json else print_timing(timing)
    return errors.PASSED


def bench_cpu(command: list[str], as_json: bool) -> int:
    from ..bench.cpu_profile import print_profile, profile_command

    command = command[1:] if command[:1] == ["--"] else command
    if not command:
        raise errors.ChaosError("bench cpu: give the command to measure after --, e.g. chaos bench cpu -- chaos run "
                                "--suite smoke --lanes 2", errors.USAGE)
    try:
        code, figures = profile_command(command, say=_progress)
    except FileNotFoundError:
        raise errors.ChaosError(f"bench cpu: no such command: {command[0]}", errors.USAGE) from None
    print(json.dumps(figures)) if as_json else print_profile(figures)
    return code


def bench_crashes(run_dirs: list[Path], as_json: bool) -> int:
    from ..bench.crash_tally import print_tally, tally

    for run_dir in run_dirs:
        require_run_dir(run_dir)
    result = tally(run_dirs)
    print(json.dumps(result)) if as_json else print_tally(result)
    return errors.PASSED


def bench_recovery_size(run_dirs: list[Path], markdown: Path | None, svg: Path | None, as_json: bool) -> int:
    from ..bench.recovery_size import main

    for run_dir in run_dirs:
        require_run_dir(run_dir)
    main(run_dirs, markdown, svg, as_json)
    return errors.PASSED


def bench_recoveries(run_dir: Path, as_json: bool) -> int:
    from ..bench.recoveries import print_recoveries, recoveries

    require_run_dir(run_dir)
    rows = recoveries(run_dir)
    print(json.dumps(rows)) if as_json else print_recoveries(rows)
    return errors.PASSED
