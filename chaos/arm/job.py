"""One arm of a run: a workload into Kafka, the job as a driver process, a drain, and the oracle's verdict.

    arm = JobArm(stack, arm_dir, ArmConfig(profile="hardened", workload=spec, settings={"gap_ms": 3_000}))
    arm.create_topic(); arm.start_job(); arm.produce(); arm.drain(); arm.stop_job()
    report = arm.judge()

Every step is a method so experiments can put faults between them.
The job is the system under test: the harness only starts, signals and reads it.
"""
from __future__ import annotations

import dataclasses
import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Set
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import MappingProxyType

from infra.driver import launch_driver
from infra.procs import ManagedProcess
from infra.stack import StackLike
from job.settings import Settings, resolve

from ..judging import judge_outputs
from ..outputs import iter_sessions, read_progress
from ..store import write_arm_summary
from ..workload import Acked, Event, Failed, Ledger, Pacer, WorkloadSpec, plan, produce

DRAIN_KEY = "__drain__"


@dataclass(frozen=True)
class ArmConfig:
    """One arm's job: its profile, its workload, and its settings as the one document the job gets
    (`--settings-json`, checked by job.settings.settings_document). Every setting the document leaves out is the
    profile's, as job/settings.py declares it: the harness keeps no defaults of its own."""

    profile: str                      # hardened | naive | baseline
    workload: WorkloadSpec
    partitions: int = 4
    settings: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))  # Settings fields
    extra_job_args: tuple[str, ...] = ()
    drain_timeout_s: float = 120.0

    def job_args(self) -> list[str]:
        args = ["--settings-json", json.dumps(dict(self.settings))] if self.settings else []
        return args + list(self.extra_job_args)

    @property
    def job_settings(self) -> Settings:
        """The settings the job runs with (resolved, and checked, by the job's own module)."""
        return resolve(self.profile, self.settings)

    @property
    def gap_ms(self) -> int:
        return self.job_settings.gap_ms

    @property
    def watermark_ms(self) -> int:
        return self.job_settings.watermark_ms or 0

    @property
    def trigger_ms(self) -> int:
        return self.job_settings.trigger_ms

    @property
    def max_session_ms(self) -> int | None:
        """The longest session the oracle expects: the job's own (a mutant with it off is judged by its own rules,
        so a session it merely did not cut is no loss; the output it withholds is judged by emitted_within)."""
        return self.job_settings.max_session_ms

    @property
    def event_time(self) -> bool:
        return self.profile != "naive"


@dataclass
class ArmState:
    topic: str
    deployment: str
    start_ms: int = 0
    last_event_ms: int = 0
    produced: dict = field(default_factory=dict)
    drained: bool = False
    drain_seconds: float | None = None


class JobArm:
    def __init__(self, stack: StackLike, arm_dir: Path, config: ArmConfig, progress: Callable[[str], None] = print):
        self.stack = stack
        self.dir = Path(arm_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config = config
        self.say = progress
        suffix = uuid.uuid4().hex[:8]
        self.state = ArmState(topic=f"events-{config.profile}-{suffix}", deployment=f"{config.profile}-{suffix}")
        self.job: ManagedProcess | None = None
        self._job_starts = 0
        self._second_starts = 0
        self.second: ManagedProcess | None = None
        self.on_start: Callable[[ManagedProcess], None] = lambda process: None  # e.g. the log scanner
        # before a new driver replaces the last one: e.g. recording that one's own exit while it is still the job
        self.before_start: Callable[[], None] = lambda: None
        # records the latest driver's own exit (one no signal of the harness's caused), once: a fault that finds the
        # driver ended by itself calls it and leaves the driver down (chaos/arm/steps.py sets it)
        self.record_own_exit: Callable[[], None] = lambda: None
        # Shims preloaded into every start of this arm's job driver, not into a second deployment (preload()).
        self.driver_env: dict[str, str] = {}
        self.clock_file: Path | None = None

    # -- paths ---------------------------------------------------------------------------------------------
    @property
    def ledger_path(self) -> Path:
        return self.dir / "ledger.jsonl"

    @property
    def progress_path(self) -> Path:
        return self.dir / "progress.jsonl"

    @property
    def second_progress_path(self) -> Path:
        """The progress file of every second deployment of this arm (one after another, appended)."""
        return self.dir / "progress-second.jsonl"

    @property
    def checkpoint_prefix(self) -> str:
        """Where this deployment's checkpoint lives in the bucket (job.settings.Settings.checkpoint_suffix)."""
        return f"{self.state.deployment}/checkpoint"

    # -- steps ---------------------------------------------------------------------------------------------
    def preload(self, shims: Iterable[str]) -> None:
        """Start the job's driver with these shims (infra/shims/<name>.c) preloaded from now on: the Python driver
        and the Spark driver JVM it starts. The clock shim reads this arm's clock file, at offset 0 until a fault
        writes it (chaos/faults/clock.py)."""
        from infra.artifacts import shim_library

        names = list(dict.fromkeys(shims))
        if not names:
            return
        self.driver_env = {"LD_PRELOAD": " ".join(str(shim_library(name)) for name in names)}
        if "clock" in names:
            from ..faults.clock import write_offset

            self.clock_file = self.dir / "driver-clock-offset"
            write_offset(self.clock_file, 0.0)
            self.driver_env["CHAOS_CLOCK_FILE"] = str(self.clock_file)

    def create_topic(self) -> None:
        from ..smoke import create_topic

        info = self.stack.info
        create_topic(info.kafka_internal_bootstrap, self.state.topic, self.config.partitions,
                     info.replication_factor, info.min_insync_replicas)

    def start_job(self) -> ManagedProcess:
        self.before_start()
        self._job_starts += 1
        args = ["--profile", self.config.profile, "--topic", self.state.topic,
                "--deployment", self.state.deployment, "--progress-file", str(self.progress_path),
                *self.config.job_args()]
        self.job = launch_driver(self.stack, f"job-{self.state.deployment}-{self._job_starts}", "job", args,
                                 env=self.driver_env or None)
        self.say(f"{self.config.profile}: job started (pid {self.job.pid}, log {self.job.log_path})")
        self.on_start(self.job)
        return self.job

    def start_second_deployment(self) -> ManagedProcess:
        """Another deployment of the same job pointed at this one's checkpoint and output (the incident's shared
        directory): its own name and progress file, and its own driver ports (two drivers cannot share the
        proxied ones), so the probes keep reading the first deployment."""
        settings = {**self.config.settings, "checkpoint_path": self.checkpoint_prefix,
                    "output_path": f"{self.state.deployment}/output", "proxied_driver": False}
        config = dataclasses.replace(self.config, settings=settings)
        args = ["--profile", self.config.profile, "--topic", self.state.topic,
                "--deployment", f"{self.state.deployment}-second",
                "--progress-file", str(self.second_progress_path), *config.job_args()]
        self._second_starts += 1  # one log per second deployment, so each window's lines can be told apart
        self.second = launch_driver(self.stack, f"job-{self.state.deployment}-second-{self._second_starts}", "job",
                                    args)
        self.say(f"{self.config.profile}: second deployment started (pid {self.second.pid})")
        self.on_start(self.second)
        return self.second

    def stop_job(self, timeout: float = 60.0) -> int | None:
        """Graceful stop: SIGTERM to the Python driver only, which stops its query (Spark cancels a batch that is
        running: its offsets entry stays uncommitted, and the next start runs it again) and records its last
        commit."""
        if self.job is None:
            return None
        self.job.signal_leader(15)
        code = self.job.wait(timeout)
        if code is None:
            self.job.stop(grace=5)
            code = self.job.returncode
        return code

    def produce(self, stop_event: threading.Event | None = None, events: Iterable[Event] | None = None,
                start_ms: int | None = None, on_progress: Callable[[object], None] = lambda result: None) -> dict:
        """Produce the workload through the `kafka` proxy; the ledger records each ack.

        By default the arm's WorkloadSpec at its rate; or `events` (already planned from `start_ms`), each
        released when the wall clock reaches its event time, so segments of different rates keep their pace.
        """
        self.state.start_ms = int(time.time() * 1000) if start_ms is None else start_ms
        spec = self.config.workload
        last = {"ms": 0}
        planned: Iterable[Event]
        pacer: Pacer | EventTimePacer
        if events is None:
            planned, pacer = plan(spec, start_ms=self.state.start_ms), Pacer(spec.rate)
        else:  # the pacer looks ahead in the stream the producer takes from
            planned = Lookahead(events)
            pacer = EventTimePacer(planned, self.state.start_ms)

        def tracked():
            for event in planned:
                last["ms"] = max(last["ms"], event.event_time_ms)
                yield event

        with Ledger(self.ledger_path) as ledger:
            result = produce(tracked(), self.stack.info.kafka_bootstrap, self.state.topic, ledger,
                             pacer, stop_event=stop_event,
                             progress=on_progress, config={"message.timeout.ms": 120_000, "log_level": 1,
                                                           **self.stack.kafka_client_login()})
        self.state.last_event_ms = last["ms"]
        self.state.produced = asdict(result)
        self.say(f"{self.config.profile}: produced {result.sent} events, {result.acked} acknowledged")
        return self.state.produced

    def drain(self) -> bool:
        """Close every open session: advance event time (event-time profiles) or let the gap pass
        (processing-time profile), keep a batch running with drain events, and wait for the proof."""
        from confluent_kafka import Producer

        config = self.config
        horizon_ms = self.state.last_event_ms + config.gap_ms + config.watermark_ms + 1_000
        producer = Producer({"bootstrap.servers": self.stack.info.kafka_bootstrap, "log_level": 3,
                             **self.stack.kafka_client_login()})
        started = time.monotonic()
        seq = 0
        # The workload's last offsets, read from the ledger once: production has ended, and a read of a scale arm's
        # ledger costs seconds of CPU (2.2 s for 740,000 events), which every second of a drain would take from the
        # job it waits for on two cores.
        last_offsets = {} if config.event_time else self._last_workload_offsets()
        # Processing-time sessions close a whole gap after the batch that read the last event, so that batch must
        # come within the drain's time less a gap. A job still behind by then (a control stalled on gigabytes of state)
        # would only be waited for until the timeout, which at a 330 s gap is seven minutes of a suite's time.
        catch_up_s = config.drain_timeout_s if config.event_time else config.drain_timeout_s - config.gap_ms / 1000
        try:
            while time.monotonic() - started < config.drain_timeout_s:
                if self.job is not None and not self.job.alive():
                    self.say(f"{config.profile}: the job exited (code {self.job.returncode}) before the drain "
                             f"finished; see {self.job.log_path}")
                    break
                event = Event(DRAIN_KEY, seq, horizon_ms, "")
                producer.produce(self.state.topic, key=DRAIN_KEY, value=event.to_json())
                producer.flush(10)
                seq += 1
                status = self._drain_status(self.state.last_event_ms + config.gap_ms, last_offsets)
                if status == "drained":
                    self.state.drained = True
                    break
                if status == "behind" and time.monotonic() - started >= catch_up_s:
                    self.say(f"{config.profile}: no batch read the workload's last event within {catch_up_s:.0f} s: "
                             f"its sessions close {config.gap_ms / 1000:g} s after that batch, so the drain cannot "
                             f"finish in its {config.drain_timeout_s:.0f} s; it stops here")
                    break
                time.sleep(1.0)
        finally:
            producer.flush(10)
        self.state.drain_seconds = round(time.monotonic() - started, 1)
        self.say(f"{config.profile}: drain {'done' if self.state.drained else 'INCOMPLETE'} "
                 f"in {self.state.drain_seconds} s")
        return self.state.drained

    def _drain_status(self, watermark_needed_ms: int, last_offsets: dict[str, int]) -> str:
        batches = [r["progress"] for r in read_progress(self.progress_path) if r.get("event") == "progress"]
        if self.config.event_time:
            return "drained" if any(_watermark_ms(b) >= watermark_needed_ms for b in batches) else "waiting"
        return drain_status(batches, self.state.topic, last_offsets, self.config.gap_ms)

    def _last_workload_offsets(self) -> dict[str, int]:
        last: dict[str, int] = {}
        for record in Ledger.records(self.ledger_path):  # a stream: one record in memory at a time
            if isinstance(record, Acked):
                last[str(record.partition)] = max(last.get(str(record.partition), -1), record.offset)
        return last

    # -- verdict -------------------------------------------------------------------------------------------
    def sessions(self) -> list[dict]:
        return list(self.iter_sessions())

    def iter_sessions(self) -> Iterator[dict]:
        """The job's output rows but the drain's, as a stream: one batch object in memory at a time."""
        rows = iter_sessions(self.stack.s3_client(direct=True), self.stack.info.bucket,
                             f"{self.state.deployment}/output")
        return (row for row in rows if row["key"] != DRAIN_KEY)

    def judge(self) -> dict:
        """oracle.json's report (chaos/judging.py: in bounded memory, with what judging cost) in arm.json."""
        extra, audit, landed = self._topic_copies()
        batches = [r["progress"] for r in read_progress(self.progress_path) if r.get("event") == "progress"]
        report, sessions_emitted = judge_arm_outputs(self.dir, self.config, self.iter_sessions(), extra, audit,
                                                     landed)
        summary = {
            "profile": self.config.profile,
            "topic": self.state.topic,
            "deployment": self.state.deployment,
            "produced": self.state.produced,
            "drained": self.state.drained,
            "drain_seconds": self.state.drain_seconds,
            "job_exit": self.job.returncode if self.job is not None else None,
            "job_error": self._job_error(),
            "sessions_emitted": sessions_emitted,
            "batches": len(batches),
            "max_state_rows": max((_state_rows(b) for b in batches), default=0),
            "oracle": report,
        }
        write_arm_summary(self.dir, summary)
        return summary

    def _topic_copies(self) -> tuple[dict[str, dict[int, int]], dict[str, object], set[tuple[str, int]]]:
        """The events the arm's topic holds more than once, and the failed deliveries it holds all the same
        (chaos/topic_audit.py), with what oracle.json says of them. A topic that cannot be read back leaves the
        oracle as it was, and says so."""
        from ..topic_audit import read_topic

        # the deliveries the producer gave up on, in memory: a few per second of a Kafka outage at most
        uncertain = {(r.key, r.seq) for r in Ledger.records(self.ledger_path) if isinstance(r, Failed)}
        try:
            records, extra, landed = read_topic(self.stack.info.kafka_bootstrap, self.state.topic,
                                                self.stack.kafka_client_login(), workdir=self.dir,
                                                uncertain=uncertain)
        except Exception as exc:  # a check of the input, not of the job: its failure must not cost the verdict
            return {}, {"topic_audit": f"not read back: {type(exc).__name__}: {exc}"}, set()
        extra.pop(DRAIN_KEY, None)  # the drain's own events are not judged
        duplicates = [{"key": key, "seq": seq, "extra_copies": n} for key, seqs in extra.items()
                      for seq, n in seqs.items()]
        return extra, {"topic_records": records, "topic_duplicates": sum(sum(seqs.values()) for seqs in extra.values()),
                       "topic_duplicate_examples": duplicates[:20], "failed_landed": len(landed),
                       "failed_landed_examples": [{"key": k, "seq": q} for k, q in sorted(landed)[:20]]}, landed

    def _job_error(self) -> str | None:
        """What the job said when it ended (its last `job:` line that reports a failure), else the first line of
        the query's failure from its progress file."""
        if self.job is not None and self.job.returncode not in (None, 0):
            try:
                lines = [ln for ln in self.job.log_path.read_text(errors="replace").splitlines()
                         if ln.startswith("job: ") and not ln.startswith(("job: lease:", "job: integrity:"))]
            except OSError:
                lines = []
            if lines:
                return lines[-1][len("job: "):][:500]
        for record in reversed(read_progress(self.progress_path)):
            if record.get("event") == "terminated" and record.get("exception"):
                return record["exception"].splitlines()[0][:500]
        return None

class Lookahead:
    """An iterator of planned events that a pacer can look ahead in: events are pulled from the plan as the pacer
    or the producer needs them, and held only from the producer's position to the pacer's."""

    def __init__(self, events: Iterable[Event]):
        self._source = iter(events)
        self._held: deque[Event] = deque()
        self._first = 0  # the index, in the whole plan, of the first event held

    def peek(self, index: int) -> Event | None:
        """Event `index` of the whole plan (not yet taken by the producer), or None past its end."""
        while self._first + len(self._held) <= index:
            event = next(self._source, None)
            if event is None:
                return None
            self._held.append(event)
        return self._held[index - self._first]

    def __iter__(self) -> Lookahead:
        return self

    def __next__(self) -> Event:
        event = self._held.popleft() if self._held else next(self._source)
        self._first += 1
        return event


class EventTimePacer:
    """Pacer interface over planned events: event i is due when the wall clock reaches its event time."""

    def __init__(self, events: Iterable[Event], start_ms: int):
        self.events = events if isinstance(events, Lookahead) else Lookahead(events)
        self.start_ms = start_ms
        self.t0 = time.monotonic() - (time.time() * 1000 - start_ms) / 1000
        self.released = 0

    def _offset_s(self, index: int) -> float | None:
        event = self.events.peek(index)
        return None if event is None else (event.event_time_ms - self.start_ms) / 1000

    def take(self, limit: int | None = None) -> int:
        elapsed = time.monotonic() - self.t0
        due = self.released
        while (limit is None or due - self.released < limit) and \
                (offset := self._offset_s(due)) is not None and offset <= elapsed:
            due += 1
        if due == self.released and self._offset_s(due) is None:
            return 1  # exhausted: ask for one more so produce() sees the plan end
        claimed, self.released = due - self.released, due
        return claimed

    def seconds_until_next(self) -> float:
        offset = self._offset_s(self.released)
        return 0.0 if offset is None else offset - (time.monotonic() - self.t0)


def drain_status(batches: Iterable[dict], topic: str, last_offsets: dict[str, int], gap_ms: int) -> str:
    """Where a processing-time job's drain stands, from its batches' progress: "behind" (no batch has read the
    workload's last event yet), "waiting" (one has; the gap since it has not passed) or "drained". Its timers are
    set from the time of the batch that read an event, so every session has closed once a batch started a gap (plus
    a margin) after the batch that read the last real event."""
    batches = list(batches)
    reached = [b for b in batches if _covers(b, topic, last_offsets)]
    if not reached:
        return "behind"
    closes_at = _timestamp_ms(reached[0]) + gap_ms + 1_000
    return "drained" if any(_timestamp_ms(b) >= closes_at for b in batches) else "waiting"


def _covers(progress: dict, topic: str, offsets: dict[str, int]) -> bool:
    """Did this batch read up to (and including) these offsets of `topic`?"""
    for source in progress.get("sources", []):
        end = source.get("endOffset")
        if isinstance(end, str):
            end = json.loads(end)
        if isinstance(end, dict) and topic in end:
            # Kafka end offsets are exclusive: offset N has been read when end > N.
            return all(end[topic].get(partition, -1) > offset for partition, offset in offsets.items())
    return False


def _watermark_ms(progress: dict) -> int:
    watermark = progress.get("eventTime", {}).get("watermark")
    return _iso_ms(watermark) if watermark else 0


def judge_arm_outputs(arm_dir: Path, config: ArmConfig, emitted: Iterable[Mapping[str, object]],
                      extra: Mapping[str, Mapping[int, int]], audit: Mapping[str, object],
                      landed: Set[tuple[str, int]] = frozenset()) -> tuple[dict, int]:
    """(oracle.json's report, rows emitted) from the arm directory's ledger.jsonl and progress.jsonl and the job's
    `emitted` rows, by the arm's own session rules: as the arm ends, or later from its stored sessions.jsonl
    (chaos/rejudge.py judge_left) when an interrupt left the judging to `chaos check`."""
    batches = [r["progress"] for r in read_progress(arm_dir / "progress.jsonl") if r.get("event") == "progress"]
    max_len = config.max_session_ms if config.profile == "hardened" else None
    # emission: emitted_within (chaos/checks/output_latency.py)
    return judge_outputs(arm_dir / "ledger.jsonl", emitted, event_time=config.event_time, gap_ms=config.gap_ms,
                         max_len_ms=max_len, extra_copies=extra, audit=audit,
                         batch_done_ms=_batch_done_ms(batches) if config.event_time else {}, workdir=arm_dir,
                         landed=landed)


def _batch_done_ms(batches: list[dict]) -> dict[int, int]:
    """Batch id -> when its first completion ended (wall ms): its trigger's start plus its duration."""
    done: dict[int, int] = {}
    for batch in batches:
        try:
            end = _timestamp_ms(batch) + int(batch.get("durationMs", {}).get("triggerExecution") or 0)
        except (KeyError, TypeError, ValueError):
            continue
        batch_id = batch.get("batchId")
        if isinstance(batch_id, int):
            done[batch_id] = min(done.get(batch_id, end), end)
    return done


def _timestamp_ms(progress: dict) -> int:
    return _iso_ms(progress["timestamp"])


def _iso_ms(text: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def _state_rows(progress: dict) -> int:
    return sum(op.get("numRowsTotal", 0) for op in progress.get("stateOperators", []))
