import json
import random
from dataclasses import asdict

import pytest

from chaos.oracle import compare, coverage, expected_sessions, session_id
from chaos.workload import Acked, Failed, Ledger


def acked(key, seq, t, offset=0):
    return Acked(key, seq, t, partition=0, offset=offset)


def events(key, times):
    return [acked(key, seq, t) for seq, t in enumerate(times)]


def shape(sessions):
    """(key, first_seq, last_seq, count, start_ms, end_ms) — what the rules decide, without the id."""
    return [(s.key, s.first_seq, s.last_seq, s.count, s.start_ms, s.end_ms) for s in sessions]


def as_emitted(sessions):
    """What the job writes: JSON rows, so the oracle sees plain dicts as it will in a real run."""
    return [json.loads(json.dumps(asdict(s))) for s in sessions]


# --- session rules --------------------------------------------------------------------------------------------

def test_session_id_is_the_truncated_sha1_of_key_and_first_seq():
    # Computed with: printf 'hot-0|0' | sha1sum | cut -c1-16
    assert session_id("hot-0", 0) == "28244d24f97fe5fb"
    assert session_id("a", 3) == "197f8f59c57a7e8e"


def test_a_gap_equal_to_gap_ms_keeps_the_session_open():
    # Spark's session_window merges an event landing exactly at the session's end (touching windows merge);
    # measured on the real job: events 2000 ms apart with a 2000 ms gap form one session.
    assert shape(expected_sessions(events("a", [0, 500]), gap_ms=500)) == [("a", 0, 1, 2, 0, 1000)]
    assert shape(expected_sessions(events("a", [0, 501]), gap_ms=500)) == [
        ("a", 0, 0, 1, 0, 500),
        ("a", 1, 1, 1, 501, 1001),
    ]


def test_hot_key_is_cut_at_max_len():
    hot = events("hot-0", range(0, 1001, 100))  # never pauses: one event every 100 ms
    assert shape(expected_sessions(hot, gap_ms=500)) == [("hot-0", 0, 10, 11, 0, 1500)]
    assert shape(expected_sessions(hot, gap_ms=500, max_len_ms=300)) == [
        ("hot-0", 0, 2, 3, 0, 700),  # the event at 300 opens bucket [300, 600): a new session
        ("hot-0", 3, 5, 3, 300, 1000),
        ("hot-0", 6, 8, 3, 600, 1300),
        ("hot-0", 9, 10, 2, 900, 1500),
    ]


def test_max_len_buckets_are_aligned_to_event_time_not_to_the_session_start():
    # 1400 and 1500 are 100 ms apart, but 1500 falls in the next 300 ms bucket [1500, 1800): a new session.
    # (The job groups session_window by this bucket; a rule counting from the session's first event would
    # keep them together.)
    assert shape(expected_sessions(events("a", [1400, 1500]), gap_ms=500, max_len_ms=300)) == [
        ("a", 0, 0, 1, 1400, 1900),
        ("a", 1, 1, 1, 1500, 2000),
    ]


def test_max_len_and_gap_closes_combine():
    evs = events("a", [0, 100, 1000, 1100, 1250, 1300])
    assert shape(expected_sessions(evs, gap_ms=500, max_len_ms=250)) == [
        ("a", 0, 1, 2, 0, 600),
        ("a", 2, 3, 2, 1000, 1600),  # a gap close
        ("a", 4, 5, 2, 1250, 1800),  # 1250 opens bucket [1250, 1500)
    ]


def test_out_of_order_ledger_gives_the_same_sessions():
    # Acks from different partitions interleave, so the ledger is not in event-time order.
    ledger = events("a", [0, 100, 2000]) + events("b", [50, 60, 5000]) + events("late", [10])
    shuffled = ledger[:]
    random.Random(3).shuffle(shuffled)
    assert shuffled != ledger
    assert expected_sessions(shuffled, gap_ms=1000) == expected_sessions(ledger, gap_ms=1000)
    assert [(s.key, s.first_seq) for s in expected_sessions(shuffled, gap_ms=1000)] == [
        ("a", 0), ("a", 2), ("b", 0), ("b", 2), ("late", 0),
    ]


def test_equal_event_times_are_ordered_by_seq():
    evs = [acked("a", 1, 100), acked("a", 0, 100), acked("a", 2, 100)]
    assert shape(expected_sessions(evs, gap_ms=10)) == [("a", 0, 2, 3, 100, 110)]


def test_undrained_expects_only_sessions_closed_at_the_watermark():
    evs = events("a", [0, 100]) + events("b", [300]) + events("c", [301])
    # ends: a 100+200=300, b 500, c 501
    got = expected_sessions(evs, gap_ms=200, drained=False, watermark_ms=500)
    assert [(s.key, s.end_ms) for s in got] == [("a", 300), ("b", 500)]
    assert len(expected_sessions(evs, gap_ms=200)) == 3


@pytest.mark.parametrize(("kwargs", "field"), [
    (dict(gap_ms=0), "gap_ms"),
    (dict(gap_ms=10, max_len_ms=0), "max_len_ms"),
    (dict(gap_ms=10, drained=False), "watermark_ms"),
    (dict(gap_ms=10, watermark_ms=5), "watermark_ms"),
])
def test_bad_arguments_are_rejected(kwargs, field):
    with pytest.raises(ValueError, match=f"^{field}: "):
        expected_sessions(events("a", [0]), **kwargs)


def test_time_going_back_within_a_key_is_rejected():
    with pytest.raises(ValueError, match=r"key 'a': seq 2 at 50 ms is earlier than seq 1 at 100 ms"):
        expected_sessions([acked("a", 0, 0), acked("a", 1, 100), acked("a", 2, 50)], gap_ms=10)


def test_a_seq_acknowledged_twice_is_rejected():
    with pytest.raises(ValueError, match=r"key 'a': seq 1 appears twice"):
        expected_sessions([acked("a", 0, 0), acked("a", 1, 5), acked("a", 1, 5, offset=9)], gap_ms=10)


# --- compare --------------------------------------------------------------------------------------------------

@pytest.fixture
def run():
    """A drained run: a hot key cut by max_len, a key with a gap close, and a quiet key."""
    ledger = (events("hot-0", range(0, 1001, 100)) + events("a", [0, 200, 1300, 1400]) + events("q", [700]))
    return expected_sessions(ledger, gap_ms=500, max_len_ms=300)


def test_exact_output_is_ok(run):
    report = compare(run, as_emitted(run))
    assert report.ok
    assert (report.expected, report.emitted) == (len(run), len(run)) == (7, 7)
    out = json.loads(json.dumps(report.to_dict()))
    assert out["ok"] is True and out["lost"] == out["missing_seqs"] == 0


def test_a_duplicated_batch_is_reported(run):
    batch = [s for s in run if s.key == "hot-0" and s.first_seq in (3, 6)]  # re-emitted after a restart
    report = compare(run, as_emitted(run) + as_emitted(batch))
    assert not report.ok
    assert report.duplicated == 2 and report.lost == report.wrong == report.unexpected == 0
    assert {(d["session_id"], d["times"]) for d in report.duplicated_examples} == {
        (s.session_id, 2) for s in batch
    }
    assert report.repeated_seq_examples == {"hot-0": [[3, 8]]}
    assert report.repeated_seqs == 6


def test_a_lost_batch_is_reported_with_ids_and_missing_seqs(run):
    dropped = [s for s in run if s.key == "hot-0" and s.first_seq in (3, 6)] + [s for s in run if s.key == "q"]
    kept = [s for s in run if s not in dropped]
    report = compare(run, as_emitted(kept))
    assert not report.ok
    assert report.lost == 3 and report.duplicated == report.wrong == report.unexpected == 0
    assert {d["session_id"] for d in report.lost_examples} == {s.session_id for s in dropped}
    assert report.missing_seq_examples == {"hot-0": [[3, 8]], "q": [[0, 0]]}
    assert report.missing_seqs == 7


def test_a_wrong_count_is_reported_with_the_differing_field(run):
    hot = next(s for s in run if s.key == "hot-0" and s.first_seq == 0)
    emitted = [{**r, "count": 2} if r["session_id"] == hot.session_id else r for r in as_emitted(run)]
    report = compare(run, emitted)
    assert not report.ok
    assert report.wrong == 1 and report.lost == report.duplicated == report.unexpected == 0
    assert report.wrong_examples == ({
        "session_id": hot.session_id,
        "key": "hot-0",
        "fields": {"count": {"expected": 3, "actual": 2}},
    },)


def test_a_session_split_differently_is_wrong_plus_unexpected(run):
    a0 = next(s for s in run if s.key == "a" and s.first_seq == 0)  # seqs 0..1 at 0, 200
    emitted = [r for r in as_emitted(run) if r["session_id"] != a0.session_id]
    emitted.append({**asdict(a0), "last_seq": 0, "count": 1, "end_ms": 500})
    emitted.append({**asdict(a0), "first_seq": 1, "start_ms": 200, "count": 1, "session_id": session_id("a", 1)})
    report = compare(run, emitted)
    assert report.wrong == 1 and report.unexpected == 1 and report.lost == report.duplicated == 0
    assert set(report.wrong_examples[0]["fields"]) == {"last_seq", "count", "end_ms"}
    assert report.unexpected_examples[0]["session_id"] == session_id("a", 1)
    assert report.missing_seqs == report.repeated_seqs == 0


def test_examples_are_capped_but_counts_are_complete(run):
    report = compare(run, [], max_examples=2)
    assert report.lost == 7 and len(report.lost_examples) == 2
    assert report.missing_seqs == 16 and len(report.missing_seq_examples) == 2


@pytest.mark.parametrize(("change", "message"), [
    (lambda r: r.pop("count"), r"emitted session #0: missing field 'count'"),
    (lambda r: r.update(start_ms="2024-01-01T00:00:00"), r"emitted session #0: field 'start_ms' must be int"),
])
def test_malformed_emitted_rows_are_rejected(run, change, message):
    emitted = as_emitted(run)
    change(emitted[0])
    with pytest.raises(ValueError, match=message):
        compare(run, emitted)


def test_end_to_end_from_a_hand_written_ledger_file(tmp_path):
    path = tmp_path / "ledger.jsonl"
    path.write_text(
        '{"key":"b","seq":0,"event_time_ms":1000,"partition":1,"offset":0}\n'
        '{"key":"a","seq":0,"event_time_ms":0,"partition":0,"offset":0}\n'
        '{"key":"a","seq":1,"event_time_ms":100,"error":"KafkaError{code=_MSG_TIMED_OUT}"}\n'
        '{"key":"a","seq":2,"event_time_ms":250,"partition":0,"offset":1}\n'
        '{"key":"b","seq":1,"event_time_ms":1'  # producer killed mid-write
    )
    contents = Ledger.read(path)
    expected = expected_sessions(contents.acked, gap_ms=200)
    assert shape(expected) == [("a", 0, 0, 1, 0, 200), ("a", 2, 2, 1, 250, 450), ("b", 0, 0, 1, 1000, 1200)]
    assert compare(expected, as_emitted(expected)).ok


# --- coverage (naive profile) ---------------------------------------------------------------------------------

def rng(key, first, last, count=None):
    return {"key": key, "first_seq": first, "last_seq": last, "count": last - first + 1 if count is None else count}


LEDGER = events("a", range(10)) + events("b", range(3))


def test_exact_coverage_is_ok():
    report = coverage(LEDGER, [], [rng("a", 0, 3), rng("a", 4, 9), rng("b", 0, 2)])
    assert report.ok
    assert (report.acked, report.emitted) == (13, 3)


def test_overlapping_ranges_are_duplicates():
    report = coverage(LEDGER, [], [rng("a", 0, 5), rng("a", 4, 9), rng("b", 0, 2), rng("b", 0, 2)])
    assert not report.ok
    assert report.duplicated_examples == {"a": [[4, 5]], "b": [[0, 2]]}
    assert report.duplicated == 5 and report.lost == 0


def test_gaps_between_ranges_are_lost():
    report = coverage(LEDGER, [], [rng("a", 0, 2), rng("a", 5, 7)])
    assert not report.ok
    assert report.lost_examples == {"a": [[3, 4], [8, 9]], "b": [[0, 2]]}
    assert report.lost == 7 and report.duplicated == 0


def test_failed_deliveries_are_uncertain_not_lost():
    ledger = events("a", range(4))
    ledger = [e for e in ledger if e.seq != 2]
    failed = [Failed("a", 2, 2, "timed out")]
    landed = coverage(ledger, failed, [rng("a", 0, 3, count=4)])
    not_landed = coverage(ledger, failed, [rng("a", 0, 1), rng("a", 3, 3)])
    assert landed.ok and not_landed.ok
    assert landed.failed == 1
    twice = coverage(ledger, failed, [rng("a", 0, 2, count=3), rng("a", 2, 3, count=2)])
    assert not twice.ok and twice.duplicated_examples == {"a": [[2, 2]]}


@pytest.mark.parametrize(("count", "ok"), [(2, False), (3, True), (4, True), (5, False)])
def test_count_must_match_what_landed_in_the_range(count, ok):
    ledger = [acked("a", 0, 0), acked("a", 1, 1), acked("a", 3, 3)]
    failed = [Failed("a", 2, 2, "timed out")]
    report = coverage(ledger, failed, [rng("a", 0, 3, count=count)])
    assert report.ok is ok
    assert report.wrong_counts == (0 if ok else 1)


def test_seqs_missing_from_the_ledger_are_unknown():
    report = coverage(events("a", range(3)), [], [rng("a", 0, 4, count=3)])
    assert not report.ok
    assert report.unknown_examples == {"a": [[3, 4]]}
    assert json.loads(json.dumps(report.to_dict()))["ok"] is False


@pytest.mark.parametrize("failed", [
    [Failed("a", 1, 1, "timed out")],  # also acknowledged
    [Failed("a", 5, 5, "timed out"), Failed("a", 5, 5, "timed out")],
])
def test_a_seq_with_two_delivery_outcomes_is_rejected(failed):
    with pytest.raises(ValueError, match=r"key 'a': seq \d has more than one delivery outcome"):
        coverage(events("a", range(3)), failed, [])


# --- events the topic holds twice (chaos/topic_audit.py) --------------------------------------------------------

def test_an_event_the_topic_holds_twice_is_input_a_session_may_count():
    ledger = events("a", range(4))
    counted_twice = [rng("a", 0, 3, count=5)]  # seq 2 is in the topic twice: 4 acknowledged events, 5 records
    assert coverage(ledger, [], counted_twice).wrong_counts == 1  # without the read-back, the job looks wrong
    report = coverage(ledger, [], counted_twice, extra_copies={"a": {2: 1}})
    assert report.ok and report.wrong_counts == 0
    assert coverage(ledger, [], [rng("a", 0, 3, count=6)], extra_copies={"a": {2: 1}}).wrong_counts == 1
    copy_elsewhere = coverage(ledger, [], counted_twice, extra_copies={"b": {2: 1}, "a": {7: 1}})
    assert copy_elsewhere.wrong_counts == 1  # a copy outside the session's range or key explains nothing
    example = copy_elsewhere.wrong_count_examples[0]
    assert example["acked_in_range"] == 4 and "topic_copies_in_range" not in example


def test_expected_sessions_count_the_copies_of_their_events():
    ledger = events("a", [0, 100, 200, 5000])
    plain = shape(expected_sessions(ledger, gap_ms=1000))
    with_copy = shape(expected_sessions(ledger, gap_ms=1000, extra_copies={"a": {1: 2, 3: 1}}))
    assert plain == [("a", 0, 2, 3, 0, 1200), ("a", 3, 3, 1, 5000, 6000)]
    assert with_copy == [("a", 0, 2, 5, 0, 1200), ("a", 3, 3, 2, 5000, 6000)]
