"""The S3 fault proxy for real: Toxiproxy `s3` -> s3proxy -> MinIO, driven through `stack.s3proxy`, measured with
minio-py through `stack.info.s3_endpoint` and checked straight on MinIO through `s3_direct_endpoint`.

One stack per backend for the module; every test leaves it reset (no rule, nothing held, no toxic).
Clients here do not retry (urllib3 retries=False) unless a test says so: minio-py's default client retries 5xx
and dropped connections, which would hide what the proxy did.
"""
from __future__ import annotations

import io
import signal
import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import urllib3
from minio import Minio
from minio.commonconfig import CopySource
from minio.error import S3Error

from infra.errors import InfraError
from infra.s3proxy import S3Event, pair_requests
from infra.stack import Stack

# The local backend only: on the containers backend the same binary runs in its image, and the stack tests
# (test_stack.py, test_containers.py) check it is in the chain there; the default test run's time goes to the smoke.
pytestmark = [pytest.mark.integration]

SAMPLES = 20


@pytest.fixture(autouse=True)
def healed(stack):
    yield
    if not stack._closing:
        stack.reset()


def _client(stack: Stack, direct: bool = False, retries=False) -> Minio:
    endpoint = stack.info.s3_direct_endpoint if direct else stack.info.s3_endpoint
    http = urllib3.PoolManager(timeout=urllib3.Timeout(connect=10, read=30), retries=retries)
    # region given: no GetBucketLocation request before the first operation (it would be what a fault hits)
    return Minio(endpoint.removeprefix("http://"), access_key=stack.credentials.access_key,
                 secret_key=stack.credentials.secret_key, secure=False, http_client=http, region="us-east-1")


def _put(client: Minio, bucket: str, key: str, data: bytes) -> None:
    client.put_object(bucket, key, io.BytesIO(data), len(data))


def _get(client: Minio, bucket: str, key: str) -> bytes:
    response = client.get_object(bucket, key)
    try:
        return response.read()
    finally:
        response.close()
        response.release_conn()


def _exists(stack: Stack, key: str) -> bool:
    try:
        _client(stack, direct=True).stat_object(stack.info.bucket, key)
        return True
    except S3Error as error:
        assert error.code in ("NoSuchKey", "NoSuchObject"), error
        return False


def _ms(call) -> float:
    t0 = time.perf_counter()
    call()
    return (time.perf_counter() - t0) * 1000


def _end_of(stack: Stack, since: int, key: str, op: str | None = None) -> S3Event:
    """The end event of the first request on `key` (and `op`) after `since`. An end event is recorded as the handler
    finishes, which can be just after the client got a streamed answer: wait for it, never read once."""
    return stack.s3proxy.wait_event(lambda e: e.type == "end" and e.key == key and (op is None or e.op == op),
                                    since=since, timeout=10)


def _events_since(stack: Stack, since: int) -> list[S3Event]:
    found: list[S3Event] = []
    while True:
        batch, since = stack.s3proxy.events(since, limit=10_000)
        if not batch:
            return found
        found += batch


def _ends(stack: Stack, since: int, count: int, predicate, timeout: float = 10) -> list[S3Event]:
    """End events after `since` that satisfy `predicate`, once there are at least `count` of them."""
    deadline = time.monotonic() + timeout
    while True:
        found = [e for e in _events_since(stack, since) if e.type == "end" and predicate(e)]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def _prefix() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def test_the_chain_is_toxiproxy_then_s3proxy_then_minio(stack):
    health = stack.s3proxy.health()
    assert health["ok"] is True
    assert stack.info.s3proxy_api == stack.s3proxy.api and stack.info.s3proxy_api.startswith("http://127.0.0.1:")
    assert stack.info.proxies["s3"]["upstream"] == health["listen"]  # Toxiproxy's s3 proxy feeds s3proxy
    assert health["upstream"] == stack.info.s3_direct_endpoint.removeprefix("http://")  # which feeds MinIO
    assert health["listen"].startswith("127.0.0.1:") and stack.info.s3_endpoint != stack.info.s3_direct_endpoint
    assert stack.handles["s3proxy"].alive()


def test_put_get_roundtrip_and_its_events(stack):
    bucket, key, payload = stack.info.bucket, f"{_prefix()}/object", uuid.uuid4().bytes * 1024
    s3 = _client(stack)
    since = stack.s3proxy.last_seq()
    _put(s3, bucket, key, payload)
    assert _get(s3, bucket, key) == payload
    assert _get(_client(stack, direct=True), bucket, key) == payload  # stored in MinIO, unchanged

    _end_of(stack, since, key, "GET")
    events = [e for e in _events_since(stack, since) if e.key == key]
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs) and seqs[0] > since
    requests = list(pair_requests(events).values())
    assert [r.op for r in requests] == ["PUT", "GET"]
    put, get = requests
    for request in requests:
        assert request.start.type == "start" and request.end.type == "end" and not request.held
        assert request.start.seq < request.end.seq and request.start.request_id == request.end.request_id
        assert request.end.status == 200 and request.end.upstream_status == 200
        assert request.end.outcome == "forwarded" and request.end.rule == ""
        assert request.end.bucket == bucket and request.end.duration_ms > 0
        assert abs(request.end.time_ms / 1000 - time.time()) < 60
    assert put.start.method == "PUT" and put.end.bytes_in >= len(payload)  # minio-py may sign in chunks
    assert get.end.bytes_out == len(payload) and get.end.bytes_in == 0

    # Long-poll: nothing new -> an empty list after about wait_s, and the same `since`.
    last = stack.s3proxy.last_seq()
    t0 = time.monotonic()
    found, next_since = stack.s3proxy.events(last, wait_s=0.4)
    assert found == [] and next_since == last and time.monotonic() - t0 >= 0.35


def test_put_only_delay_leaves_gets_alone(stack):
    bucket, prefix, delay_ms = stack.info.bucket, _prefix(), 300
    s3, payload = _client(stack), b"d" * 8192
    _put(s3, bucket, f"{prefix}/get-target", payload)
    for _ in range(5):  # warm connections
        _get(s3, bucket, f"{prefix}/get-target")

    def measure() -> tuple[list[float], list[float]]:
        puts, gets = [], []
        for n in range(SAMPLES):
            puts.append(_ms(lambda n=n: _put(s3, bucket, f"{prefix}/put-{n % 4}", payload)))
            gets.append(_ms(lambda: _get(s3, bucket, f"{prefix}/get-target")))
        return puts, gets

    _puts_before, gets_before = measure()
    rule = stack.s3proxy.add_rule(ops=["PUT"], action="delay", delay_ms=delay_ms)
    since = stack.s3proxy.last_seq()
    puts_with, gets_with = measure()

    # every PUT waited (the fastest one is the check: a median-minus-median one is noise on a loaded machine, where
    # one slow PUT before the rule inflates the base; test_stack's latency toxic failed that way in CI)
    assert min(puts_with) >= delay_ms, puts_with
    # GETs: no delay at all. A delayed GET takes delay_ms or more; a bound relative to the GETs before is noise
    # here (those took 0.4 s, these are spread over seconds between delayed PUTs, beside another test's Spark).
    assert statistics.median(gets_with) < delay_ms, (gets_before, gets_with)
    ends = _ends(stack, since, 2 * SAMPLES, lambda e: e.key.startswith(prefix))
    assert {e.outcome for e in ends if e.op == "PUT"} == {"delayed"}
    assert {(e.rule, e.outcome) for e in ends if e.op == "GET"} == {("", "forwarded")}
    assert next(r for r in stack.s3proxy.rules() if r["id"] == rule)["applied"] == SAMPLES


def test_slowdown_for_state_keys_only(stack):
    bucket, prefix = stack.info.bucket, _prefix()
    s3 = _client(stack)
    _put(s3, bucket, f"{prefix}/x/state/existing", b"old")
    stack.s3proxy.add_rule(key=rf"^{prefix}/x/state/", action="error", status=503, code="SlowDown")

    with pytest.raises(S3Error) as raised:
        _put(s3, bucket, f"{prefix}/x/state/1.zip", b"state")
    assert raised.value.code == "SlowDown" and raised.value.response.status == 503
    assert raised.value.response.headers["Content-Type"] == "application/xml"
    with pytest.raises(S3Error) as raised:
        _get(s3, bucket, f"{prefix}/x/state/existing")
    assert raised.value.code == "SlowDown"
    assert not _exists(stack, f"{prefix}/x/state/1.zip")  # an errored PUT never reached MinIO

    _put(s3, bucket, f"{prefix}/x/offsets/1", b"offsets")  # other keys go through
    assert _get(s3, bucket, f"{prefix}/x/offsets/1") == b"offsets"


def test_a_retrying_client_gets_through_after_the_limit(stack):
    """minio-py's own client retries 503 (urllib3 Retry): a rule with limit=2 costs it two attempts."""
    bucket, key = stack.info.bucket, f"{_prefix()}/x/state/retried"
    rule = stack.s3proxy.add_rule(ops=["PUT"], key=r"/x/state/", action="error", status=503, limit=2)
    since = stack.s3proxy.last_seq()
    stack.s3_client().put_object(bucket, key, io.BytesIO(b"v"), 1)
    assert _exists(stack, key)
    stack.s3proxy.wait_event(lambda e: e.type == "end" and e.key == key and e.status == 200, since=since)
    puts = [e for e in _events_since(stack, since) if e.type == "end" and e.key == key]
    assert [e.status for e in puts] == [503, 503, 200]
    assert [e.rule for e in puts] == [rule, rule, ""]


def test_drop_response_stores_the_object_and_the_client_sees_a_connection_error(stack):
    bucket, key, payload = stack.info.bucket, f"{_prefix()}/dropped", b"stored-but-unacknowledged"
    stack.s3proxy.add_rule(ops=["PUT"], key=r"/dropped$", action="drop_response", limit=1)
    since = stack.s3proxy.last_seq()
    with pytest.raises(urllib3.exceptions.HTTPError):  # ProtocolError: connection closed without an answer
        _put(_client(stack), bucket, key, payload)
    assert _get(_client(stack, direct=True), bucket, key) == payload
    end = _end_of(stack, since, key)
    assert (end.action, end.outcome, end.status, end.upstream_status) == ("drop_response", "dropped", 0, 200)


def test_hold_parks_a_put_until_released(stack):
    bucket, key = stack.info.bucket, f"{_prefix()}/held"
    rule = stack.s3proxy.add_rule(ops=["PUT"], key=r"/held$", action="hold")
    s3 = _client(stack)
    with ThreadPoolExecutor(max_workers=1) as pool:
        # released with drop: the client sees the connection closed, nothing reached MinIO
        pending = pool.submit(_put, s3, bucket, key, b"first")
        held = stack.s3proxy.wait_held(1)
        assert [(h["op"], h["key"], h["rule"], h["phase"]) for h in held] == [("PUT", key, rule, "before")]
        time.sleep(0.3)
        assert not pending.done() and not _exists(stack, key)
        stack.s3proxy.release(held[0]["request_id"], "drop")
        with pytest.raises(urllib3.exceptions.HTTPError):
            pending.result(timeout=30)
        assert not _exists(stack, key)

        # released with forward: it goes on as if never held
        pending = pool.submit(_put, s3, bucket, key, b"second")
        held = stack.s3proxy.wait_held(1)
        assert not _exists(stack, key)
        stack.s3proxy.release(held[0]["request_id"], "forward")
        pending.result(timeout=30)
        assert _get(_client(stack, direct=True), bucket, key) == b"second"
    assert stack.s3proxy.held() == []
    end = stack.s3proxy.wait_event(lambda e: e.type == "end" and e.request_id == held[0]["request_id"])
    assert (end.outcome, end.release, end.released_by, end.status) == ("released", "forward", "api", 200)


def test_reset_clears_rules_and_releases_held_requests(stack):
    bucket, key = stack.info.bucket, f"{_prefix()}/reset"
    stack.s3proxy.add_rule(ops=["PUT"], key=r"/reset$", action="hold")
    stack.s3proxy.add_rule(ops=["GET"], action="delay", delay_ms=5000)
    stack.toxiproxy.add_toxic("s3", "reset_latency", "latency", {"latency": 10})
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(_put, _client(stack), bucket, key, b"v")
        stack.s3proxy.wait_held(1)
        stack.reset()
        pending.result(timeout=30)
    assert stack.s3proxy.rules() == [] and stack.s3proxy.held() == []
    assert stack.toxiproxy.toxics("s3") == {}
    assert _exists(stack, key)
    assert _ms(lambda: _get(_client(stack), bucket, key)) < 2000


def test_copy_is_classified_with_its_source(stack):
    """Spark's checkpoint "rename" on S3: PUT with x-amz-copy-source from a .tmp name, then DELETE."""
    bucket, prefix = stack.info.bucket, _prefix()
    s3 = _client(stack)
    tmp, final = f"{prefix}/state/.1.changelog.{uuid.uuid4()}.tmp", f"{prefix}/state/1.changelog"
    _put(s3, bucket, tmp, b"changelog")
    since = stack.s3proxy.last_seq()
    s3.copy_object(bucket, final, CopySource(bucket, tmp))
    s3.remove_object(bucket, tmp)
    _end_of(stack, since, tmp, "DELETE")
    ends = [e for e in _events_since(stack, since) if e.type == "end"]
    copy = next(e for e in ends if e.op == "COPY")
    assert (copy.key, copy.source_bucket, copy.source_key, copy.status) == (final, bucket, tmp, 200)
    assert any(e.op == "DELETE" and e.key == tmp and e.status == 204 for e in ends)

    # a rule on the copy's source key: renames from .tmp names fail, other copies do not
    stack.s3proxy.add_rule(ops=["COPY"], source_key=r"\.tmp$", action="error", status=500)
    _put(s3, bucket, tmp, b"changelog")
    with pytest.raises(S3Error) as raised:
        s3.copy_object(bucket, f"{prefix}/state/2.changelog", CopySource(bucket, tmp))
    assert raised.value.code == "InternalError"
    s3.copy_object(bucket, f"{prefix}/state/3.changelog", CopySource(bucket, final))
    assert not _exists(stack, f"{prefix}/state/2.changelog") and _exists(stack, f"{prefix}/state/3.changelog")


def test_list_delay_slows_listings_not_gets(stack):
    bucket, prefix, delay_ms = stack.info.bucket, _prefix(), 300
    s3 = _client(stack)
    _put(s3, bucket, f"{prefix}/list/a", b"a")
    gets_before = [_ms(lambda: _get(s3, bucket, f"{prefix}/list/a")) for _ in range(SAMPLES)]
    stack.s3proxy.add_rule(ops=["LIST"], key=rf"^{prefix}/", action="delay", delay_ms=delay_ms)
    since = stack.s3proxy.last_seq()
    listed: list = []
    list_ms = _ms(lambda: listed.extend(s3.list_objects(bucket, prefix=f"{prefix}/list/", recursive=True)))
    gets_with = [_ms(lambda: _get(s3, bucket, f"{prefix}/list/a")) for _ in range(SAMPLES)]
    assert [o.object_name for o in listed] == [f"{prefix}/list/a"]
    assert list_ms >= delay_ms
    assert statistics.median(gets_with) < delay_ms, (gets_before, gets_with)  # GETs not delayed (as above)
    listing = stack.s3proxy.wait_event(lambda e: e.type == "end" and e.op == "LIST", since=since)
    assert listing.query.get("prefix") == f"{prefix}/list/" and listing.outcome == "delayed"
    assert listing.query.get("list-type") == "2"


def test_a_bad_rule_or_release_is_one_line(stack):
    with pytest.raises(InfraError) as raised:
        stack.s3proxy.add_rule(action="explode")
    assert "action" in str(raised.value) and "\n" not in str(raised.value)
    with pytest.raises(InfraError, match="unknown_field|colour"):
        stack.s3proxy.add_rule(action="error", colour="red")
    with pytest.raises(InfraError, match="no held request"):
        stack.s3proxy.release("q999999999", "forward")
    assert stack.s3proxy.rules() == []


def test_minio_down_closes_client_connections_like_toxiproxy_did(stack):
    """With MinIO gone the chain answers no HTTP status (no 502): the connection closes, as it did with Toxiproxy
    alone, and works again once MinIO is back."""
    bucket, key = stack.info.bucket, f"{_prefix()}/down"
    old = stack.handles["minio"]
    old.signal(signal.SIGKILL)
    deadline = time.monotonic() + 15
    while old.alive():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    since = stack.s3proxy.last_seq()
    try:
        with pytest.raises(urllib3.exceptions.HTTPError):
            _put(_client(stack), bucket, key, b"v")
        end = _end_of(stack, since, key)
        assert (end.outcome, end.status) == ("upstream_error", 0) and end.error
    finally:
        stack.restart("minio")
    _put(_client(stack), bucket, key, b"v")
    assert _exists(stack, key)


def test_s3proxy_restart_comes_back_without_rules(stack):
    stack.s3proxy.add_rule(ops=["GET"], action="error")
    seconds = stack.restart("s3proxy")
    assert seconds < 30 and stack.handles["s3proxy"].alive()
    assert stack.s3proxy.rules() == []
    bucket, key = stack.info.bucket, f"{_prefix()}/after-restart"
    _put(_client(stack), bucket, key, b"v")
    assert _get(_client(stack), bucket, key) == b"v"
