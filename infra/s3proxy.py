"""Client of the S3 fault proxy's API (the Go program in infra/s3proxy/; rules, events and API in docs/s3proxy.md).

The stack puts s3proxy between Toxiproxy's `s3` proxy and MinIO, so a rule acts on everything that uses
`stack.info.s3_endpoint` (Spark's s3a, the job's bookkeeping) and on nothing that uses `s3_direct_endpoint`.

    rule = stack.s3proxy.add_rule(ops=["PUT"], key=r"^ck/state/", action="error", status=503, code="SlowDown")
    events, since = stack.s3proxy.events(since=0, wait_s=1.0)
    stack.s3proxy.remove_rule(rule)

Every failure (the API does not answer, refuses a rule, knows no such held request) is an InfraError with one
line naming the API and what to do.

    python -m infra.s3proxy bench [--samples 50] [--delay-ms 200] [--backend local] [--out DIR] [--json]
"""
from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import requests

from .errors import InfraError

OPS = ("PUT", "COPY", "GET", "HEAD", "DELETE", "LIST", "POST", "OTHER")
ACTIONS = ("delay", "error", "drop_response", "hold")
RELEASE_MODES = ("forward", "drop", "error")
OUTCOMES = ("forwarded", "delayed", "errored", "dropped", "released", "upstream_error", "client_gone", "aborted")
DOC = "docs/s3proxy.md"


@dataclass(frozen=True)
class S3Event:
    """One record of s3proxy's event ring: `start` (headers received), `held` (parked by a hold rule) or `end`
    (answered, errored or dropped). `start` and `end` of one request share `request_id`."""

    seq: int
    type: str
    time_ms: int
    request_id: str
    op: str
    method: str
    bucket: str
    key: str
    source_bucket: str = ""
    source_key: str = ""
    query: dict[str, str] = field(default_factory=dict)
    content_length: int = -1
    status: int = 0            # end: the status sent to the client (0: none, the connection was closed)
    upstream_status: int = 0   # end: what MinIO answered (0: not forwarded, or it failed)
    bytes_in: int = 0
    bytes_out: int = 0
    duration_ms: float = 0.0
    rule: str = ""             # the rule that acted ("": none)
    action: str = ""
    phase: str = ""
    outcome: str = ""          # end: one of OUTCOMES; held events: "held"
    release: str = ""          # end of a held request: forward, drop or error
    released_by: str = ""      # api, timeout or reset
    error: str = ""

    @classmethod
    def from_dict(cls, raw: dict) -> S3Event:
        """Fields this client does not know (a newer proxy) are ignored; missing ones take their defaults."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{name: value for name, value in raw.items() if name in known and value is not None})


@dataclass(frozen=True)
class S3Request:
    """A request's events tied together by request_id (end is None while it is in flight)."""

    request_id: str
    start: S3Event | None
    end: S3Event | None
    held: bool

    @property
    def op(self) -> str:
        return self._either().op

    @property
    def key(self) -> str:
        return self._either().key

    def _either(self) -> S3Event:
        event = self.start or self.end
        assert event is not None, "a request has a start or an end event"
        return event


def pair_requests(events: Iterable[S3Event]) -> dict[str, S3Request]:
    """Tie start, held and end events together, in the order requests started."""
    starts: dict[str, S3Event] = {}
    ends: dict[str, S3Event] = {}
    held: set[str] = set()
    order: list[str] = []
    for event in sorted(events, key=lambda e: e.seq):
        if event.request_id not in starts and event.request_id not in ends:
            order.append(event.request_id)
        if event.type == "start":
            starts[event.request_id] = event
        elif event.type == "end":
            ends[event.request_id] = event
        elif event.type == "held":
            held.add(event.request_id)
    return {rid: S3Request(rid, starts.get(rid), ends.get(rid), rid in held) for rid in order}


def latency_summary(samples_ms: list[float]) -> dict:
    """Median, p95 (nearest rank), min and max of latencies in ms, rounded to 0.1 ms."""
    if not samples_ms:
        raise ValueError("no samples")
    ordered = sorted(samples_ms)
    p95 = ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]
    return {"n": len(ordered), "median_ms": round(statistics.median(ordered), 1), "p95_ms": round(p95, 1),
            "min_ms": round(ordered[0], 1), "max_ms": round(ordered[-1], 1)}


def _error_text(response: requests.Response) -> str:
    try:
        return str(response.json().get("error", "")).strip() or response.text.strip()[:200]
    except ValueError:
        return " ".join(response.text.split())[:200]


class S3ProxyClient:
    def __init__(self, api: str, timeout: float = 5.0):
        self.api = api.rstrip("/")
        self.timeout = timeout
        self._session = requests.Session()
        self._session.trust_env = False  # loopback: never an HTTP proxy from the environment

    def _call(self, method: str, path: str, *, body: dict | None = None, params: dict | None = None,
              timeout: float | None = None, what: str = "") -> dict:
        what = what or f"{method} {path}"
        try:
            response = self._session.request(method, self.api + path, json=body, params=params,
                                             timeout=timeout or self.timeout)
        except requests.RequestException as error:
            raise InfraError(f"s3proxy API at {self.api} did not answer {what} ({type(error).__name__}); is the "
                             f"stack running? see the run's logs/s3proxy.log") from error
        if response.status_code == 400:
            raise InfraError(f"s3proxy API at {self.api} refused {what}: {_error_text(response)}; "
                             f"see {DOC} for the fields")
        if response.status_code == 404:
            raise InfraError(f"s3proxy API at {self.api}: {_error_text(response)} ({what})")
        if not 200 <= response.status_code < 300:
            raise InfraError(f"s3proxy API at {self.api} failed {what}: HTTP {response.status_code} "
                             f"{_error_text(response)}; see the run's logs/s3proxy.log")
        try:
            return response.json()
        except ValueError as error:
            raise InfraError(f"s3proxy API at {self.api} answered {what} with no JSON; is {self.api} really "
                             f"s3proxy's API?") from error

    # -- health and rules -------------------------------------------------------------------------------------
    def health(self) -> dict:
        return self._call("GET", "/health")

    def rules(self) -> list[dict]:
        """The rules in match order, with their `matched` and `applied` counters."""
        return self._call("GET", "/rules")["rules"]

    def add_rule(self, **fields) -> str:
        """Add a rule at the end of the list; returns its id. Fields (docs/s3proxy.md): id, ops, bucket, key,
        source_key, action, phase, delay_ms, jitter_ms, status, code, message, hold_timeout_ms, on_timeout,
        probability, limit, enabled. None values are left out (the proxy's defaults apply)."""
        body = {name: value for name, value in fields.items() if value is not None}
        if isinstance(body.get("ops"), str):
            body["ops"] = [body["ops"]]
        return self._call("POST", "/rules", body=body, what=f"the rule {body}")["id"]

    def remove_rule(self, rule_id: str) -> None:
        self._call("DELETE", f"/rules/{rule_id}", what=f"removing rule {rule_id!r}")

    def clear(self) -> dict:
        """Remove every rule and release every held request with `forward`: {"removed": n, "released": m}."""
        return self._call("DELETE", "/rules", what="clearing the rules")

    # -- events ------------------------------------------------------------------------------------------------
    def events(self, since: int = 0, wait_s: float = 0.0, limit: int = 1000) -> tuple[list[S3Event], int]:
        """Events with seq > since, oldest first, and the `since` to pass next time. With wait_s > 0 this
        long-polls: it returns as soon as there is one, or after wait_s with an empty list."""
        wait_ms = max(0, min(60_000, int(wait_s * 1000)))
        raw = self._call("GET", "/events", params={"since": since, "wait_ms": wait_ms, "limit": limit},
                         timeout=self.timeout + wait_ms / 1000, what="reading events")
        return [S3Event.from_dict(e) for e in raw["events"]], int(raw["next"])

    def last_seq(self) -> int:
        return int(self.health()["last_seq"])

    def wait_event(self, predicate: Callable[[S3Event], bool], since: int = 0, timeout: float = 10.0) -> S3Event:
        """The first event after `since` that satisfies `predicate`; InfraError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise InfraError(f"s3proxy at {self.api}: no matching event within {timeout:.0f} s (after seq {since})")
            found, since = self.events(since, wait_s=min(left, 5.0))
            for event in found:
                if predicate(event):
                    return event

    # -- held requests -------------------------------------------------------------------------------------------
    def held(self) -> list[dict]:
        """Requests parked by hold rules, oldest first: request_id, op, method, bucket, key, source_key, rule,
        phase, held_ms."""
        return self._call("GET", "/held")["held"]

    def wait_held(self, count: int = 1, timeout: float = 10.0) -> list[dict]:
        """Poll until at least `count` requests are held; InfraError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.held()
            if len(found) >= count:
                return found
            if time.monotonic() > deadline:
                raise InfraError(f"s3proxy at {self.api}: {len(found)} requests held after {timeout:.0f} s, "
                                 f"expected {count}")
            time.sleep(0.05)

    def release(self, request_id: str, mode: str = "forward", status: int | None = None, code: str | None = None,
                message: str | None = None) -> None:
        """Send a held request on: forward (as if never held), drop (close the connection without an answer) or
        error (answer an S3 error: status and code default to the rule's)."""
        if mode not in RELEASE_MODES:
            raise InfraError(f"release mode {mode!r} is not one of {', '.join(RELEASE_MODES)}")
        body = {name: value for name, value in {"mode": mode, "status": status, "code": code,
                                                 "message": message}.items() if value is not None}
        self._call("POST", f"/held/{request_id}", body=body, what=f"releasing {request_id} ({mode})")

    def stats(self) -> dict:
        """Finished requests per op and outcome, and in-flight/held/rule counts."""
        return self._call("GET", "/stats")
