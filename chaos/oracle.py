"""Exactly-once oracle: the sessions a run must produce, and how the job's output differs from them.

Every function is pure (ledger records and emitted rows in, report out), so any run can be re-checked offline.
This module is the reference and holds its input in memory; chaos/oracle_bounded.py gives the same reports in
bounded memory, and the harness judges through it (chaos/judging.py).
Seq ranges are inclusive (first, last) pairs: per key, seqs are contiguous and event time never decreases with seq,
so a session is exactly the seqs between its first_seq and last_seq.
"""

from __future__ import annotations

import bisect
import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Protocol

Range = tuple[int, int]


class KeyedEvent(Protocol):
    """Anything with key, seq and event time: workload.Event, workload.Acked, workload.Failed."""

    @property
    def key(self) -> str: ...

    @property
    def seq(self) -> int: ...

    @property
    def event_time_ms(self) -> int: ...


def session_id(key: str, first_seq: int) -> str:
    """Deterministic session identity, shared with the job so emitted rows can be matched to expected ones."""
    return hashlib.sha1(f"{key}|{first_seq}".encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Session:
    key: str
    start_ms: int  # first event time
    end_ms: int  # last event time + gap_ms, like Spark's session_window
    count: int
    first_seq: int
    last_seq: int
    session_id: str

    @classmethod
    def from_record(cls, record: Mapping[str, object] | Session, where: str) -> Session:
        """Accept a job's output row (dict) or a Session; `where` names the row in error messages."""
        if isinstance(record, Session):
            return record
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in record:
                raise ValueError(f"{where}: missing field {f.name!r}")
            value = record[f.name]
            wanted = str if f.name in ("key", "session_id") else int
            if not isinstance(value, wanted) or isinstance(value, bool):
                raise ValueError(f"{where}: field {f.name!r} must be {wanted.__name__}, got {value!r}")
            values[f.name] = value
        return cls(**values)


def _events_by_key(events: Iterable[KeyedEvent]) -> dict[str, list[tuple[int, int]]]:
    """(event_time_ms, seq) per key, sorted; rejects duplicates and time going backwards with seq."""
    by_key: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for e in events:
        by_key[e.key].append((e.event_time_ms, e.seq))
    for key, evs in by_key.items():
        evs.sort()
        for (prev_t, prev_seq), (t, seq) in zip(evs, evs[1:]):
            if seq == prev_seq:
                raise ValueError(f"key {key!r}: seq {seq} appears twice among acknowledged events")
            if seq < prev_seq:
                raise ValueError(
                    f"key {key!r}: seq {prev_seq} at {prev_t} ms is earlier than seq {seq} at {t} ms; "
                    "event time must be nondecreasing in seq"
                )
    return by_key


def expected_sessions(
    acked_events: Iterable[KeyedEvent],
    gap_ms: int,
    max_len_ms: int | None = None,
    drained: bool = True,
    watermark_ms: int | None = None,
    extra_copies: Mapping[str, Mapping[int, int]] | None = None,
) -> list[Session]:
    """Sessions of the hardened (event-time) profile, sorted by (key, start_ms).

    Per key, in (event_time_ms, seq) order, the next event starts a new session when it is more than gap_ms after
    the previous event (Spark's session_window merges windows that touch), or when it falls into a later
    max_len_ms-aligned bucket of event time than the session's first
    event (t // max_len_ms differs): no session spans more than max_len_ms, so a key that never pauses still closes
    sessions. This is the rule the job implements with session_window grouped by that bucket. Undrained, only
    sessions closed at the watermark (end_ms <= watermark_ms) are expected yet. `extra_copies` (key -> {seq: copies
    beyond the first}, chaos/topic_audit.py): events the topic holds more than once, which a session counts as
    input.
    """
    if gap_ms <= 0:
        raise ValueError(f"gap_ms: must be > 0, got {gap_ms}")
    if max_len_ms is not None and max_len_ms <= 0:
        raise ValueError(f"max_len_ms: must be > 0 or None, got {max_len_ms}")
    if drained != (watermark_ms is None):
        raise ValueError("watermark_ms: required when drained=False and meaningless when drained=True")
    sessions = []
    for key, evs in sorted(_events_by_key(acked_events).items()):
        copies = (extra_copies or {}).get(key, {})
        run = [evs[0]]
        for t, seq in evs[1:]:
            too_long = max_len_ms is not None and t // max_len_ms != run[0][0] // max_len_ms
            if t - run[-1][0] > gap_ms or too_long:
                sessions.append(_session(key, run, gap_ms, copies))
                run = []
            run.append((t, seq))
        sessions.append(_session(key, run, gap_ms, copies))
    if not drained and watermark_ms is not None:  # given when not drained (checked above)
        sessions = [s for s in sessions if s.end_ms <= watermark_ms]
    return sessions


def _session(key: str, run: list[tuple[int, int]], gap_ms: int, copies: Mapping[int, int]) -> Session:
    first_seq = run[0][1]
    count = len(run) + sum(copies.get(seq, 0) for _t, seq in run)
    return Session(key, run[0][0], run[-1][0] + gap_ms, count, first_seq, run[-1][1], session_id(key, first_seq))


def _merge(ranges: Iterable[Range]) -> list[Range]:
    """Union as sorted disjoint ranges (adjacent ones joined); empty ranges (first > last) are ignored."""
    out: list[Range] = []
    for lo, hi in sorted(r for r in ranges if r[0] <= r[1]):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _subtract(a: list[Range], b: list[Range]) -> list[Range]:
    """a minus b, both merged."""
    out: list[Range] = []
    j = 0
    for lo, hi in a:
        while j < len(b) and b[j][1] < lo:
            j += 1
        cur, k = lo, j
        while k < len(b) and b[k][0] <= hi:
            if b[k][0] > cur:
                out.append((cur, b[k][0] - 1))
            cur = max(cur, b[k][1] + 1)
            k += 1
        if cur <= hi:
            out.append((cur, hi))
    return out


def _covered_twice(ranges: Iterable[Range]) -> list[Range]:
    """Seqs lying in two or more of the ranges."""
    deltas: Counter[int] = Counter()
    for lo, hi in ranges:
        if lo <= hi:
            deltas[lo] += 1
            deltas[hi + 1] -= 1
    out: list[Range] = []
    depth, start = 0, 0
    for pos in sorted(deltas):
        new_depth = depth + deltas[pos]
        if depth < 2 <= new_depth:
            start = pos
        elif new_depth < 2 <= depth:
            out.append((start, pos - 1))
        depth = new_depth
    return out


def _compress(sorted_seqs: list[int]) -> list[Range]:
    out: list[Range] = []
    for s in sorted_seqs:
        if out and s == out[-1][1] + 1:
            out[-1] = (out[-1][0], s)
        else:
            out.append((s, s))
    return out


def _size(ranges: list[Range]) -> int:
    return sum(hi - lo + 1 for lo, hi in ranges)


def _per_key_examples(per_key: dict[str, list[Range]], cap: int) -> dict[str, list[list[int]]]:
    return {key: [[lo, hi] for lo, hi in per_key[key][:cap]] for key in sorted(per_key)[:cap] if per_key[key]}


def _per_key_total(per_key: dict[str, list[Range]]) -> int:
    return sum(_size(r) for r in per_key.values())


@dataclass(frozen=True)
class OracleReport:
    """Counts are complete; *_examples are capped (max_examples items, and per key max_examples ranges)."""

    expected: int
    emitted: int
    lost: int  # expected session ids never emitted
    duplicated: int  # session ids emitted more than once
    wrong: int  # expected ids emitted with different fields
    unexpected: int  # emitted ids that were not expected
    missing_seqs: int  # expected seqs no emitted session covers
    repeated_seqs: int  # seqs covered by two or more emitted sessions
    lost_examples: tuple[dict[str, object], ...]
    duplicated_examples: tuple[dict[str, object], ...]  # {"session_id", "key", "times"}
    wrong_examples: tuple[dict[str, object], ...]  # {"session_id", "key", "fields": {name: {"expected","actual"}}}
    unexpected_examples: tuple[dict[str, object], ...]
    missing_seq_examples: dict[str, list[list[int]]]  # key -> inclusive [first, last] ranges
    repeated_seq_examples: dict[str, list[list[int]]]

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.wrong or self.unexpected)

    def to_dict(self) -> dict[str, object]:
        return {"ok": self.ok, **asdict(self)}


def compare(
    expected: Iterable[Session],
    actual: Iterable[Mapping[str, object] | Session],
    max_examples: int = 20,
) -> OracleReport:
    """Match emitted sessions to expected ones by session_id, and check per-key seq coverage."""
    want: dict[str, Session] = {}
    for s in expected:
        if s.session_id in want:
            raise ValueError(f"expected: session_id {s.session_id} appears twice")
        want[s.session_id] = s
    got = [Session.from_record(r, f"emitted session #{i}") for i, r in enumerate(actual)]
    times = Counter(s.session_id for s in got)

    wrong: dict[str, dict[str, dict[str, object]]] = {}
    for s in got:
        exp = want.get(s.session_id)
        if exp is None:
            continue
        for f in fields(Session):
            e, a = getattr(exp, f.name), getattr(s, f.name)
            if e != a:
                wrong.setdefault(s.session_id, {}).setdefault(f.name, {"expected": e, "actual": a})

    lost = [s for sid, s in want.items() if sid not in times]
    duplicated = sorted(sid for sid, n in times.items() if n > 1)
    unexpected = [s for s in got if s.session_id not in want]
    first_of = {s.session_id: s for s in reversed(got)}

    expected_ranges: dict[str, list[Range]] = defaultdict(list)
    for s in want.values():
        expected_ranges[s.key].append((s.first_seq, s.last_seq))
    emitted_ranges: dict[str, list[Range]] = defaultdict(list)
    for s in got:
        emitted_ranges[s.key].append((s.first_seq, s.last_seq))
    missing = {k: _subtract(_merge(r), _merge(emitted_ranges.get(k, []))) for k, r in expected_ranges.items()}
    repeated = {k: _covered_twice(r) for k, r in emitted_ranges.items()}

    cap = max_examples
    return OracleReport(
        expected=len(want),
        emitted=len(got),
        lost=len(lost),
        duplicated=len(duplicated),
        wrong=len(wrong),
        unexpected=len({s.session_id for s in unexpected}),
        missing_seqs=_per_key_total(missing),
        repeated_seqs=_per_key_total(repeated),
        lost_examples=tuple(asdict(s) for s in lost[:cap]),
        duplicated_examples=tuple(
            {"session_id": sid, "key": first_of[sid].key, "times": times[sid]} for sid in duplicated[:cap]
        ),
        wrong_examples=tuple(
            {"session_id": sid, "key": want[sid].key, "fields": diff} for sid, diff in list(wrong.items())[:cap]
        ),
        unexpected_examples=tuple(asdict(s) for s in unexpected[:cap]),
        missing_seq_examples=_per_key_examples(missing, cap),
        repeated_seq_examples=_per_key_examples(repeated, cap),
    )


@dataclass(frozen=True)
class CoverageReport:
    """Seq-level check for profiles whose session boundaries cannot be predicted (processing-time sessions)."""

    acked: int  # acknowledged (key, seq) pairs
    failed: int  # failed deliveries: uncertain, may have landed
    emitted: int
    lost: int  # acknowledged seqs no emitted session covers
    duplicated: int  # seqs covered by two or more emitted sessions
    wrong_counts: int  # sessions whose count is not acked-in-range .. acked+failed-in-range
    unknown: int  # seqs covered by an emitted session but absent from the ledger
    lost_examples: dict[str, list[list[int]]]
    duplicated_examples: dict[str, list[list[int]]]
    wrong_count_examples: tuple[dict[str, object], ...]
    unknown_examples: dict[str, list[list[int]]]

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.wrong_counts or self.unknown)

    def to_dict(self) -> dict[str, object]:
        return {"ok": self.ok, **asdict(self)}


def coverage(
    acked_events: Iterable[KeyedEvent],
    failed_events: Iterable[KeyedEvent],
    actual: Iterable[Mapping[str, object] | Session],
    max_examples: int = 20,
    extra_copies: Mapping[str, Mapping[int, int]] | None = None,
) -> CoverageReport:
    """Every acknowledged seq must lie in exactly one emitted [first_seq, last_seq]; failed ones in at most one.

    A session's count must equal the seqs in its range that landed: all acknowledged ones plus some (unknowable)
    subset of the failed ones, plus the extra copies the topic holds of them (`extra_copies`, key -> {seq: copies
    beyond the first}: chaos/topic_audit.py).
    """
    acked: dict[str, list[int]] = {k: [seq for _t, seq in evs] for k, evs in _events_by_key(acked_events).items()}
    acked_sets = {k: set(v) for k, v in acked.items()}
    failed_sets: dict[str, set[int]] = defaultdict(set)
    for e in failed_events:
        # One delivery report per produced message: a repeat means the same event was produced twice.
        if e.seq in acked_sets.get(e.key, ()) or e.seq in failed_sets[e.key]:
            raise ValueError(f"key {e.key!r}: seq {e.seq} has more than one delivery outcome in the ledger")
        failed_sets[e.key].add(e.seq)
    failed = {k: sorted(v) for k, v in failed_sets.items()}
    extra = {k: sorted(seq for seq, n in copies.items() for _ in range(n))
             for k, copies in (extra_copies or {}).items()}

    emitted_ranges: dict[str, list[Range]] = defaultdict(list)
    wrong_counts = []
    emitted = 0
    for i, record in enumerate(actual):
        where = f"emitted session #{i}"
        key, first, last, count = (_field(record, n, where) for n in ("key", "first_seq", "last_seq", "count"))
        emitted += 1
        emitted_ranges[key].append((first, last))
        landed, copies = _count_in(acked.get(key, []), first, last), _count_in(extra.get(key, []), first, last)
        maybe = _count_in(failed.get(key, []), first, last)
        if not landed + copies <= count <= landed + copies + maybe:
            wrong_counts.append({"key": key, "first_seq": first, "last_seq": last, "count": count,
                                 "acked_in_range": landed, "failed_in_range": maybe,
                                 **({"topic_copies_in_range": copies} if copies else {})})

    lost, duplicated, unknown = {}, {}, {}
    for key in set(acked) | set(emitted_ranges):
        covered = _merge(emitted_ranges.get(key, []))
        known = _merge(_compress(acked.get(key, [])) + _compress(failed.get(key, [])))
        lost[key] = _subtract(_compress(acked.get(key, [])), covered)
        duplicated[key] = _covered_twice(emitted_ranges.get(key, []))
        unknown[key] = _subtract(covered, known)

    cap = max_examples
    return CoverageReport(
        acked=sum(len(v) for v in acked.values()),
        failed=sum(len(v) for v in failed.values()),
        emitted=emitted,
        lost=_per_key_total(lost),
        duplicated=_per_key_total(duplicated),
        wrong_counts=len(wrong_counts),
        unknown=_per_key_total(unknown),
        lost_examples=_per_key_examples(lost, cap),
        duplicated_examples=_per_key_examples(duplicated, cap),
        wrong_count_examples=tuple(wrong_counts[:cap]),
        unknown_examples=_per_key_examples(unknown, cap),
    )


def _field(record: Mapping[str, object] | Session, name: str, where: str) -> Any:
    value = getattr(record, name) if isinstance(record, Session) else record.get(name)
    wanted = str if name == "key" else int
    if not isinstance(value, wanted) or isinstance(value, bool):
        raise ValueError(f"{where}: field {name!r} must be {wanted.__name__}, got {value!r}")
    return value


def _count_in(sorted_seqs: list[int], first: int, last: int) -> int:
    return max(0, bisect.bisect_right(sorted_seqs, last) - bisect.bisect_left(sorted_seqs, first))


def emission_waits(emitted: Iterable[Mapping[str, object]], batch_done_ms: Mapping[int, int]) -> dict[str, object]:
    """How long the job's users waited for its sessions: per emitted session (a row with `batch_id`), the time from
    its first event (start_ms: the workload's event time is the wall clock it was produced at) to the end of the
    batch that wrote it (`batch_done_ms`: batch id -> wall ms, the job's progress). The longest, and the session.
    A key that never pauses keeps its session open: its events wait until it closes (at the drain, at worst)."""
    longest: dict[str, object] | None = None
    longest_ms = 0
    judged = unknown = 0
    for row in emitted:
        batch_id, start = row.get("batch_id"), row.get("start_ms")
        done = batch_done_ms.get(batch_id) if isinstance(batch_id, int) else None
        if done is None or not isinstance(start, int):
            unknown += 1
            continue
        judged += 1
        wait = done - start
        if longest is None or wait > longest_ms:
            longest_ms = wait
            longest = {"wait_ms": wait, "key": row.get("key"), "session_id": row.get("session_id"),
                       "start_ms": start, "count": row.get("count"), "batch_id": row.get("batch_id")}
    return {"sessions": judged, "unmeasured": unknown, "longest": longest}
