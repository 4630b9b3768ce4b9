"""chaos/topic_audit.py's pure parts: which (key, seq) pairs a topic holds more than once, and what a record is.
Reading a real topic back is tested against a real broker in tests/integration/test_job.py."""
from __future__ import annotations

import json
import random
from collections import Counter

from chaos.checks.exactly_once import check_lost
from chaos.topic_audit import event_of, extra_copies


def test_only_pairs_seen_more_than_once_are_extra_and_they_count_copies_beyond_the_first():
    pairs = [("a", 1), ("a", 2), ("a", 2), ("b", 2), ("a", 2), ("c", 0), ("c", 0)]
    assert extra_copies(pairs) == {"a": {2: 2}, "c": {0: 1}}
    assert extra_copies([]) == {}


def test_copies_counted_over_partitions_on_disk_are_the_copies_counted_at_once(tmp_path):
    rng = random.Random(5)
    pairs = [(f"k-{rng.randrange(300)}", rng.randrange(40)) for _ in range(20_000)]
    at_once: dict[str, dict[int, int]] = {}
    for (key, seq), n in sorted(Counter(pairs).items()):
        if n > 1:
            at_once.setdefault(key, {})[seq] = n - 1
    assert at_once and extra_copies(iter(pairs), partitions=7, workdir=tmp_path) == at_once
    assert list(tmp_path.iterdir()) == []


def test_a_workload_record_is_json_with_a_string_key_and_an_integer_seq():
    record = {"key": "k-71", "seq": 100, "event_time_ms": 5, "payload": "x"}
    assert event_of(json.dumps(record).encode()) == ("k-71", 100)
    for bad in (b"", b"not json", b"[1, 2]", json.dumps({**record, "seq": "100"}).encode(),
                json.dumps({**record, "seq": True}).encode(), json.dumps({"seq": 1}).encode(), None):
        assert event_of(bad) is None


def test_the_lost_check_says_when_the_topic_held_copies():
    oracle = {"acked": 101, "failed": 0, "lost": 0, "duplicated": 0, "wrong_counts": 0, "unknown": 0,
              "drained": True, "topic_records": 102, "topic_duplicates": 1}
    check = check_lost(oracle, 0)
    assert check.verdict == "PASSED"
    assert check.message.endswith("; the topic held 1 event copies beyond the first (the producer's), counted as input")
    assert "topic" not in check_lost({**oracle, "topic_duplicates": 0}, 0).message


def test_the_lost_check_says_when_failed_deliveries_landed_in_the_topic():
    oracle = {"acked": 100, "failed": 3, "lost": 0, "duplicated": 0, "wrong_counts": 0, "unknown": 0,
              "drained": True, "topic_records": 102, "topic_duplicates": 0, "failed_landed": 2}
    check = check_lost(oracle, 0)
    assert check.verdict == "PASSED"
    assert check.message.endswith("; 2 deliveries the producer gave up on were in the topic, counted as input")
    assert "gave up" not in check_lost({**oracle, "failed_landed": 0}, 0).message
