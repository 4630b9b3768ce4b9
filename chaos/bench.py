"""`chaos bench job`: sustained throughput of each way of keeping sessions, measured in one run on one stack.

Method: one topic is filled with a backlog of uniform events (1,000 keys); each variant then runs as the
real job (its own driver process and checkpoint) from the start of the topic for a fixed time, with the
same batch cap and an as-fast-as-possible trigger. Throughput is input rows over batch time for every
batch after the first (which includes start-up): the rate the variant sustains with bounded lag. Variants
run one after another, never two Spark jobs at once. State rows and bytes per key are read from the last
batch's state-operator metrics.
"""
from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Callable

from infra.driver import launch_driver
from infra.stack import Stack

from .outputs import read_progress
from .smoke import create_topic
from .workload import Ledger, Pacer, WorkloadSpec, plan, produce

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
    sst_bytes = sum(op.get("customMetrics", {}).get("rocksdbSstFileSize", 0) for op in operators)
    memory_bytes = sum(op.get("memoryUsedBytes", 0) for op in operators)
    durations = sorted(b["durationMs"].get("triggerExecution", 0) for b in measured)
    return {
        "eps": round(rows / (busy_ms / 1000), 1) if busy_ms else 0.0,
        "rows_measured": rows,
        "batches_measured": len(measured),
        "batch_p50_ms": durations[len(durations) // 2] if durations else None,
        "state_rows_per_key": round(state_rows / KEYS, 3),
        "state_sst_bytes_per_key": round(sst_bytes / KEYS, 1),
        "state_memory_bytes_per_key": round(memory_bytes / KEYS, 1),
    }


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
            job.signal_leader(15)
            code = job.wait(120)
            if code is None:
                job.stop()
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
