"""Files in: a YAML document (duplicate keys refused, one line for any YAML error), an experiment file to its
validated spec, and the incident files every experiment names."""
from __future__ import annotations

import os
from pathlib import Path

import yaml

from ..errors import SpecError
from .experiment import parse_experiment
from .fields import DuplicateKey, Invalid, check_scale, dotted, find_duplicate_keys
from .model import ExperimentSpec
from .stored import load_stored

# -- the incidents ---------------------------------------------------------------------------------------------
INCIDENTS_ENV = "CHAOS_INCIDENTS_DIR"
INCIDENTS_DIR = Path(__file__).resolve().parents[2] / "incidents"  # the repository's own, in any clone


def incidents_dir() -> Path:
    """Where the incident files are: $CHAOS_INCIDENTS_DIR when set, else the repository's incidents/ folder."""
    return Path(os.environ[INCIDENTS_ENV]) if os.environ.get(INCIDENTS_ENV) else INCIDENTS_DIR


def incident_path(spec: ExperimentSpec) -> Path:
    """The summary of the incident a spec reproduces (check_incident says whether it exists)."""
    return incidents_dir() / spec.incident.file


def check_incident(spec: ExperimentSpec) -> None:
    """One SpecError line when the incident file a spec reproduces does not exist. Checked by the command line
    (run, validate, list, ...) before anything starts, always: a spec must name an incident the clone holds."""
    if incident_path(spec).is_file():
        return
    directory = incidents_dir()
    known = sorted(p.name.split("-")[0] for p in directory.glob("*.txt")) if directory.is_dir() else []
    raise SpecError(f"{spec.source}: incident.file: {spec.incident.file!r} is not in {directory}; allowed: an "
                    f"incident file there ({', '.join(known) or 'none found'})")


# -- loading -------------------------------------------------------------------------------------------------

def load_yaml(path: Path) -> object:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{path}: (file): cannot read ({exc.strerror}); allowed: an existing YAML file") from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: (file): not UTF-8 text (byte {exc.start}); allowed: a UTF-8 YAML file") from None
    try:
        find_duplicate_keys(yaml.compose(text, Loader=yaml.SafeLoader))
        return yaml.safe_load(text)
    except DuplicateKey as exc:
        raise SpecError(f"{path}: {dotted(exc.path)}: appears twice (lines {exc.first} and {exc.second}); "
                        "allowed: each key once per mapping") from None
    except RecursionError:
        raise SpecError(f"{path}: (document): nested too deeply; allowed: a YAML mapping") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "(document)"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(f"{path}: {where}: not valid YAML ({problem}); allowed: a YAML mapping") from None


def load_experiment(path: str | Path, scale: float = 1.0) -> ExperimentSpec:
    """Load and validate one experiment; durations resolved to seconds with `scale` applied. A `.json` file is a
    run store's spec.json (load_stored): already scaled, so only scale 1 applies to it."""
    path = Path(path)
    scale = check_scale(scale, str(path), ("scale",))
    if path.suffix == ".json":
        if scale != 1.0:
            raise SpecError(f"{path}: scale: a stored spec.json is already scaled, {scale:g} cannot be applied "
                            "again; allowed: no --scale with a spec.json")
        return load_stored(path)
    try:
        return parse_experiment(load_yaml(path), str(path), scale)
    except Invalid as exc:
        raise SpecError(f"{path}: {dotted(exc.path)}: {exc.what}; allowed: {exc.allowed}") from None
