"""One append-only JSON-lines history per run: everything the checkers judge, and nothing they compute.

Every record is {"t": seconds since the run started (monotonic clock), "wall": ISO time, "type": ..., ...}. The
checkers are pure functions over these records, so any stored run can be re-judged offline.

    phase   name (steady | inject | recover), boundary (start | end)
    fault   name, target, state (injecting | injected | healing | healed), params
    sample  the probes' measurements; a metric a probe could not measure is null (never a guess)
    job     event (started | exited | restarted | refused), process, and e.g. code for exited; an `exited` the
            harness caused carries `cause` (a kill, a stop for a fault, "stopped at the arm's end"), one the job
            ended by itself carries its code and `line` (its last `job:` line) instead
    log     a matched log signature: signature (the spec's pattern), source (file), line, text, count (lines of that
            source matched so far: the first matches are recorded one by one, later ones as tallies)
    trigger a lifecycle trigger fired (chaos/triggers.py): fault (its index in the spec), name, target, firing (1-based)
            of firings, the event and what was drawn, the S3 key and batch it landed on, how the held request was
            released, and where the checkpoint stood (last_commit, in_flight)
    schedule a compact schedule moved the windows up: fault (the index of the one done early), saved_s (before its
            window's end), total_saved_s (so far; every later window and phase mark moved up by it)
    error   the environment failed (a toxiproxy call, a broker that did not start): never a job failure
    watch   the log signatures the arm's scanner looks for (patterns), and records_reads: true when every job log it
            reads is then recorded as a watch record with `read` (the log's path in the run directory), once, as the
            scanner first reads it: the logs check judges only logs that were read
    skipped the arm was not run, and why (a fault that cannot act on the target: docs/targets.md): verdict SKIPPED
    interrupted the run was interrupted (Ctrl-C, SIGTERM) while this arm ran, and where: verdict INTERRUPTED
    measure what the harness measured of the stack for the figures beside a verdict, never judged: name (s3_read:
            bytes of the arm's checkpoint read back through the `s3` proxy, seconds, bytes_per_s; the floor of a
            restore of its state)
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

PHASES = ("steady", "inject", "recover")
BOUNDARIES = ("start", "end")
FAULT_STATES = ("injecting", "injected", "healing", "healed")
JOB_EVENTS = ("started", "exited", "restarted", "refused", "leaders_moved", "paused", "continued", "records_deleted")
# Numeric sample metrics (probes and checkers read these); `alive` maps process name -> bool.
SAMPLE_METRICS = ("input_rate", "processed_rate", "lag", "batch_duration_ms", "state_rows", "state_bytes",
                  "checkpoint_bytes", "batch_id")
# state_bytes is RocksDB's SST bytes, or the operators' memory while no SST exists (what the checkers have always
# fitted); state_sst_bytes is the on-disk SST bytes alone (0 before the first flush): one measure, for the report's
# plot. late_rows counts the input rows the job's stateful operator dropped behind its watermark so far (Spark's
# numRowsDroppedByWatermark, summed over every batch the job reported): why events can be lost with no fault in the
# job itself. Both recorded, not probe metrics.
# batch_started and run_id are the last completed batch's start (Spark's progress `timestamp`: ISO 8601 UTC, from the
# driver's clock on the harness's host) and its query run (`runId`, new at every start of the query): what shows that
# a batch completed after a disruption, in the driver running then (chaos/checks/recovery.py). Histories written
# before them have neither key.
# state_memory_bytes is the operators' own memoryUsedBytes (RocksDB's memtables, block cache and pinned blocks), for
# the state the arm held (chaos/state_held.py); histories written before it have none.
SAMPLE_FIELDS = (*SAMPLE_METRICS, "state_sst_bytes", "state_memory_bytes", "late_rows", "batch_started", "run_id",
                 "alive")
RECORD_TYPES = ("phase", "fault", "sample", "job", "log", "trigger", "schedule", "error", "watch", "skipped",
                "interrupted", "measure")

Record = Mapping[str, object]


class HistoryError(ValueError):
    """A history that cannot be written or read as a valid sequence of records."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


class HistoryWriter:
    """Thread-safe appender. t is taken under the lock, so file order is t order; each line is flushed as written.

    The file must not exist: a run's history is written once, never resumed or mixed with another run's.
    """

    def __init__(self, path: str | os.PathLike[str], clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], datetime] = _utc_now) -> None:
        self.path = Path(path)
        self._clock = clock
        self._wall_clock = wall_clock
        self._lock = threading.Lock()
        self._file = open(self.path, "x", encoding="utf-8")
        self._start = clock()
        self._last_t = 0.0

    def phase(self, name: str, boundary: str) -> dict[str, object]:
        _one_of("phase name", name, PHASES)
        _one_of("phase boundary", boundary, BOUNDARIES)
        return self._append("phase", {"name": name, "boundary": boundary})

    def fault(self, name: str, target: str, state: str, params: Mapping[str, object]) -> dict[str, object]:
        _one_of("fault state", state, FAULT_STATES)
        return self._append("fault", {"name": name, "target": target, "state": state, "params": dict(params)})

    def sample(self, **metrics: object) -> dict[str, object]:
        unknown = sorted(set(metrics) - set(SAMPLE_FIELDS))
        if unknown:
            raise HistoryError(f"sample: unknown metric {unknown[0]!r}; allowed: {', '.join(SAMPLE_FIELDS)}")
        return self._append("sample", {name: metrics.get(name) for name in SAMPLE_FIELDS})

    def job(self, event: str, process: str, **fields: object) -> dict[str, object]:
        _one_of("job event", event, JOB_EVENTS)
        return self._append("job", {"event": event, "process": process, **fields})

    def log(self, signature: str, source: str, line: int, text: str, count: int | None = None) -> dict[str, object]:
        """A matched line; `count` is how many lines of `source` matched `signature` so far (a loop logs thousands:
        only the first few are recorded line by line, then tallies carry the count)."""
        fields = {"signature": signature, "source": source, "line": line, "text": text}
        if count is not None:
            fields["count"] = count
        return self._append("log", fields)

    def watch(self, patterns: Sequence[str]) -> dict[str, object]:
        """The log signatures this arm's scanner looks for (its own targets' and the experiment's control
        signatures): a signature absent from the history was looked for and not seen, not merely not looked for."""
        return self._append("watch", {"patterns": list(patterns), "records_reads": True})

    def log_read(self, source: str) -> dict[str, object]:
        """A job log the scanner has opened and read (first read only): a log never read cannot show a line."""
        return self._append("watch", {"read": source})

    def trigger(self, fault: int, name: str, target: str, firing: int, of: int, **fields: object) -> dict[str, object]:
        return self._append("trigger", {"fault": fault, "name": name, "target": target, "firing": firing, "of": of,
                                        **fields})

    def schedule(self, fault: int, **fields: object) -> dict[str, object]:
        return self._append("schedule", {"fault": fault, **fields})

    def error(self, message: str, **fields: object) -> dict[str, object]:
        return self._append("error", {"message": message, **fields})

    def skipped(self, reason: str) -> dict[str, object]:
        """The arm is not run: its verdict is SKIPPED with `reason`, whatever else the history holds."""
        return self._append("skipped", {"reason": reason})

    def interrupted(self, reason: str) -> dict[str, object]:
        """The arm was cut short by an interrupt: its verdict is INTERRUPTED, whatever its checks measured."""
        return self._append("interrupted", {"reason": reason})

    def measure(self, name: str, **fields: object) -> dict[str, object]:
        """A figure the harness measured of the stack (not of the job), for what a report shows beside a verdict."""
        return self._append("measure", {"name": name, **fields})

    def _append(self, record_type: str, fields: dict[str, object]) -> dict[str, object]:
        with self._lock:
            t = self._clock() - self._start
            if t < self._last_t:
                raise HistoryError(f"{self.path}: clock went back from t={self._last_t} to t={t}; "
                                   "allowed: a monotonic clock")
            wall = self._wall_clock().isoformat(timespec="milliseconds")
            record = {"t": t, "wall": wall, "type": record_type, **fields}
            self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
            self._file.flush()
            self._last_t = t
            return record

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _one_of(what: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise HistoryError(f"{what} {value!r} is not valid; allowed: {', '.join(allowed)}")


def json_object(raw: bytes) -> dict[str, object]:
    """One JSON-lines record (a history or ledger line) as a dict; ValueError saying why not."""
    try:
        record = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    return record


def _parse(raw: bytes) -> dict[str, Any]:
    record = json_object(raw)
    t = record.get("t")
    if not isinstance(t, (int, float)) or isinstance(t, bool):
        raise ValueError(f"t must be a number, got {t!r}")
    if record.get("type") not in RECORD_TYPES:
        raise ValueError(f"type {record.get('type')!r} is not one of {', '.join(RECORD_TYPES)}")
    return record


def read_history(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All records in order. Only an unterminated last line that does not parse is dropped (a torn write by a
    crashed writer); any other bad line, or t going back, raises HistoryError naming the line."""
    records: list[dict[str, Any]] = []
    with open(path, "rb") as f:
        for lineno, line in enumerate(f, 1):
            try:
                record = _parse(line)
            except ValueError as exc:
                if not line.endswith(b"\n"):
                    break
                raise HistoryError(f"{path}:{lineno}: {exc}") from None
            if records and record["t"] < records[-1]["t"]:
                raise HistoryError(f"{path}:{lineno}: t={record['t']} is before the previous t={records[-1]['t']}")
            records.append(record)
    return records
