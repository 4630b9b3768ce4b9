"""`python -m chaos.bench.oracle --events N`: what judging exactly-once costs, in time and peak memory.

Writes a synthetic arm (a ledger of N acknowledged events from the workload plan, and the job's output: the sessions
those events make, a share lost and a share emitted twice with --damage), then judges it in a fresh process per
path, one after the other, and prints each one's seconds (wall, and CPU: the figure to read on a busy machine) and
peak resident memory (its own getrusage ru_maxrss):

    memory    what JobArm.judge did before chaos/judging.py: the whole ledger (read with the JSON parser, as
              Ledger.read did) and output in memory, chaos/oracle.py's expected_sessions and compare,
              emission_waits
    bounded   chaos/judging.py's judge_outputs, as JobArm.judge runs it now

Shapes: hot_key (half the events on one key that never pauses: sessions cut at max_session), uniform, rotating
(every key sends two events and retires: a session per two events). A figure, never a verdict: docs/job.md.
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import resource
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

from ..oracle import session_id
from ..workload import WorkloadSpec, plan

PATHS = ("memory", "bounded")
RATE = 2_000  # events per second of event time: 1M events span 500 s, so keys' sessions are cut at max_session
ROTATION_GAP_MS = 2_000  # rotating: an actor's two events this far apart, inside one session


def _spec(shape: str, events: int, keys: int, rate: int, seed: int) -> WorkloadSpec:
    duration_ms = math.ceil(events * 1000 / rate) + 2 * ROTATION_GAP_MS
    if shape == "rotating":
        return WorkloadSpec("rotating", 1, rate, duration_ms, seed, rotation_live_actors=rate * ROTATION_GAP_MS // 2000,
                            rotation_gap_ms=ROTATION_GAP_MS, payload_bytes=0)
    return WorkloadSpec(shape, keys, rate, duration_ms, seed, payload_bytes=0)


def generate(directory: Path, events: int, shape: str, keys: int, gap_ms: int, max_session_ms: int, damage: float,
             rate: int = RATE, seed: int = 1) -> dict:
    """ledger.jsonl, emitted.jsonl (rows as outputs.read_sessions gives them: with batch_id) and meta.json in
    `directory`; memory bounded by the keys open within a gap."""
    rng = random.Random(seed)
    offsets = [0, 0, 0, 0]
    open_runs: dict[str, list[int]] = {}  # key -> [first_t, first_seq, last_t, last_seq, count]
    start = 0
    rows = written = 0
    with open(directory / "ledger.jsonl", "w") as ledger, open(directory / "emitted.jsonl", "w") as sessions:

        def close(key: str, run: list[int]) -> None:
            nonlocal rows, written
            first_t, first_seq, last_t, last_seq, count = run
            if rng.random() < damage:
                return  # lost
            row = json.dumps({"key": key, "start_ms": first_t, "end_ms": last_t + gap_ms, "count": count,
                              "first_seq": first_seq, "last_seq": last_seq, "session_id": session_id(key, first_seq),
                              "batch_id": (last_t + gap_ms - start) // 1000}) + "\n"
            copies = 2 if rng.random() < damage else 1
            sessions.write(row * copies)
            rows += copies

        sweep_at = 0
        for event in itertools.islice(plan(_spec(shape, events, keys, rate, seed), start_ms=start), events):
            key, seq, t = event.key, event.seq, event.event_time_ms
            partition = zlib.crc32(key.encode()) % 4
            ledger.write(json.dumps({"key": key, "seq": seq, "event_time_ms": t, "partition": partition,
                                     "offset": offsets[partition]}, separators=(",", ":")) + "\n")
            offsets[partition] += 1
            written += 1
            run = open_runs.get(key)
            if run is not None and (t - run[2] > gap_ms or t // max_session_ms != run[0] // max_session_ms):
                close(key, run)
                run = None
            if run is None:
                open_runs[key] = [t, seq, t, seq, 1]
            else:
                run[2], run[3], run[4] = t, seq, run[4] + 1
            if t >= sweep_at:  # a run silent for more than a gap is closed for good
                for quiet in [k for k, r in open_runs.items() if t - r[2] > gap_ms]:
                    close(quiet, open_runs.pop(quiet))
                sweep_at = t + 1_000
        for key, run in open_runs.items():
            close(key, run)
    meta = {"events": written, "rows": rows, "shape": shape, "gap_ms": gap_ms, "max_session_ms": max_session_ms,
            "start_ms": start, "ledger_mb": round((directory / "ledger.jsonl").stat().st_size / 2**20, 1)}
    (directory / "meta.json").write_text(json.dumps(meta))
    return meta


def _rows(path: Path):
    with open(path) as f:
        for line in f:
            yield json.loads(line)


def judge(directory: Path, path: str, partition_mib: float | None = None) -> dict:
    """One path over the arm in `directory`, in this process: its seconds, peak RSS and verdict counts;
    `partition_mib` sizes the bounded path's partitions (oracle_bounded.LEDGER_BYTES_PER_PARTITION)."""
    meta = json.loads((directory / "meta.json").read_text())
    ledger, sessions = directory / "ledger.jsonl", directory / "emitted.jsonl"
    from ..oracle import compare, emission_waits, expected_sessions
    from ..workload import Acked, _parse_json_record
    if path == "bounded":
        from .. import oracle_bounded
        from ..judging import judge_outputs

        if partition_mib is not None:
            oracle_bounded.LEDGER_BYTES_PER_PARTITION = int(partition_mib * 2**20)
    gap, max_len = meta["gap_ms"], meta["max_session_ms"]
    last_batch = max((row["batch_id"] for row in _rows(sessions)), default=0)
    done = {b: meta["start_ms"] + (b + 1) * 1000 for b in range(last_batch + 1)}
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started, cpu_started = time.monotonic(), time.process_time()
    if path == "memory":
        acked: list = []
        failed: list = []
        with open(ledger, "rb") as f:  # Ledger.read as it was: every line through the JSON parser
            for line in f:
                record = _parse_json_record(line)
                (acked if isinstance(record, Acked) else failed).append(record)
        emitted = list(_rows(sessions))
        for_oracle = [{k: v for k, v in row.items() if k != "batch_id"} for row in emitted]
        report = compare(expected_sessions(acked, gap, max_len), for_oracle).to_dict()
        report["emission"] = emission_waits(emitted, done)
    else:
        report, _ = judge_outputs(ledger, _rows(sessions), event_time=True, gap_ms=gap, max_len_ms=max_len,
                                  extra_copies={}, audit={}, batch_done_ms=done, workdir=directory)
    seconds, cpu_seconds = time.monotonic() - started, time.process_time() - cpu_started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"path": path, "events": meta["events"], "rows": meta["rows"], "seconds": round(seconds, 1),
            "cpu_seconds": round(cpu_seconds, 1),
            "peak_rss_mb": round(peak / 1024, 1), "rss_before_mb": round(base / 1024, 1),
            "lost": report["lost"], "duplicated": report["duplicated"], "judging": report.get("judging")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos.bench.oracle", description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--shape", choices=("hot_key", "uniform", "rotating"), default="hot_key")
    parser.add_argument("--keys", type=int, default=1_000, help="hot_key, uniform: the key space")
    parser.add_argument("--rate", type=int, default=RATE, help="events per second of event time")
    parser.add_argument("--paths", default=",".join(PATHS), help=f"comma-separated, of {', '.join(PATHS)}")
    parser.add_argument("--damage", type=float, default=0.001, help="share of sessions lost, and emitted twice")
    parser.add_argument("--gap-ms", type=int, default=10_000)
    parser.add_argument("--max-session-ms", type=int, default=60_000)
    parser.add_argument("--dir", type=Path, default=None, help="where the arm is written (default: a temporary "
                                                                "directory under the current one, removed after)")
    parser.add_argument("--partition-mib", type=float, default=None,
                        help="bounded: ledger MiB per partition (default: oracle_bounded's)")
    parser.add_argument("--judge", type=Path, default=None, help=argparse.SUPPRESS)  # the child: one path
    parser.add_argument("--path", choices=PATHS, default="bounded", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.judge is not None:
        print(json.dumps(judge(args.judge, args.path, args.partition_mib)))
        return 0
    paths = [p for p in args.paths.split(",") if p]
    if unknown := sorted(set(paths) - set(PATHS)):
        parser.error(f"--paths: {unknown[0]!r} is not one of {', '.join(PATHS)}")
    with tempfile.TemporaryDirectory(dir=args.dir or Path.cwd(), prefix="bench-oracle-") as tmp:
        directory = Path(tmp)
        started = time.monotonic()
        meta = generate(directory, args.events, args.shape, args.keys, args.gap_ms, args.max_session_ms,
                        args.damage, args.rate)
        print(f"{meta['events']:,} events ({meta['shape']}, ledger {meta['ledger_mb']} MB), {meta['rows']:,} rows; "
              f"written in {time.monotonic() - started:.1f} s", flush=True)
        for path in paths:
            sizing = [] if args.partition_mib is None else ["--partition-mib", str(args.partition_mib)]
            child = subprocess.run([sys.executable, "-m", "chaos.bench.oracle", "--judge", str(directory),
                                    "--path", path, *sizing], capture_output=True, text=True)
            if child.returncode != 0:
                print(f"{path}: exit {child.returncode}: {child.stderr.strip().splitlines()[-1:]}", flush=True)
                continue
            result = json.loads(child.stdout)
            print(f"{path:8} {result['seconds']:8.1f} s ({result['cpu_seconds']:.1f} s CPU)  peak RSS "
                  f"{result['peak_rss_mb']:8.1f} MB "
                  f"(after imports {result['rss_before_mb']} MB)  lost {result['lost']} duplicated "
                  f"{result['duplicated']}" + (f"  judging {json.dumps(result['judging'])}"
                                               if result.get("judging") else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
