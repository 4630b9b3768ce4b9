"""The pure parts of infra/s3proxy.py: events as the API sends them, pairing, latency figures, one-line errors."""
from __future__ import annotations

import socket

import pytest

from infra.errors import InfraError
from infra.s3proxy import S3Event, S3ProxyClient, latency_summary, pair_requests

START = {"seq": 7, "type": "start", "time_ms": 1700000000000, "request_id": "q3", "op": "COPY", "method": "PUT",
         "bucket": "chaos", "key": "ck/state/0/1/1.changelog", "source_bucket": "chaos",
         "source_key": "ck/state/0/1/.1.changelog.1f2e.tmp", "query": {}, "content_length": 0, "status": 0,
         "upstream_status": 0, "bytes_in": 0, "bytes_out": 0, "duration_ms": 0, "rule": "r1", "action": "hold",
         "phase": "before", "outcome": "", "release": "", "released_by": "", "error": ""}


def test_an_event_reads_every_field_the_api_sends():
    event = S3Event.from_dict(START)
    assert (event.seq, event.op, event.key, event.source_key, event.rule) == (
        7, "COPY", "ck/state/0/1/1.changelog", "ck/state/0/1/.1.changelog.1f2e.tmp", "r1")


def test_an_event_ignores_fields_it_does_not_know_and_defaults_missing_ones():
    event = S3Event.from_dict({**{k: START[k] for k in ("seq", "type", "time_ms", "request_id", "op", "method",
                                                         "bucket", "key")}, "from_a_newer_proxy": 1, "query": None})
    assert event.query == {} and event.status == 0 and event.content_length == -1


def _event(seq: int, kind: str, request_id: str, **fields) -> S3Event:
    return S3Event.from_dict({**START, "seq": seq, "type": kind, "request_id": request_id, **fields})


def test_pair_requests_ties_start_held_and_end_in_start_order():
    events = [_event(4, "end", "q1", status=200), _event(1, "start", "q1"), _event(2, "start", "q2"),
              _event(3, "held", "q2"), _event(5, "start", "q3")]
    paired = pair_requests(events)
    assert list(paired) == ["q1", "q2", "q3"]
    assert paired["q1"].end.status == 200 and not paired["q1"].held
    assert paired["q2"].held and paired["q2"].end is None
    assert paired["q3"].start.seq == 5 and paired["q3"].op == "COPY"


def test_latency_summary_median_and_nearest_rank_p95():
    samples = [float(n) for n in range(1, 21)]  # 1..20 ms
    summary = latency_summary(samples)
    assert summary == {"n": 20, "median_ms": 10.5, "p95_ms": 19.0, "min_ms": 1.0, "max_ms": 20.0}
    assert latency_summary([3.0])["p95_ms"] == 3.0
    with pytest.raises(ValueError):
        latency_summary([])


def test_an_api_that_does_not_answer_is_one_line_naming_it():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = S3ProxyClient(f"http://127.0.0.1:{port}", timeout=1)
    with pytest.raises(InfraError) as raised:
        client.add_rule(action="delay", delay_ms=10)
    message = str(raised.value)
    assert f"127.0.0.1:{port}" in message and "s3proxy.log" in message and "\n" not in message


def test_release_mode_is_checked_before_asking():
    with pytest.raises(InfraError, match="forward, drop, error"):
        S3ProxyClient("http://127.0.0.1:1").release("q1", mode="later")
