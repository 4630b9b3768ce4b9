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

ParamKind = Literal["duration", "int", "number", "choice"]

NETWORK_TARGETS = ("kafka", "s3", "spark-driver")
PROCESS_TARGETS = ("job-driver", "executor", "broker", "minio")
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
    FaultType("checkpoint.corrupt", "a state file of the checkpoint is damaged while the job is stopped; the job "
              "then restarts on it", ("checkpoint",), _params(
                  kind=Param("choice", "which file", required=True, choices=("sst", "zip", "changelog")),
                  version=Param("int", "state version to damage", default="newest", minimum=1, words=("newest",)),
                  method=Param("choice", "how; a list damages one file per method (other partitions first)",
                               required=True, choices=("bit_flip", "truncate", "footer", "zero_fill"), many=True),
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

FAULTS: Mapping[str, FaultType] = MappingProxyType({fault.name: fault for fault in _CATALOG})
