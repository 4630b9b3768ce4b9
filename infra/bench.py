"""Benchmarks of the stack itself (docs/lab-notes.md), each on a stack it starts:

    python -m infra.bench start [--rounds 3]      warm stack start, local and containers alternating
    python -m infra.bench topology [--rounds 3]   warm start and resident memory, single and cluster alternating
    python -m infra.bench s3proxy [--samples 50] [--delay-ms 200] [--backend local] [--json]
                                                  GET/PUT latency through the S3 chain, no rule vs a PUT-only delay

Kept out of infra/containers.py and infra/s3proxy.py, which infra/stack.py imports: a module the stack imports never
imports the stack (tests/unit/test_import_cycles.py)."""
from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from pathlib import Path

from .errors import InfraError
from .s3proxy import S3Event, latency_summary


# -- benchmark: warm stack start, both backends in one run ---------------------------------------------------
def bench_start(rounds: int = 3, backends: tuple[str, ...] = ("local", "containers"), out: Path | None = None,
                progress=lambda message: print(f"[bench] {message}", file=sys.stderr, flush=True)) -> dict:
    """Start and stop a Stack `rounds` times per backend, alternating, so both see the same machine load.

    A first, unmeasured start per backend warms page cache, images and JIT archives ("warm" start).
    """
    import statistics
    import tempfile

    from .stack import Stack

    base = Path(out or tempfile.mkdtemp(prefix="chaos-bench-start-"))
    progress(f"run directories (logs) under {base}")
    results: dict[str, list[dict]] = {name: [] for name in backends}
    for round_number in range(rounds + 1):
        for name in backends:
            run_dir = base / f"{name}-{round_number}"
            t0 = time.monotonic()
            with Stack(run_dir, backend=name) as stack:
                seconds = dict(stack.info.start_seconds)
                up = time.monotonic() - t0
                t1 = time.monotonic()
            teardown = time.monotonic() - t1
            if round_number == 0:
                progress(f"{name}: warm-up start {seconds['total']:.1f} s (not counted)")
                continue
            results[name].append({"start_s": seconds, "enter_s": round(up, 2), "teardown_s": round(teardown, 2)})
            progress(f"{name}: round {round_number}: start {seconds['total']:.1f} s "
                     f"(Stack.__enter__ {up:.1f} s), teardown {teardown:.1f} s")
    summary = {name: {"median_total_start_s": statistics.median(r["start_s"]["total"] for r in runs),
                      "median_enter_s": statistics.median(r["enter_s"] for r in runs),
                      "median_teardown_s": statistics.median(r["teardown_s"] for r in runs),
                      "rounds": runs} for name, runs in results.items()}
    if "local" in summary and "containers" in summary:
        summary["ratio_containers_to_local"] = round(summary["containers"]["median_total_start_s"]
                                                     / summary["local"]["median_total_start_s"], 2)
    return summary


# -- benchmark: the cluster topology against the single node, one run ----------------------------------------
def _resident_mib(pgids: list[int]) -> float:
    """Resident memory of every process in these process groups (a local stack's components), in MiB."""
    from .procs import members

    total_kib = 0
    for pid in (pid for pgid in pgids for pid in members(pgid)):
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kib += int(line.split()[1])
        except (OSError, ValueError):
            continue  # gone meanwhile
    return round(total_kib / 1024, 1)


def bench_topology(rounds: int = 3, out: Path | None = None,
                   progress=lambda message: print(f"[bench] {message}", file=sys.stderr, flush=True)) -> dict:
    """Start and stop a local Stack `rounds` times per topology, alternating (both see the same machine load), after
    one unmeasured warm start each; the median start, and the resident memory of the stack's processes 10 s after
    it is up (servers idle: no job)."""
    import statistics
    import tempfile

    from .stack import Stack

    base = Path(out or tempfile.mkdtemp(prefix="chaos-bench-topology-"))
    progress(f"run directories (logs) under {base}")
    results: dict[str, list[dict]] = {"single": [], "cluster": []}
    for round_number in range(rounds + 1):
        for topology in results:
            with Stack(base / f"{topology}-{round_number}", topology=topology) as stack:
                seconds = stack.info.start_seconds["total"]
                time.sleep(10)
                memory = _resident_mib([h.pid for h in stack.handles.values() if h.pid is not None])
            if round_number == 0:
                progress(f"{topology}: warm-up start {seconds:.1f} s (not counted)")
                continue
            results[topology].append({"start_s": seconds, "resident_mib": memory})
            progress(f"{topology}: round {round_number}: start {seconds:.1f} s, resident {memory:.0f} MiB")
    summary: dict[str, object] = {
        topology: {"median_start_s": statistics.median(r["start_s"] for r in runs),
                   "median_resident_mib": statistics.median(r["resident_mib"] for r in runs), "rounds": runs}
        for topology, runs in results.items()}
    single, cluster = summary["single"], summary["cluster"]
    assert isinstance(single, dict) and isinstance(cluster, dict)
    summary["ratio_cluster_to_single_start"] = round(cluster["median_start_s"] / single["median_start_s"], 2)
    summary["ratio_cluster_to_single_memory"] = round(cluster["median_resident_mib"] / single["median_resident_mib"],
                                                      2)
    return summary


# -- benchmark: PUT-only slowness leaves GETs alone ---------------------------------------------------------
def _timed(call: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    call()
    return (time.perf_counter() - t0) * 1000


def _measure(client, bucket: str, get_key: str, payload: bytes, samples: int, prefix: str) -> dict:
    """`samples` PUTs and GETs, alternating, each timed on its own (ms)."""
    import io

    def put(n: int) -> None:
        client.put_object(bucket, f"{prefix}/put-{n % 8}", io.BytesIO(payload), len(payload))

    def get() -> None:
        response = client.get_object(bucket, get_key)
        try:
            response.read()
        finally:
            response.close()
            response.release_conn()

    puts, gets = [], []
    for n in range(samples):
        puts.append(_timed(functools.partial(put, n)))
        gets.append(_timed(get))
    return {"put": latency_summary(puts), "get": latency_summary(gets)}


def bench(run_dir: Path, samples: int = 50, delay_ms: int = 200, backend: str = "local",
          progress: Callable[[str], None] = lambda message: None) -> dict:
    """Start a stack; GET and PUT latency through the chain (Toxiproxy -> s3proxy -> MinIO) with no rule, then
    with a PUT-only delay rule; straight to MinIO for reference. 16 KiB objects, one client, alternating PUT/GET."""
    import io

    from .stack import Stack

    payload = b"s" * 16384
    with Stack(run_dir, backend=backend, progress=progress) as stack:
        bucket = stack.info.bucket
        chain, direct = stack.s3_client(), stack.s3_client(direct=True)
        chain.put_object(bucket, "bench/get-target", io.BytesIO(payload), len(payload))
        _measure(chain, bucket, "bench/get-target", payload, 10, "bench/warm")  # connections, caches
        _measure(direct, bucket, "bench/get-target", payload, 10, "bench/warm")
        progress(f"measuring {samples} PUTs and GETs with no rule")
        no_rule = _measure(chain, bucket, "bench/get-target", payload, samples, "bench/plain")
        direct_figures = _measure(direct, bucket, "bench/get-target", payload, samples, "bench/direct")
        since = stack.s3proxy.last_seq()
        rule = stack.s3proxy.add_rule(ops=["PUT"], action="delay", delay_ms=delay_ms)
        progress(f"measuring {samples} PUTs and GETs with a {delay_ms} ms PUT-only delay rule ({rule})")
        with_delay = _measure(chain, bucket, "bench/get-target", payload, samples, "bench/delayed")
        applied = next(r["applied"] for r in stack.s3proxy.rules() if r["id"] == rule)
        events: list[S3Event] = []
        while True:
            batch, since = stack.s3proxy.events(since, limit=10_000)
            if not batch:
                break
            events += batch
        stack.s3proxy.remove_rule(rule)
    delayed_gets = sum(1 for e in events if e.type == "end" and e.op == "GET" and e.action == "delay")
    return {
        "samples": samples, "delay_ms": delay_ms, "object_bytes": len(payload), "backend": backend,
        "no_rule": no_rule, "put_delay_rule": with_delay, "direct_to_minio": direct_figures,
        "rule_applied_to_puts": applied, "gets_delayed": delayed_gets,
        "ratio_get_with_put_delay_to_no_rule": round(with_delay["get"]["median_ms"] / no_rule["get"]["median_ms"], 3),
        "put_added_median_ms": round(with_delay["put"]["median_ms"] - no_rule["put"]["median_ms"], 1),
        "chain_overhead_get_median_ms": round(no_rule["get"]["median_ms"] - direct_figures["get"]["median_ms"], 1),
    }


def _print_bench(result: dict) -> None:
    rows = [("no rule", result["no_rule"]), (f"PUT delay {result['delay_ms']} ms", result["put_delay_rule"]),
            ("direct to MinIO", result["direct_to_minio"])]
    print(f"{'':<20} {'PUT median':>11} {'PUT p95':>9} {'GET median':>11} {'GET p95':>9}   "
          f"(ms, {result['samples']} each, {result['object_bytes']} B objects)")
    for name, figures in rows:
        print(f"{name:<20} {figures['put']['median_ms']:>11} {figures['put']['p95_ms']:>9} "
              f"{figures['get']['median_ms']:>11} {figures['get']['p95_ms']:>9}")
    print(f"GET(with PUT delay) / GET(no rule) = {result['ratio_get_with_put_delay_to_no_rule']}; "
          f"PUT median +{result['put_added_median_ms']} ms; the rule acted on {result['rule_applied_to_puts']} PUTs "
          f"and {result['gets_delayed']} GETs")


def main(argv: list[str]) -> int:
    import argparse
    import json
    import tempfile

    parser = argparse.ArgumentParser(prog="python -m infra.bench")
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("start", help="warm stack start, local and containers alternating")
    start.add_argument("--rounds", type=int, default=3)
    shapes = commands.add_parser("topology", help="warm start and memory, single and cluster alternating")
    shapes.add_argument("--rounds", type=int, default=3)
    bench_cmd = commands.add_parser("s3proxy", help="GET/PUT latency through the chain, no rule vs a PUT-only delay")
    bench_cmd.add_argument("--samples", type=int, default=50)
    bench_cmd.add_argument("--delay-ms", type=int, default=200)
    bench_cmd.add_argument("--backend", default="local", choices=("local", "containers"))
    bench_cmd.add_argument("--out", type=Path, help="run directory (logs); default: a new temporary directory")
    bench_cmd.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.command in ("start", "topology"):
        try:
            measure = bench_start if args.command == "start" else bench_topology
            print(json.dumps(measure(args.rounds), indent=2))
        except KeyboardInterrupt:
            return 130
        except InfraError as error:
            print(f"bench {args.command}: {error}", file=sys.stderr)
            return 3
        return 0
    if args.samples < 2 or args.delay_ms < 1:
        parser.error("--samples must be >= 2 and --delay-ms >= 1")
    run_dir = args.out or Path(tempfile.mkdtemp(prefix="chaos-bench-s3proxy-"))

    def progress(message: str) -> None:
        print(f"[bench] {message}", file=sys.stderr, flush=True)

    progress(f"run directory (logs): {run_dir}")
    try:
        result = bench(run_dir, samples=args.samples, delay_ms=args.delay_ms, backend=args.backend,
                       progress=progress)
    except KeyboardInterrupt:
        return 130
    except InfraError as error:
        print(f"s3proxy bench: {error}", file=sys.stderr)
        return 3
    if args.json:
        print(json.dumps(result))
    else:
        _print_bench(result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
