"""`python -m chaos.bench.state --mib 256`: how long this machine takes to build a hardened state of a given size with
the workload's state-size knobs, and to restore it after the driver is killed (issue 37's probe for a `scale` suite).

Method: one stack; the hardened job (JobArm, as an arm runs it) keeps 1 KiB of attributes per open session
(attribute_bytes, docs/job.md "State size"); a uniform workload over 10 million keys with 1 KiB payloads and a session
gap of an hour, so nearly every event opens a session that stays open: the state grows by about one row of ~1.1 KB per
event read. The producer runs at --rate until the state store's own metrics (RocksDB SST bytes) reach --mib, then the
driver is killed with SIGKILL while the producer goes on, and restarted. Printed and written as JSON: events/s into
Kafka, the job's throughput, rows, SST and memory bytes, the checkpoint's bytes in MinIO, the time to build, and the
time from the kill to the restarted driver's first completed batch with the rows it held. Then, the job stopped, the
floor of that restore: the checkpoint's SST objects, largest first, as many bytes as the restored state's SST, read
through the `s3` proxy the job reads through and timed (S3 read throughput in the same stack); the floor is the
restored SST bytes over that throughput.
"""
from __future__ import annotations

import argparse
import json
import signal
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from infra.stack import Stack

from ..arm.job import ArmConfig, JobArm
from ..outputs import read_progress
from ..restore_floor import read_throughput
from ..state_held import size, sst_bytes
from ..workload import WorkloadSpec

KEYS = 10_000_000
ATTRIBUTE_BYTES = 1024


def _state(progress: dict) -> tuple[int, int, int]:
    operators = progress.get("stateOperators", [])
    return (sum(op.get("numRowsTotal", 0) for op in operators),
            sst_bytes(progress),
            sum(op.get("memoryUsedBytes", 0) for op in operators))


def _done_s(progress: dict) -> float:
    """When a batch completed (epoch seconds): its start plus its duration."""
    started = datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()
    return started + progress.get("durationMs", {}).get("triggerExecution", 0) / 1000


def _checkpoint_bytes(stack, prefix: str) -> int:
    s3 = stack.s3_client(direct=True)
    return sum(o.size or 0 for o in s3.list_objects(stack.info.bucket, prefix=prefix + "/", recursive=True))


def bench_state(run_dir: Path, mib: int, rate: float, budget_s: float,
                progress: Callable[[str], None] = print) -> dict:
    target = mib * 2**20
    workload = WorkloadSpec("uniform", KEYS, rate, round(budget_s * 2 * 1000), 11, payload_bytes=ATTRIBUTE_BYTES)
    settings = {"attribute_bytes": ATTRIBUTE_BYTES, "gap_ms": 3_600_000, "max_session_ms": 7_200_000,
                "watermark_ms": 1_000}
    result: dict = {"target_bytes": target, "rate": rate, "keys": KEYS, "attribute_bytes": ATTRIBUTE_BYTES}
    with Stack(run_dir, progress=progress) as stack:
        arm = JobArm(stack, run_dir / "arm", ArmConfig(profile="hardened", workload=workload, settings=settings))
        arm.create_topic()
        arm.start_job()
        stop = threading.Event()
        acked = {"n": 0}
        producer = threading.Thread(target=arm.produce, name="producer", daemon=True, kwargs={
            "stop_event": stop, "on_progress": lambda r: acked.__setitem__("n", r.acked)})
        started = time.monotonic()
        producer.start()
        built: dict | None = None
        while time.monotonic() - started < budget_s and arm.job is not None and arm.job.alive():
            batches = [r["progress"] for r in read_progress(arm.progress_path) if r.get("event") == "progress"]
            if batches and _state(batches[-1])[1] >= target:
                built = batches[-1]
                break
            time.sleep(1.0)
        build_s = time.monotonic() - started
        batches = [r["progress"] for r in read_progress(arm.progress_path) if r.get("event") == "progress"]
        last = built or (batches[-1] if batches else {})
        rows, sst, memory = _state(last)
        read = sum(b.get("numInputRows", 0) for b in batches)
        busy_s = sum(b.get("durationMs", {}).get("triggerExecution", 0) for b in batches[1:]) / 1000
        result.update(built=built is not None, build_s=round(build_s, 1), events_acked=acked["n"],
                      kafka_events_per_s=round(acked["n"] / build_s, 1), rows_read=read,
                      job_rows_per_s=round(read / build_s, 1),
                      job_rows_per_busy_s=round(sum(b.get("numInputRows", 0) for b in batches[1:]) / busy_s, 1)
                      if busy_s else None, batches=len(batches), rows=rows, sst_bytes=sst, memory_bytes=memory,
                      checkpoint_bytes=_checkpoint_bytes(stack, arm.checkpoint_prefix))
        progress(f"built {'' if built else 'NOT '}in {build_s:.0f} s: {rows} rows, {size(sst)} SST, {size(memory)} "
                 f"memory, checkpoint {size(result['checkpoint_bytes'])}; {result['kafka_events_per_s']} events/s "
                 f"into Kafka, the job read {result['job_rows_per_s']} rows/s")
        if built is not None:
            seen = len(read_progress(arm.progress_path))
            killed = time.time()
            crashed = arm.job
            assert crashed is not None  # built: the job ran
            crashed.signal(signal.SIGKILL)
            while crashed.alive():
                time.sleep(0.05)
            job = arm.start_job()
            restored = None
            while time.time() - killed < budget_s and job.alive():
                later = [r["progress"] for r in read_progress(arm.progress_path)[seen:] if r.get("event") == "progress"]
                if later:
                    restored = later[0]
                    break
                time.sleep(0.5)
            if restored is not None:
                back_rows, back_sst, back_memory = _state(restored)
                result.update(restore_s=round(_done_s(restored) - killed, 1),
                              restore_batch_ms=restored.get("durationMs", {}).get("triggerExecution"),
                              restored_rows=back_rows, restored_sst_bytes=back_sst, restored_memory_bytes=back_memory)
                progress(f"restored {result['restore_s']} s after the kill (its first batch "
                         f"{result['restore_batch_ms']} ms): {back_rows} rows, {size(back_sst)} SST")
            else:
                result["restore_s"] = None
                progress("NOT restored within the budget")
        stop.set()
        producer.join(60)
        arm.stop_job(timeout=30)
        if result.get("restore_s") is not None:
            read, seconds = read_throughput(stack, arm.checkpoint_prefix, result["restored_sst_bytes"])
            throughput = read / seconds if seconds > 0 else None
            result.update(s3_read_bytes=read, s3_read_s=round(seconds, 2),
                          s3_read_bytes_per_s=round(throughput) if throughput else None,
                          floor_s=round(result["restored_sst_bytes"] / throughput, 1) if throughput else None)
            progress(f"S3 read through the proxy: {size(read)} in {seconds:.1f} s; the restore's floor "
                     f"{result['floor_s']} s (restored {result['restore_s']} s)")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos.bench.state", description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256, help="the state to build, MiB of RocksDB SST (default 256)")
    parser.add_argument("--rate", type=float, default=10_000, help="events/s offered to Kafka (default 10000)")
    parser.add_argument("--budget", type=float, default=360, help="seconds allowed to build, and to restore")
    parser.add_argument("--out", type=Path, default=Path("/tmp/chaos-bench-state"))
    args = parser.parse_args(argv)
    run_dir = args.out / time.strftime("%Y%m%dT%H%M%S")
    result = bench_state(run_dir, args.mib, args.rate, args.budget)
    (run_dir / "state.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
