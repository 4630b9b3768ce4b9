"""The command line's argument types: each bad value is one argparse line naming what is allowed."""
from __future__ import annotations

import argparse
import sys

from .common import EXPERIMENTS_DIR
from .common import shown as _shown

MAX_SEED = 2**31 - 1  # a seed's bound (chaos/spec/fields.py LIMITS); `--seed random` draws below it
MAX_BENCH_SECONDS = 24 * 3600.0  # bench job --seconds: a variant's run, like any spec duration
MAX_ROUNDS = 100  # bench startup --rounds: each round starts a job per variant
MAX_BATCHES = 600  # bench startup --batches: a batch a second, so ten minutes of one start


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
    from ..spec import MAX_SCALE

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


def _batches(text: str) -> int:
    value = _positive_int(text)
    if value > MAX_BATCHES:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is too many; allowed: 1 to {MAX_BATCHES}")
    return value


def _arms(text: str) -> list[str]:
    arms = [a.strip() for a in text.split(",")]
    bad = [a for a in arms if a not in ("hardened", "naive")]
    if bad or len(set(arms)) != len(arms):
        raise argparse.ArgumentTypeError(f"{_shown((bad or [text])[0])} is not valid; allowed: hardened, naive or "
                                         "hardened,naive")
    return arms


def _startup_variants(text: str) -> list[str]:
    from ..bench.job import STARTUP_VARIANTS

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
    from ..lanes.launch import MAX_LANES

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
