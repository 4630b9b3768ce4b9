"""What the commands share: console lines, paths from the command line, where experiments live, the verdict lines
of a finished run."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from .. import errors
from ..state_held import describe
from ..store import is_run_dir

BACKENDS = ("local", "containers")
EXPERIMENTS_DIR = Path(__file__).resolve().parents[2] / "experiments"


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def is_file(path: Path) -> bool:
    """Path.is_file, but a name the file system refuses (too long: ENAMETOOLONG) is no file, not an OSError."""
    try:
        return path.is_file()
    except OSError:
        return False


def short(text: object) -> str:
    """A path from the command line in a one-line message, cut at 60 characters."""
    text = str(text)
    return text if len(text) <= 60 else text[:57] + "..."


def shown(name: str) -> str:
    """A name from the command line in a one-line message: quoted, cut at 60 characters."""
    return repr(name) if len(name) <= 60 else repr(name[:57] + "...")


def require_run_dir(run_dir: Path) -> None:
    """A usage error unless `run_dir` is a run directory (has run.json)."""
    if not is_run_dir(run_dir):
        raise errors.ChaosError(f"{short(run_dir)} is not a run directory (no run.json); give reports/runs/<run>",
                                errors.USAGE)


def _suite_path(suite: str) -> Path:
    path = Path(suite)
    if not path.suffix:
        path = EXPERIMENTS_DIR / "suites" / f"{suite}.yaml"
    if not is_file(path):
        known = ", ".join(sorted(p.stem for p in (EXPERIMENTS_DIR / "suites").glob("*.yaml")))
        raise errors.SpecError(f"no suite {shown(suite)} ({shown(str(path))} is not a file); known suites: {known}")
    return path


def _experiment_path(name: str) -> Path:
    path = Path(name)
    if not path.suffix:
        path = EXPERIMENTS_DIR / f"{name}.yaml"
    if not is_file(path):
        known = ", ".join(sorted(p.stem for p in EXPERIMENTS_DIR.glob("*.yaml")))
        raise errors.SpecError(f"no experiment {shown(name)} ({shown(str(path))} is not a file); known "
                               f"experiments: {known}")
    return path


def _print_results(results: dict, run_dir: Path) -> None:
    for experiment in results.get("experiments", []):
        for arm in experiment.get("arms", []):
            failed = [c["name"] for c in arm.get("checks", []) if c.get("verdict") != "PASSED"]
            extra = f"  (not passed: {', '.join(failed)})" if failed else ""
            if arm.get("role") == "control" and arm.get("signature"):
                extra += f"  control reproduced: {arm['signature']}"
            held = describe(arm.get("state_held"))
            if held:
                extra += f"  {held}"
            if arm.get("verdict") == "SKIPPED":
                extra = f"  (not run: {arm.get('skipped')})"
            print(f"{arm['verdict']:<11} {experiment['name']} / {arm['profile']}{extra}")
    _print_discrimination(results)
    if results.get("verdict") == "SKIPPED":
        print("SKIPPED: nothing failed, but some arms were not run (above, with why): not a pass")
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
            print(f"INCONCLUSIVE        {name}: {discrimination.get('message')}"
                  + (" (required by this suite: FAILED)" if discrimination.get("verdict") == "FAILED" else ""))
