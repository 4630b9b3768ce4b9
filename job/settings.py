"""The job's profiles. Every hardened setting says which incident it answers (incidents/)."""
from __future__ import annotations

import argparse
import json
import math
import os
import types
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Union, get_args, get_origin, get_type_hints

PROFILES = ("hardened", "naive", "baseline")
STATE_IMPLS = ("session-window", "tws-rows", "tws-pandas")
# The fewest records a capped batch may take: the former fixed cap. Below it a batch here is mostly its fixed cost
# (planning, state load and commit, the output), and every experiment up to 2,000 events/s at a 1 s trigger keeps the
# batches it was measured with.
BATCH_CAP_FLOOR = 20_000


def batch_cap(trigger_ms: int, expected_rate: float | None, catch_up_factor: float) -> int:
    """Records one batch may take (Kafka's maxOffsetsPerTrigger): `catch_up_factor` trigger intervals of input at the
    expected rate, never fewer than BATCH_CAP_FLOOR. A backlog then drains at up to that many times the input rate
    (batches permitting), while no batch grows with the backlog: a fixed cap under rate x trigger never catches up."""
    return max(BATCH_CAP_FLOOR, math.ceil(catch_up_factor * (expected_rate or 0.0) * trigger_ms / 1000))


def parse_duration_ms(text: str) -> int:
    """'500ms', '10s', '2m', '1h' or plain seconds -> milliseconds."""
    units = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
    text = str(text).strip()
    for suffix in ("ms", "s", "m", "h"):
        if text.endswith(suffix) and text[: -len(suffix)].replace(".", "", 1).isdigit():
            return int(float(text[: -len(suffix)]) * units[suffix])
    if text.replace(".", "", 1).isdigit():
        return int(float(text) * 1000)
    raise ValueError(f"bad duration {text!r}; use e.g. 500ms, 10s, 2m")


@dataclass(frozen=True)
class Settings:
    profile: str
    topic: str
    deployment: str                  # names the checkpoint and output paths of this deployment
    progress_file: str               # JSON lines of StreamingQueryProgress, for the harness ("": none)
    gap_ms: int = 10_000             # a session closes after this much silence
    max_session_ms: int | None = None
    watermark_ms: int | None = None  # event-time lateness allowed before a session may close
    trigger_ms: int = 1_000
    # Batch size: a fixed cap when given (a deployer's own choice); else, with a catch-up factor, the cap batch_cap()
    # sizes from the trigger and the expected input rate (events/s on the topic, told by the deployer); else none.
    max_offsets_per_trigger: int | None = None
    catch_up_factor: float | None = None
    expected_rate: float | None = None
    kafka_options: dict[str, str] = field(default_factory=dict)
    changelog_checkpointing: bool = False
    min_batches_to_retain: int = 100
    run_seconds: float | None = None  # stop by itself after this long (benchmarks); else until SIGTERM
    state_impl: str = "session-window"  # how the event-time profiles keep sessions (see docs/job.md)
    # Where this deployment writes, as keys in the bucket; by default under its own name (a second deployment
    # must be pointed at another's checkpoint on purpose to collide with it).
    checkpoint_path: str | None = None
    output_path: str | None = None
    # Read by the harness, which sets the driver's Spark ports (infra/driver.py), not by the job: executors reach
    # the driver through the stack's `spark-driver` proxy; a second driver at the same time (a colliding
    # deployment) cannot bind the same ports and talks to executors directly.
    proxied_driver: bool = True
    # Hardening switches (docs/job.md): each can be turned off to show what happens without it.
    lease: bool = False              # checkpoint ownership (job/lease.py)
    lease_ttl_ms: int = 15_000
    verify_state: bool = False       # integrity manifests, verification and rollback (job/integrity.py)
    supervise: bool = False          # restart a failed query within a failure budget (job/supervisor.py)
    failure_budget: int = 0          # failures tolerated per window; 0 = the first failure stops the job
    failure_window_ms: int = 300_000
    backoff_initial_ms: int = 1_000
    backoff_max_ms: int = 30_000
    spark_snapshot_repair: bool = False  # Spark 4.3's own autoSnapshotRepair (measured: docs/job.md)
    # Sessions keep aggregates only, removed once the watermark passes their end (job/sessions.py); off: the
    # naive state shape (every event of the open session in list state, per-key bookkeeping never expired).
    aggregate_state: bool = False
    # The first this many bytes of a session's first payload, kept with its aggregates as the session's attributes
    # (landing page, device) and their length emitted as `attribute_bytes`: the state then grows by about this much
    # per open session, as a real sessionization's does (docs/job.md "State size"). Only the session-window state.
    attribute_bytes: int = 0
    stop_on_repeat: bool = False     # a failure repeating on every restart stops the job (exit 7; job/supervisor.py)
    stop_on_takeover: bool = False   # a lease taken over by another deployment stops the job (exit 6; job/lease.py)
    local_disk_outage: bool = False  # a full or failing local disk is an outage, not a repeat (job/supervisor.py)
    # Lease expiry judged by S3's clock (the age of the lease's last write) and, for the holder's own, by the
    # monotonic clock since its last renewal; off: by the wall-clock expiry times in the records (job/lease.py).
    lease_store_clock: bool = False
    # A wall-clock step back restarts the query, whose trigger waits by the wall clock (docs/job.md, "Clocks").
    restart_on_clock_step: bool = False
    s3a_options: dict[str, str] = field(default_factory=dict)        # spark.hadoop.fs.s3a.* for the job
    spark_options: dict[str, str] = field(default_factory=dict)      # other Spark settings, set at start
    state_store_options: dict[str, str] = field(default_factory=dict)  # spark.sql.streaming.stateStore.*

    @property
    def batch_cap(self) -> int | None:
        """The records one batch may take (Kafka's maxOffsetsPerTrigger), or None: a backlog is one batch."""
        if self.max_offsets_per_trigger is not None:
            return self.max_offsets_per_trigger
        if self.catch_up_factor is None:
            return None
        return batch_cap(self.trigger_ms, self.expected_rate, self.catch_up_factor)

    @property
    def checkpoint_suffix(self) -> str:
        return self.checkpoint_path or f"{self.deployment}/checkpoint"

    @property
    def output_suffix(self) -> str:
        return self.output_path or f"{self.deployment}/output"


def hardened(topic: str, deployment: str, progress_file: str, **overrides) -> Settings:
    base = Settings(
        profile="hardened", topic=topic, deployment=deployment, progress_file=progress_file,
        # 000/002: one key's session state passed 2 GB. Sessions keep aggregates only (never the events),
        # and no session may outlive max_session_ms, so a key that never pauses still closes sessions.
        max_session_ms=60_000,
        # 003: state leaked under key rotation. Event-time sessions with a watermark: once the watermark
        # passes a session's end, the session is emitted and its state is removed.
        watermark_ms=5_000,
        # 000/002/003: aggregates only (never the events), no per-key bookkeeping outside the open session.
        aggregate_state=True,
        # No batch cap: after an outage the backlog is one batch. Measured in backlog-under-kills (a backlog 10-15x
        # a cap, the executor killed every 30 s): capped, the job was still 149,655 records behind at the end; one
        # batch caught up 56 s after the heal, since every batch pays the state's load and commit (docs/job.md
        # "Removed switches"). A deployer may still cap batches (max_offsets_per_trigger, or catch_up_factor).
        # 001: disconnect loops. Back off between reconnects and give up on a request in bounded time,
        # so the query fails fast (and is restarted by its supervisor) instead of hanging.
        kafka_options={
            "kafka.reconnect.backoff.ms": "250",
            "kafka.reconnect.backoff.max.ms": "5000",
            "kafka.request.timeout.ms": "15000",
            "kafka.default.api.timeout.ms": "30000",
            "kafka.socket.connection.setup.timeout.ms": "5000",
            "kafka.socket.connection.setup.timeout.max.ms": "15000",
            "kafka.metadata.max.age.ms": "10000",
        },
        # 001 ("Bad table magic number") and 004 (slow checkpoint storage): upload only the changes of each
        # batch, and keep enough versions to roll back to. Snapshots every 5 versions, checked for every 15 s,
        # keep the changelog replay after a restart (or after a damaged snapshot is set aside) short.
        changelog_checkpointing=True,
        state_store_options={"minDeltasForSnapshot": "5", "maintenanceInterval": "15s"},
        # 001 ("_metadata already exists"): one deployment per checkpoint, enforced by a lease.
        lease=True,
        # 001 ("Bad table magic number"): verify the state version before loading it; roll back if damaged.
        verify_state=True,
        # Spark's own snapshot repair, its default in 4.3 (the naive profile turns it off, as the incident jobs had
        # none): not a hardening switch, since verification recovers what it repairs (docs/job.md "Removed switches").
        spark_snapshot_repair=True,
        # 001/002 ("Exceeded checkpoint tolerable failure threshold"): transient failures restart the query
        # with backoff (1 s doubling to 10 s: recovery after a heal waits at most that long); 20 failures in
        # 5 minutes (an outage of several minutes) stop the job with a clear error instead of looping forever.
        supervise=True,
        failure_budget=20,
        backoff_max_ms=10_000,
        # issue 15: a failure that comes back the same way on every restart (a checkpoint file Spark cannot read)
        # stops the job within a minute (exit 7) instead of spending the budget on it.
        stop_on_repeat=True,
        # 005 (issue 40): a local disk that is full or failing under RocksDB fails every restart the same way until
        # it is back; the checkpoint is intact, so that is an outage the budget bounds, not a repeat to stop on
        # (measured: without it a 30 s ENOSPC stopped the job with exit 7 after 4 failures in ~10 s).
        local_disk_outage=True,
        # 001: a deployment whose lease another one took over (after a lapse) stops before its next commit (exit 6).
        stop_on_takeover=True,
        # issue 40: a driver whose clock runs behind must keep its lease (its records' wall-clock expiries would
        # say it ran out while it renews), and a clock stepped back must not stall the trigger for the step.
        lease_store_clock=True,
        restart_on_clock_step=True,
        # 002/004: an S3 call gives up in bounded time (a silent connection after 15 s, a whole request after
        # 60 s, which still lets a 1 MB snapshot through a 50 KB/s link) with a few quick retries: an S3 outage
        # fails the batch within about half a minute and the supervisor restarts it, instead of the query stalling
        # for minutes inside nested retries (measured: with the defaults a batch hung 89 s through a 60 s outage
        # and failed only after ~130 s of one).
        s3a_options={
            "connection.timeout": "15s",
            "connection.establish.timeout": "15s",  # Hadoop raises anything lower to 15 s (and says so)
            "connection.request.timeout": "60s",
            "retry.limit": "2",
            "retry.interval": "250ms",
            "attempts.maximum": "2",
        },
    )
    return replace(base, **overrides)


def naive(topic: str, deployment: str, progress_file: str, **overrides) -> Settings:
    """Mirrors the incident jobs: every event buffered in list state, processing-time sessions, Kafka
    defaults, no batch limit, no bound on a session, per-key bookkeeping that is never expired."""
    return replace(Settings(profile="naive", topic=topic, deployment=deployment, progress_file=progress_file),
                   **overrides)


def baseline(topic: str, deployment: str, progress_file: str, **overrides) -> Settings:
    """A plain event-time session_window aggregation: the throughput reference for the benchmark."""
    base = Settings(profile="baseline", topic=topic, deployment=deployment, progress_file=progress_file,
                    watermark_ms=5_000, aggregate_state=True)
    return replace(base, **overrides)


FACTORIES = {"hardened": hardened, "naive": naive, "baseline": baseline}

# Given by their own options, never by a settings document.
IDENTITY = ("profile", "topic", "deployment", "progress_file")


def _fits(value: object, hint: Any) -> bool:
    if get_origin(hint) in (Union, types.UnionType):
        return any(_fits(value, arg) for arg in get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if get_origin(hint) is dict:
        key, val = get_args(hint)
        return isinstance(value, dict) and all(_fits(k, key) and _fits(v, val) for k, v in value.items())
    return False


def settings_document(doc: object) -> dict[str, Any]:
    """A settings document (Settings fields over the profile's, as `--settings-json` gives them) checked field by
    field against Settings: its names, its types, its choices. ValueError names the first field that is wrong. The
    defaults of the fields it leaves out are the profile's: this module's, and nowhere else's."""
    if not isinstance(doc, dict):
        raise ValueError(f"a settings document is a JSON object of Settings fields, got {type(doc).__name__}")
    hints = get_type_hints(Settings)
    known = [f.name for f in fields(Settings) if f.name not in IDENTITY]
    for name, value in doc.items():
        if name in IDENTITY:
            raise ValueError(f"setting {name!r} is given by its own option (--{name.replace('_', '-')}), not here")
        if name not in known:
            raise ValueError(f"unknown setting {name!r}; allowed: {', '.join(sorted(known))}")
        if not _fits(value, hints[name]):
            raise ValueError(f"setting {name!r}: {value!r} is not a {hints[name]}")
    if "state_impl" in doc and doc["state_impl"] not in STATE_IMPLS:
        raise ValueError(f"setting 'state_impl': {doc['state_impl']!r}; allowed: {', '.join(STATE_IMPLS)}")
    for name in ("catch_up_factor", "expected_rate"):
        if doc.get(name) is not None and not doc[name] > 0:
            raise ValueError(f"setting {name!r}: {doc[name]!r} is not > 0")
    if doc.get("attribute_bytes", 0) < 0:
        raise ValueError(f"setting 'attribute_bytes': {doc['attribute_bytes']!r} is not >= 0")
    return dict(doc)


def resolve(profile: str, document: Mapping[str, Any], topic: str = "", deployment: str = "",
            progress_file: str = "") -> Settings:
    """The Settings a job of `profile` runs with given a settings document (what `--settings-json` carries)."""
    return FACTORIES[profile](topic, deployment, progress_file, **settings_document(dict(document)))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The job's own settings (what it does, not where it runs: job/spark.py has those)."""
    parser.add_argument("--profile", choices=PROFILES, required=True)
    topic = os.environ.get("JOB_KAFKA_TOPIC") or None
    parser.add_argument("--topic", required=topic is None, default=topic,
                        help="the Kafka topic of the events (JOB_KAFKA_TOPIC)")
    parser.add_argument("--deployment", required=True, help="names this deployment's checkpoint and output")
    parser.add_argument("--progress-file", default="",
                        help="append every StreamingQueryProgress to this local file as JSON lines (default: none)")
    parser.add_argument("--gap", type=parse_duration_ms)
    parser.add_argument("--max-session", type=parse_duration_ms)
    parser.add_argument("--watermark", type=parse_duration_ms)
    parser.add_argument("--trigger", type=parse_duration_ms)
    parser.add_argument("--max-offsets-per-trigger", type=int,
                        help="a fixed batch cap in records (default: none, a backlog is one batch)")
    parser.add_argument("--expected-rate", type=float,
                        help="events/s expected on the topic: with a settings document's catch_up_factor, a batch "
                             f"takes that many trigger intervals of it, at least {BATCH_CAP_FLOOR:,} records "
                             "(docs/job.md)")
    parser.add_argument("--run-seconds", type=float)
    parser.add_argument("--state-impl", choices=STATE_IMPLS)
    parser.add_argument("--checkpoint-path",
                        help="bucket key prefix of the checkpoint (default <deployment>/checkpoint)")
    parser.add_argument("--output-path", help="bucket key prefix of the output (default <deployment>/output)")
    parser.add_argument("--settings-json", type=json.loads, default={},
                        help="JSON object of Settings fields over the profile's, applied last and checked field by "
                             "field (the one document the harness sends an arm's settings in)")


def settings_from(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Settings:
    overrides = {name: value for name, value in {
        "gap_ms": args.gap, "max_session_ms": args.max_session, "watermark_ms": args.watermark,
        "trigger_ms": args.trigger, "max_offsets_per_trigger": args.max_offsets_per_trigger,
        "expected_rate": args.expected_rate,
        "run_seconds": args.run_seconds, "state_impl": args.state_impl, "checkpoint_path": args.checkpoint_path,
        "output_path": args.output_path}.items() if value is not None}
    try:
        overrides.update(settings_document(args.settings_json))
    except ValueError as exc:
        parser.error(f"--settings-json: {exc}")
    return FACTORIES[args.profile](args.topic, args.deployment, args.progress_file, **overrides)


def parser(prog: str = "python -m job") -> argparse.ArgumentParser:
    return argparse.ArgumentParser(prog=prog, description="Sessionization job (system under test)")


def from_args(argv: list[str] | None = None) -> Settings:
    """Settings from the job's own options only (no deployment options): what the harness reads back."""
    settings_parser = parser()
    add_arguments(settings_parser)
    return settings_from(settings_parser.parse_args(argv), settings_parser)
