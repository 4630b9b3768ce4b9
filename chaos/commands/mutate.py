"""`chaos mutate` (each claimed hardening switch off in turn) and `chaos reproduce` (an incident's control arms)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from .. import errors
from ..store import new_run_dir
from ..verdicts import EXIT as VERDICT_EXIT
from .common import EXPERIMENTS_DIR, _print_results
from .common import progress as _progress
from .common import shown as _shown
from .runs import _resolve, clean_dead_runs


def mutate(names: list[str], suite: str | None, scale: float | None, switches: list[str] | None, backend: str,
           out: Path | None, argv: list[str], seed: int | None = None) -> int:
    """Every claimed hardening switch off in turn (chaos/mutate.py); exit 0 when every switch run is killed. The
    headline gives the kill rate over every switch and over those the run claims."""
    from ..mutate import headline, plan, write_plan
    from ..run import run_experiments
    from ..switches import SWITCHES

    unknown = [s for s in switches or [] if s not in SWITCHES]
    if unknown:
        raise errors.ChaosError(f"unknown switch {unknown[0]!r}; allowed: {', '.join(SWITCHES)}", errors.USAGE)
    suite = suite or (None if names else "smoke")
    _name, specs, _repeat, _lanes = _resolve(names, suite, scale)
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
    for name, why in (mutation.get("explained") or {}).items():
        print(f"{'SURVIVED':<9} {name}: a survivor, explained (docs/job.md): {why}")
    claimer = f"the {Path(suite).stem}" if suite else "this run"
    print(headline(mutation, claimer) if mutation else "no mutation matrix (the run did not complete)")
    print(f"report: {run_dir / 'index.html'}")
    return VERDICT_EXIT.get(results["verdict"], errors.FAILED)


def reproducing(incident: str, scale: float | None, arms: list[str], seed: int | None = None) -> list:
    """The experiments that reproduce `incident` and have one of `arms`, on `seed` if given (usage error if none)."""
    from ..spec import check_incident, load_experiment

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


def incident_summary(spec) -> str:
    """Where the incident a spec reproduces is written up (the clone's incidents/, or $CHAOS_INCIDENTS_DIR) and
    its title, the summary's first line; check_incident has made sure the file is there."""
    from ..spec.loading import incident_path

    path = incident_path(spec)
    title = path.read_text(encoding="utf-8").partition("\n")[0].strip()
    return f"{path}: {title}"


def reproduce(incident: str, scale: float | None, backend: str, out: Path | None, argv: list[str],
              seed: int | None = None, arms: list[str] | None = None) -> int:
    """Run the control (naive) arm of every experiment that reproduces `incident` (its number, e.g. 001, or a
    part of its file name) and show what was observed next to what the incident showed. `arms` ["hardened"]
    verifies the fix instead: the hardened arms of the same experiments, on the same seed."""
    from ..run import run_experiments

    arms = arms or ["naive"]
    matching = reproducing(incident, scale, arms, seed)
    which = " and ".join({"naive": "control", "hardened": "hardened"}[a] for a in arms)
    for spec in {s.incident.file: s for s in matching}.values():
        _progress(f"incident {incident_summary(spec)}")
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
