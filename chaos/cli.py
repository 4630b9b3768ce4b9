"""The `chaos` command line: its parser, and each command handed to its module in chaos/commands/
(docs/architecture.md). Exit codes are in chaos/errors.py and the README."""
from __future__ import annotations

import argparse
import json
import signal
import sys
import traceback
from pathlib import Path

from infra.errors import InfraError

from . import errors
from .commands.args import _arms, _batches, _bench_seconds, _lanes, _rounds, _scale, _seed, _startup_variants, version
from .commands.bench import (
    bench,
    bench_cpu,
    bench_crashes,
    bench_recoveries,
    bench_recovery_size,
    bench_startup,
    bench_suite,
    stack_smoke,
)
from .commands.catalog import catalogue, list_experiments, validate
from .commands.common import BACKENDS, EXPERIMENTS_DIR
from .commands.doctor import doctor, doctor_target, setup
from .commands.mutate import mutate, reproduce, reproducing
from .commands.rerun import rerun, rerun_plan
from .commands.runs import check, clean, clean_dead_runs, lane, run
from .commands.stack import stack_up
from .store import new_run_dir

__all__ = ["BACKENDS", "EXPERIMENTS_DIR", "catalogue", "check", "clean_dead_runs", "main", "new_run_dir",
           "reproducing", "rerun_plan", "version"]


# -- entry point ------------------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (what is wrong, where to look) and exit 2, not a usage block."""

    def error(self, message: str):
        self.exit(errors.USAGE, f"{self.prog}: {message}; see: {self.prog} --help\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="chaos", description="Chaos and fault-injection suite for streaming state.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    commands = parser.add_subparsers(dest="command", required=True)

    doctor_cmd = commands.add_parser("doctor", help="what is installed, what is missing (exit 0 when ready)")
    doctor_cmd.add_argument("--backend", choices=BACKENDS, default="local")
    doctor_cmd.add_argument("--target", type=Path, help="check a target file instead (docs/targets.md): each endpoint "
                            "answers and traffic crosses the proxies; exit 2 for a bad file")

    commands.add_parser("setup", help="fetch, build and verify every pinned artifact (idempotent)")

    stack_cmd = commands.add_parser("stack", help="the Kafka + MinIO + Toxiproxy + Spark stack")
    stack_commands = stack_cmd.add_subparsers(dest="stack_command", required=True)
    smoke_cmd = stack_commands.add_parser("smoke", help="start the stack, prove each part works, tear down")
    smoke_cmd.add_argument("--backend", choices=BACKENDS, default="local")
    smoke_cmd.add_argument("--json", action="store_true", help="print one JSON object with the measurements")
    smoke_cmd.add_argument("--out", type=Path, help="run store directory (default reports/runs)")
    up_cmd = stack_commands.add_parser("up", help="start the stack and keep it running until Ctrl-C")
    up_cmd.add_argument("--backend", choices=BACKENDS, default="local")
    up_cmd.add_argument("--write-target", type=Path, metavar="FILE", help="write the running stack as a target file "
                        "(docs/targets.md; removed when the stack stops); needs AWS_ACCESS_KEY_ID and "
                        "AWS_SECRET_ACCESS_KEY in the environment, which become MinIO's keys")
    up_cmd.add_argument("--s3-tls", action="store_true", help="MinIO and the S3 fault proxy serve HTTPS with a "
                        "certificate of a CA made for this stack (its PEM in the target file's s3.ca_bundle)")
    up_cmd.add_argument("--kafka-sasl", action="store_true", help="the brokers' client listeners ask for a SASL "
                        "login (PLAIN); with --write-target it is $KAFKA_USERNAME/$KAFKA_PASSWORD, which the target "
                        "names")
    up_cmd.add_argument("--topology", choices=("single", "cluster"), default="single",
                        help="single: one broker, one Spark worker; cluster: three brokers (replication 3, "
                        "min.insync.replicas 2), two Spark workers")
    up_cmd.add_argument("--out", type=Path, help="run store directory (default reports/runs)")

    run_cmd = commands.add_parser("run",
                                  help="run experiments or a suite (--suite nightly: about an hour) and judge them")
    run_cmd.add_argument("experiments", nargs="*", help="experiment names (see chaos list), YAML paths, or a stored "
                         "run's <experiment>/spec.json")
    run_cmd.add_argument("--suite", help="a suite name (experiments/suites/NAME.yaml) or path")
    run_cmd.add_argument("--scale", type=_scale, help="multiply every phase and fault time by this")
    run_cmd.add_argument("--backend", choices=BACKENDS, default="local")
    run_cmd.add_argument("--arms", type=lambda text: text.split(","), help="only these arms (hardened,naive)")
    run_cmd.add_argument("--seed", type=_seed, help="replace every experiment's seed (workload, fault jitter and "
                         "lifecycle-trigger draws), or `random`; "
                         "the seed used is in each experiment's spec.json")
    run_cmd.add_argument("--only", metavar="EXP[/ARM],...", help="only these experiments (or arms) of the suite, "
                         "each with the suite's scale, overrides and arms")
    run_cmd.add_argument("--changed-since", metavar="REF", help="only the experiments that a change since the git "
                         "revision REF (committed or not) can affect; says what it skips and why")
    run_cmd.add_argument("--lanes", type=_lanes, help="run the experiments side by side on this many stacks "
                         "(default: the suite's own `lanes`, else 1; docs/lab-notes.md says what running side by "
                         "side does to the figures)")
    run_cmd.add_argument("--out", type=Path, help="run store directory (default reports/runs)")
    run_cmd.add_argument("--target", type=Path, metavar="FILE", help="run against the environment this target file "
                         "describes instead of a stack of the suite's own (docs/targets.md); an arm whose faults "
                         "cannot act there is SKIPPED (exit 6 when nothing failed)")

    check_cmd = commands.add_parser("check", help="re-judge a stored run offline from its files")
    check_cmd.add_argument("run_dir", type=Path)

    list_cmd = commands.add_parser("list", help="the experiments and suites (a broken file: listed with its error)")
    list_cmd.add_argument("--json", action="store_true", help="one JSON array: name, path, arms, seconds, error, ...")

    validate_cmd = commands.add_parser("validate", help="check experiment and suite files without starting anything "
                                       "(exit 0: all valid; 2: one line per bad file)")
    validate_cmd.add_argument("files", nargs="*", help="YAML files, experiment or suite names, or a run's spec.json "
                              "(default: every file under experiments/)")

    commands.add_parser("schema", help="print the JSON Schema of an experiment spec (docs/spec.schema.json)")

    rerun_cmd = commands.add_parser("rerun", help="run again exactly what a stored run ran: its specs (scale, seed) "
                                    "and arms")
    rerun_cmd.add_argument("run_dir", type=Path, help="a run directory (reports/runs/<run>)")
    rerun_cmd.add_argument("target", nargs="?", help="only this EXPERIMENT or EXPERIMENT/ARM of it")
    rerun_cmd.add_argument("--backend", choices=BACKENDS, help="default: the stored run's")
    rerun_cmd.add_argument("--lanes", type=_lanes, default=1, help="experiments side by side (see chaos run)")
    rerun_cmd.add_argument("--out", type=Path, help="run store directory (default reports/runs)")
    lane_cmd = commands.add_parser("lane", help="internal: one lane of `chaos run --lanes` (chaos/lanes/launch.py)")
    lane_cmd.add_argument("run_dir", type=Path)
    lane_cmd.add_argument("--lane", required=True)
    lane_cmd.add_argument("--backend", choices=BACKENDS, default="local")
    lane_cmd.add_argument("--arms", type=lambda text: text.split(","))
    lane_cmd.add_argument("--queue", action="store_true", help="take one-node experiments from the run's shared queue")
    lane_cmd.add_argument("directories", nargs="*")
    commands.add_parser("clean", help="stop what runs killed with SIGKILL left running, and close their results")

    mutate_cmd = commands.add_parser(
        "mutate", help="each hardening switch an experiment claims turned off in turn: the hardened arm must then fail "
                       "an outcome check (default: the smoke suite's experiments)")
    mutate_cmd.add_argument("experiments", nargs="*", help="experiment names or YAML paths (default: --suite)")
    mutate_cmd.add_argument("--suite", help="smoke (default), nightly, pre-release or a suite file")
    mutate_cmd.add_argument("--switch", dest="switches", action="append",
                            help="only this switch (repeatable; default: every claimed one)")
    mutate_cmd.add_argument("--scale", type=_scale, help="replace the suite's scale")
    mutate_cmd.add_argument("--seed", type=_seed, help="replace every experiment's seed, or `random`")
    mutate_cmd.add_argument("--backend", choices=BACKENDS, default="local")
    mutate_cmd.add_argument("--out", type=Path, help="run store directory (default reports/runs)")
    reproduce_cmd = commands.add_parser("reproduce", help="run the control arm of the experiments that reproduce an "
                                        "incident; show the observed error next to the incident's")
    reproduce_cmd.add_argument("incident", help="incident number (e.g. 001) or part of its file name")
    reproduce_cmd.add_argument("--scale", type=_scale, help="multiply every phase and fault time by this")
    reproduce_cmd.add_argument("--seed", type=_seed, help="replace the experiments' seeds, or `random`")
    reproduce_cmd.add_argument("--arms", type=_arms, default=["naive"],
                               help="naive (default: reproduce the incident), hardened (verify the fix), or both")
    reproduce_cmd.add_argument("--backend", choices=BACKENDS, default="local")
    reproduce_cmd.add_argument("--out", type=Path, help="run store directory (default reports/runs)")

    report_cmd = commands.add_parser("report", help="write index.html and junit.xml of a run, or a trend page")
    report_cmd.add_argument("report_args", nargs=argparse.REMAINDER)

    bench_cmd = commands.add_parser("bench", help="benchmarks that print figures")
    bench_commands = bench_cmd.add_subparsers(dest="bench_command", required=True)
    job_bench = bench_commands.add_parser("job", help="sustained throughput of the job's profiles and state choices")
    job_bench.add_argument("--seconds", type=_bench_seconds, default=60.0, help="run time per variant")
    job_bench.add_argument("--variants", type=lambda text: text.split(","),
                           help="comma list (default all: "
                                "baseline,hardened,hardened_tws_rows,hardened_tws_pandas,naive)")
    job_bench.add_argument("--json", action="store_true")
    job_bench.add_argument("--out", type=Path)
    startup_bench = bench_commands.add_parser(
        "startup",
        help="the job's start-up (query start, first batch) with the suite's JVM options vs without archives")
    startup_bench.add_argument("--rounds", type=_rounds, default=3, help="starts per variant, alternating")
    startup_bench.add_argument("--variants", type=_startup_variants, default=["archives", "c1"],
                               help="comma-separated, of: archives (the suite's: C1 and class-data archives), c1 (C1, "
                                    "no archives), tiered (the JDK's JIT, no archives), serial-gc (the suite's with "
                                    "the serial collector), in-driver (the suite's, the tasks in the driver: no "
                                    "executor JVM); default archives,c1")
    startup_bench.add_argument("--batches", type=_batches, default=3,
                               help="measure each start until its Nth batch (default 3: the start; more: a running "
                                    "job's batches too)")
    startup_bench.add_argument("--json", action="store_true")
    startup_bench.add_argument("--out", type=Path)
    crashes_bench = bench_commands.add_parser(
        "crashes", help="what stored runs' lifecycle-triggered faults hit (kills before the first commit, in a "
                        "batch) and how each arm came out (docs/lab-notes.md)")
    crashes_bench.add_argument("run_dirs", type=Path, nargs="+")
    crashes_bench.add_argument("--json", action="store_true")
    recoveries_bench = bench_commands.add_parser(
        "recoveries", help="every disruption of a stored run on its own: to the first new batch, to recovery")
    recoveries_bench.add_argument("run_dir", type=Path)
    recoveries_bench.add_argument("--json", action="store_true")
    size_bench = bench_commands.add_parser(
        "recovery-size", help="recovery against the state held, per disruption and arm, with the S3-read floor "
                              "beside each: a Markdown table and an SVG plot (docs/experiments.md)")
    size_bench.add_argument("run_dirs", type=Path, nargs="+")
    size_bench.add_argument("--markdown", type=Path, help="also write the table to this file")
    size_bench.add_argument("--svg", type=Path, help="also write the plot to this file")
    size_bench.add_argument("--json", action="store_true")
    suite_bench = bench_commands.add_parser("suite", help="where a stored suite run's wall time went (from its files)")
    suite_bench.add_argument("run_dir", type=Path)
    suite_bench.add_argument("--json", action="store_true")
    cpu_bench = bench_commands.add_parser(
        "cpu", help="run a command and say where its CPU went, by kind of process (e.g. -- chaos run --suite smoke "
                    "--lanes 2); exits with the command's exit code")
    cpu_bench.add_argument("--json", action="store_true")
    cpu_bench.add_argument("cpu_command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...")
    return parser


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "doctor":
        return doctor_target(args.target) if args.target else doctor(args.backend)
    if args.command == "setup":
        return setup()
    if args.command == "stack" and args.stack_command == "smoke":
        return stack_smoke(args.backend, args.json, args.out)
    if args.command == "stack" and args.stack_command == "up":
        return stack_up(args.backend, args.write_target, args.out, args.topology, s3_tls=args.s3_tls,
                        kafka_sasl=args.kafka_sasl)
    if args.command == "run":
        bad = [a for a in args.arms or [] if a not in ("hardened", "naive")]
        if bad:
            raise errors.ChaosError(f"unknown arm {bad[0]!r}; allowed: hardened, naive", errors.USAGE)
        target = None
        if args.target is not None:
            from .target import load_target

            target = load_target(args.target)  # a bad file: exit 2 before anything starts
            if args.lanes is not None and args.lanes > 1:
                raise errors.ChaosError("--lanes with --target: a target is one environment, and its arms run one "
                                        "after another; drop --lanes", errors.USAGE)
        return run(args.experiments, args.suite, args.scale, args.backend, args.arms, args.out, sys.argv[1:],
                   seed=args.seed, only=args.only, changed_since=args.changed_since, lanes=args.lanes, target=target)
    if args.command == "check":
        return check(args.run_dir)
    if args.command == "list":
        return list_experiments(args.json)
    if args.command == "validate":
        return validate(args.files)
    if args.command == "schema":
        from .schema import spec_schema

        print(json.dumps(spec_schema(), indent=2))
        return errors.PASSED
    if args.command == "rerun":
        return rerun(args.run_dir, args.target, args.backend, args.out, sys.argv[1:], lanes=args.lanes)
    if args.command == "lane":
        return lane(args.run_dir, args.lane, args.backend, args.arms, args.directories, args.queue)
    if args.command == "clean":
        return clean()
    if args.command == "mutate":
        return mutate(args.experiments, args.suite, args.scale, args.switches, args.backend, args.out, sys.argv[1:],
                      seed=args.seed)
    if args.command == "reproduce":
        return reproduce(args.incident, args.scale, args.backend, args.out, sys.argv[1:], seed=args.seed,
                         arms=args.arms)
    if args.command == "report":
        from .report import main_report

        return main_report(args.report_args)
    if args.command == "bench" and args.bench_command == "suite":
        return bench_suite(args.run_dir, args.json)
    if args.command == "bench" and args.bench_command == "startup":
        return bench_startup(args.rounds, args.variants, args.batches, args.json, args.out)
    if args.command == "bench" and args.bench_command == "recovery-size":
        return bench_recovery_size(args.run_dirs, args.markdown, args.svg, args.json)
    if args.command == "bench" and args.bench_command == "recoveries":
        return bench_recoveries(args.run_dir, args.json)
    if args.command == "bench" and args.bench_command == "crashes":
        return bench_crashes(args.run_dirs, args.json)
    if args.command == "bench" and args.bench_command == "cpu":
        return bench_cpu(args.cpu_command, args.json)
    if args.command == "bench":
        from .bench.job import VARIANTS

        unknown = [v for v in args.variants or [] if v not in VARIANTS]
        if unknown:
            raise errors.ChaosError(f"unknown bench variant {unknown[0]!r}; allowed: {', '.join(VARIANTS)}",
                                    errors.USAGE)
        return bench(args.bench_command, args.seconds, args.json, args.out, args.variants)
    raise AssertionError(args)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    raw = list(sys.argv[1:] if argv is None else argv)
    if raw[:1] == ["report"]:
        # `report` has options of its own (--trend, --out, --margin): argparse's REMAINDER does not take an option
        # first ("unrecognized arguments: --trend"), so its own parser gets everything after the word.
        from .report import main_report

        return main_report(raw[1:])
    args = parser.parse_args(argv)  # exits 2 with argparse's one-line message on bad usage

    def _terminate(signum, frame):
        raise KeyboardInterrupt  # SIGTERM takes the same path as Ctrl-C: finally blocks tear down

    signal.signal(signal.SIGTERM, _terminate)
    # Ctrl-C (SIGINT) interrupts every command, also one a script started in the background (`cmd &`), which a
    # non-interactive shell starts with SIGINT ignored: otherwise `kill -INT` on such a run would do nothing, and it
    # would run to its end (measured: a CI script started that way, and the interrupt tests' runs completed).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return _dispatch(args)
    except KeyboardInterrupt:
        print("chaos: interrupted; everything the run started has been stopped", file=sys.stderr)
        return errors.INTERRUPTED
    except InfraError as error:
        if args.debug:
            traceback.print_exc()
        print(f"chaos: environment error: {error}", file=sys.stderr)
        return errors.ENVIRONMENT
    except errors.ChaosError as error:
        if args.debug:
            traceback.print_exc()
        print(f"chaos: {error}", file=sys.stderr)
        return error.exit_code
    except OSError as error:  # the run directory's disk is full, unwritable, ...: the environment, not the job
        if args.debug:
            traceback.print_exc()
        where = f" ({error.filename})" if error.filename else ""
        print(f"chaos: environment error: {error.strerror or error}{where}; free space or fix permissions, or give "
              f"--out another directory", file=sys.stderr)
        return errors.ENVIRONMENT


if __name__ == "__main__":
    sys.exit(main())
