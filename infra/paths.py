"""Where things live: the repository, the user-level artifact cache and the run store."""
import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
INFRA_DIR = Path(__file__).resolve().parent
REPORTS_DIR = REPO_ROOT / "reports"

CACHE_ENV = "CHAOS_CACHE_DIR"


def cache_dir() -> Path:
    """User cache for downloaded and built artifacts; CHAOS_CACHE_DIR overrides it."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "chaos-suite"
