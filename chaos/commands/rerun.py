"""`chaos rerun RUN_DIR [EXPERIMENT[/ARM]]`: run again exactly what a stored run ran."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

from .. import errors
from .common import BACKENDS, require_run_dir
from .common import progress as _progress
from .common import shown as _shown
from .runs import _execute

if TYPE_CHECKING:
    from ..spec import ExperimentSpec

_REPEAT_SUFFIX = re.compile(r"\.r\d+$")  # <name>.r1, <name>.r2: the repeats of a suite (chaos/run.py)


def rerun_plan(run_dir: Path, target: str | None) -> dict:
    """What a stored run ran, to run it again: every experiment's spec.json (its scale and seed already in it), the
    suite's repeat, the arms it ran (the arm directories it wrote) and its backend. `target` narrows it to one
    EXPERIMENT or EXPERIMENT/ARM. Every problem is one usage or spec error line, before anything starts."""
    from ..spec import load_stored

    require_run_dir(run_dir)
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
    stored = str(json.loads((run_dir / "run.json").read_text()).get("backend") or "")
    if stored.startswith("target:"):
        # the target file is not stored with the run (its hooks and endpoints may be gone): never rerun it elsewhere
        raise errors.ChaosError(f"{run_dir} ran against {stored}; a rerun does not keep the target file: run the same "
                                f"experiments with chaos run --target FILE", errors.USAGE)
    if plan["missing"]:
        _progress(f"not rerun (never started in {run_dir}): {', '.join(plan['missing'])}")
    _progress(f"rerunning {', '.join(s.name for s in plan['specs'])} of {run_dir} (seeds "
              f"{', '.join(str(s.seed) for s in plan['specs'])}, arms {','.join(plan['arms'] or ['all'])})")
    return _execute(plan["name"], plan["directory"], plan["specs"], plan["repeat"], backend or plan["backend"],
                    plan["arms"], out, argv, lanes)
