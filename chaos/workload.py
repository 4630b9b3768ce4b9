"""Seeded workload plan, send pacing, delivery ledger and the Kafka producer loop.

The plan is a pure function of the spec, so a run can be re-planned offline; the ledger records what the broker
acknowledged, which is the oracle's ground truth (the plan is only the intent).
"""

from __future__ import annotations

import bisect
import functools
import heapq
import itertools
import json
import math
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from confluent_kafka import KafkaError, Message, Producer

from .history import json_object

SHAPES = ("uniform", "zipf", "hot_key", "rotating")
HOT_KEY = "hot-0"
MAX_PAYLOAD_BYTES = 4096
# The hot key's events may be larger: incidents 000/002 are one key's list state past 2 GB, which at this machine's
# event rates takes events of tens of KiB (Kafka's default message limit is 1 MB; the event's JSON wraps the payload).
MAX_HOT_KEY_PAYLOAD_BYTES = 512 * 1024


@dataclass(frozen=True, slots=True)
class Event:
    """One planned event; (key, seq) identifies it everywhere (Kafka value, ledger, job output, oracle)."""

    key: str
    seq: int
    event_time_ms: int
    payload: str

    def to_json(self) -> bytes:
        return json.dumps(
            {"key": self.key, "seq": self.seq, "event_time_ms": self.event_time_ms, "payload": self.payload},
            separators=(",", ":"),
        ).encode()


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)) and math.isfinite(value)


@dataclass(frozen=True)
class WorkloadSpec:
    """What to send. `keys` sizes the key space of uniform, zipf and hot_key (hot_key: "hot-0" plus keys-1 others);
    rotating ignores it because its key space is unbounded by design.

    Rotating follows incident 003: rotation_live_actors actors each send rotation_events events rotation_gap_ms
    apart and retire; the replacement (a never-used key) sends its first event the moment its predecessor sends its
    last. The live actors are the open sessions (concurrency) and rotation_events * rotation_gap_ms their length; by
    Little's law the rate is live * events / ((events - 1) * gap), so `rate` must agree with it.
    """

    shape: str
    keys: int
    rate: float
    duration_ms: int
    seed: int
    zipf_s: float = 1.1
    hot_key_share: float = 0.5
    rotation_live_actors: int = 0
    rotation_gap_ms: int = 0
    payload_bytes: int = 32
    rotation_events: int = 2
    hot_key_payload_bytes: int | None = None  # the hot key's events' payload (hot_key); None: payload_bytes

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise ValueError(f"shape: {self.shape!r} is not one of {', '.join(SHAPES)}")
        if not _is_int(self.keys) or self.keys < 1:
            raise ValueError(f"keys: must be an int >= 1, got {self.keys!r}")
        if not _is_number(self.rate) or self.rate <= 0:
            raise ValueError(f"rate: must be a finite number of events/s > 0, got {self.rate!r}")
        if not _is_int(self.duration_ms) or self.duration_ms < 0:
            raise ValueError(f"duration_ms: must be an int >= 0, got {self.duration_ms!r}")
        if not _is_int(self.seed):
            raise ValueError(f"seed: must be an int, got {self.seed!r}")
        if not _is_number(self.zipf_s) or self.zipf_s <= 0:
            raise ValueError(f"zipf_s: must be a finite number > 0, got {self.zipf_s!r}")
        if not _is_number(self.hot_key_share) or not 0 < self.hot_key_share < 1:
            raise ValueError(f"hot_key_share: must be a number strictly between 0 and 1, got {self.hot_key_share!r}")
        if not _is_int(self.payload_bytes) or not 0 <= self.payload_bytes <= MAX_PAYLOAD_BYTES:
            raise ValueError(f"payload_bytes: must be an int in 0..{MAX_PAYLOAD_BYTES}, got {self.payload_bytes!r}")
        hot = self.hot_key_payload_bytes
        if hot is not None and (not _is_int(hot) or not 0 <= hot <= MAX_HOT_KEY_PAYLOAD_BYTES):
            raise ValueError(f"hot_key_payload_bytes: must be an int in 0..{MAX_HOT_KEY_PAYLOAD_BYTES}, got {hot!r}")
        if self.shape == "hot_key" and self.keys < 2:
            raise ValueError(f"keys: hot_key needs >= 2 keys (hot-0 plus at least one other), got {self.keys}")
        if self.shape == "rotating":
            self._check_rotation()

    def _check_rotation(self) -> None:
        live, gap, events = self.rotation_live_actors, self.rotation_gap_ms, self.rotation_events
        if not _is_int(events) or events < 2:
            raise ValueError(f"rotation_events: rotating needs an int >= 2 (a first and a last), got {events!r}")
        if not _is_int(live) or live < 1:
            raise ValueError(f"rotation_live_actors: rotating needs an int >= 1, got {live!r}")
        if not _is_int(gap) or gap < 1:
            raise ValueError(f"rotation_gap_ms: rotating needs an int >= 1, got {gap!r}")
        implied = rotation_rate(live, gap, events)
        if abs(self.rate - implied) > 1e-6 * implied:
            raise ValueError(
                f"rate: rotating with {live} live actors sending {events} events {gap} ms apart is "
                f"1000*live*events/((events-1)*gap_ms) = {implied!r} ev/s, got {self.rate!r}"
            )


def rotation_rate(live_actors: int, gap_ms: int, events: int) -> float:
    """Events/s of a rotation: each actor sends `events` events over (events - 1) * gap_ms (Little's law)."""
    return 1000 * live_actors * events / ((events - 1) * gap_ms)


def plan(spec: WorkloadSpec, start_ms: int = 0) -> Iterator[Event]:
    """Yield the run's events lazily in nondecreasing event time (= start_ms + planned send offset).

    uniform, zipf, hot_key: event i is planned at floor(i * 1000 / rate) ms, matching Pacer's schedule exactly.
    rotating: actor n sends at floor(n * life / live) and every gap ms after, `events` events over life =
    (events - 1) * gap; only actors whose last event falls inside duration_ms start, so the first and last life of
    a run run below the rate (a fixed gap, a fixed number of live
    actors and an even grid cannot all hold while the first actors have nothing to retire).
    """
    rng = random.Random(spec.seed)
    if spec.shape == "rotating":
        return _rotating(spec, start_ms, rng)
    return _keyed(spec, start_ms, rng)


def _payload(rng: random.Random, size: int) -> str:
    return rng.randbytes((size + 1) // 2).hex()[:size]


def _key_picker(spec: WorkloadSpec, rng: random.Random) -> Callable[[int], str]:
    if spec.shape == "uniform":
        return lambda _i: f"k-{rng.randrange(spec.keys)}"
    if spec.shape == "zipf":
        cumulative = list(itertools.accumulate((rank + 1) ** -spec.zipf_s for rank in range(spec.keys)))
        last = spec.keys - 1
        return lambda _i: f"k-{min(bisect.bisect_right(cumulative, rng.random() * cumulative[-1]), last)}"
    share = spec.hot_key_share

    # The hot key takes an exact share of the slots, evenly spread, so it never pauses long enough to close its
    # session: that is what drives it into the max-length cut.
    def hot_or_other(i: int) -> str:
        if math.floor((i + 1) * share) > math.floor(i * share):
            return HOT_KEY
        return f"k-{rng.randrange(spec.keys - 1)}"

    return hot_or_other


def _keyed(spec: WorkloadSpec, start_ms: int, rng: random.Random) -> Iterator[Event]:
    pick = _key_picker(spec, rng)
    hot_bytes = spec.payload_bytes if spec.hot_key_payload_bytes is None else spec.hot_key_payload_bytes
    next_seq: dict[str, int] = {}
    for i in itertools.count():
        offset = math.floor(i * 1000 / spec.rate)
        if offset >= spec.duration_ms:
            return
        key = pick(i)
        seq = next_seq.get(key, 0)
        next_seq[key] = seq + 1
        yield Event(key, seq, start_ms + offset, _payload(rng, hot_bytes if key == HOT_KEY else spec.payload_bytes))


def _rotating(spec: WorkloadSpec, start_ms: int, rng: random.Random) -> Iterator[Event]:
    live, gap, events = spec.rotation_live_actors, spec.rotation_gap_ms, spec.rotation_events
    life = (events - 1) * gap
    # The live actors' next events as (offset, actor, seq): at equal offsets the older actor (lower number) goes
    # first, so an actor retires before its replacement starts; one entry per live actor.
    pending: list[tuple[int, int, int]] = []
    for actor in itertools.count():
        # Integer arithmetic makes actor n+live start exactly when actor n retires: exactly `live` stay live.
        first = actor * life // live
        if first + life >= spec.duration_ms:
            break
        while pending and pending[0][0] <= first:
            yield _next_of(pending, gap, events, start_ms, rng, spec.payload_bytes)
        yield Event(f"actor-{actor}", 0, start_ms + first, _payload(rng, spec.payload_bytes))
        heapq.heappush(pending, (first + gap, actor, 1))
    while pending:
        yield _next_of(pending, gap, events, start_ms, rng, spec.payload_bytes)


def _next_of(pending: list[tuple[int, int, int]], gap: int, events: int, start_ms: int, rng: random.Random,
             payload_bytes: int) -> Event:
    offset, actor, seq = heapq.heappop(pending)
    if seq + 1 < events:
        heapq.heappush(pending, (offset + gap, actor, seq + 1))
    return Event(f"actor-{actor}", seq, start_ms + offset, _payload(rng, payload_bytes))


class Pacing(Protocol):
    """What produce() needs of a pacer: Pacer (a steady rate) or chaos.arm.job.EventTimePacer (event times)."""

    def take(self, limit: int | None = None) -> int: ...
    def seconds_until_next(self) -> float: ...


class Pacer:
    """Releases event i at start + i / rate seconds on an injectable monotonic clock.

    The producer asks how many events are due, sends them as one burst and sleeps until the next; after a stall the
    backlog is released at once (catch up, never skip), so event time and send time stay tied together.
    """

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not _is_number(rate) or rate <= 0:
            raise ValueError(f"rate: must be a finite number of events/s > 0, got {rate!r}")
        self.rate = rate
        self._clock = clock
        self._start: float | None = None
        self.released = 0

    def take(self, limit: int | None = None) -> int:
        """Claim the events due now (at most `limit`); the first call starts the schedule and releases event 0."""
        now = self._clock()
        if self._start is None:
            self._start = now
        due = math.floor((now - self._start) * self.rate) + 1 - self.released
        count = due if limit is None else min(due, limit)
        self.released += count
        return count

    def seconds_until_next(self) -> float:
        """How long the producer may sleep before the next unclaimed event is due (0 if one is due already)."""
        if self._start is None:
            return 0.0
        return max(0.0, self._start + self.released / self.rate - self._clock())


@dataclass(frozen=True, slots=True)
class Acked:
    key: str
    seq: int
    event_time_ms: int
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class Failed:
    """A delivery the producer gave up on: it may or may not have landed, so the oracle treats it as uncertain."""

    key: str
    seq: int
    event_time_ms: int
    error: str


@dataclass(frozen=True)
class LedgerContents:
    acked: list[Acked]
    failed: list[Failed]


class LedgerError(ValueError):
    """A ledger line that is not a valid record (anywhere but a torn last line)."""


_ACKED_FIELDS = {"key": str, "seq": int, "event_time_ms": int, "partition": int, "offset": int}
_FAILED_FIELDS = {"key": str, "seq": int, "event_time_ms": int, "error": str}


# An acknowledged record exactly as Ledger writes it (a key without escapes): read without the JSON parser, in half
# the time; any other line, valid or not, is left to it (tests/unit/test_workload.py compares the two).
_INT = rb"(-?(?:0|[1-9][0-9]*))"
_ACKED_LINE = re.compile(rb'\{"key":"([^"\\\x00-\x1f]*)","seq":' + _INT + rb',"event_time_ms":' + _INT
                         + rb',"partition":' + _INT + rb',"offset":' + _INT + rb"\}\n")


def _parse_record(raw: bytes) -> Acked | Failed:
    """Parse one ledger line; raises ValueError with the reason (the caller adds file and line)."""
    written = _ACKED_LINE.fullmatch(raw)
    if written is not None:
        key, seq, event_time_ms, partition, offset = written.groups()
        try:
            return Acked(key.decode(), int(seq), int(event_time_ms), int(partition), int(offset))
        except UnicodeDecodeError:
            pass  # the JSON parser says why
    return _parse_json_record(raw)


def _parse_json_record(raw: bytes) -> Acked | Failed:
    record = json_object(raw)
    kind: type[Acked] | type[Failed]
    if record.keys() == _ACKED_FIELDS.keys():
        fields, kind = _ACKED_FIELDS, Acked
    elif record.keys() == _FAILED_FIELDS.keys():
        fields, kind = _FAILED_FIELDS, Failed
    else:
        raise ValueError(f"fields {sorted(record)} are neither {sorted(_ACKED_FIELDS)} nor {sorted(_FAILED_FIELDS)}")
    for name, expected in fields.items():
        value = record[name]
        if not isinstance(value, expected) or isinstance(value, bool):
            raise ValueError(f"field {name!r} must be {expected.__name__}, got {value!r}")
    return kind(**record)  # type: ignore[arg-type]  # every field checked just above


class Ledger:
    """Append-only JSON-lines record of delivery outcomes, one line per event, written from delivery callbacks.

    Line buffered, so a crashed producer loses at most the line being written; reopening finishes or drops that
    torn line so appending after a restart cannot glue two records together.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._repair_tail()
        self._file = open(self.path, "a", encoding="utf-8", buffering=1)

    def _repair_tail(self) -> None:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with open(self.path, "rb+") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - 65536))
            tail = f.read()
            if tail.endswith(b"\n"):
                return
            cut = tail.rfind(b"\n")
            if cut < 0 and size > len(tail):
                raise LedgerError(f"{self.path}: last line is longer than 64 KiB, not a torn record")
            try:
                _parse_record(tail[cut + 1 :])
            except ValueError:
                f.truncate(size - len(tail) + cut + 1)
            else:
                f.write(b"\n")

    def acked(self, event: Event, partition: int, offset: int) -> None:
        self._write({"key": event.key, "seq": event.seq, "event_time_ms": event.event_time_ms,
                     "partition": partition, "offset": offset})

    def failed(self, event: Event, error: str) -> None:
        self._write({"key": event.key, "seq": event.seq, "event_time_ms": event.event_time_ms, "error": error})

    def _write(self, record: dict[str, object]) -> None:
        self._file.write(json.dumps(record, separators=(",", ":")) + "\n")

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @staticmethod
    def read(path: str | os.PathLike[str]) -> LedgerContents:
        """All records; an unterminated last line that does not parse is a torn write and is skipped."""
        acked: list[Acked] = []
        failed: list[Failed] = []
        for record in Ledger.records(path):
            if isinstance(record, Acked):
                acked.append(record)
            else:
                failed.append(record)
        return LedgerContents(acked, failed)

    @staticmethod
    def records(path: str | os.PathLike[str]) -> Iterator[Acked | Failed]:
        """The records in file order, one line in memory at a time (a ledger of millions of events is read in
        bounded memory); the same torn last line skipped, the same LedgerError, as `read`."""
        with open(path, "rb") as f:
            for lineno, line in enumerate(f, 1):
                torn_candidate = not line.endswith(b"\n")
                try:
                    record = _parse_record(line)
                except ValueError as exc:
                    if torn_candidate:
                        break
                    raise LedgerError(f"{path}:{lineno}: {exc}") from None
                yield record


@dataclass(frozen=True)
class ProduceResult:
    sent: int
    acked: int
    failed: int
    undelivered: int  # still queued after flush: no delivery report, so neither acked nor failed in the ledger


def produce(
    events: Iterable[Event],
    bootstrap: str,
    topic: str,
    ledger: Ledger,
    pacer: Pacing,
    stop_event: threading.Event | None = None,
    progress: Callable[[ProduceResult], None] | None = None,
    *,
    config: dict[str, object] | None = None,
) -> ProduceResult:
    """Send `events` at the pacer's rate and ledger every delivery report.

    Idempotence plus acks=all means an acknowledged event is in the log exactly once; murmur2_random keeps each key
    on one partition so per-key order (seq order) survives. `config` overrides producer settings (e.g.
    message.timeout.ms, which bounds how long a fault can hold a delivery open). `progress` is called about once a
    second from this thread.
    """
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "partitioner": "murmur2_random",
        **(config or {}),
    })
    sent = acked = failed = 0

    def on_delivery(event: Event, err: KafkaError | None, msg: Message) -> None:
        nonlocal acked, failed
        if err is None:
            ledger.acked(event, msg.partition(), msg.offset())  # type: ignore[arg-type]  # set on a delivered message
            acked += 1
        else:
            ledger.failed(event, str(err))
            failed += 1

    def result(undelivered: int) -> ProduceResult:
        return ProduceResult(sent, acked, failed, undelivered)

    remaining = iter(events)
    next_progress = time.monotonic() + 1.0
    try:
        while stop_event is None or not stop_event.is_set():
            claimed = pacer.take(limit=1000)
            burst = list(itertools.islice(remaining, claimed))
            for event in burst:
                while True:
                    try:
                        producer.produce(topic, value=event.to_json(), key=event.key,
                                         on_delivery=functools.partial(on_delivery, event))
                        break
                    except BufferError:  # local queue full (broker slow or gone): serve deliveries, retry
                        producer.poll(0.1)
                sent += 1
            if len(burst) < claimed:  # the plan is exhausted
                break
            producer.poll(max(pacer.seconds_until_next(), 0.001))
            if progress is not None and time.monotonic() >= next_progress:
                progress(result(len(producer)))
                next_progress += 1.0
    finally:
        undelivered = producer.flush()
    return result(undelivered)
