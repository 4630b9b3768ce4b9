"""emitted_within: how long a session's events wait for its output (chaos/oracle.py emission_waits,
chaos/checks/output_latency.py): the outcome a user sees of a key that never pauses when nothing cuts its session."""
from __future__ import annotations

from chaos.checks.output_latency import EMITTED_WITHIN, check_emitted_within
from chaos.checks.registry import CHECKS
from chaos.oracle import emission_waits, expected_sessions


class Event:
    def __init__(self, key: str, seq: int, t: int):
        self.key, self.seq, self.event_time_ms = key, seq, t


def _rows(sessions, batch_of):
    return [{"key": s.key, "start_ms": s.start_ms, "end_ms": s.end_ms, "count": s.count, "first_seq": s.first_seq,
             "last_seq": s.last_seq, "session_id": s.session_id, "batch_id": batch_of(s)} for s in sessions]


# A hot key with an event every 100 ms for 60 s, from t=1,000 s; the job writes a session in the batch that ends
# 6 s after the session's last event (gap 3 s, watermark 2 s, the batch), and the drain at t=1,066 s.
HOT = [Event("hot", n, 1_000_000 + 100 * n) for n in range(600)]


def _waits(max_len_ms):
    sessions = expected_sessions(HOT, 3_000, max_len_ms)
    done = {}
    for s in sessions:
        done[s.end_ms // 1000] = min(s.end_ms + 3_000, 1_066_000)  # its batch: closed by the watermark, or the drain
    return emission_waits(_rows(sessions, lambda s: s.end_ms // 1000), done)


def test_with_cuts_each_session_waits_its_length_and_without_the_one_session_waits_the_run():
    cut, uncut = _waits(20_000), _waits(None)
    assert cut["sessions"] == 3 and uncut["sessions"] == 1
    assert cut["longest"]["wait_ms"] == 19_900 + 6_000  # a 20 s bucket's session: its length, gap, watermark, batch
    assert uncut["longest"]["wait_ms"] == 65_900 and uncut["longest"]["key"] == "hot"
    assert check_emitted_within({"emission": cut}, 40.0).verdict == "PASSED"
    failed = check_emitted_within({"emission": uncut}, 40.0)
    assert failed.verdict == "FAILED" and "key 'hot'" in failed.message and failed.measured == "the longest 65.9s"


def test_a_session_whose_batch_was_never_timed_is_counted_unmeasured_and_no_data_is_nodata():
    waits = emission_waits([{"key": "k", "start_ms": 0, "batch_id": 7}], {})
    assert (waits["sessions"], waits["unmeasured"], waits["longest"]) == (0, 1, None)
    assert check_emitted_within({"emission": waits}, 40.0).verdict == "NODATA"
    assert check_emitted_within({"lost": 0}, 40.0).verdict == "NODATA"
    assert check_emitted_within(None, 40.0).verdict == "NODATA"


def test_registered_and_set_on_hot_key_session_growth():
    from chaos.spec import load_experiment

    from .test_spec import ROOT

    assert EMITTED_WITHIN in CHECKS
    spec = load_experiment(ROOT / "experiments" / "hot-key-session-growth.yaml")
    assert dict(spec.arm("hardened").targets.extra["emitted_within"]) == {"within": 40.0}
