"""`chaos report`: its command line."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from .junit import write_junit
from .model import ReportError
from .page import write_report
from .trend import write_trend


# -- command line ----------------------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse's default prints the usage too)
        raise _UsageError(f"chaos report: {message}; see: chaos report --help")


class _UsageError(Exception):
    pass


def _margin(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--margin {text!r} is not a number") from None
    if not 0 <= value < 10:
        raise argparse.ArgumentTypeError(f"--margin {text!r} must be a fraction such as 0.2 (20 %)")
    return value


def main_report(argv: Sequence[str] | None = None, say: Callable[[str], None] = print) -> int:
    """`chaos report RUN_DIR` or `chaos report --trend RUNS_DIR [--out FILE] [--margin 0.2]`. Exit 0 or 2."""
    parser = _Parser(prog="chaos report", description="Write index.html and junit.xml of a run, or a trend page.")
    parser.add_argument("run_dir", nargs="?", type=Path, help="a run directory (reports/runs/<run>)")
    parser.add_argument("--trend", type=Path, metavar="RUNS_DIR", help="write a trend page over these runs")
    parser.add_argument("--out", type=Path, help="trend page path (default RUNS_DIR/trend.html)")
    parser.add_argument("--margin", type=_margin, default=0.2,
                        help="regression margin: worse than the previous runs' median by more than this (0.2)")
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
        if (args.run_dir is None) == (args.trend is None):
            parser.error("give a RUN_DIR or --trend RUNS_DIR (one of them)")
        if args.run_dir is not None and args.out is not None:
            parser.error("--out is for --trend; a run's report is always RUN_DIR/index.html")
        if args.trend is not None:
            out = write_trend(args.trend, args.out, args.margin)
            say(f"trend: {out}")
        else:
            page = write_report(args.run_dir)
            junit = write_junit(args.run_dir)
            say(f"report: {page}")
            say(f"junit: {junit}")
    except _UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    except ReportError as exc:
        print(f"chaos report: {exc}", file=sys.stderr)
        return 2
    return 0
