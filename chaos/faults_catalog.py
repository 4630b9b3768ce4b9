"""The fault registry as data: every fault a spec may name, the targets it accepts and the params it takes.

Specs are validated against this table before anything starts; fault implementations register against the same
names, so a test can check that every catalogued fault has an implementation and vice versa.

Durations in params are resolved to seconds. A duration param is `scaled` when it places something in time inside
the inject phase (it shrinks with the suite's `scale` like the phases do); magnitudes of a fault (a latency, a
timeout) and durations tied to the job's own timing (a second deployment's stagger must outlast start-up) are not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, Mapping

ParamKind = Literal["duration", "int", "number", "choice", "glob"]

NETWORK_TARGETS = ("kafka", "s3", "spark-driver")
PROCESS_TARGETS = ("job-driver", "executor", "broker", "minio")
S3_OPS = ("PUT", "COPY", "GET", "HEAD", "DELETE", "LIST", "POST")
DIRECTIONS = ("upstream", "downstream", "both")


@dataclass(frozen=True)
class Param:
    kind: ParamKind
    summary: str
    required: bool = False
    default: object = None
    minimum: float | None = None  # inclusive, for int, number and duration (seconds)
    maximum: float | None = None  # inclusive
    choices: tuple[object, ...] = ()  # for choice
    words: tuple[str, ...] = ()  # literal words an int also accepts (checkpoint.corrupt version: newest)
    scaled: bool = False  # durations only: multiplied by the suite's scale
    many: bool = False  # choices only: a list of distinct choices is allowed too

    def allowed(self) -> str:
        """What a spec may write here, for the `allowed:` part of an error message."""
        if self.kind == "choice":
            one = " | ".join(str(c) for c in self.choices)
            return f"{one}, or a list of distinct ones" if self.many else one
        if self.kind == "duration":
            low = "" if self.minimum is None else f" >= {self.minimum:g}s"
            return f"a duration like 500ms, 30s, 2m{low}"
        if self.kind == "glob":
            return ("a key pattern relative to the arm's deployment, with * and ?, e.g. checkpoint/state/*, "
                    "checkpoint/commits/*, output/* (letters, digits, _ . / - * ?; at most 200)")
        bounds = []
        if self.minimum is not None:
            bounds.append(f">= {self.minimum:g}")
        if self.maximum is not None:
            bounds.append(f"<= {self.maximum:g}")
        noun = "an integer" if self.kind == "int" else "a number"
        text = " ".join([noun, " and ".join(bounds)]).strip()
        return " or ".join([text, *self.words])


@dataclass(frozen=True)
class FaultType:
    name: str
    summary: str
    targets: tuple[str, ...]
    params: Mapping[str, Param] = field(default_factory=lambda: MappingProxyType({}))


def _params(**params: Param) -> Mapping[str, Param]:
    return MappingProxyType(params)


# Toxics act per stream direction and on a fraction of connections; a disabled proxy (down, flap) has neither.
_TOXIC = {
    "direction": Param("choice", "which stream the toxic acts on", default="downstream", choices=DIRECTIONS),
    "toxicity": Param("number", "fraction of connections affected", default=1.0, minimum=0.0, maximum=1.0),
}


def _toxic(**params: Param) -> Mapping[str, Param]:
    return _params(**params, **_TOXIC)


_CATALOG = (
    FaultType("network.down", "the proxy is disabled: connections are refused and open ones closed",
              NETWORK_TARGETS),
    FaultType("network.latency", "every chunk is delayed", NETWORK_TARGETS, _toxic(
        latency=Param("duration", "added delay", required=True, minimum=0.0),
        jitter=Param("duration", "random +/- variation of the delay", default=0.0, minimum=0.0),
    )),
    FaultType("network.bandwidth", "throughput is capped", NETWORK_TARGETS, _toxic(
        rate_kbps=Param("int", "KB/s allowed", required=True, minimum=0),
    )),
    FaultType("network.timeout", "data stops; the connection closes after timeout_ms (0: held open forever)",
              NETWORK_TARGETS, _toxic(
                  timeout_ms=Param("int", "ms before the connection is closed", default=0, minimum=0),
              )),
    FaultType("network.reset_peer", "connections are reset (TCP RST) after timeout_ms", NETWORK_TARGETS, _toxic(
        timeout_ms=Param("int", "ms before the reset", default=0, minimum=0),
    )),
    FaultType("network.slicer", "data is cut into small slices with a delay between them", NETWORK_TARGETS, _toxic(
        average_size=Param("int", "average slice size in bytes", default=64, minimum=1),
        size_variation=Param("int", "slice size variation in bytes", default=32, minimum=0),
        delay_us=Param("int", "delay between slices in microseconds", default=10, minimum=0),
    )),
    FaultType("network.limit_data", "connections are closed after this many bytes", NETWORK_TARGETS, _toxic(
        bytes=Param("int", "bytes let through per connection", required=True, minimum=0),
    )),
    FaultType("network.flap", "the proxy goes down for `down` at the start of every `period`", NETWORK_TARGETS,
              _params(
                  period=Param("duration", "one down+up cycle", required=True, minimum=0.001, scaled=True),
                  down=Param("duration", "down time within each cycle", required=True, minimum=0.001,
                             scaled=True),
              )),
    FaultType("process.kill", "the process is killed `count` times, `interval` apart (default: spread evenly over "
              "the fault); heal restarts whatever is still down", PROCESS_TARGETS, _params(
                  signal=Param("choice", "signal sent", default=9, choices=(9, 15)),
                  count=Param("int", "number of kills", default=1, minimum=1),
                  interval=Param("duration", "time between kills (default: duration / count)", minimum=0.001,
                                 scaled=True),
              )),
    FaultType("process.pause", "the process is stopped (SIGSTOP) for the fault's duration, then continued",
              PROCESS_TARGETS),
    FaultType("checkpoint.second_deployment", "a second deployment of the job starts on the same checkpoint",
              ("checkpoint",), _params(
                  mode=Param("choice", "simultaneous: the job restarts as the second starts; staggered: the job "
                             "keeps running and the second starts `stagger` into the fault", required=True,
                             choices=("simultaneous", "staggered")),
                  stagger=Param("duration", "delay of the second start (staggered only)", minimum=0.001),
              )),
    FaultType("checkpoint.corrupt", "a checkpoint file is damaged while the job is down (stopped, or killed at a "
              "lifecycle event with `on`); the job then restarts on it", ("checkpoint",), _params(
                  kind=Param("choice", "which kind of file (any: drawn with the seed among those present)",
                             required=True, choices=("sst", "zip", "changelog", "metadata", "sources", "offsets",
                                                     "commits", "state_metadata", "any")),
                  version=Param("int", "state version (sst, zip, changelog) or batch id (offsets, commits) to "
                                "damage", default="newest", minimum=0, words=("newest",)),
                  method=Param("choice", "how; a list damages one file per method (other partitions or older "
                               "entries first)", required=True, choices=("bit_flip", "truncate", "footer",
                                                                         "zero_fill"), many=True),
              )),
    FaultType("data.hot_key", "one key takes `share` of all events and never pauses", ("workload",), _params(
        share=Param("number", "fraction of events on the hot key", default=0.5, minimum=0.01, maximum=0.99),
    )),
    FaultType("data.key_rotation", "keys send two events `gap` apart and retire; a new key replaces each",
              ("workload",), _params(
                  live_actors=Param("int", "keys live at any time", required=True, minimum=1),
                  gap=Param("duration", "event time between a key's two events", required=True, minimum=0.001),
              )),
)

# HTTP-level S3 faults (infra/s3proxy.py): they act on the arm's own deployment only, by operation and key.
_S3_KEYS = Param("glob", "which keys, relative to the arm's deployment", default="*")
_S3_WRITES = Param("choice", "which writes (COPY: the rename that finishes an upload)", default=("PUT", "COPY"),
                   choices=("PUT", "COPY"), many=True)
_S3_PROBABILITY = Param("number", "fraction of matching requests affected", default=1.0, minimum=0.0, maximum=1.0)
_S3_DELAY = Param("duration", "added delay per request", required=True, minimum=0.001)
_S3_JITTER = Param("duration", "random +/- variation of the delay", default=0.0, minimum=0.0)

_S3_CATALOG = (
    FaultType("s3.slow_put", "writes (PUT, and the COPY that renames an upload) are delayed; reads are not", ("s3",),
              _params(delay=_S3_DELAY, jitter=_S3_JITTER, keys=_S3_KEYS, ops=_S3_WRITES)),
    FaultType("s3.error", "matching requests are answered with an S3 error (503 SlowDown or 500 InternalError) "
              "instead of reaching MinIO", ("s3",), _params(
                  status=Param("choice", "503: SlowDown; 500: InternalError", default=503, choices=(503, 500)),
                  keys=_S3_KEYS,
                  ops=Param("choice", "which operations", default=("PUT", "COPY"), choices=S3_OPS, many=True),
                  probability=_S3_PROBABILITY,
              )),
    FaultType("s3.drop_response", "writes are stored by MinIO, but their answer never reaches the client", ("s3",),
              _params(keys=_S3_KEYS, ops=_S3_WRITES, probability=_S3_PROBABILITY)),
    FaultType("s3.list_latency", "LIST requests are delayed", ("s3",),
              _params(delay=_S3_DELAY, jitter=_S3_JITTER, keys=_S3_KEYS)),
)

FAULTS: Mapping[str, FaultType] = MappingProxyType({fault.name: fault for fault in (*_CATALOG, *_S3_CATALOG)})
# Faults that may fire on a lifecycle event (`on:`, chaos/triggers.py); those that heal may also take `for`.
TRIGGERABLE = ("network.down", "network.latency", "network.timeout", "network.reset_peer", "process.kill",
               "process.pause", "checkpoint.corrupt", *(f.name for f in _S3_CATALOG))
INSTANT = ("process.kill", "checkpoint.corrupt")  # act at once: `for` means nothing to them
