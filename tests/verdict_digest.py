"""Verdict equivalence: stored runs judged again, their verdicts and figures as a digest, compared with a baseline.

    python -m tests.verdict_digest --base REF           # judged with REF's code and with this tree's; compared
    python -m tests.verdict_digest --write FILE         # this tree's digest, stored in FILE
    python -m tests.verdict_digest --compare FILE       # this tree's digest against one stored in FILE
    ... [RUN_DIR ...]                                   # the runs to judge; default: every run in tests/fixtures/runs

Each run directory is copied to a temporary directory first (a stored run is never modified) and judged there by
`chaos check COPY` in a child process, with this tree's code or, for `--base`, with REF's (`git archive REF`). The
digest holds, per run: the exit code, the printed lines (the copy's path written RUN_DIR), the files the copy then
holds, and every leaf of results.json and of each arm's result.json, keyed by its path (a list of objects is keyed by
their `name` or `profile`, so one added check shows as one difference, not a shifted list). Every difference is
printed as `key: before -> after`; exit 0 when there is none, 1 when there are, 2 for a usage error.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chaos.store import is_run_dir

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_RUNS = ROOT / "tests" / "fixtures" / "runs"
ABSENT = "(absent)"
CLOCK = re.compile(r"^\[\d\d:\d\d:\d\d\] ")  # a progress line's time (chaos/commands/common.py progress)


def fixture_runs() -> list[Path]:
    """The stored runs under tests/fixtures/runs (`latest` is a link to one of them)."""
    return [path for path in sorted(FIXTURE_RUNS.iterdir()) if not path.is_symlink() and is_run_dir(path)]


def flatten(value: Any, prefix: str, into: dict[str, Any]) -> dict[str, Any]:
    """Every leaf of a JSON value under its path; objects in a list by their `name` or `profile` when each has a
    distinct one, else by position."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            flatten(item, f"{prefix}/{key}", into)
    elif isinstance(value, list) and value:
        names = [item.get("name") or item.get("profile") if isinstance(item, dict) else None for item in value]
        keyed = all(isinstance(n, str) and n for n in names) and len(set(names)) == len(names)
        for position, item in enumerate(value):
            flatten(item, f"{prefix}/{names[position] if keyed else position}", into)
    else:
        into[prefix] = value
    return into


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as error:
        return f"unreadable: {type(error).__name__}"


def judge_copy(run_dir: Path, code: Path, scratch: Path) -> dict[str, Any]:
    """`chaos check` with the code in `code` on a copy of `run_dir` made under `scratch`: the run's digest entries."""
    copy = scratch / run_dir.name
    shutil.copytree(run_dir, copy, symlinks=True)
    done = subprocess.run([sys.executable, "-m", "chaos.cli", "check", str(copy)], cwd=code, capture_output=True,
                          text=True, timeout=600, env={**_environment(), "PYTHONPATH": str(code)})

    def lines(text: str) -> list[str]:
        for path in {str(copy.resolve()), str(copy)}:
            text = text.replace(path, "RUN_DIR")
        return [CLOCK.sub("", line) for line in text.splitlines()]

    name = run_dir.name
    digest: dict[str, Any] = {f"{name}/exit": done.returncode, f"{name}/stdout": lines(done.stdout),
                              f"{name}/stderr": lines(done.stderr),
                              f"{name}/files": sorted(str(p.relative_to(copy)) for p in copy.rglob("*") if p.is_file())}
    flatten(_json(copy / "results.json"), f"{name}/results.json", digest)
    for result in sorted(copy.glob("*/*/result.json")):
        flatten(_json(result), f"{name}/{result.relative_to(copy)}", digest)
    return digest


def _environment() -> dict[str, str]:
    import os

    return {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}


def digest_of(runs: Sequence[Path], code: Path) -> dict[str, Any]:
    """The digest of every run in `runs`, each judged on its own copy with the code in `code`."""
    digest: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="verdict-digest-") as scratch:
        for run_dir in runs:
            digest.update(judge_copy(run_dir, code, Path(scratch)))
    return digest


def differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """One line per key whose value differs (or that only one side has), in key order."""
    return [f"{key}: {json.dumps(before.get(key, ABSENT))} -> {json.dumps(after.get(key, ABSENT))}"
            for key in sorted(set(before) | set(after)) if before.get(key, ABSENT) != after.get(key, ABSENT)]


def summary(digest: dict[str, Any]) -> list[str]:
    """One line per run: its name, exit code and verdict."""
    runs = sorted(key.split("/")[0] for key in digest if key.endswith("/exit") and key.count("/") == 1)
    return [f"  {run}: exit {digest[run + '/exit']}, {digest.get(run + '/results.json/verdict', ABSENT)}"
            for run in runs]


def _base_code(ref: str, scratch: Path) -> Path:
    """REF's tree, exported (nothing of this checkout changes)."""
    code = scratch / "base"
    code.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], capture_output=True, timeout=300)
    if archive.returncode != 0:
        raise SystemExit(f"verdict_digest: git archive {ref} failed: {archive.stderr.decode().strip()}; give a commit")
    subprocess.run(["tar", "-x", "-C", str(code)], input=archive.stdout, check=True, timeout=300)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.verdict_digest", description=__doc__.splitlines()[0])
    modes = parser.add_mutually_exclusive_group(required=True)
    modes.add_argument("--base", metavar="REF", help="judge with REF's code too and compare")
    modes.add_argument("--write", metavar="FILE", type=Path, help="store this tree's digest in FILE")
    modes.add_argument("--compare", metavar="FILE", type=Path, help="compare this tree's digest with FILE's")
    parser.add_argument("runs", nargs="*", type=Path, metavar="RUN_DIR", help="default: tests/fixtures/runs/*")
    args = parser.parse_args(argv)
    runs = [Path(r) for r in args.runs] or fixture_runs()
    for run_dir in runs:
        if not is_run_dir(run_dir):
            parser.error(f"{run_dir} is not a run directory (no run.json); give reports/runs/<run>")
    if len({r.name for r in runs}) != len(runs):
        parser.error("two runs with the same directory name; give each run once")
    if args.compare is not None:
        try:
            before = json.loads(args.compare.read_text())
        except (OSError, ValueError) as error:
            parser.error(f"{args.compare}: no digest ({error}); write one with --write FILE")
    if args.base is not None:
        with tempfile.TemporaryDirectory(prefix="verdict-digest-base-") as scratch:
            before = digest_of(runs, _base_code(args.base, Path(scratch)))
        print(f"{len(runs)} runs judged with {args.base}'s code:", *summary(before), sep="\n")
    after = digest_of(runs, ROOT)
    print(f"{len(runs)} runs judged with this tree's code:", *summary(after), sep="\n")
    if args.write is not None:
        args.write.write_text(json.dumps(after, indent=1, sort_keys=True) + "\n")
        print(f"digest: {args.write} ({len(after)} entries)")
        return 0
    found = differences(before, after)
    print("\n".join(found) if found else f"IDENTICAL: {len(after)} entries, every one equal to the baseline's")
    if found:
        print(f"{len(found)} differences from the baseline")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
