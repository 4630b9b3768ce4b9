"""The exactly-once oracle in bounded memory: the reports of chaos/oracle.py's compare (over expected_sessions) and
coverage, identical for every input, from a ledger and emitted rows that need not fit in memory.

chaos/oracle.py is the reference: short, and every rule of the oracle is stated there. This module gets the same
answer at tens of millions of events:

- the ledger's records and the emitted rows stream once each into partitions on disk by a hash of their key
  (chaos/spill.py); each key partition is then judged on its own: its sessions (compare) or its coverage;
- per key, events that come in (event time, seq) order (the producer acknowledges one key's events in order) are
  cut into sessions as they stream, so a hot key costs its sessions, not its events; a key whose events come in any
  other order is judged by chaos/oracle.py itself, with that key's events in memory;
- compare matches an emitted row by its session_id, whatever its key says, so expected sessions and emitted rows
  are partitioned a second time, by session id, and matched partition by partition;
- examples are what the reference would pick: each finding carries its order in the reference's lists (a key, a
  row's place in the output), and only the first max_examples survive from partition to partition;
- an error is the one the reference raises first (a ledger key's in the order the key first appears, then one of
  the failed deliveries', then an emitted row's).

Memory is one key partition's (or one session-id partition's) worth; `partitions_for` sizes them from the ledger.
"""
from __future__ import annotations

import bisect
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .oracle import (
    CoverageReport,
    OracleReport,
    Range,
    Session,
    _compress,
    _count_in,
    _covered_twice,
    _events_by_key,
    _field,
    _merge,
    _size,
    _subtract,
    expected_sessions,
    session_id,
)
from .spill import Spill
from .workload import Acked, Failed

# Ledger bytes per partition: about 50,000 events of ~85 bytes; a partition of a key rotation's (a session per two
# events, the most there can be) is judged in about 30 MB (docs/job.md, "How the oracle scales").
LEDGER_BYTES_PER_PARTITION = 4 * 2**20
MAX_PARTITIONS = 4096  # past 16 GiB of ledger (about 200 million events) partitions grow instead


def partitions_for(ledger_bytes: int) -> int:
    """How many partitions keep one partition of a ledger of `ledger_bytes` near LEDGER_BYTES_PER_PARTITION."""
    return max(1, min(MAX_PARTITIONS, -(-ledger_bytes // LEDGER_BYTES_PER_PARTITION)))


def _twice(ranges: list[Range]) -> list[Range]:
    """oracle._covered_twice, without its work for a key emitted once (most keys)."""
    return _covered_twice(ranges) if len(ranges) > 1 else []


class _Firsts:
    """The values of the `cap` smallest orders offered (orders are unique), smallest first."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._items: list[tuple[Any, Any]] = []

    def wants(self, order: Any) -> bool:
        return self.cap > 0 and (len(self._items) < self.cap or order < self._items[-1][0])

    def offer(self, order: Any, value: Any) -> None:
        if self.wants(order):
            bisect.insort(self._items, (order, value), key=lambda item: item[0])
            del self._items[self.cap:]

    def values(self) -> list[Any]:
        return [value for _order, value in self._items]

    def items(self) -> list[tuple[Any, Any]]:
        return list(self._items)


class _PerKey:
    """A per-key finding (seq ranges) over every key: its total, and the reference's examples (the first max_examples
    keys in sorted order, those with ranges, max_examples ranges each: oracle._per_key_examples)."""

    def __init__(self, cap: int) -> None:
        self.total = 0
        self._firsts = _Firsts(cap)

    def add(self, key: str, ranges: list[Range]) -> None:
        self.total += _size(ranges)
        if self._firsts.wants(key):
            self._firsts.offer(key, [[lo, hi] for lo, hi in ranges[:self._firsts.cap]])

    def examples(self) -> dict[str, list[list[int]]]:
        return {key: ranges for key, ranges in self._firsts.items() if ranges}


class _Errors:
    """The error the reference would raise first: the smallest (stage, order) offered."""

    def __init__(self) -> None:
        self.first: tuple[int, Any, BaseException] | None = None

    def offer(self, stage: int, order: Any, error: BaseException) -> None:
        if self.first is None or (stage, order) < self.first[:2]:
            self.first = (stage, order, error)

    def raise_first(self) -> None:
        if self.first is not None:
            raise self.first[2]


# Stages of the reference's errors, in the order it meets them.
_KEY, _EXPECTED, _FAILED, _EXTRA, _ROW = range(5)


@dataclass(frozen=True, slots=True)
class _Event:
    key: str
    seq: int
    event_time_ms: int


def _check_rules(gap_ms: int, max_len_ms: int | None, drained: bool, watermark_ms: int | None) -> None:
    """expected_sessions' own argument checks (it raises them before it reads an event)."""
    expected_sessions([], gap_ms, max_len_ms, drained, watermark_ms)


def _check_cap(max_examples: int) -> None:
    if max_examples < 0:
        raise ValueError(f"max_examples: must be >= 0, got {max_examples}")


class _Ordered:
    """One key's events while they come in (event time, seq) order: seq rising, event time never falling."""

    __slots__ = ("first_index", "ordered", "last_t", "last_seq", "run_t", "run_seq", "run_count", "done")

    def __init__(self, index: int, t: int, seq: int, weight: int) -> None:
        self.first_index = index
        self.ordered = True
        self.last_t, self.last_seq = t, seq
        self.run_t, self.run_seq, self.run_count = t, seq, weight
        self.done: list[Any] = []  # compare: closed sessions; coverage: acked seq ranges


def _disordered_events(spill: Spill, partition: int, keys: set[str]) -> dict[str, list[_Event]]:
    """The acknowledged events of `keys` (those out of order), read again from the partition (a record's fifth
    field, where there is one, says it is a failed delivery)."""
    events: dict[str, list[_Event]] = defaultdict(list)
    if not keys:
        return events
    for record in spill.read(partition):
        if record[0] in keys and not (len(record) > 4 and record[4]):
            key, seq, t = record[0], record[1], record[2]
            events[key].append(_Event(key, seq, t))
    return events


# -- compare -------------------------------------------------------------------------------------------------------
def judge_compare(ledger: Iterable[Acked | Failed], emitted: Iterable[Mapping[str, object] | Session], gap_ms: int,
                  max_len_ms: int | None = None, drained: bool = True, watermark_ms: int | None = None,
                  extra_copies: Mapping[str, Mapping[int, int]] | None = None, max_examples: int = 20, *,
                  workdir: str | Path | None = None, partitions: int = 1) -> OracleReport:
    """compare(expected_sessions(<the ledger's acknowledged events>, ...), emitted, max_examples), the same report
    and the same error, in one key partition's memory. Failed deliveries in `ledger` are skipped (the reference is
    given acknowledged events only). `emitted` is read once, after the ledger, as the list the reference is given
    would have been read before it judged anything."""
    _check_cap(max_examples)
    errors = _Errors()
    with tempfile.TemporaryDirectory(dir=workdir, prefix="oracle-") as tmp:
        with Spill(tmp, "events", partitions) as events:
            for index, record in enumerate(ledger):
                if not isinstance(record, Failed):
                    events.add(record.key, (record.key, record.seq, record.event_time_ms, index))
        with Spill(tmp, "rows-by-key", partitions) as rows_by_key, Spill(tmp, "rows-by-id", partitions) as rows_by_id:
            for i, row in enumerate(emitted):
                if errors.first is not None:
                    continue  # read to the end all the same, as the reference (given a list) would have
                try:
                    s = Session.from_record(row, f"emitted session #{i}")
                except Exception as exc:  # noqa: BLE001 - what the reference raises at this row, raised in its turn
                    errors.offer(_ROW, i, exc)
                    continue
                rows_by_key.add(s.key, (s.key, s.first_seq, s.last_seq))
                rows_by_id.add(s.session_id, (i, str(s.session_id), str(s.key), int(s.start_ms), int(s.end_ms),
                                              int(s.count), int(s.first_seq), int(s.last_seq)))
        _check_rules(gap_ms, max_len_ms, drained, watermark_ms)
        missing, repeated = _PerKey(max_examples), _PerKey(max_examples)
        with Spill(tmp, "expected", partitions) as expected:
            for p in range(partitions):
                _compare_keys(p, events, rows_by_key, expected, gap_ms, max_len_ms,
                              None if drained else watermark_ms, extra_copies or {}, missing, repeated, errors)
        matched = _Matched(max_examples)
        for q in range(partitions):
            matched.add(q, expected, rows_by_id, errors)
        errors.raise_first()
        return matched.report(missing, repeated)


def _compare_keys(p: int, events: Spill, rows: Spill, expected: Spill, gap_ms: int, max_len_ms: int | None,
                  watermark_ms: int | None, extra_copies: Mapping[str, Mapping[int, int]], missing: _PerKey,
                  repeated: _PerKey, errors: _Errors) -> None:
    """Key partition p: its expected sessions (into `expected`, by session id), its seqs missing and repeated."""
    keys: dict[str, _Ordered] = {}
    for key, seq, t, index in events.read(p):
        copies = extra_copies.get(key) if extra_copies else None
        weight = 1 + copies.get(seq, 0) if copies else 1
        k = keys.get(key)
        if k is None:
            keys[key] = _Ordered(index, t, seq, weight)
        elif not k.ordered:
            continue
        elif seq > k.last_seq and t >= k.last_t:
            if t - k.last_t > gap_ms or (max_len_ms is not None and t // max_len_ms != k.run_t // max_len_ms):
                k.done.append(Session(key, k.run_t, k.last_t + gap_ms, k.run_count, k.run_seq, k.last_seq,
                                      session_id(key, k.run_seq)))
                k.run_t, k.run_seq, k.run_count = t, seq, weight
            else:
                k.run_count += weight
            k.last_t, k.last_seq = t, seq
        else:
            k.ordered, k.done = False, []
    disordered = _disordered_events(events, p, {key for key, k in keys.items() if not k.ordered})
    sessions_of: dict[str, list[Session]] = {}
    for key, k in keys.items():
        if k.ordered:
            k.done.append(Session(key, k.run_t, k.last_t + gap_ms, k.run_count, k.run_seq, k.last_seq,
                                  session_id(key, k.run_seq)))
            sessions = k.done
        else:
            copies = extra_copies.get(key)
            try:
                sessions = expected_sessions(disordered.pop(key), gap_ms, max_len_ms,
                                             extra_copies={key: copies} if copies else None)
            except ValueError as exc:
                errors.offer(_KEY, k.first_index, exc)
                continue
        if watermark_ms is not None:
            sessions = [s for s in sessions if s.end_ms <= watermark_ms]
        if sessions:
            sessions_of[key] = sessions
    del keys
    emitted: dict[str, list[Range]] = defaultdict(list)
    for key, first, last in rows.read(p):
        emitted[key].append((first, last))
    for key, sessions in sessions_of.items():
        for pos, s in enumerate(sessions):
            expected.add(s.session_id, (s.session_id, key, pos, s.start_ms, s.end_ms, s.count, s.first_seq,
                                        s.last_seq))
        missing.add(key, _subtract(_merge((s.first_seq, s.last_seq) for s in sessions), _merge(emitted.get(key, []))))
    for key, ranges in emitted.items():
        repeated.add(key, _twice(ranges))


_FIELDS = ("key", "start_ms", "end_ms", "count", "first_seq", "last_seq")


class _Matched:
    """Expected sessions matched with emitted rows by session id, partition by partition: compare's counts and
    examples."""

    def __init__(self, cap: int) -> None:
        self.expected = self.emitted = self.lost = self.duplicated = self.wrong = self.unexpected = 0
        self.lost_examples, self.duplicated_examples = _Firsts(cap), _Firsts(cap)
        self.wrong_examples, self.unexpected_examples = _Firsts(cap), _Firsts(cap)

    def add(self, q: int, expected: Spill, rows: Spill, errors: _Errors) -> None:
        # session id -> its place in the reference's list (key, pos), and (key, start_ms, ..., last_seq)
        want: dict[str, tuple[tuple[str, int], tuple[str, int, int, int, int, int]]] = {}
        seen: dict[str, list[tuple[str, int]]] = {}  # session ids expected twice: where each time
        for sid, key, pos, start_ms, end_ms, count, first_seq, last_seq in expected.read(q):
            if sid in want:
                seen.setdefault(sid, [want[sid][0]]).append((key, pos))
            else:
                want[sid] = ((key, pos), (key, start_ms, end_ms, count, first_seq, last_seq))
        for sid, orders in seen.items():  # the reference raises at the second of them, in (key, pos) order
            errors.offer(_EXPECTED, sorted(orders)[1], ValueError(f"expected: session_id {sid} appears twice"))
        self.expected += len(want)
        times: Counter[str] = Counter()
        first_key: dict[str, str] = {}
        wrong: dict[str, dict[str, dict[str, object]]] = {}
        wrong_at: dict[str, int] = {}
        unexpected: set[str] = set()
        for i, sid, key, start_ms, end_ms, count, first_seq, last_seq in rows.read(q):
            self.emitted += 1
            times[sid] += 1
            first_key.setdefault(sid, key)
            actual = (key, start_ms, end_ms, count, first_seq, last_seq)
            found = want.get(sid)
            if found is None:
                unexpected.add(sid)
                if self.unexpected_examples.wants(i):
                    self.unexpected_examples.offer(i, asdict(Session(*actual, sid)))
                continue
            wanted = found[1]
            if actual == wanted:
                continue
            for name, e, a in zip(_FIELDS, wanted, actual, strict=True):
                if e != a:
                    wrong_at.setdefault(sid, i)
                    wrong.setdefault(sid, {}).setdefault(name, {"expected": e, "actual": a})
        for sid, diff in wrong.items():
            self.wrong_examples.offer(wrong_at[sid], {"session_id": sid, "key": want[sid][1][0], "fields": diff})
        self.wrong += len(wrong)
        self.unexpected += len(unexpected)
        for sid, (order, session) in want.items():
            if sid not in times:
                self.lost += 1
                if self.lost_examples.wants(order):
                    self.lost_examples.offer(order, asdict(Session(*session, sid)))
        for sid, n in times.items():
            if n > 1:
                self.duplicated += 1
                self.duplicated_examples.offer(sid, {"session_id": sid, "key": first_key[sid], "times": n})

    def report(self, missing: _PerKey, repeated: _PerKey) -> OracleReport:
        return OracleReport(
            expected=self.expected, emitted=self.emitted, lost=self.lost, duplicated=self.duplicated,
            wrong=self.wrong, unexpected=self.unexpected, missing_seqs=missing.total, repeated_seqs=repeated.total,
            lost_examples=tuple(self.lost_examples.values()),
            duplicated_examples=tuple(self.duplicated_examples.values()),
            wrong_examples=tuple(self.wrong_examples.values()),
            unexpected_examples=tuple(self.unexpected_examples.values()),
            missing_seq_examples=missing.examples(), repeated_seq_examples=repeated.examples())


# -- coverage ------------------------------------------------------------------------------------------------------
def judge_coverage(ledger: Iterable[Acked | Failed], emitted: Iterable[Mapping[str, object] | Session],
                   max_examples: int = 20, extra_copies: Mapping[str, Mapping[int, int]] | None = None, *,
                   workdir: str | Path | None = None, partitions: int = 1) -> CoverageReport:
    """coverage(<the ledger's acknowledged events>, <its failed ones>, emitted, max_examples, extra_copies), the same
    report and the same error, in one key partition's memory. `emitted` is read once, after the ledger."""
    _check_cap(max_examples)
    errors = _Errors()
    with tempfile.TemporaryDirectory(dir=workdir, prefix="oracle-") as tmp:
        with Spill(tmp, "events", partitions) as events:
            for index, record in enumerate(ledger):
                events.add(record.key, (record.key, record.seq, record.event_time_ms, index,
                                        isinstance(record, Failed)))
        with Spill(tmp, "rows", partitions) as rows:
            for i, row in enumerate(emitted):
                if errors.first is not None:
                    continue  # read to the end all the same, as the reference (given a list) would have
                where = f"emitted session #{i}"
                try:
                    key, first, last, count = (_field(row, n, where)
                                               for n in ("key", "first_seq", "last_seq", "count"))
                except Exception as exc:  # noqa: BLE001 - what the reference raises at this row, raised in its turn
                    errors.offer(_ROW, i, exc)
                    continue
                rows.add(key, (key, first, last, count, i))
        try:
            extra = {k: sorted(seq for seq, n in copies.items() for _ in range(n))
                     for k, copies in (extra_copies or {}).items()}
        except Exception as exc:  # noqa: BLE001 - raised in its turn, as the reference would
            errors.offer(_EXTRA, 0, exc)
            extra = {}
        covered = _Covered(max_examples)
        for p in range(partitions):
            covered.add(p, events, rows, extra, errors)
        errors.raise_first()
        return covered.report()


class _Seqs:
    """A key's acknowledged seqs as sorted, disjoint, non-adjacent ranges (oracle._compress of them)."""

    __slots__ = ("ranges", "_los", "_his", "_before")

    def __init__(self, ranges: list[Range]) -> None:
        self.ranges = ranges
        self._los: list[int] = []
        self._his: list[int] = []
        self._before: list[int] = []  # seqs in the ranges before each

    def _index(self) -> None:
        if not self._los and self.ranges:
            self._los = [lo for lo, _hi in self.ranges]
            self._his = [hi for _lo, hi in self.ranges]
            self._before = [0]
            for lo, hi in self.ranges:
                self._before.append(self._before[-1] + hi - lo + 1)

    def __contains__(self, seq: int) -> bool:
        self._index()
        i = bisect.bisect_right(self._los, seq) - 1
        return i >= 0 and seq <= self._his[i]

    def count_in(self, first: int, last: int) -> int:
        """How many seqs lie in [first, last] (oracle._count_in over the sorted seqs)."""
        if first > last:
            return 0
        self._index()
        i, j = bisect.bisect_left(self._his, first), bisect.bisect_right(self._los, last)
        if i >= j:
            return 0
        return (self._before[j] - self._before[i] - max(0, first - self._los[i])
                - max(0, self._his[j - 1] - last))


class _Covered:
    """coverage's counts and examples, key partition by key partition."""

    def __init__(self, cap: int) -> None:
        self.acked = self.failed = self.emitted = self.wrong_counts = 0
        self.lost, self.duplicated, self.unknown = _PerKey(cap), _PerKey(cap), _PerKey(cap)
        self.wrong_count_examples = _Firsts(cap)

    def add(self, p: int, events: Spill, rows: Spill, extra: Mapping[str, list[int]], errors: _Errors) -> None:
        acked = self._acked(p, events, errors)
        failed = self._failed(p, events, acked, errors)
        emitted: dict[str, list[Range]] = defaultdict(list)
        for key, first, last, count, i in rows.read(p):
            self.emitted += 1
            emitted[key].append((first, last))
            seqs = acked.get(key)
            landed = seqs.count_in(first, last) if seqs is not None else 0
            copies = _count_in(extra.get(key, []), first, last)
            maybe = _count_in(failed.get(key, []), first, last)
            if not landed + copies <= count <= landed + copies + maybe:
                self.wrong_counts += 1
                self.wrong_count_examples.offer(i, {"key": key, "first_seq": first, "last_seq": last, "count": count,
                                                    "acked_in_range": landed, "failed_in_range": maybe,
                                                    **({"topic_copies_in_range": copies} if copies else {})})
        for key in set(acked) | set(emitted):
            seqs = acked.get(key)
            ranges = seqs.ranges if seqs is not None else []
            covered = _merge(emitted.get(key, []))
            self.lost.add(key, _subtract(ranges, covered))
            self.duplicated.add(key, _twice(emitted.get(key, [])))
            self.unknown.add(key, _subtract(covered, _merge(ranges + _compress(failed.get(key, [])))))

    def _acked(self, p: int, events: Spill, errors: _Errors) -> dict[str, _Seqs]:
        keys: dict[str, _Ordered] = {}
        for key, seq, t, index, failed in events.read(p):
            if failed:
                continue
            k = keys.get(key)
            if k is None:
                k = keys[key] = _Ordered(index, t, seq, 1)
                k.done.append([seq, seq])
            elif not k.ordered:
                continue
            elif seq > k.last_seq and t >= k.last_t:
                if seq == k.done[-1][1] + 1:
                    k.done[-1][1] = seq
                else:
                    k.done.append([seq, seq])
                k.run_count += 1
                k.last_t, k.last_seq = t, seq
            else:
                k.ordered, k.done = False, []
        disordered = _disordered_events(events, p, {key for key, k in keys.items() if not k.ordered})
        acked: dict[str, _Seqs] = {}
        for key, k in keys.items():
            if k.ordered:
                acked[key] = _Seqs([(lo, hi) for lo, hi in k.done])
                self.acked += k.run_count
                continue
            try:
                seqs = [seq for _t, seq in _events_by_key(disordered.pop(key))[key]]
            except ValueError as exc:
                errors.offer(_KEY, k.first_index, exc)
                continue
            acked[key] = _Seqs(_compress(seqs))
            self.acked += len(seqs)
        return acked

    def _failed(self, p: int, events: Spill, acked: Mapping[str, _Seqs], errors: _Errors) -> dict[str, list[int]]:
        """The failed seqs per key, sorted; the first one that is also acknowledged, or failed twice, is an error."""
        failed: dict[str, set[int]] = defaultdict(set)
        for key, seq, _t, index, is_failed in events.read(p):
            if not is_failed:
                continue
            seqs = acked.get(key)
            if (seqs is not None and seq in seqs) or seq in failed[key]:
                errors.offer(_FAILED, index, ValueError(f"key {key!r}: seq {seq} has more than one delivery outcome "
                                                        "in the ledger"))
                break
            failed[key].add(seq)
        self.failed += sum(len(v) for v in failed.values())
        return {k: sorted(v) for k, v in failed.items()}

    def report(self) -> CoverageReport:
        return CoverageReport(
            acked=self.acked, failed=self.failed, emitted=self.emitted, lost=self.lost.total,
            duplicated=self.duplicated.total, wrong_counts=self.wrong_counts, unknown=self.unknown.total,
            lost_examples=self.lost.examples(), duplicated_examples=self.duplicated.examples(),
            wrong_count_examples=tuple(self.wrong_count_examples.values()), unknown_examples=self.unknown.examples())
