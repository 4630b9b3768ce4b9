"""The sampler: one thread samples the arm every second into the history while an experiment runs.

Each sample is measured from outside the job, never through a faulted path: Kafka end offsets come from the
broker's internal listener (not the `kafka` proxy) and checkpoint sizes from MinIO directly (not the `s3`
proxy), so a fault on a proxy changes what the job sees, not what the harness measures.

    input_rate        events the broker acknowledged per second over the sample window (from the producer)
    processed_rate    rows the job's batches read per second, over the last RATE_WINDOW_S (a batch every few
                      seconds would make a one-second rate jump between 0 and bursts); only the current query run's
                      batches: the window empties at every driver start and every new runId
    lag               records in the topic not yet read by the job's last completed batch
    batch_duration_ms the longest batch that completed in the window (null if none did)
    state_rows/bytes  of the last completed batch (rows; RocksDB SST bytes, else memory)
    state_sst_bytes   of the last completed batch: RocksDB SST bytes on disk only (0 before the first flush)
    state_memory_bytes of the last completed batch: the operators' memoryUsedBytes
    checkpoint_bytes  every object under the checkpoint prefix, listed every few seconds
    batch_id          the last completed batch
    batch_started     when the last completed batch started (Spark's progress `timestamp`, ISO 8601 UTC)
    run_id            the query run of the last completed batch (Spark's `runId`, new at every start of the query)
    alive             process name -> running

Log lines of the job processes are scanned as they are written; a line matching a signature pattern becomes a
`log` record.
"""
from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import urllib3

from ..history import HistoryWriter
from ..state_held import sst_bytes

SAMPLE_EVERY_S = 1.0
RATE_WINDOW_S = 5.0
CHECKPOINT_EVERY_S = 5.0
MATCHES_PER_SOURCE = 5


class ProgressTail:
    """New progress lines of a file that a job process appends to (a torn last line is read next time)."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0

    def new(self) -> list[dict]:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n") + 1
        self.offset += end
        records = []
        for line in data[:end].splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return records


class LogScanner:
    """Matches every new line of the job logs against signature patterns."""

    def __init__(self, patterns: list[str], history: HistoryWriter, run_dir: Path):
        self.patterns = [(p, re.compile(p)) for p in dict.fromkeys(patterns)]
        self.history = history
        self.run_dir = run_dir
        self.files: dict[Path, tuple[int, int]] = {}  # path -> (byte offset, lines read)
        self.read: set[Path] = set()  # files opened and read at least once (each recorded in the history once)
        self.seen: Counter[tuple[str, str]] = Counter()  # (pattern, source) -> matching lines so far
        self.recorded: Counter[tuple[str, str]] = Counter()  # (pattern, source) -> count in the last record
        self._last: dict[tuple[str, str], tuple[int, str]] = {}  # (pattern, source) -> (line, text) of the last
        self.marked: Counter[tuple[str, str]] | None = None  # the counts at the inject phase's start (`mark`)
        self._lock = threading.Lock()  # the sampler thread and the runner both scan

    def watch(self, path: Path) -> None:
        self.files.setdefault(path, (0, 0))

    def scan(self) -> None:
        with self._lock:
            self._scan()

    def _scan(self) -> None:
        for path, (offset, lineno) in list(self.files.items()):
            try:
                with open(path, "rb") as handle:
                    handle.seek(offset)
                    data = handle.read()
            except FileNotFoundError:
                continue
            if path not in self.read:
                self.read.add(path)
                self.history.log_read(self._source(path))
            end = data.rfind(b"\n") + 1
            for raw in data[:end].splitlines():
                lineno += 1
                text = raw.decode("utf-8", "replace")
                for pattern, regex in self.patterns:
                    if regex.search(text):
                        key = (pattern, self._source(path))
                        self.seen[key] += 1
                        self._last[key] = (lineno, text[:1000])
                        if self.seen[key] <= MATCHES_PER_SOURCE:  # enough to show it; a loop logs thousands
                            self.history.log(pattern, key[1], lineno, text[:1000], count=self.seen[key])
                            self.recorded[key] = self.seen[key]
            self.files[path] = (offset + end, lineno)

    def _source(self, path: Path) -> str:
        return str(path.relative_to(self.run_dir)) if path.is_relative_to(self.run_dir) else str(path)

    def tally(self) -> None:
        """Record the running count of every signature that matched more lines than its records say."""
        with self._lock:
            self._tally()

    def _tally(self) -> None:
        for key, count in self.seen.items():
            if count > self.recorded[key]:
                line, text = self._last[key]
                self.history.log(key[0], key[1], line, text, count=count)
                self.recorded[key] = count

    def mark(self) -> None:
        """The inject phase starts: read every line so far (their records predate the phase mark), and count
        expected signatures from here (`count_since_mark`), as the logs checker does."""
        with self._lock:
            self._scan()
            self.marked = Counter(self.seen)

    def count_since_mark(self, pattern: str) -> int:
        with self._lock:
            if self.marked is None:
                return 0
            return sum(n - self.marked[key] for key, n in self.seen.items() if key[0] == pattern)


class Sampler:
    def __init__(self, history: HistoryWriter, topic: str, kafka_bootstrap: str, s3, bucket: str,
                 checkpoint_prefix: str, progress_path: Path, processes: Callable[[], dict],
                 acked: Callable[[], int], logs: LogScanner):
        self.history = history
        self.topic = topic
        self.bootstrap = kafka_bootstrap
        self.s3 = s3
        self.bucket = bucket
        self.checkpoint_prefix = checkpoint_prefix
        self.progress = ProgressTail(progress_path)
        self.processes = processes
        self.acked = acked
        self.logs = logs
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: dict[str, Any] = {"batch_id": None, "state_rows": None, "state_bytes": None,
                                      "state_sst_bytes": None, "state_memory_bytes": None, "end": None,
                                      "batch_started": None, "run_id": None}
        self._checkpoint_bytes: int | None = None
        self._checkpoint_at = 0.0
        self.last_sample: dict | None = None  # for live progress
        self.recent: deque[tuple[float, dict]] = deque(maxlen=30)  # (monotonic time, sample): the arm's own view
        self._completed: deque[tuple[float, int]] = deque()  # (monotonic time seen, rows) of recent batches
        self._run_id: str | None = None  # the query run whose batches the rate window holds
        self._ended_runs: set[str] = set()  # runs of drivers that have been replaced: never counted again
        self._driver_started = threading.Event()  # set by the arm at a driver start: the window empties
        self._late_rows: int | None = None  # rows dropped behind the watermark, over every batch seen
        self._started = time.monotonic()

    def __enter__(self) -> Sampler:
        from confluent_kafka import Consumer

        # Silent: process-crash kills the broker on purpose, and at level 3 librdkafka printed a "Connection
        # refused" line every 50 ms of the outage (~370 per arm) into the run's output. A broker the sampler
        # cannot reach shows in the history as samples without lag.
        self._consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "chaos-probe",
                                   "enable.auto.commit": False, "log_level": 0})
        self._thread = threading.Thread(target=self._loop, name="sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        self._consumer.close()

    def _loop(self) -> None:
        previous_t, previous_acked = time.monotonic(), self.acked()
        while not self._stop.wait(SAMPLE_EVERY_S):
            now, acked = time.monotonic(), self.acked()
            try:
                self._sample(now - previous_t, acked - previous_acked)
            except Exception as exc:  # a probe that fails must not stop the others or the run
                self.history.error(f"probe failed: {type(exc).__name__}: {exc}")
            previous_t, previous_acked = now, acked

    def driver_started(self) -> None:
        """A new driver: processed_rate counts none of the previous driver's batches (emptied at the next sample)."""
        self._driver_started.set()

    def _current_run(self, records: list[dict]) -> list[dict]:
        """The progress in new progress lines; the rate window empties when a driver starts or the query starts
        again (a new runId), so processed_rate counts only the current query run's batches: a killed driver's
        batches are no progress of the new one."""
        if self._driver_started.is_set():
            self._driver_started.clear()
            self._completed.clear()
            if self._run_id is not None:
                self._ended_runs.add(self._run_id)  # its last lines may still be unread
        batches = []
        for record in records:
            event = record.get("event")
            run = record.get("run_id") if event == "started" else \
                record.get("progress", {}).get("runId") if event == "progress" else None
            if run is not None and run != self._run_id and run not in self._ended_runs:
                self._run_id = run
                self._completed.clear()
            if event == "progress":
                batches.append(record["progress"])
        return batches

    def _window_rows(self, batches: list[dict], now: float) -> int:
        """Rows the current query run's batches read over the last RATE_WINDOW_S, these `batches` included."""
        self._completed.append((now, sum(b.get("numInputRows", 0) for b in batches
                                         if b.get("runId", self._run_id) == self._run_id
                                         and self._run_id not in self._ended_runs)))
        while self._completed and now - self._completed[0][0] > RATE_WINDOW_S:
            self._completed.popleft()
        return sum(n for _, n in self._completed)

    def _sample(self, elapsed: float, acked: int) -> None:
        batches = self._current_run(self.progress.new())
        now = time.monotonic()
        rows = self._window_rows(batches, now)
        window = min(RATE_WINDOW_S, max(elapsed, now - self._started))
        durations = [b.get("durationMs", {}).get("triggerExecution") for b in batches]
        durations = [d for d in durations if d is not None]
        late = [op.get("numRowsDroppedByWatermark") for b in batches for op in b.get("stateOperators", [])]
        if any(isinstance(n, int) for n in late):
            self._late_rows = (self._late_rows or 0) + sum(n for n in late if isinstance(n, int))
        if batches:
            last = batches[-1]
            operators = last.get("stateOperators", [])
            self._last["batch_id"] = last.get("batchId")
            self._last["batch_started"] = last.get("timestamp")
            self._last["run_id"] = last.get("runId")
            self._last["state_rows"] = sum(op.get("numRowsTotal", 0) for op in operators) if operators else None
            sst = sst_bytes(last)
            memory = sum(op.get("memoryUsedBytes", 0) for op in operators)
            self._last["state_bytes"] = (sst or memory) if operators else None
            self._last["state_sst_bytes"] = sst if operators else None  # on disk only: never the memory fallback
            self._last["state_memory_bytes"] = memory if operators else None
            end = _end_offsets(last, self.topic)
            if end is not None:
                self._last["end"] = end
        self.logs.scan()
        self.last_sample = self.history.sample(
            input_rate=round(acked / elapsed, 1) if elapsed > 0 else None,
            processed_rate=round(rows / window, 1) if window > 0 else None,
            lag=self._lag(),
            batch_duration_ms=max(durations) if durations else None,
            state_rows=self._last["state_rows"],
            state_bytes=self._last["state_bytes"],
            state_sst_bytes=self._last["state_sst_bytes"],
            state_memory_bytes=self._last["state_memory_bytes"],
            late_rows=self._late_rows,
            checkpoint_bytes=self._checkpoint_size(),
            batch_id=self._last["batch_id"],
            batch_started=self._last["batch_started"],
            run_id=self._last["run_id"],
            alive=self.processes(),
        )
        self.recent.append((time.monotonic(), self.last_sample))

    def _lag(self) -> int | None:
        """None while the broker cannot answer (a fault on the broker itself): not measured, not an error."""
        from confluent_kafka import KafkaException, TopicPartition

        try:
            return self._lag_now(TopicPartition)
        except KafkaException:
            return None

    def _lag_now(self, TopicPartition) -> int:
        metadata = self._consumer.list_topics(self.topic, timeout=5)
        partitions = metadata.topics[self.topic].partitions
        read = self._last["end"] or {}
        lag = 0
        for partition in partitions:
            _low, high = self._consumer.get_watermark_offsets(TopicPartition(self.topic, partition), timeout=5)
            lag += max(0, high - int(read.get(str(partition), 0)))
        return lag

    def _checkpoint_size(self) -> int | None:
        """Listed every few seconds; None while MinIO cannot answer (a fault on MinIO itself)."""
        now = time.monotonic()
        if now - self._checkpoint_at >= CHECKPOINT_EVERY_S:
            self._checkpoint_at = now
            try:
                total = 0
                for obj in self.s3.list_objects(self.bucket, prefix=self.checkpoint_prefix + "/", recursive=True):
                    total += obj.size or 0
                self._checkpoint_bytes = total
            except (OSError, urllib3.exceptions.HTTPError):  # MinIO unreachable (killed, paused): not measured
                self._checkpoint_bytes = None
        return self._checkpoint_bytes


def _end_offsets(progress: dict, topic: str) -> dict | None:
    for source in progress.get("sources", []):
        end = source.get("endOffset")
        if isinstance(end, str):
            try:
                end = json.loads(end)
            except json.JSONDecodeError:
                continue
        if isinstance(end, dict) and topic in end:
            return end[topic]
    return None
