"""HTTP-level S3 faults (infra/s3proxy.py): one s3proxy rule for the fault's window, on this arm's deployment only,
by operation and key (other arms and the harness's direct reads are never touched). Each kind gives its rule."""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from infra.errors import InfraError
from infra.s3proxy import S3ProxyClient

from .base import BaseFault, FaultKind, Needs, Param, params

OPS = ("PUT", "COPY", "GET", "HEAD", "DELETE", "LIST", "POST")


def glob_regex(glob: str) -> str:
    """A spec's key glob (* any run of characters, ? one) as an RE2-compatible regex body."""
    return "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob)


class S3Rule(BaseFault):
    def _rule(self) -> dict:
        key = "^" + re.escape(self.ctx.arm.state.deployment + "/") + glob_regex(self.params["keys"]) + "$"
        return {"key": key, **RULES[self.fault.fault](self.params)}

    def _proxy(self) -> S3ProxyClient:
        proxy = self.ctx.stack.s3proxy
        if proxy is None:  # a target run SKIPs such an arm before it starts (chaos/target/gate.py)
            raise InfraError("no S3 fault proxy in the S3 path of this target")
        return proxy

    def inject(self) -> None:
        self.rule_id = self._proxy().add_rule(**self._rule())

    def heal(self) -> None:
        rule_id = getattr(self, "rule_id", None)
        if rule_id is not None:
            self._proxy().remove_rule(rule_id)


def _delay(ops: list[str], p: Mapping[str, Any]) -> dict:
    return {"ops": ops, "action": "delay", "delay_ms": round(p["delay"] * 1000), "jitter_ms": round(p["jitter"] * 1000)}


# kind -> its s3proxy rule (all but the key) from the fault's params
RULES: Mapping[str, Callable[[Mapping[str, Any]], dict]] = {
    "s3.slow_put": lambda p: _delay(list(p["ops"]), p),
    "s3.error": lambda p: {"ops": list(p["ops"]), "action": "error", "status": p["status"],
                           "code": {503: "SlowDown", 500: "InternalError"}[p["status"]],
                           "probability": p["probability"]},
    "s3.drop_response": lambda p: {"ops": list(p["ops"]), "action": "drop_response", "probability": p["probability"]},
    "s3.list_latency": lambda p: _delay(["LIST"], p),
    "s3.slow_get": lambda p: _delay(list(p["ops"]), p),
    # A delay rule: each request keeps the wait drawn at its arrival, so one that arrived in the window stays
    # unanswered past the heal (a Toxiproxy timeout toxic closes its connections at the heal instead).
    "s3.silent": lambda p: {"ops": list(p["ops"]), "action": "delay", "delay_ms": round(p["hold"] * 1000),
                            "jitter_ms": 0},
}

_KEYS = Param("glob", "which keys, relative to the arm's deployment", default="*")
_WRITES = Param("choice", "which writes (COPY: the rename that finishes an upload)", default=("PUT", "COPY"),
                choices=("PUT", "COPY"), many=True)
_PROBABILITY = Param("number", "fraction of matching requests affected", default=1.0, minimum=0.0, maximum=1.0)
_DELAY = Param("duration", "added delay per request", required=True, minimum=0.001)
_JITTER = Param("duration", "random +/- variation of the delay", default=0.0, minimum=0.0)
# Every S3 kind is a rule of the S3 fault proxy, driven by infra/s3proxy.py (the proxy's own code: infra/s3proxy/).
_NEEDS = Needs(s3_fault_proxy=True, code=("infra/s3proxy.py", "infra/s3proxy/*"))

KINDS = (
    FaultKind("s3.slow_put", "writes (PUT, and the COPY that renames an upload) are delayed; reads are not", ("s3",),
              params(delay=_DELAY, jitter=_JITTER, keys=_KEYS, ops=_WRITES), implementation=S3Rule,
              triggerable=True, needs=_NEEDS),
    FaultKind("s3.error", "matching requests are answered with an S3 error (503 SlowDown or 500 InternalError) "
              "instead of reaching MinIO", ("s3",), params(
                  status=Param("choice", "503: SlowDown; 500: InternalError", default=503, choices=(503, 500)),
                  keys=_KEYS,
                  ops=Param("choice", "which operations", default=("PUT", "COPY"), choices=OPS, many=True),
                  probability=_PROBABILITY,
              ), implementation=S3Rule, triggerable=True, needs=_NEEDS),
    FaultKind("s3.drop_response", "writes are stored by MinIO, but their answer never reaches the client", ("s3",),
              params(keys=_KEYS, ops=_WRITES, probability=_PROBABILITY), implementation=S3Rule, triggerable=True,
              needs=_NEEDS),
    FaultKind("s3.list_latency", "LIST requests are delayed", ("s3",),
              params(delay=_DELAY, jitter=_JITTER, keys=_KEYS), implementation=S3Rule, triggerable=True, needs=_NEEDS),
    FaultKind("s3.slow_get", "reads (GET, and the HEAD that asks whether an object exists) are delayed; writes and "
              "LISTs are not", ("s3",), params(
                  delay=_DELAY, jitter=_JITTER, keys=_KEYS,
                  ops=Param("choice", "which reads", default=("GET", "HEAD"), choices=("GET", "HEAD"), many=True),
              ), implementation=S3Rule, triggerable=True, needs=_NEEDS),
    FaultKind("s3.silent", "S3 stops answering: a request that arrives in the window gets no answer, no error and no "
              "reset for `hold` (its connection open), even past the heal; requests after the heal are answered",
              ("s3",), params(
                  hold=Param("duration", "how long a request that arrived in the window waits unanswered",
                             default=900.0, minimum=0.001),
                  keys=_KEYS,
                  ops=Param("choice", "which operations", default=OPS, choices=OPS, many=True),
              ), implementation=S3Rule, triggerable=True, needs=_NEEDS),
)
