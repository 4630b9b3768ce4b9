"""The chaos suite as a pytest plugin (entry point `pytest11`, name `chaos.pytest_plugin`; this repository's
tests/conftest.py also names it in `pytest_plugins`, which loads it from a clone without an install — the two do
not collide, since the entry point's name is the module's).

Options:
  --chaos-scale X   every `chaos run` the plugin starts gets `--scale X` (a suite entry's own scale is kept)
  --chaos-seed N    ... and `--seed N` (the workload, fault jitter and lifecycle-trigger draws)
  --chaos-lanes N   a suite's experiments side by side on N stacks (`chaos run --lanes N`; default: the suite's own)
  --chaos-part P    all (default); `alone`: only the items marked `alone` (their verdicts hold only with the
                    machine to themselves: timing bounds); `shared`: every other item. `make test` runs the shared
                    part several test files at a time (pytest-xdist), then the alone part by itself (tests/run_parts.py)

Fixtures:
  chaos_stack       a running stack (infra.stack.Stack) per test module, on the module's `backend` (a parameter
                    tests/conftest.py gives; `local` without it), torn down after the module
  run_experiment    run_experiment(spec, arms=..., scale=..., seed=...) runs `chaos run` as a subprocess, as a
                    user does, and returns a ChaosRun (exit code, run directory, results.json)
  chaos_suite_runs  session-wide: .get(suite, backend) runs the part of a suite the session's selected items
                    need, once, on first use (below)

One test item per arm: `chaos_arms(suite_file)` gives pytest.param()s, one per (experiment, arm) the suite runs,
marked `chaos_arm`. `chaos_suite_runs.get(...)` looks at the items the session kept after `-k`/`-m`/`--deselect`
and runs ONE `chaos run --suite S --only EXP/ARM,...` for exactly their arms (each as the suite runs it: its
scale, overrides and arms), or the whole suite when every arm is selected, or when only items marked
`chaos_suite` (whole-suite checks) are. `ChaosRun.complete` says whether the whole suite ran, so whole-suite
checks can skip, saying why, after a subset.
"""
from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SUITES_DIR = Path(__file__).resolve().parents[1] / "experiments" / "suites"
PARTS = ("all", "shared", "alone")


def pytest_addoption(parser):
    group = parser.getgroup("chaos", "chaos suite (chaos/pytest_plugin.py)")
    group.addoption("--chaos-scale", type=float, default=None, metavar="X",
                    help="pass --scale X to every `chaos run` the tests start (default: each suite's or spec's own)")
    group.addoption("--chaos-seed", type=int, default=None, metavar="N",
                    help="pass --seed N to every `chaos run` the tests start (default: each spec's own)")
    group.addoption("--chaos-lanes", type=int, default=None, metavar="N",
                    help="run a suite's experiments side by side on N stacks (`chaos run --lanes N`; default: the "
                         "suite's own `lanes`)")
    group.addoption("--chaos-part", choices=PARTS, default="all",
                    help="alone: only the tests marked `alone` (timing-bound: they need the machine to themselves); "
                         "shared: every other test; all (default)")


def pytest_configure(config):
    config.addinivalue_line("markers", "chaos_arm(suite, experiment, arm): a test item that judges one arm of a "
                                       "suite; selecting it (-k) runs that arm")
    config.addinivalue_line("markers", "chaos_suite(suite): a check of a whole suite run; selected alone, it runs "
                                       "the whole suite")
    config.addinivalue_line("markers", "backends(*names): the only backends this module's stack may run on")
    config.addinivalue_line("markers", "alone: its verdicts are timing-bound (recovery, progress), so it runs with "
                                       "nothing else beside it (--chaos-part alone)")


def in_part(item, part: str) -> bool:
    """Whether `item` belongs to `part` of the tests (--chaos-part)."""
    return part == "all" or (item.get_closest_marker("alone") is not None) == (part == "alone")


def pytest_collection_modifyitems(config, items):
    part = config.getoption("chaos_part")
    if part == "all":
        return
    kept = [item for item in items if in_part(item, part)]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if not in_part(item, part)])
        items[:] = kept


# -- one `chaos run` --------------------------------------------------------------------------------------------

@dataclass
class ChaosRun:
    """A finished `chaos run`: its exit code and output, its run directory and results.json (None if it wrote no
    run directory, e.g. a usage error)."""
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    run_dir: Path | None
    results: dict | None
    complete: bool = True  # the whole suite (or everything asked for), not a part chosen by the selection
    only: str | None = None

    def arm(self, experiment: str, profile: str) -> dict | None:
        for entry in (self.results or {}).get("experiments", []):
            if entry["name"] == experiment:
                for arm in entry["arms"]:
                    if arm["profile"] == profile:
                        return arm
        return None

    def ran(self) -> list[tuple[str, str]]:
        return [(e["name"], a["profile"]) for e in (self.results or {}).get("experiments", []) for a in e["arms"]]


def chaos_run(args: Sequence[str], out: Path, timeout: float = 3600) -> ChaosRun:
    """`python -m chaos.cli run ARGS --out OUT` as a subprocess (the CLI as a user or the nightly job runs it)."""
    argv = [sys.executable, "-m", "chaos.cli", "run", *args, "--out", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    latest = out / "latest"
    run_dir = latest.resolve() if latest.exists() else None
    results_file = run_dir / "results.json" if run_dir else None
    results = json.loads(results_file.read_text()) if results_file and results_file.is_file() else None
    return ChaosRun(argv, done.returncode, done.stdout, done.stderr, run_dir, results)


def _options(config, scale: float | None, seed: int | None) -> list[str]:
    scale = config.getoption("chaos_scale") if scale is None else scale
    seed = config.getoption("chaos_seed") if seed is None else seed
    return ([] if scale is None else ["--scale", repr(scale)]) + ([] if seed is None else ["--seed", str(seed)])


def _backend_of(request) -> str:
    return request.getfixturevalue("backend") if "backend" in request.fixturenames else "local"


@pytest.fixture(scope="module")
def backend():
    """The stack backend; tests/conftest.py parametrizes it (--backend), and this is the default without that."""
    return "local"


@pytest.fixture(scope="module")
def chaos_stack(backend, request, tmp_path_factory):
    """A running stack for the module's tests, on its backend; stopped (every process, every port) after them."""
    from infra.stack import Stack

    name = request.module.__name__.rpartition(".")[2].removeprefix("test_")
    with Stack(tmp_path_factory.mktemp(f"{name}-{backend}"), backend=backend) as running:
        yield running


@pytest.fixture
def run_experiment(request, tmp_path_factory):
    """run_experiment(spec, arms=None, scale=None, seed=None, backend=None, timeout=3600) -> ChaosRun.

    `spec`: an experiment name or YAML path (or several, as a list); `arms`: e.g. ["hardened"]; scale and seed
    default to --chaos-scale/--chaos-seed (else the spec's own), backend to the test's `backend`."""
    def run(spec: str | Path | Iterable[str | Path], arms: Sequence[str] | None = None, scale: float | None = None,
            seed: int | None = None, backend: str | None = None, timeout: float = 3600) -> ChaosRun:
        specs = [str(spec)] if isinstance(spec, (str, Path)) else [str(s) for s in spec]
        args = [*specs, "--backend", backend or _backend_of(request), *_options(request.config, scale, seed)]
        if arms:
            args += ["--arms", ",".join(arms)]
        return chaos_run(args, tmp_path_factory.mktemp("chaos-run"), timeout)

    return run


# -- a suite's arms as test items -------------------------------------------------------------------------------

def suite_file(suite: str | Path) -> Path:
    path = Path(suite)
    return path if path.suffix else SUITES_DIR / f"{path}.yaml"


def suite_arms(suite: str | Path) -> list[tuple[str, str]]:
    """(experiment, arm) of every arm the suite runs, in its order."""
    from .spec import load_suite

    return [(entry.spec.name, arm.profile) for entry in load_suite(suite_file(suite)).entries
            for arm in entry.spec.arms]


def chaos_arms(suite: str | Path) -> list:
    """pytest.param(experiment, arm) per arm of the suite, id `EXPERIMENT/ARM`, marked chaos_arm."""
    return [pytest.param(experiment, arm, id=f"{experiment}/{arm}",
                         marks=pytest.mark.chaos_arm(suite=str(suite), experiment=experiment, arm=arm))
            for experiment, arm in suite_arms(suite)]


def _item_backend(item) -> str:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("backend", "local") if callspec else "local"


def plan(items, suite: str, backend: str) -> str | None:
    """The `--only` value for the arms the items select, or None: the whole suite (every arm selected, or no arm
    but a whole-suite check)."""
    everything = suite_arms(suite)
    picked = {(m.kwargs["experiment"], m.kwargs["arm"]) for item in items if _item_backend(item) == backend
              for m in item.iter_markers("chaos_arm") if m.kwargs["suite"] == str(suite)}
    if not picked or picked >= set(everything):
        return None
    parts: list[str] = []
    for experiment in dict.fromkeys(e for e, _ in everything):
        arms = [a for e, a in everything if e == experiment]
        chosen = [a for a in arms if (experiment, a) in picked]
        if chosen == arms:
            parts.append(experiment)
        else:
            parts += [f"{experiment}/{a}" for a in chosen]
    return ",".join(parts)


@dataclass
class SuiteRuns:
    session: pytest.Session
    out: Path
    runs: dict[tuple[str, str], ChaosRun] = field(default_factory=dict)

    def get(self, suite: str, backend: str = "local", timeout: float = 3600) -> ChaosRun:
        """The run of `suite` on `backend` for this session's selected items: started on the first call."""
        key = (str(suite), backend)
        if key not in self.runs:
            only = plan(self.session.items, str(suite), backend)
            args = ["--suite", str(suite), "--backend", backend, *_options(self.session.config, None, None)]
            if only:
                args += ["--only", only]
            lanes = self.session.config.getoption("chaos_lanes")
            if lanes is not None:
                args += ["--lanes", str(lanes)]
            out = self.out / f"{Path(str(suite)).stem}-{backend}"
            out.mkdir(parents=True, exist_ok=True)
            done = chaos_run(args, out, timeout)
            done.complete, done.only = only is None, only
            self.runs[key] = done
        return self.runs[key]


@pytest.fixture(scope="session")
def chaos_suite_runs(request, tmp_path_factory) -> SuiteRuns:
    return SuiteRuns(request.session, tmp_path_factory.mktemp("suites"))


def describe(arm: dict) -> str:
    """An arm's verdict and each check that did not pass, with what it expected, measured and said."""
    failed = [f"{c['name']}={c['verdict']} (expected {c.get('expected')}, measured {c.get('measured')}: "
              f"{c.get('message')})" for c in arm.get("checks", []) if c.get("verdict") != "PASSED"]
    if arm.get("verdict") == "SKIPPED":
        return f"SKIPPED: not run: {arm.get('skipped')}"
    return f"{arm['verdict']}: " + ("; ".join(failed) or "no failed check")


def record_arm(record_property, arm: dict) -> None:
    """The arm's recovery time (s), lost and duplicated counts and verdict as junit <property>s; one the arm did not
    measure (results.json null, e.g. no recovery where the job is meant to stop) is left out. Per-test properties
    need junit_family xunit1 (pyproject.toml): xunit2's schema has none."""
    for key in ("recovery_s", "lost", "duplicated", "verdict"):
        if arm.get(key) is not None:
            record_property(key, arm[key])
