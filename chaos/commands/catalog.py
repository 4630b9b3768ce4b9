"""`chaos list` and `chaos validate`: the experiments and suites under experiments/, loaded, nothing started."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from .. import errors
from .common import EXPERIMENTS_DIR, _suite_path
from .common import is_file as _is_file


def catalogue() -> list[dict]:
    """Every experiment and suite under experiments/, each with what it runs, or its one-line error: a broken file
    is listed with its error, not a reason for the others to go unlisted."""
    from ..spec import check_incident, load_experiment, load_suite

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
    from ..spec import check_incident, load_experiment, load_suite

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
