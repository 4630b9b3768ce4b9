"""Per-key sessions: one builder per profile, each from the same parsed event stream.

Output rows (every profile): key, start_ms (first event time), end_ms (last event time + gap, as
Spark's session_window defines it), count, first_seq, last_seq, session_id (sha1 of "key|first_seq",
16 hex chars: the same id the oracle computes).
"""
from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from .settings import Settings

EVENT_SCHEMA = "key STRING, seq LONG, event_time_ms LONG, payload STRING"
SESSION_COLUMNS = ["key", "start_ms", "end_ms", "count", "first_seq", "last_seq", "session_id"]
SESSION_SCHEMA = ("key STRING, start_ms LONG, end_ms LONG, count LONG, first_seq LONG, last_seq LONG, "
                  "session_id STRING")


def parse_events(kafka_rows: DataFrame) -> DataFrame:
    return (kafka_rows
            .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("event"))
            .select("event.*")
            .where(F.col("key").isNotNull())
            .withColumn("event_time", F.timestamp_millis("event_time_ms")))


def _session_id(key, first_seq):
    return F.substring(F.sha1(F.concat(key, F.lit("|"), first_seq.cast("string"))), 1, 16)


def session_window_sessions(events: DataFrame, settings: Settings) -> DataFrame:
    """Event-time sessions with Spark's native session_window; aggregates only.

    With max_session_ms set, sessions are also cut at max_session_ms-aligned boundaries of event time
    (grouping by the boundary bucket), so no session spans more than max_session_ms and a key that never
    pauses still closes a session per bucket.
    """
    gap = f"{settings.gap_ms} milliseconds"
    grouped = events.withWatermark("event_time", f"{settings.watermark_ms} milliseconds")
    keys = [F.col("key")]
    if settings.max_session_ms:
        grouped = grouped.withColumn("bucket", F.floor(F.col("event_time_ms") / F.lit(settings.max_session_ms)))
        keys.append(F.col("bucket"))
    aggregates = [F.min("event_time_ms").alias("start_ms"), F.max("event_time_ms").alias("last_ms"),
                  F.count(F.lit(1)).alias("count"), F.min("seq").alias("first_seq"), F.max("seq").alias("last_seq")]
    emitted = []
    if settings.attribute_bytes:
        # Cut before aggregating, so the state holds attribute_bytes, not the whole payload; emitted as a length
        # (the output stays small) that the optimizer cannot compute without keeping the attributes.
        first_payload = F.substring("payload", 1, settings.attribute_bytes)
        aggregates.append(F.min_by(first_payload, "seq").alias("attributes"))
        emitted.append(F.length("attributes").alias("attribute_bytes"))
    sessions = grouped.groupBy(*keys, F.session_window("event_time", gap)).agg(*aggregates)
    return sessions.select(
        "key", "start_ms", (F.col("last_ms") + F.lit(settings.gap_ms)).alias("end_ms"), "count",
        "first_seq", "last_seq", _session_id(F.col("key"), F.col("first_seq")).alias("session_id"), *emitted)


class BufferingSessionProcessor(StatefulProcessor):
    """The incident job's shape: every event of the session kept in list state; the session closes
    `gap` of *processing* time after its last event; on close the whole list is read back.

    Per-key bookkeeping (the last sequence seen) is kept forever with no TTL, as incident 003's operators
    kept expired keys: under key rotation it grows without bound.
    """

    def __init__(self, gap_ms: int):
        self.gap_ms = gap_ms

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.events = handle.getListState("events", "seq LONG, event_time_ms LONG, payload STRING")
        self.last_seen = handle.getValueState("last_seen", "last_seq LONG")

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        for frame in rows:
            self.events.appendList(list(frame[["seq", "event_time_ms", "payload"]].itertuples(index=False,
                                                                                             name=None)))
            self.last_seen.update((int(frame["seq"].max()),))
        for timer in list(self.handle.listTimers()):
            self.handle.deleteTimer(timer)
        self.handle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + self.gap_ms)
        return iter([])

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[pd.DataFrame]:
        buffered = list(self.events.get())
        self.events.clear()
        if not buffered:
            return iter([])
        seqs = [seq for seq, _, _ in buffered]
        times = [time for _, time, _ in buffered]
        first_seq = min(seqs)
        row = {"key": key[0], "start_ms": min(times), "end_ms": max(times) + self.gap_ms,
               "count": len(buffered), "first_seq": first_seq, "last_seq": max(seqs),
               "session_id": _python_session_id(key[0], first_seq)}
        return iter([pd.DataFrame([row], columns=SESSION_COLUMNS)])

    def close(self) -> None:
        pass


def _python_session_id(key: str, first_seq: int) -> str:
    import hashlib

    return hashlib.sha1(f"{key}|{first_seq}".encode()).hexdigest()[:16]


def buffering_sessions(events: DataFrame, settings: Settings) -> DataFrame:
    return (events.groupBy("key")
            .transformWithStateInPandas(BufferingSessionProcessor(settings.gap_ms), SESSION_SCHEMA,
                                        outputMode="Append", timeMode="ProcessingTime"))




# -- transformWithState variants with the hardened rules, measured against session_window --------------
# The same event-time rules as session_window_sessions, kept in ValueState (aggregates only) and closed by
# an event-time timer at last + gap. `chaos bench job` measures them; the hardened profile uses whichever
# is fastest (docs/job.md has the figures).

AGGREGATE_SCHEMA = "start_ms LONG, last_ms LONG, count LONG, first_seq LONG, last_seq LONG"


def fold_session(state: tuple | None, events: list[tuple[int, int]], gap_ms: int, max_session_ms: int | None
                 ) -> tuple[tuple | None, list[tuple]]:
    """Fold (event_time_ms, seq) events into the open session; return it and the sessions closed on the way.

    A session closes when an event comes more than `gap_ms` after the last one (as session_window:
    windows that touch merge), or falls into a later
    max_session_ms-aligned bucket of event time.
    """
    closed = []
    for event_time, seq in sorted(events):
        if state is not None:
            start, last, count, first_seq, last_seq = state
            new_bucket = max_session_ms and event_time // max_session_ms != start // max_session_ms
            if event_time - last > gap_ms or new_bucket:
                closed.append(state)
                state = None
        if state is None:
            state = (event_time, event_time, 1, seq, seq)
        else:
            start, last, count, first_seq, last_seq = state
            state = (start, max(last, event_time), count + 1, min(first_seq, seq), max(last_seq, seq))
    return state, closed


def _session_row(key: str, aggregate: tuple, gap_ms: int) -> dict:
    start, last, count, first_seq, last_seq = aggregate
    return {"key": key, "start_ms": start, "end_ms": last + gap_ms, "count": count, "first_seq": first_seq,
            "last_seq": last_seq, "session_id": _python_session_id(key, first_seq)}


class AggregateSessionProcessor(StatefulProcessor):
    """Hardened rules in transformWithState: one ValueState per key, an event-time timer per session."""

    pandas = False

    def __init__(self, gap_ms: int, max_session_ms: int | None):
        self.gap_ms = gap_ms
        self.max_session_ms = max_session_ms

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.session = handle.getValueState("session", AGGREGATE_SCHEMA)

    def _events(self, rows) -> list[tuple[int, int]]:
        if self.pandas:
            return [(int(t), int(s)) for frame in rows for t, s in zip(frame["event_time_ms"], frame["seq"])]
        return [(row.event_time_ms, row.seq) for row in rows]

    def _emit(self, rows: list[dict]):
        if self.pandas:
            return iter([pd.DataFrame(rows, columns=SESSION_COLUMNS)] if rows else [])
        from pyspark.sql import Row

        return iter([Row(**row) for row in rows])

    def handleInputRows(self, key, rows, timerValues):
        state = self.session.get() if self.session.exists() else None
        state, closed = fold_session(state, self._events(rows), self.gap_ms, self.max_session_ms)
        if state is None:  # no rows at all (Spark passes at least one): nothing to keep, nothing closed
            return self._emit([])
        for timer in list(self.handle.listTimers()):
            self.handle.deleteTimer(timer)
        self.session.update(state)
        self.handle.registerTimer(state[1] + self.gap_ms)
        return self._emit([_session_row(key[0], aggregate, self.gap_ms) for aggregate in closed])

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        if not self.session.exists():
            return self._emit([])
        aggregate = self.session.get()
        if aggregate is None:  # exists() said yes; a None here would be Spark's own inconsistency
            return self._emit([])
        row = _session_row(key[0], aggregate, self.gap_ms)
        self.session.clear()
        return self._emit([row])

    def close(self) -> None:
        pass


class PandasAggregateSessionProcessor(AggregateSessionProcessor):
    pandas = True


def tws_sessions(events: DataFrame, settings: Settings, pandas: bool) -> DataFrame:
    grouped = events.withWatermark("event_time", f"{settings.watermark_ms} milliseconds").groupBy("key")
    if pandas:
        pandas_processor = PandasAggregateSessionProcessor(settings.gap_ms, settings.max_session_ms)
        return grouped.transformWithStateInPandas(pandas_processor, SESSION_SCHEMA, outputMode="Append",
                                                  timeMode="EventTime")
    processor = AggregateSessionProcessor(settings.gap_ms, settings.max_session_ms)
    return grouped.transformWithState(processor, SESSION_SCHEMA, outputMode="Append", timeMode="EventTime")


# -- the naive state shape under the hardened rules: the switch aggregate_state off ------------------------------
# The same event-time sessions as session_window_sessions (so the oracle judges the output the same way), kept as
# the incident jobs kept them: every event of the open session in list state, read back whole on every batch, and
# per-key bookkeeping (the last seq seen) that is never expired. What `chaos mutate` shows is the state this costs.

def split_runs(events: list[tuple[int, int]], gap_ms: int, max_session_ms: int | None) -> list[list[tuple[int, int]]]:
    """(event_time_ms, seq) events, in any order, as the runs of events the sessions are made of: the session
    rules of fold_session (more than gap_ms apart, or a later max_session_ms bucket, starts a new session)."""
    runs: list[list[tuple[int, int]]] = []
    for event_time, seq in sorted(events):
        if runs:
            first, last = runs[-1][0][0], runs[-1][-1][0]
            if event_time - last <= gap_ms and not (max_session_ms and
                                                   event_time // max_session_ms != first // max_session_ms):
                runs[-1].append((event_time, seq))
                continue
        runs.append([(event_time, seq)])
    return runs


def run_aggregate(run: list[tuple[int, int]]) -> tuple[int, int, int, int, int]:
    """The aggregate fold_session keeps for a run: (start, last, count, first_seq, last_seq)."""
    times, seqs = [t for t, _ in run], [s for _, s in run]
    return min(times), max(times), len(run), min(seqs), max(seqs)


class BufferedEventTimeProcessor(StatefulProcessor):
    """Event-time sessions with an event-time timer at last + gap, every event buffered in list state."""

    def __init__(self, gap_ms: int, max_session_ms: int | None):
        self.gap_ms = gap_ms
        self.max_session_ms = max_session_ms

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.events = handle.getListState("events", "event_time_ms LONG, seq LONG")
        self.last_seen = handle.getValueState("last_seen", "last_seq LONG")  # never cleared, as in incident 003

    def _rows(self, key: str, runs: list[list[tuple[int, int]]]) -> Iterator[pd.DataFrame]:
        rows = [_session_row(key, run_aggregate(run), self.gap_ms) for run in runs]
        return iter([pd.DataFrame(rows, columns=SESSION_COLUMNS)] if rows else [])

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:
        arrived = [(int(t), int(s)) for frame in rows for t, s in zip(frame["event_time_ms"], frame["seq"])]
        buffered = [(int(t), int(s)) for t, s in self.events.get()] if self.events.exists() else []
        runs = split_runs(buffered + arrived, self.gap_ms, self.max_session_ms)
        closed, open_run = runs[:-1], runs[-1]
        self.events.put(open_run)
        self.last_seen.update((max(s for _, s in arrived),))
        for timer in list(self.handle.listTimers()):
            self.handle.deleteTimer(timer)
        self.handle.registerTimer(open_run[-1][0] + self.gap_ms)
        return self._rows(key[0], closed)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[pd.DataFrame]:
        buffered = [(int(t), int(s)) for t, s in self.events.get()] if self.events.exists() else []
        self.events.clear()
        return self._rows(key[0], split_runs(buffered, self.gap_ms, self.max_session_ms) if buffered else [])

    def close(self) -> None:
        pass


def buffered_event_time_sessions(events: DataFrame, settings: Settings) -> DataFrame:
    processor = BufferedEventTimeProcessor(settings.gap_ms, settings.max_session_ms)
    return (events.withWatermark("event_time", f"{settings.watermark_ms} milliseconds").groupBy("key")
            .transformWithStateInPandas(processor, SESSION_SCHEMA, outputMode="Append", timeMode="EventTime"))


def build(events: DataFrame, settings: Settings) -> DataFrame:
    # The naive shapes (the naive profile, aggregate_state off) buffer the events themselves and keep no attributes;
    # of the aggregate shapes only session-window keeps them, and a setting no state keeps is refused.
    if settings.attribute_bytes and settings.aggregate_state and settings.state_impl != "session-window":
        raise ValueError(f"attribute_bytes: state_impl {settings.state_impl!r} keeps no attributes; "
                         "only session-window does")
    if settings.profile == "naive":
        return buffering_sessions(events, settings)
    if not settings.aggregate_state:
        return buffered_event_time_sessions(events, settings)
    if settings.state_impl == "tws-rows":
        return tws_sessions(events, settings, pandas=False)
    if settings.state_impl == "tws-pandas":
        return tws_sessions(events, settings, pandas=True)
    return session_window_sessions(events, settings)
