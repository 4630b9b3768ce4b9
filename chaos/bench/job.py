"""`chaos bench job`: sustained throughput of each way of keeping sessions, measured in one run on one stack.

Method: one topic is filled with a backlog of uniform events (1,000 keys); each variant then runs as the
real job (its own driver process and checkpoint) from the start of the topic for a fixed time, with the
same batch cap and an as-fast-as-possible trigger. Throughput is input rows over batch time for every
batch after the first (which includes start-up): the rate the variant sustains with bounded lag. Variants
run one after another, never two Spark jobs at once. State rows and bytes per key are read from the last
batch's state-operator metrics.
"""
from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from infra.driver import launch_driver
from infra.errors import InfraError
from infra.stack import Stack

from ..outputs import read_progress
from ..smoke import create_topic
from ..state_held import sst_bytes
from ..workload import Ledger, Pacer, WorkloadSpec, plan, produce

# name -> (job profile, state implementation)
VARIANTS = {
    "baseline": ("baseline", "session-window"),
    "hardened": ("hardened", "session-window"),
    "hardened_tws_rows": ("hardened", "tws-rows"),
    "hardened_tws_pandas": ("hardened", "tws-pandas"),
    "naive": ("naive", "session-window"),
}
KEYS = 1000
BATCH_CAP = 20_000
MIN_BATCHES = 5


def _measure(batches: list[dict]) -> dict:
    measured = [b for b in batches if b["numInputRows"] > 0][1:]
    rows = sum(b["numInputRows"] for b in measured)
    busy_ms = sum(b["durationMs"].get("triggerExecution", 0) for b in measured)
    last = batches[-1] if batches else {}
    operators = last.get("stateOperators", [])
    state_rows = sum(op.get("numRowsTotal", 0) for op in operators)
    # SST bytes are what a snapshot holds on S3 (0 until changelog checkpointing writes its first snapshot);
    # memory is RocksDB's own estimate of the loaded state (memtables, block cache, index).
    sst = sst_bytes(last)
    memory_bytes = sum(op.get("memoryUsedBytes", 0) for op in operators)
    durations = sorted(b["durationMs"].get("triggerExecution", 0) for b in measured)
    return {
        "eps": round(rows / (busy_ms / 1000), 1) if busy_ms else 0.0,
        "rows_measured": rows,
        "batches_measured": len(measured),
        "batch_p50_ms": durations[len(durations) // 2] if durations else None,
        "state_rows_per_key": round(state_rows / KEYS, 3),
        "state_sst_bytes_per_key": round(sst / KEYS, 1),
        "state_memory_bytes_per_key": round(memory_bytes / KEYS, 1),
    }


def _stop_job(job, grace_s: float) -> int | None:
    """SIGTERM (the job stops its query and exits), then kill after `grace_s`; the exit code or None."""
    job.signal_leader(15)
    code = job.wait(grace_s)
    if code is None:
        job.stop()
    return code


def bench_job(run_dir: Path, seconds: float = 60, backlog: int = 1_500_000, variants: list[str] | None = None,
              progress: Callable[[str], None] = print) -> dict:
    chosen = variants or list(VARIANTS)
    results: dict = {"seconds_per_variant": seconds, "backlog_events": backlog, "keys": KEYS,
                     "batch_cap": BATCH_CAP, "variants": {}}
    with Stack(run_dir, progress=progress) as stack:
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        create_topic(stack.info.kafka_internal_bootstrap, topic, 4)
        # Event times spaced as if 50,000 events/s arrived: each key sees 50 events/s, so sessions stay open
        # and close by the max-session bucket, as a busy production stream does.
        spec = WorkloadSpec(shape="uniform", keys=KEYS, rate=50_000, duration_ms=backlog * 1000 // 50_000, seed=1)
        t0 = time.monotonic()
        with Ledger(run_dir / "backlog-ledger.jsonl") as ledger:
            produced = produce(plan(spec, start_ms=int(time.time() * 1000)), stack.info.kafka_internal_bootstrap,
                               topic, ledger, Pacer(1e9), config={"linger.ms": 50, "log_level": 3})
        progress(f"backlog: {produced.acked} events in {time.monotonic() - t0:.0f} s")
        for name in chosen:
            profile, state_impl = VARIANTS[name]
            progress_file = run_dir / f"progress-{name}.jsonl"
            args = ["--profile", profile, "--topic", topic, "--deployment", f"bench-{name}-{uuid.uuid4().hex[:6]}",
                    "--progress-file", str(progress_file), "--trigger", "0ms",
                    "--max-offsets-per-trigger", str(BATCH_CAP), "--gap", "10s", "--state-impl", state_impl]
            if profile != "naive":
                args += ["--watermark", "5s"]
            started = time.monotonic()
            job = launch_driver(stack, f"bench-{name}", "job", args)
            # Run at least `seconds`, and on until MIN_BATCHES batches after the first are measured, so a
            # slow variant is measured over real batches rather than reported as zero; give up at the limit.
            limit = started + max(4 * seconds, seconds + 240)
            while job.alive() and time.monotonic() < limit:
                done = [r for r in read_progress(progress_file) if r.get("event") == "progress"]
                if time.monotonic() - started >= seconds and len(done) > MIN_BATCHES:
                    break
                time.sleep(1)
            code = _stop_job(job, grace_s=120)
            batches = [r["progress"] for r in read_progress(progress_file) if r.get("event") == "progress"]
            measured = _measure(batches)
            measured.update({"exit": code, "wall_s": round(time.monotonic() - started, 1)})
            results["variants"][name] = measured
            progress(f"{name}: {measured['eps']:.0f} events/s over {measured['batches_measured']} batches "
                     f"(exit {code})")
    variants_measured = results["variants"]
    for name in ("hardened", "naive", "baseline"):
        if name in variants_measured:
            results[f"{name}_eps"] = variants_measured[name]["eps"]
    if variants_measured.get("baseline", {}).get("eps"):
        results["ratio_hardened_to_baseline"] = round(
            variants_measured.get("hardened", {}).get("eps", 0) / variants_measured["baseline"]["eps"], 3)
    return results


# -- start-up -----------------------------------------------------------------------------------------------------
STARTUP_FEED_RATE = 50  # events/s, as the smoke experiments' workloads
STARTUP_BATCHES = 3


STARTUP_VARIANTS = ("archives", "c1", "tiered", "serial-gc", "in-driver")
SERIAL_GC = "-XX:+UseSerialGC"
IN_DRIVER_MASTER = "local[2]"  # the tasks in the driver's JVM, on the two cores a standalone executor gets


def startup_variants(info) -> dict[str, dict[str, str]]:
    """JVM options of the driver and executors per variant: the suite's (C1 only, with the class-data archives of
    infra/cds.py where the stack has them), C1 without archives, the JDK's tiered default without archives, the
    suite's with the serial collector instead of the JDK's default (G1 on this machine), and the suite's with no
    executor JVM (`in-driver`: Spark's local master runs the tasks in the driver; what a start would cost without
    the executor's launch, not a deployment the suite tests)."""
    from infra.driver import DRIVER_JAVA_OPTIONS, EXECUTOR_JAVA_OPTIONS, QUICK_START_JIT, java_options

    suite = java_options(info, "hardened")
    return {
        "archives": suite,
        "serial-gc": {side: f"{options} {SERIAL_GC}" for side, options in suite.items()},
        "in-driver": {**suite, "spark.master": IN_DRIVER_MASTER},
        "c1": {"spark.driver.extraJavaOptions": DRIVER_JAVA_OPTIONS,
               "spark.executor.extraJavaOptions": EXECUTOR_JAVA_OPTIONS},
        "tiered": {"spark.driver.extraJavaOptions": DRIVER_JAVA_OPTIONS.replace(QUICK_START_JIT, "").strip(),
                   "spark.executor.extraJavaOptions": EXECUTOR_JAVA_OPTIONS.replace(QUICK_START_JIT, "").strip()},
    }


def startup_order(names: list[str], rounds: int) -> list[str]:
    """One uncounted warm-up start (the first job on a fresh stack is slower for every variant), then the variants
    in ABBA order: forwards in even rounds, backwards in odd ones, so none always goes first."""
    order = ["warm-up"]
    for round_index in range(rounds):
        order += names if round_index % 2 == 0 else names[::-1]
    return order


def _jvm_cpu(before: set[int]) -> dict[str, float]:
    """CPU seconds the job's driver and executor JVMs have used so far: those alive now that were not before its
    launch (an earlier start's executor may still be ending)."""
    from .cpu_profile import cpu_by_process

    cpu = {"driver": 0.0, "executor": 0.0}
    for pid, (kind, seconds) in cpu_by_process().items():
        if pid not in before:
            cpu[kind.removeprefix("spark ")] += seconds
    return cpu


def _startup_marks(job, progress_file: Path, started: float, limit_s: float, jvms_before: set[int],
                   batches_wanted: int = STARTUP_BATCHES) -> dict:
    """Seconds from launch to the query's start, the first batch's end and the `batches_wanted`-th batch's end, and
    the CPU seconds the job's JVMs used until then (the start's work: on two cores the suite is CPU-bound)."""
    marks: dict = {}
    while job.alive() and time.monotonic() - started < limit_s:
        records = read_progress(progress_file)
        if "query_started_s" not in marks and any(r.get("event") == "started" for r in records):
            marks["query_started_s"] = round(time.monotonic() - started, 1)
        batches = [r["progress"] for r in records if r.get("event") == "progress"]
        if batches and "first_batch_s" not in marks:
            marks["first_batch_s"] = round(time.monotonic() - started, 1)
            marks["first_batch_ms"] = batches[0]["durationMs"].get("triggerExecution")
        if len(batches) >= batches_wanted:
            marks[f"batch_{batches_wanted}_s"] = round(time.monotonic() - started, 1)
            marks["later_batch_ms"] = batches[batches_wanted - 1]["durationMs"].get("triggerExecution")
            cpu = _jvm_cpu(jvms_before)
            marks.update({"cpu_driver_s": round(cpu["driver"], 1), "cpu_executor_s": round(cpu["executor"], 1),
                          "cpu_s": round(cpu["driver"] + cpu["executor"], 1)})
            break
        time.sleep(0.2)
    return marks


def bench_startup(run_dir: Path, rounds: int = 3, variants: tuple[str, ...] = ("archives", "c1"),
                  progress: Callable[[str], None] = print, batches: int = STARTUP_BATCHES) -> dict:
    """The hardened job started again and again on one stack, the JVM variants in ABBA order (startup_order), each
    start measured until its `batches`-th batch (more than a few: what a running job's batches cost too).
    Every start gets a topic of its own, fed at STARTUP_FEED_RATE from its launch on: each meets the same stream."""
    import statistics
    import threading

    from job.settings import hardened

    from .cpu_profile import cpu_by_process

    names = list(variants)
    order = startup_order(names, rounds)
    results: dict = {"rounds": rounds, "feed_rate": STARTUP_FEED_RATE, "batches": batches, "order": order,
                     "variants": {}}
    profile_options = hardened("t", "d", "p").spark_options
    spec = WorkloadSpec(shape="uniform", keys=50, rate=STARTUP_FEED_RATE, duration_ms=3600 * 1000, seed=1)
    with Stack(run_dir, progress=progress) as stack:
        if "archives" in names and stack.info.class_archives.get("mode") != "use":
            # without recorded archives the variant is c1 under another name: a ratio near 1 would mislead
            raise InfraError("chaos bench startup: the `archives` variant needs the class-data archives recorded; "
                             "run: make setup (or leave it out: --variants c1,tiered)")
        options = startup_variants(stack.info)
        results["variants"] = {name: {"conf": options[name], "starts": []} for name in names}
        bootstrap = stack.info.kafka_internal_bootstrap
        for index, name in enumerate(order):
            conf = options[names[0] if name == "warm-up" else name]
            topic = f"bench-startup-{index}-{uuid.uuid4().hex[:8]}"
            create_topic(bootstrap, topic, 4)
            stop = threading.Event()

            def feed(topic=topic, stop=stop, index=index) -> None:
                with Ledger(run_dir / f"feed-{index:02d}-ledger.jsonl") as ledger:
                    produce(plan(spec, start_ms=int(time.time() * 1000)), bootstrap, topic, ledger,
                            Pacer(STARTUP_FEED_RATE), stop_event=stop, config={"log_level": 3})

            feeder = threading.Thread(target=feed, name=f"startup-feed-{index}", daemon=True)
            progress_file = run_dir / f"progress-{index:02d}-{name}.jsonl"
            settings = {"spark_options": {**profile_options, **conf}}
            args = ["--profile", "hardened", "--topic", topic, "--deployment",
                    f"bench-startup-{index}-{uuid.uuid4().hex[:6]}", "--progress-file", str(progress_file),
                    "--settings-json", json.dumps(settings)]
            jvms_before = set(cpu_by_process())
            feeder.start()
            started = time.monotonic()
            try:
                job = launch_driver(stack, f"startup-{index:02d}-{name}", "job", args)
                try:
                    marks = _startup_marks(job, progress_file, started, limit_s=240 + 2 * batches,
                                           jvms_before=jvms_before, batches_wanted=batches)
                finally:
                    _stop_job(job, grace_s=60)
            finally:
                stop.set()
                feeder.join(30)
            progress(f"{name}: {json.dumps(marks)}")
            if name in results["variants"]:
                results["variants"][name]["starts"].append(marks)
    for measured in results["variants"].values():
        for key in ("query_started_s", "first_batch_s", f"batch_{batches}_s", "later_batch_ms", "cpu_s",
                    "cpu_driver_s", "cpu_executor_s"):
            values = [s[key] for s in measured["starts"] if s.get(key) is not None]
            measured[f"median_{key}"] = round(statistics.median(values), 2) if values else None
    reference = results["variants"].get("c1", {}).get("median_first_batch_s")
    for name, measured in results["variants"].items():
        if name != "c1" and reference and measured.get("median_first_batch_s"):
            results[f"ratio_first_batch_{name}_to_c1"] = round(measured["median_first_batch_s"] / reference, 3)
    # CPU against the suite's own options where they ran
    base = "archives" if "archives" in results["variants"] else names[0]
    base_cpu = results["variants"][base].get("median_cpu_s")
    for name, measured in results["variants"].items():
        if name != base and base_cpu and measured.get("median_cpu_s"):
            results[f"ratio_cpu_{name}_to_{base}"] = round(measured["median_cpu_s"] / base_cpu, 3)
    return results
