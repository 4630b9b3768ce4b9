"""The arm's input read back: which workload events the topic holds more than once.

The oracle judges the job's output against the ledger (every event the broker acknowledged, once). A session that
counts one event too many can then mean two things: the job counted an event twice, or the topic really holds it
twice (a producer retry the broker did not deduplicate). Only the topic can tell them apart, so after an arm the
harness reads it back once, from the beginning to its end offsets, and the oracle counts each extra copy as input
(chaos/oracle.py). A job is never blamed for counting what it was given; and a duplicate in the topic is reported
as such (oracle.json's `topic_duplicates`), never hidden.

The read-back also settles the deliveries the producer gave up on (the ledger's `failed`: a timeout says nothing
of whether the broker stored the record). Those the topic holds were input like any other, so the oracle expects
them (`landed`); those it does not hold never reached the job.
"""
from __future__ import annotations

import json
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Set
from pathlib import Path

from .spill import Spill

READ_TIMEOUT_S = 60.0
RECORDS_PER_PARTITION = 200_000  # pairs counted in memory at a time


def extra_copies(pairs: Iterable[tuple[str, int]], partitions: int = 1,
                 workdir: str | Path | None = None) -> dict[str, dict[int, int]]:
    """key -> {seq: copies beyond the first}, for the (key, seq) pairs seen more than once. The pairs are counted
    one key partition at a time (chaos/spill.py, in a temporary directory under `workdir`): a topic of millions of
    records is read back in bounded memory."""
    found: list[tuple[tuple[str, int], int]] = []
    with tempfile.TemporaryDirectory(dir=workdir, prefix="topic-audit-") as tmp:
        with Spill(tmp, "pairs", partitions) as spill:
            for key, seq in pairs:
                spill.add(key, (key, seq))
        for partition in range(partitions):
            found += [(pair, n) for pair, n in Counter(spill.read(partition)).items() if n > 1]
    extra: dict[str, dict[int, int]] = {}
    for (key, seq), copies in sorted(found):
        extra.setdefault(key, {})[seq] = copies - 1
    return extra


def event_of(value: bytes | None) -> tuple[str, int] | None:
    """(key, seq) of a workload record's value (the job's EVENT_SCHEMA JSON), None for anything else."""
    try:
        document = json.loads(value or b"")
    except ValueError:
        return None
    if not isinstance(document, dict):
        return None
    key, seq = document.get("key"), document.get("seq")
    if not isinstance(key, str) or not isinstance(seq, int) or isinstance(seq, bool):
        return None
    return key, seq


def read_topic(bootstrap: str, topic: str, client: Mapping[str, str] | None = None,
               timeout_s: float = READ_TIMEOUT_S, workdir: str | Path | None = None,
               uncertain: Set[tuple[str, int]] = frozenset(),
               ) -> tuple[int, dict[str, dict[int, int]], set[tuple[str, int]]]:
    """(records read, extra copies, landed) of every partition of `topic`, from its start to the end offsets it had
    when the read began. Raises TimeoutError when the read does not reach them within `timeout_s`. The copies are
    counted on disk under `workdir` (extra_copies); `landed` is the part of `uncertain` (deliveries the producer
    gave up on) that the topic holds."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-topic-audit", "enable.auto.commit": False,
                         "enable.partition.eof": False, "log_level": 0, **(client or {})})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
        left = {p for p, end in ends.items() if end > 0}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in left])
        records = 0
        landed: set[tuple[str, int]] = set()
        deadline = time.monotonic() + timeout_s

        def pairs() -> Iterator[tuple[str, int]]:
            nonlocal records
            while left:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"reading topic {topic} back: partitions {sorted(left)} not read to their "
                                       f"end within {timeout_s:.0f} s")
                for message in consumer.consume(num_messages=5000, timeout=1.0):
                    if message.error() is not None:
                        continue
                    partition, offset = message.partition(), message.offset()
                    if partition not in left or offset is None or offset >= ends[partition]:
                        continue
                    records += 1
                    event = event_of(message.value())
                    if event is not None:
                        if event in uncertain:
                            landed.add(event)
                        yield event
                    if offset + 1 >= ends[partition]:
                        left.discard(partition)

        counted_in = max(1, -(-sum(ends.values()) // RECORDS_PER_PARTITION))
        extra = extra_copies(pairs(), counted_in, workdir)
        return records, extra, landed
    finally:
        consumer.close()
