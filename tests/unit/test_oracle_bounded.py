"""The bounded oracle (chaos/oracle_bounded.py) against the reference (chaos/oracle.py): the same report, field for
field and in the same order, and the same error, on randomized histories judged over several partitions."""
import json
import random
from dataclasses import asdict

import pytest

from chaos.oracle import compare, coverage, expected_sessions, session_id
from chaos.oracle_bounded import judge_compare, judge_coverage, partitions_for
from chaos.spill import Spill, partition_of
from chaos.workload import Acked, Failed, Ledger

GAP, MAX_LEN = 1_000, 5_000


def history(rng: random.Random, keys: int, hot: int, rotating: int, disorder: float = 0.0) -> list[Acked | Failed]:
    """A ledger: `keys` ordinary keys, a hot key of `hot` events that never pauses (cut at MAX_LEN), `rotating`
    keys of one or two events (key rotation); some deliveries failed, some acknowledgements never recorded; keys'
    events interleaved by time, and with `disorder` a share of neighbours swapped (a key's events out of order)."""
    timeline: list[tuple[int, Acked | Failed]] = []

    def key_events(key: str, start: int, n: int, pause: float) -> None:
        t = start
        for seq in range(n):
            t += rng.choice([0, 10, 200]) if rng.random() > pause else rng.randrange(GAP + 1, 3 * GAP)
            roll = rng.random()
            if roll < 0.05:
                timeline.append((t, Failed(key, seq, t, "timed out")))
            elif roll > 0.03 * 2:  # the rest acknowledged, but for a few never recorded
                timeline.append((t, Acked(key, seq, t, partition=0, offset=len(timeline))))

    for i in range(keys):
        key_events(f"k-{i}", rng.randrange(20_000), rng.randrange(1, 30), pause=0.2)
    key_events("hot-0", 0, hot, pause=0.0)
    for i in range(rotating):
        key_events(f"actor-{i}", rng.randrange(20_000), rng.choice([1, 2]), pause=0.5)
    timeline.sort(key=lambda item: item[0])
    records = [record for _t, record in timeline]
    for i in range(len(records) - 1):
        if rng.random() < disorder:
            records[i], records[i + 1] = records[i + 1], records[i]
    return records


def acked_of(ledger):
    return [r for r in ledger if isinstance(r, Acked)]


def damaged(rng: random.Random, sessions, rows_lost=0.05, rows_twice=0.05) -> list[dict]:
    """The job's output with every kind of fault: sessions lost, emitted twice, split, with a wrong count, emitted
    under another key's session id, never expected at all, with an empty range; some rows carry batch_id."""
    rows: list[dict] = []
    for s in sessions:
        row = asdict(s)
        roll = rng.random()
        if roll < rows_lost:
            continue
        if roll < rows_lost + 0.03 and s.last_seq > s.first_seq:  # split in two
            rows.append({**row, "last_seq": s.first_seq, "count": 1})
            rows.append({**row, "first_seq": s.first_seq + 1, "session_id": session_id(s.key, s.first_seq + 1)})
            continue
        if roll < rows_lost + 0.05:
            row["count"] += 1
        rows.append(row)
        if rng.random() < rows_twice:
            rows.append({**row, "batch_id": 99})
    for _ in range(max(1, len(sessions) // 20)):
        s, other = rng.choice(sessions), rng.choice(sessions)
        rows.insert(rng.randrange(len(rows) + 1), {**asdict(s), "session_id": other.session_id})  # a foreign id
    rows.append({"key": "never-sent", "start_ms": 0, "end_ms": GAP, "count": 1, "first_seq": 0, "last_seq": 0,
                 "session_id": session_id("never-sent", 0)})
    if sessions:
        s = rng.choice(sessions)
        rows.append({**asdict(s), "first_seq": s.last_seq + 1, "session_id": session_id(s.key, s.last_seq + 1)})
    return rows


def same(bounded, reference):
    """Equal, and equal as oracle.json writes them (every dict in the same order)."""
    assert bounded == reference
    assert json.dumps(bounded.to_dict()) == json.dumps(reference.to_dict())


CASES = [  # (seed, keys, hot events, rotating keys, disorder, partitions, max_examples)
    (1, 30, 300, 40, 0.0, 1, 20),
    (2, 200, 500, 300, 0.0, 3, 2),  # many keys, few partitions: examples chosen across partitions
    (3, 80, 200, 100, 0.02, 4, 3),  # keys out of order: judged by the reference itself
    (4, 5, 1_000, 0, 0.0, 7, 20),  # more partitions than keys: some empty
    (5, 300, 0, 600, 0.01, 2, 1),
]


@pytest.mark.parametrize(("seed", "keys", "hot", "rotating", "disorder", "partitions", "cap"), CASES)
def test_compare_is_the_reference_on_randomized_histories(tmp_path, seed, keys, hot, rotating, disorder,
                                                          partitions, cap):
    rng = random.Random(seed)
    ledger = history(rng, keys, hot, rotating, disorder)
    extra = {"hot-0": {3: 1, 40: 2}, "k-1": {0: 1}} if seed % 2 else None
    reference_sessions = expected_sessions(acked_of(ledger), GAP, MAX_LEN, extra_copies=extra)
    rows = damaged(rng, reference_sessions)
    reference = compare(reference_sessions, rows, max_examples=cap)
    assert reference.lost and reference.duplicated and reference.wrong and reference.unexpected  # every kind
    assert reference.missing_seqs and reference.repeated_seqs
    bounded = judge_compare(iter(ledger), iter(rows), GAP, MAX_LEN, extra_copies=extra, max_examples=cap,
                            workdir=tmp_path, partitions=partitions)
    same(bounded, reference)
    assert list(tmp_path.iterdir()) == []  # the spill removed


def test_compare_of_an_exact_output_is_ok_and_without_max_len(tmp_path):
    ledger = history(random.Random(6), 50, 100, 50)
    sessions = expected_sessions(acked_of(ledger), GAP)
    report = judge_compare(ledger, [asdict(s) for s in sessions], GAP, workdir=tmp_path, partitions=3)
    same(report, compare(sessions, [asdict(s) for s in sessions]))
    assert report.ok and report.expected == len(sessions) > 100


def test_compare_undrained_expects_only_the_sessions_closed_at_the_watermark(tmp_path):
    ledger = history(random.Random(7), 40, 100, 40)
    acked = acked_of(ledger)
    watermark = sorted(s.end_ms for s in expected_sessions(acked, GAP, MAX_LEN))[len(acked) // 8]
    reference_sessions = expected_sessions(acked, GAP, MAX_LEN, drained=False, watermark_ms=watermark)
    rows = damaged(random.Random(8), expected_sessions(acked, GAP, MAX_LEN))
    same(judge_compare(ledger, rows, GAP, MAX_LEN, drained=False, watermark_ms=watermark, workdir=tmp_path,
                       partitions=3),
         compare(reference_sessions, rows))


@pytest.mark.parametrize(("seed", "keys", "hot", "rotating", "disorder", "partitions", "cap"), CASES)
def test_coverage_is_the_reference_on_randomized_histories(tmp_path, seed, keys, hot, rotating, disorder,
                                                           partitions, cap):
    rng = random.Random(seed)
    ledger = history(rng, keys, hot, rotating, disorder)
    acked, failed = acked_of(ledger), [r for r in ledger if isinstance(r, Failed)]
    everything = [Acked(r.key, r.seq, r.event_time_ms, 0, 0) for r in ledger]  # as if every failure had landed
    rows = [{"key": r["key"], "first_seq": r["first_seq"], "last_seq": r["last_seq"], "count": r["count"]}
            for r in damaged(rng, expected_sessions(everything, GAP, MAX_LEN))]
    for row in rng.sample(rows, len(rows) // 10):
        row["last_seq"] += 3  # seqs nobody sent, and overlaps
    extra = {"hot-0": {3: 1}, "k-2": {1: 2}} if seed % 2 else None
    reference = coverage(acked, failed, rows, max_examples=cap, extra_copies=extra)
    assert reference.lost and reference.duplicated and reference.wrong_counts and reference.unknown
    assert reference.failed
    bounded = judge_coverage(iter(ledger), iter(rows), max_examples=cap, extra_copies=extra, workdir=tmp_path,
                             partitions=partitions)
    same(bounded, reference)


def test_many_keys_in_few_partitions_are_really_partitioned(tmp_path):
    keys = [f"k-{i}" for i in range(500)]
    with Spill(tmp_path, "keys", 3) as spill:
        for key in keys:
            spill.add(key, (key,))
    held = [[key for (key,) in spill.read(p)] for p in range(3)]
    assert sorted(sum(held, [])) == sorted(keys)
    assert all(len(keys_of) > 100 for keys_of in held)  # every partition holds many keys
    assert all(partition_of(key, 3) == p for p, keys_of in enumerate(held) for key in keys_of)


def errors_of(judge, reference):
    with pytest.raises(Exception) as bounded_error:
        judge()
    with pytest.raises(Exception) as reference_error:
        reference()
    return (type(bounded_error.value), str(bounded_error.value)), (type(reference_error.value),
                                                                   str(reference_error.value))


def a(key, seq, t):
    return Acked(key, seq, t, 0, 0)


@pytest.mark.parametrize("ledger", [
    [a("b", 0, 0), a("a", 0, 0), a("a", 1, 5), a("a", 1, 5), a("b", 1, 1)],  # seq twice
    [a("a", 0, 0), a("a", 1, 100), a("a", 2, 50)],  # time back
    [a("z", 0, 0), a("z", 1, 100), a("z", 2, 50), a("c", 0, 9), a("c", 0, 9)],  # two keys wrong: z first seen
    [a(f"k-{i}", 1, 5) for i in range(40)] + [a(f"k-{i}", 1, 5) for i in range(39, -1, -1)],
])
def test_a_bad_ledger_raises_what_the_reference_raises_first(tmp_path, ledger):
    rows = [{"key": "a"}]  # a malformed row too: the ledger's error comes first
    bounded, reference = errors_of(
        lambda: judge_compare(ledger, rows, 10, workdir=tmp_path, partitions=4),
        lambda: compare(expected_sessions(ledger, 10), rows))
    assert bounded == reference and reference[0] is ValueError
    bounded, reference = errors_of(lambda: judge_coverage(ledger, rows, workdir=tmp_path, partitions=4),
                                   lambda: coverage(ledger, [], rows))
    assert bounded == reference


def test_a_failed_delivery_with_two_outcomes_raises_what_the_reference_raises(tmp_path):
    ledger = [a("a", 0, 0), Failed("b", 3, 3, "x"), Failed("a", 0, 0, "x"), Failed("b", 3, 3, "x")]
    bounded, reference = errors_of(
        lambda: judge_coverage(ledger, [], workdir=tmp_path, partitions=2),
        lambda: coverage(acked_of(ledger), [r for r in ledger if isinstance(r, Failed)], []))
    assert bounded == reference and "seq 0" in reference[1]


@pytest.mark.parametrize("change", [
    lambda row: row.pop("count"),
    lambda row: row.update(first_seq="1"),
    lambda row: row.update(key=None),
])
def test_a_malformed_row_raises_what_the_reference_raises(tmp_path, change):
    ledger = history(random.Random(9), 20, 20, 20)
    sessions = expected_sessions(acked_of(ledger), GAP)
    rows = [asdict(s) for s in sessions]
    change(rows[7])
    change(rows[11])
    bounded, reference = errors_of(lambda: judge_compare(ledger, rows, GAP, workdir=tmp_path, partitions=3),
                                   lambda: compare(sessions, rows))
    assert bounded == reference and "emitted session #7" in reference[1]
    bounded, reference = errors_of(lambda: judge_coverage(ledger, rows, workdir=tmp_path, partitions=3),
                                   lambda: coverage(acked_of(ledger), [r for r in ledger if isinstance(r, Failed)],
                                                    rows))
    assert bounded == reference


def test_bad_rules_raise_what_expected_sessions_raises(tmp_path):
    bounded, reference = errors_of(lambda: judge_compare([], [], 10, drained=False, workdir=tmp_path),
                                   lambda: expected_sessions([], 10, drained=False))
    assert bounded == reference and reference[1].startswith("watermark_ms: ")


def test_the_ledger_read_as_a_stream_is_the_ledger_read_whole(tmp_path):
    path = tmp_path / "ledger.jsonl"
    path.write_text('{"key":"a","seq":0,"event_time_ms":0,"partition":0,"offset":0}\n'
                    '{"key":"a","seq":1,"event_time_ms":5,"error":"timed out"}\n'
                    '{"key":"b","seq":0,"event_time_ms":1,"partition":1,"offset":0}\n'
                    '{"key":"b","seq":1,"event_ti')  # torn
    whole = Ledger.read(path)
    assert list(Ledger.records(path)) == [whole.acked[0], whole.failed[0], whole.acked[1]]


def test_partitions_grow_with_the_ledger_and_stop_at_a_limit():
    assert partitions_for(0) == partitions_for(1) == 1
    assert partitions_for(4 * 2**20) == 1 and partitions_for(4 * 2**20 + 1) == 2
    assert partitions_for(315 * 2**20) == 79
    assert partitions_for(10**15) == 4096


# --- the harness's path (chaos/judging.py, JobArm.judge) ---------------------------------------------------------

def ledger_file(path, ledger):
    with open(path, "w") as f:
        for r in ledger:
            fields = {"partition": r.partition, "offset": r.offset} if isinstance(r, Acked) else {"error": r.error}
            f.write(json.dumps({"key": r.key, "seq": r.seq, "event_time_ms": r.event_time_ms, **fields}) + "\n")
    return path


@pytest.mark.parametrize("event_time", [True, False])
def test_judge_outputs_is_what_the_arm_reported_before_plus_what_judging_cost(tmp_path, monkeypatch, event_time):
    """oracle.json as JobArm.judge wrote it from the whole ledger and output in memory, then `judging`."""
    import chaos.oracle_bounded
    from chaos.judging import judge_outputs
    from chaos.oracle import emission_waits

    monkeypatch.setattr(chaos.oracle_bounded, "LEDGER_BYTES_PER_PARTITION", 20_000)  # several partitions
    rng = random.Random(10)
    ledger = history(rng, 100, 300, 200, 0.01)
    path = ledger_file(tmp_path / "ledger.jsonl", ledger)
    contents = Ledger.read(path)
    rows = [{**row, "batch_id": row["end_ms"] // 1000} for row in damaged(rng, expected_sessions(contents.acked,
                                                                                                 GAP, MAX_LEN))]
    extra, audit = {"hot-0": {5: 1}}, {"topic_records": 9, "topic_duplicates": 1}
    done = {b: b * 1000 + 400 for b in range(0, 100)}
    without_batch = [{k: v for k, v in row.items() if k != "batch_id"} for row in rows]
    if event_time:
        before = compare(expected_sessions(contents.acked, GAP, MAX_LEN, extra_copies=extra), without_batch).to_dict()
    else:
        before = coverage(contents.acked, contents.failed, without_batch, extra_copies=extra).to_dict()
    before.update(audit)
    if event_time:
        before["emission"] = emission_waits(rows, done)
    work = tmp_path / "arm"
    work.mkdir()
    report, emitted = judge_outputs(path, iter(rows), event_time=event_time, gap_ms=GAP, max_len_ms=MAX_LEN,
                                    extra_copies=extra, audit=audit, batch_done_ms=done, workdir=work)
    judging = report.pop("judging")
    assert json.dumps(report) == json.dumps(before)
    assert emitted == len(rows) and list(work.iterdir()) == []
    assert judging["events"] == len(ledger) and judging["sessions"] == len(rows)
    assert judging["partitions"] == -(-path.stat().st_size // 20_000) > 3
    assert 0 <= judging["seconds"] < 60 and 10 < judging["peak_rss_mb"] < 4096


def test_a_failed_delivery_the_topic_holds_is_judged_as_input(tmp_path):
    """The producer gave up on seq 2 (its delivery timed out in a Kafka outage) but the broker had stored it and
    the job counted it: with the read-back's `landed` the session is right; without it, the job would be blamed."""
    from chaos.judging import judge_outputs

    ledger = [Acked("k", 0, 1_000, 0, 0), Acked("k", 1, 1_100, 0, 1), Failed("k", 2, 1_200, "timed out"),
              Acked("k", 3, 1_300, 0, 3)]
    path = ledger_file(tmp_path / "ledger.jsonl", ledger)
    as_landed = expected_sessions([Acked(r.key, r.seq, r.event_time_ms, 0, 0) for r in ledger], GAP, MAX_LEN)
    rows = [asdict(s) for s in as_landed]
    assert [(s.count, s.last_seq) for s in as_landed] == [(4, 3)]

    def judged(landed):
        report, _rows = judge_outputs(path, iter(rows), event_time=True, gap_ms=GAP, max_len_ms=MAX_LEN,
                                      extra_copies={}, audit={}, batch_done_ms={}, workdir=tmp_path, landed=landed)
        return report

    assert judged({("k", 2)})["ok"] and judged({("k", 2)})["wrong"] == 0
    assert judged(set())["wrong"] == 1 and not judged(set())["ok"]


def test_a_spill_keeps_each_partitions_records_in_order_over_many_chunks(tmp_path):
    with Spill(tmp_path, "numbers", 2) as spill:
        for n in range(30_000):  # several chunks in each partition
            spill.add(str(n % 10), (str(n % 10), n))
    for p in range(2):
        read = list(spill.read(p))
        assert read == sorted(read, key=lambda record: record[1]) and len(read) > 10_000
        assert {partition_of(name, 2) for name, _n in read} == {p}
    assert spill.added == 30_000 and sum(len(list(spill.read(p))) for p in range(2)) == 30_000


class _Response:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self) -> bytes:
        return self.data

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


class _Bucket:
    """The two calls outputs.iter_sessions makes of an S3 client, over objects held in a dict."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects = objects

    def list_objects(self, bucket, prefix, recursive):
        from types import SimpleNamespace

        return [SimpleNamespace(object_name=name) for name in self.objects if name.startswith(prefix)]

    def get_object(self, bucket, name):
        return _Response(self.objects[name])


class _Stack:
    """What JobArm.judge asks of a stack: the job's output in a bucket; the topic cannot be read back here."""

    def __init__(self, bucket: _Bucket) -> None:
        from types import SimpleNamespace

        self.bucket = bucket
        self.info = SimpleNamespace(bucket="chaos", kafka_bootstrap="127.0.0.1:9")

    def s3_client(self, direct=False):
        return self.bucket

    def kafka_client_login(self):
        raise RuntimeError("no broker in a unit test")


@pytest.mark.parametrize("profile", ["hardened", "naive"])
def test_an_arm_is_judged_as_before_with_what_judging_cost(tmp_path, profile):
    """JobArm.judge on a written ledger, progress file and bucket: arm.json's oracle is what the in-memory path made
    of the same files (the drain's rows left out), with `judging` beside it."""
    from chaos.arm.job import DRAIN_KEY, ArmConfig, JobArm, _batch_done_ms
    from chaos.oracle import emission_waits
    from chaos.workload import WorkloadSpec

    bucket = _Bucket({})
    arm = JobArm(_Stack(bucket), tmp_path / "arm", ArmConfig(profile, WorkloadSpec("uniform", 10, 10.0, 1000, 1)),
                 progress=lambda line: None)
    rng = random.Random(12)
    ledger = history(rng, 60, 200, 60)
    ledger_file(arm.ledger_path, ledger)
    gap, max_len = arm.config.gap_ms, arm.config.max_session_ms if profile == "hardened" else None
    acked, failed = acked_of(ledger), [r for r in ledger if isinstance(r, Failed)]
    rows = damaged(rng, expected_sessions(acked, gap, max_len))
    batches = [rows[i:i + 25] for i in range(0, len(rows), 25)]
    drain = {"key": DRAIN_KEY, "start_ms": 0, "end_ms": 1, "count": 1, "first_seq": 0, "last_seq": 0,
             "session_id": "d"}
    for b, batch in enumerate(batches):
        bucket.objects[f"{arm.state.deployment}/output/batch-{b}.jsonl"] = "".join(
            json.dumps(row) + "\n" for row in [*batch, drain]).encode()
    progress = [{"batchId": b, "timestamp": f"2026-11-28T10:00:{b % 60:02d}.000Z",
                 "durationMs": {"triggerExecution": 300}} for b in range(len(batches))]
    arm.progress_path.write_text("".join(json.dumps({"event": "progress", "progress": p}) + "\n" for p in progress))
    emitted = [{**row, "batch_id": b} for b, batch in enumerate(batches) for row in batch]
    if profile == "hardened":
        before = compare(expected_sessions(acked, gap, max_len), rows).to_dict()
    else:
        before = coverage(acked, failed, rows).to_dict()
    before["topic_audit"] = "not read back: RuntimeError: no broker in a unit test"
    if profile == "hardened":
        before["emission"] = emission_waits(emitted, _batch_done_ms(progress))
    summary = arm.judge()
    judging = summary["oracle"].pop("judging")
    assert json.dumps(summary["oracle"]) == json.dumps(before)
    assert summary["sessions_emitted"] == len(rows) and summary["batches"] == len(batches)
    assert judging["events"] == len(ledger) and judging["sessions"] == len(rows)
    assert sorted(p.name for p in arm.dir.iterdir()) == ["arm.json", "ledger.jsonl", "progress.jsonl"]  # no spill
