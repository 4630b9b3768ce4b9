"""Network faults: the stack's Toxiproxy proxies (`kafka`, `s3`, `spark-driver`) disabled, flapping, or given a
toxic. On a cluster, `spark-driver-worker-N` is the link between the driver and worker N alone (its executors
reach the driver through proxies of their own: infra/components.py driver_link)."""
from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from infra.components import TOPOLOGIES, driver_link
from infra.errors import InfraError

from ..spec.fields import EPSILON, Invalid, fmt_seconds
from .base import BaseFault, FaultError, FaultKind, Needs, Param, params

if TYPE_CHECKING:
    from ..spec.model import Fault

# `kafka` is every broker's proxy; kafka-1 .. kafka-3 one broker's (topology: cluster)
WORKER_LINK = "spark-driver-worker-"
WORKER_LINKS = tuple(f"{WORKER_LINK}{n}" for n in range(1, TOPOLOGIES["cluster"].workers + 1))
TARGETS = ("kafka", "kafka-1", "kafka-2", "kafka-3", "s3", "spark-driver", *WORKER_LINKS)
DIRECTIONS = ("upstream", "downstream", "both")
# `spark-driver` covers both driver ports executors connect to (RPC and block manager), for every worker: a worker's
# own link ends at these proxies. spark-driver-worker-N covers worker N's two.
PROXIES = {"kafka": ("kafka",), "s3": ("s3",), "spark-driver": ("spark-driver", "spark-driver-blocks"),
           **{link: driver_link(link.removeprefix("spark-driver-")) for link in WORKER_LINKS}}


def proxies_for(target: str, brokers: list[str]) -> tuple[str, ...]:
    """The proxies a fault's target names on a stack with these brokers' proxies: `kafka` is every broker's proxy
    (one, or kafka-1 .. kafka-3); kafka-N is broker N's alone."""
    if target == "kafka":
        return tuple(brokers)
    if target.startswith("kafka-"):
        if target not in brokers:
            raise FaultError(f"this stack has no broker {target} (topology: cluster has kafka-1 .. kafka-3)")
        return (target,)
    return PROXIES[target]


def worker_link_proxies(target: str, proxies: Collection[str]) -> tuple[str, ...]:
    """The proxies of a worker's own link to the driver, which a stack of these proxies must have."""
    names = PROXIES[target]
    if not all(name in proxies for name in names):
        worker = target.removeprefix("spark-driver-")
        raise FaultError(f"this stack has no link of its own between the driver and {worker} "
                         f"(proxies {', '.join(names)}): only the cluster topology's workers reach the driver through "
                         "proxies of their own, on the local backend (the containers backend preloads no shim)")
    return names


def proxies_of(fault: BaseFault) -> tuple[str, ...]:
    target = fault.fault.target
    if target.startswith(WORKER_LINK):
        return worker_link_proxies(target, fault.ctx.stack.info.proxies)
    return proxies_for(target, fault.ctx.stack.info.brokers if target.startswith("kafka") else [])


class ProxyDown(BaseFault):
    def inject(self) -> None:
        for proxy in proxies_of(self):
            self.ctx.stack.toxiproxy.set_enabled(proxy, False)

    def heal(self) -> None:
        for proxy in proxies_of(self):
            self.ctx.stack.toxiproxy.set_enabled(proxy, True)


class Flap(BaseFault):
    """Down for `down` at the start of every `period` until healed; a thread does the cycling."""

    def inject(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._cycle, name="flap", daemon=True)
        self._thread.start()

    def _set(self, enabled: bool) -> None:
        for proxy in proxies_of(self):
            self.ctx.stack.toxiproxy.set_enabled(proxy, enabled)

    def _cycle(self) -> None:
        period, down = self.params["period"], self.params["down"]
        try:
            while not self._stop.is_set():
                self._set(False)
                if self._stop.wait(down):
                    break
                self._set(True)
                self._stop.wait(max(0.0, period - down))
        except InfraError as exc:
            self.ctx.history.error(f"flap on {self.fault.target}: {exc}")

    def heal(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._set(True)


def _validate_flap(fault: Fault, path: tuple[str, ...]) -> None:
    p: Mapping[str, Any] = fault.params
    if p["down"] >= p["period"]:
        raise Invalid(path + ("params", "down"), f"{fmt_seconds(p['down'])} is not shorter than the period "
                      f"{fmt_seconds(p['period'])}", "down < period")
    if p["period"] > fault.duration + EPSILON:
        raise Invalid(path + ("params", "period"), f"{fmt_seconds(p['period'])} is longer than the fault "
                      f"({fmt_seconds(fault.duration)})", "period <= duration")


class Toxic(BaseFault):
    """One toxic per proxy and direction; `both` adds an upstream and a downstream toxic. Each toxic kind gives its
    Toxiproxy type and its attributes from its params (TOXICS)."""

    def _attributes(self) -> dict:
        return dict(TOXICS[self.fault.fault][1](self.params))

    def _streams(self) -> tuple[str, ...]:
        direction = self.params["direction"]
        return ("upstream", "downstream") if direction == "both" else (direction,)

    def _names(self) -> Iterator[tuple[str, str, str]]:
        for proxy in proxies_of(self):
            for stream in self._streams():
                yield proxy, stream, f"chaos-{TOXICS[self.fault.fault][0]}-{stream}"

    def inject(self) -> None:
        for proxy, stream, name in self._names():
            self.ctx.stack.toxiproxy.add_toxic(proxy, name, TOXICS[self.fault.fault][0], self._attributes(),
                                               stream=stream, toxicity=self.params["toxicity"])

    def heal(self) -> None:
        for proxy, _stream, name in self._names():
            self.ctx.stack.toxiproxy.remove_toxic(proxy, name)


# Toxics act per stream direction and on a fraction of connections; a disabled proxy (down, flap) has neither.
_TOXIC = {
    "direction": Param("choice", "which stream the toxic acts on", default="downstream", choices=DIRECTIONS),
    "toxicity": Param("number", "fraction of connections affected", default=1.0, minimum=0.0, maximum=1.0),
}


def _toxic(**declared: Param) -> Mapping[str, Param]:
    return params(**declared, **_TOXIC)


# Every network kind acts through a Toxiproxy proxy, driven by infra/toxiproxy.py.
_NEEDS = Needs(toxiproxy=True, code=("infra/toxiproxy.py", "infra/shims/redirect.c"))


# kind -> (Toxiproxy toxic type, its attributes from the fault's params)
TOXICS: Mapping[str, tuple[str, Callable[[Mapping[str, Any]], Mapping[str, object]]]] = {
    "network.latency": ("latency",
                        lambda p: {"latency": round(p["latency"] * 1000), "jitter": round(p["jitter"] * 1000)}),
    "network.bandwidth": ("bandwidth", lambda p: {"rate": p["rate_kbps"]}),
    "network.timeout": ("timeout", lambda p: {"timeout": p["timeout_ms"]}),
    "network.reset_peer": ("reset_peer", lambda p: {"timeout": p["timeout_ms"]}),
    "network.slicer": ("slicer", lambda p: {"average_size": p["average_size"], "size_variation": p["size_variation"],
                                            "delay": p["delay_us"]}),
    "network.limit_data": ("limit_data", lambda p: {"bytes": p["bytes"]}),
}

KINDS = (
    FaultKind("network.down", "the proxy is disabled: connections are refused and open ones closed",
              TARGETS, implementation=ProxyDown, triggerable=True, needs=_NEEDS),
    FaultKind("network.latency", "every chunk is delayed", TARGETS, _toxic(
        latency=Param("duration", "added delay", required=True, minimum=0.0),
        jitter=Param("duration", "random +/- variation of the delay", default=0.0, minimum=0.0),
    ), implementation=Toxic, triggerable=True, needs=_NEEDS),
    FaultKind("network.bandwidth", "throughput is capped", TARGETS, _toxic(
        rate_kbps=Param("int", "KB/s allowed", required=True, minimum=0),
    ), implementation=Toxic, triggerable=True, needs=_NEEDS),
    FaultKind("network.timeout", "data stops; the connection closes after timeout_ms (0: held open until the heal, "
              "which closes it: a client resumes at the heal; s3.silent keeps a request unanswered past it)",
              TARGETS, _toxic(
                  timeout_ms=Param("int", "ms before the connection is closed", default=0, minimum=0),
              ), implementation=Toxic, triggerable=True, needs=_NEEDS),
    FaultKind("network.reset_peer", "connections are reset (TCP RST) after timeout_ms", TARGETS, _toxic(
        timeout_ms=Param("int", "ms before the reset", default=0, minimum=0),
    ), implementation=Toxic, triggerable=True, needs=_NEEDS),
    FaultKind("network.slicer", "data is cut into small slices with a delay between them", TARGETS, _toxic(
        average_size=Param("int", "average slice size in bytes", default=64, minimum=1),
        size_variation=Param("int", "slice size variation in bytes", default=32, minimum=0),
        delay_us=Param("int", "delay between slices in microseconds", default=10, minimum=0),
    ), implementation=Toxic, needs=_NEEDS),
    FaultKind("network.limit_data", "connections are closed after this many bytes", TARGETS, _toxic(
        bytes=Param("int", "bytes let through per connection", required=True, minimum=0),
    ), implementation=Toxic, needs=_NEEDS),
    FaultKind("network.flap", "the proxy goes down for `down` at the start of every `period`", TARGETS,
              params(
                  period=Param("duration", "one down+up cycle", required=True, minimum=0.001, scaled=True),
                  down=Param("duration", "down time within each cycle", required=True, minimum=0.001,
                             scaled=True),
              ), implementation=Flap, validate=_validate_flap, needs=_NEEDS),
)
