import itertools
import json
import math
import random
import re
import time
from collections import Counter
from dataclasses import replace

import pytest

from chaos.workload import (
    _ACKED_LINE,
    HOT_KEY,
    Acked,
    Event,
    Failed,
    Ledger,
    LedgerError,
    Pacer,
    WorkloadSpec,
    _parse_json_record,
    _parse_record,
    plan,
)


def spec(**overrides):
    base = dict(shape="uniform", keys=10, rate=1000.0, duration_ms=2000, seed=7)
    return WorkloadSpec(**{**base, **overrides})


def rotating(**overrides):
    # 50 actors, 2 events 1000 ms apart: 2000 * 50 / 1000 = 100 ev/s
    base = dict(shape="rotating", keys=1, rate=100.0, duration_ms=10_000, seed=7,
                rotation_live_actors=50, rotation_gap_ms=1000)
    return WorkloadSpec(**{**base, **overrides})


ALL_SHAPES = [spec(), spec(shape="zipf"), spec(shape="hot_key"), rotating()]


# --- plan: determinism, timing, per-key invariants -------------------------------------------------------------

@pytest.mark.parametrize("s", ALL_SHAPES, ids=lambda s: s.shape)
def test_plan_is_deterministic_for_a_seed_and_changes_with_it(s):
    first, again = list(plan(s)), list(plan(s))
    other = list(plan(replace(s, seed=s.seed + 1)))
    assert first == again
    assert first != other


@pytest.mark.parametrize("shape", ["uniform", "zipf"])
def test_other_seed_changes_the_key_sequence(shape):
    keys = [e.key for e in plan(spec(shape=shape))]
    other = [e.key for e in plan(spec(shape=shape, seed=8))]
    assert keys != other


@pytest.mark.parametrize("shape", ["uniform", "zipf", "hot_key"])
def test_event_i_is_planned_at_i_times_1000_over_rate_after_start(shape):
    start = 1_700_000_000_000
    events = list(plan(spec(shape=shape, rate=3000.0, duration_ms=100), start_ms=start))
    assert len(events) == 300  # floor(i / 3) < 100
    assert [e.event_time_ms for e in events] == [start + math.floor(i * 1000 / 3000) for i in range(300)]


@pytest.mark.parametrize("s", ALL_SHAPES, ids=lambda s: s.shape)
def test_per_key_seqs_are_contiguous_from_zero_and_time_never_goes_back(s):
    times = [e.event_time_ms for e in plan(s)]
    assert times == sorted(times)
    per_key = {}
    for e in plan(s):
        per_key.setdefault(e.key, []).append(e)
    for key, evs in per_key.items():
        assert [e.seq for e in evs] == list(range(len(evs))), key
        assert all(a.event_time_ms <= b.event_time_ms for a, b in zip(evs, evs[1:])), key


def test_zipf_skew_is_real_and_uniform_is_flat():
    n = 20_000
    zipf = Counter(e.key for e in plan(spec(shape="zipf", keys=100, rate=1000.0, duration_ms=n)))
    flat = Counter(e.key for e in plan(spec(shape="uniform", keys=100, rate=1000.0, duration_ms=n)))
    assert zipf["k-0"] / n > 0.15  # uniform would give 0.01; theory for s=1.1 over 100 keys is about 0.23
    assert zipf["k-0"] > zipf["k-9"] > zipf["k-99"]
    assert max(flat.values()) / n < 0.015
    assert set(zipf) <= {f"k-{i}" for i in range(100)} and set(flat) == {f"k-{i}" for i in range(100)}


def test_hot_key_takes_its_exact_share_without_pausing():
    events = list(plan(spec(shape="hot_key", keys=11, hot_key_share=0.3, rate=1000.0, duration_ms=10_000)))
    hot_positions = [i for i, e in enumerate(events) if e.key == HOT_KEY]
    assert len(hot_positions) == 3000
    assert max(b - a for a, b in zip(hot_positions, hot_positions[1:])) <= math.ceil(1 / 0.3)
    others = Counter(e.key for e in events if e.key != HOT_KEY)
    assert set(others) == {f"k-{i}" for i in range(10)}
    assert max(others.values()) < 3000 / 2  # no second hot key among the others


def test_the_hot_keys_events_carry_their_own_payload_size_and_the_others_keep_theirs():
    events = list(plan(spec(shape="hot_key", keys=11, hot_key_share=0.5, payload_bytes=16,
                            hot_key_payload_bytes=65536, duration_ms=200)))
    assert {len(e.payload) for e in events if e.key == HOT_KEY} == {65536}
    assert {len(e.payload) for e in events if e.key != HOT_KEY} == {16}
    assert {len(e.payload) for e in plan(spec(shape="hot_key", keys=11, payload_bytes=16))} == {16}


@pytest.mark.parametrize("size", [-1, 512 * 1024 + 1, 1.5, True])
def test_a_hot_key_payload_outside_what_kafka_takes_is_refused(size):
    with pytest.raises(ValueError, match="hot_key_payload_bytes: must be an int in 0..524288"):
        spec(shape="hot_key", hot_key_payload_bytes=size)


# --- rotating -------------------------------------------------------------------------------------------------

def test_rotating_actors_send_exactly_two_events_gap_apart_and_keys_are_never_reused():
    events = list(plan(rotating()))
    by_key = {}
    for e in events:
        by_key.setdefault(e.key, []).append(e)
    assert all(len(evs) == 2 for evs in by_key.values())
    assert all(evs[1].event_time_ms - evs[0].event_time_ms == 1000 for evs in by_key.values())
    starters = [int(e.key.removeprefix("actor-")) for e in events if e.seq == 0]
    assert starters == list(range(len(starters)))  # increasing, so no key comes back
    assert all(e.event_time_ms < 10_000 for e in events)


def test_rotating_keeps_exactly_the_live_actor_count_in_steady_state():
    s = rotating()
    live, peak, steady = set(), 0, []
    for t, group in itertools.groupby(plan(s), key=lambda e: e.event_time_ms):
        for e in group:
            (live.add if e.seq == 0 else live.remove)(e.key)
            peak = max(peak, len(live))  # per event: an actor retires before its replacement starts
        if s.rotation_gap_ms <= t < s.duration_ms - s.rotation_gap_ms:
            steady.append(len(live))
    assert peak == s.rotation_live_actors
    assert steady and set(steady) == {s.rotation_live_actors}


def test_rotating_runs_at_the_target_rate_in_steady_state():
    s = rotating()
    window = [e for e in plan(s) if 1000 <= e.event_time_ms < 9000]
    assert len(window) == s.rate * 8


def test_rotating_rejects_a_rate_that_contradicts_live_actors_and_gap():
    with pytest.raises(ValueError, match=r"^rate: .*= 100\.0 ev/s, got 150"):
        rotating(rate=150.0)


# --- spec validation ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("overrides", "field"), [
    (dict(shape="bursty"), "shape"),
    (dict(keys=0), "keys"),
    (dict(keys=2.5), "keys"),
    (dict(rate=0), "rate"),
    (dict(rate=float("nan")), "rate"),
    (dict(duration_ms=-1), "duration_ms"),
    (dict(seed="7"), "seed"),
    (dict(zipf_s=0), "zipf_s"),
    (dict(hot_key_share=1.0), "hot_key_share"),
    (dict(payload_bytes=-1), "payload_bytes"),
    (dict(shape="hot_key", keys=1), "keys"),
    (dict(shape="rotating"), "rotation_live_actors"),
    (dict(shape="rotating", rotation_live_actors=5), "rotation_gap_ms"),
])
def test_invalid_spec_names_the_field_in_one_line(overrides, field):
    with pytest.raises(ValueError) as info:
        spec(**overrides)
    message = str(info.value)
    assert message.startswith(f"{field}: ") and "\n" not in message


# --- laziness, payload, wire format ---------------------------------------------------------------------------

@pytest.mark.parametrize("s", [
    spec(rate=5000.0, duration_ms=600_000),
    spec(shape="zipf", keys=1000, rate=5000.0, duration_ms=600_000),
    rotating(rate=5000.0, rotation_live_actors=5000, rotation_gap_ms=2000, duration_ms=600_000),
], ids=lambda s: s.shape)
def test_plan_is_lazy(s):
    began = time.perf_counter()
    head = list(itertools.islice(plan(s), 10))
    assert len(head) == 10
    assert time.perf_counter() - began < 0.5  # building 3M events takes many seconds


@pytest.mark.parametrize("size", [0, 5, 32])
def test_payload_has_the_requested_size(size):
    payloads = [e.payload for e in plan(spec(payload_bytes=size, duration_ms=20))]
    assert all(len(p) == size for p in payloads)
    if size:
        assert len(set(payloads)) == len(payloads)


def test_event_json_carries_every_field():
    e = Event("k-1", 3, 1234, "ab")
    assert json.loads(e.to_json()) == {"key": "k-1", "seq": 3, "event_time_ms": 1234, "payload": "ab"}


# --- Pacer ----------------------------------------------------------------------------------------------------

class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_pacer_releases_events_on_schedule():
    clock = FakeClock()
    pacer = Pacer(4.0, clock)  # one event every 0.25 s
    assert pacer.seconds_until_next() == 0.0
    assert pacer.take() == 1  # event 0 is due at start
    assert pacer.take() == 0
    assert pacer.seconds_until_next() == pytest.approx(0.25)
    clock.now += 0.125
    assert pacer.take() == 0
    assert pacer.seconds_until_next() == pytest.approx(0.125)
    clock.now += 0.125
    assert pacer.take() == 1
    clock.now += 0.75  # events at 0.5, 0.75, 1.0
    assert pacer.take() == 3
    assert pacer.released == 5


def test_pacer_catches_up_after_a_stall_in_limited_bursts():
    clock = FakeClock()
    pacer = Pacer(4.0, clock)
    pacer.take()
    clock.now += 10.0  # 40 more events became due
    assert pacer.take(limit=25) == 25
    assert pacer.seconds_until_next() == 0.0
    assert pacer.take(limit=25) == 15
    assert pacer.take(limit=25) == 0
    assert pacer.seconds_until_next() == pytest.approx(0.25)


def test_pacer_rejects_a_bad_rate():
    with pytest.raises(ValueError, match="^rate: "):
        Pacer(0)


# --- Ledger ---------------------------------------------------------------------------------------------------

A = Event("k-1", 0, 1000, "x")
B = Event("k-1", 1, 1500, "y")
C = Event("k-2", 0, 1200, "z")


def write_ledger(path):
    with Ledger(path) as ledger:
        ledger.acked(A, partition=2, offset=40)
        ledger.failed(B, "KafkaError{code=_MSG_TIMED_OUT}")
        ledger.acked(C, partition=0, offset=7)


def test_ledger_round_trip(tmp_path):
    path = tmp_path / "ledger.jsonl"
    write_ledger(path)
    contents = Ledger.read(path)
    assert contents.acked == [Acked("k-1", 0, 1000, 2, 40), Acked("k-2", 0, 1200, 0, 7)]
    assert contents.failed == [Failed("k-1", 1, 1500, "KafkaError{code=_MSG_TIMED_OUT}")]


def test_ledger_tolerates_a_torn_last_line(tmp_path):
    path = tmp_path / "ledger.jsonl"
    write_ledger(path)
    with open(path, "ab") as f:
        f.write(b'{"key":"k-3","seq":0,"event_ti')
    contents = Ledger.read(path)
    assert len(contents.acked) == 2 and len(contents.failed) == 1


def test_ledger_keeps_a_complete_last_line_without_newline(tmp_path):
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(b'{"key":"k-3","seq":0,"event_time_ms":5,"partition":1,"offset":9}')
    assert Ledger.read(path).acked == [Acked("k-3", 0, 5, 1, 9)]


def test_ledger_rejects_a_corrupt_middle_line_with_file_and_line(tmp_path):
    path = tmp_path / "ledger.jsonl"
    write_ledger(path)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = b'{"key":"k-1","seq":1,"event_ti\n'
    path.write_bytes(b"".join(lines))
    with pytest.raises(LedgerError, match=rf"^{re.escape(str(path))}:2: not JSON") as info:
        Ledger.read(path)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("line", "reason"), [
    (b'{"key":"k","seq":"1","event_time_ms":5,"partition":1,"offset":9}', "field 'seq' must be int"),
    (b'{"key":"k","seq":true,"event_time_ms":5,"partition":1,"offset":9}', "field 'seq' must be int"),
    (b'{"key":"k","seq":1,"event_time_ms":5,"partition":1}', "neither"),
    (b'[1,2]', "not a JSON object"),
])
def test_ledger_rejects_malformed_records(tmp_path, line, reason):
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(line + b"\n" + b'{"key":"k","seq":0,"event_time_ms":1,"error":"e"}\n')
    with pytest.raises(LedgerError, match=rf":1: .*{reason}"):
        Ledger.read(path)


def outcome(parse, line):
    try:
        return parse(line)
    except ValueError as exc:
        return type(exc), str(exc)


def test_a_line_read_without_the_json_parser_is_what_the_json_parser_reads():
    """_parse_record reads a line as Ledger writes it with a regular expression: on every other line the JSON
    parser decides, so the outcome (record or error) is always the JSON parser's."""
    rng = random.Random(11)
    keys = ["k-1", "hot-0", "é", "キー", 'q"uote', "back\\slash", "tab\t", "\x7f", "ctl\x01", "", "\ud800"]
    ints, bad_ints = ["0", "-0", "7", "-12", "1764300000000", str(2**70)], ["01", "+1", "1.0", "1e3", '"3"', "true"]

    def number() -> str:
        return rng.choice(bad_ints if rng.random() < 0.05 else ints)

    lines = []
    for _ in range(3_000):
        key, (seq, t, partition, offset) = rng.choice(keys), (number() for _ in range(4))
        fields = [f'"key":{json.dumps(key)}' if rng.random() < 0.5 else f'"key":"{key}"', f'"seq":{seq}',
                  f'"event_time_ms":{t}', f'"partition":{partition}', f'"offset":{offset}']
        if rng.random() < 0.1:
            rng.shuffle(fields)
        if rng.random() < 0.05:
            fields[-1] = f'"error":"{key}"'
        line = ("{" + (", " if rng.random() < 0.05 else ",").join(fields) + "}").encode("utf-8", "surrogatepass")
        if rng.random() < 0.05:
            line = line.replace(b"k-1", b"k-\xff")  # not UTF-8
        lines.append(line + (rng.choice([b"", b" \n", b"\r\n"]) if rng.random() < 0.1 else b"\n"))
    fast = [line for line in lines if _ACKED_LINE.fullmatch(line)]
    assert len(fast) > 300 and len(lines) - len(fast) > 300  # both ways taken
    assert [outcome(_parse_record, line) for line in lines] == [outcome(_parse_json_record, line) for line in lines]


def test_reopening_drops_a_torn_tail_so_appends_stay_readable(tmp_path):
    path = tmp_path / "ledger.jsonl"
    write_ledger(path)
    with open(path, "ab") as f:
        f.write(b'{"key":"k-3","se')
    with Ledger(path) as ledger:
        ledger.acked(Event("k-4", 0, 2000, ""), partition=1, offset=3)
    contents = Ledger.read(path)
    assert [a.key for a in contents.acked] == ["k-1", "k-2", "k-4"]


def test_reopening_completes_an_unterminated_but_whole_record(tmp_path):
    path = tmp_path / "ledger.jsonl"
    path.write_bytes(b'{"key":"k-3","seq":0,"event_time_ms":5,"partition":1,"offset":9}')
    with Ledger(path) as ledger:
        ledger.acked(Event("k-4", 0, 2000, ""), partition=1, offset=3)
    assert [a.key for a in Ledger.read(path).acked] == ["k-3", "k-4"]
