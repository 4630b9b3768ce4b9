"""Process faults: the job driver, a Spark executor, the broker or MinIO killed or paused by signal."""
from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from infra.errors import InfraError
from infra.procs import descendants_running

from ..spec.fields import EPSILON, Invalid, fmt_seconds
from .base import BaseFault, FaultError, FaultKind, Needs, Param, params

if TYPE_CHECKING:
    from ..spec.model import Fault

TARGETS = ("job-driver", "executor", "broker", "minio")


def executor_pids(worker_pid: int) -> list[int]:
    """Spark executors of this run: CoarseGrainedExecutorBackend JVMs descending from our worker."""
    return descendants_running(worker_pid, b"CoarseGrainedExecutorBackend")


def partition_leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """Partition -> the node id leading it now (-1: none), read straight from the brokers."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    metadata = admin.list_topics(topic, timeout=10)
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        raise FaultError(f"cannot read the leaders of topic {topic}: {found.error if found else 'no such topic'}")
    return {p.id: p.leader for p in found.partitions.values()}


def busiest_leader(leaders: Mapping[int, int]) -> int:
    """The node leading the most partitions (the lowest id on a tie): losing it moves the most leadership."""
    counts: dict[int, int] = {}
    for node in leaders.values():
        if node > 0:
            counts[node] = counts.get(node, 0) + 1
    if not counts:
        raise FaultError("no partition of the job's topic has a leader")
    return min(counts, key=lambda node: (-counts[node], node))


class ProcessFault(BaseFault):
    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._kills_so_far = 0
        self._killed: dict[str, Any] = {}
        self._down: list[str] = []
        self.job_ended = False  # the job's driver was found ended by itself: nothing left to kill or restart
        self._rng = random.Random(f"{self.ctx.seed}:{self.fault.fault}:{self.fault.target}:{self.fault.at}")

    def servers(self) -> list[str]:
        """The server component(s) this firing acts on: MinIO, or the broker its `broker` param names: a node number,
        `leader` (the one leading the most partitions of the job's topic now) or `each` (the brokers in turn)."""
        if self.fault.target == "minio":
            return ["minio"]
        brokers = self.ctx.stack.info.brokers
        which = self.params.get("broker", "leader")
        if which == "each":
            return [brokers[self._kills_so_far % len(brokers)]]
        if which == "leader":
            if len(brokers) == 1:
                return brokers[:1]
            node = busiest_leader(partition_leaders(self.ctx.stack.info.kafka_internal_bootstrap,
                                                    self.ctx.arm.state.topic))
            return [brokers[node - 1]]
        return [brokers[int(which) - 1]]

    def _signal(self, signum: int) -> list[str]:
        """Send `signum`; the names of what it reached (recorded, so a report says which broker or executor)."""
        target, stack = self.fault.target, self.ctx.stack
        if target == "job-driver":
            job = self.ctx.arm.job
            if self.ended_by_itself(job):  # the job failed before the kill: nothing to kill, nor to restart
                self.job_ended = True
                return []
            if job is None or not job.alive():
                raise FaultError("the job driver is not running")
            job.signal(signum)  # the whole group: the Python driver and its JVM
            self.stopped_jobs.append(job)
            return ["job-driver"]
        if target == "executor" and "executor" in stack.handles:
            # a target's hook (chaos/target/stack.py): every executor at once, or with {node} the one on a worker
            # drawn by the experiment's seed (the gate has SKIPPED `executors: one` for a hook without {node})
            handle: Any = stack.handles["executor"]  # chaos.target.stack.HookHandle
            if self.params.get("executors", "all") == "one" and handle.hook.per_node:
                node = self._rng.randint(1, handle.hook.nodes or 1)
                handle.signal(signum, node=node)
                return [f"executor on node {node} (hook)"]
            handle.signal(signum)
            return ["executors (hook)"]
        if target == "executor":
            pids = []
            for worker in stack.info.workers:
                # a local process group, or a container's init on this host
                worker_pid = getattr(stack.handles.get(worker), "pid", None)
                if worker_pid is None:
                    raise FaultError("executor faults need the worker's processes visible on this host (a Docker "
                                     "engine in another PID namespace hides them)")
                pids += [(worker, pid) for pid in executor_pids(worker_pid)]
            if not pids:
                raise FaultError("no Spark executor of this run is running")
            if self.params.get("executors", "all") == "one":  # one of several, chosen by the experiment's seed
                pids = [self._rng.choice(sorted(pids))]
            self._executor_pids = [pid for _worker, pid in pids]
            for _worker, pid in pids:
                os.kill(pid, signum)
            return [f"executor {pid} on {worker}" for worker, pid in pids]
        hit = self.servers()
        for component in hit:
            stack.handles[component].signal(signum)
        return hit


class Kill(ProcessFault):
    """Killed `count` times, `interval` apart. A killed job driver is restarted at once, as a platform (a
    Kubernetes deployment, a YARN retry) would; a killed broker or MinIO is restarted in place by the stack (same
    ports, same data), as its supervisor would: at once, or (`restart: at_heal`) only when the fault heals, so it
    stays lost for the fault's window; heal makes sure it runs. The worker relaunches executors. Only what this fault
    killed comes back: a driver that ended by itself, before or after a kill, stays down (its own exit recorded, and
    judged by the exits check), and the kills stop there."""

    SERVERS = ("broker", "minio")

    @property
    def firings(self) -> int:
        return self.params["count"]

    @property
    def kills_sender(self) -> bool:
        # `executors: one` draws one of several, which may not be the one whose request is held: that request is
        # forwarded (a dead sender's answer goes nowhere), so a surviving uploader is not cut off by a fault nobody
        # planned.
        if self.fault.target == "executor":
            return self.params.get("executors", "all") == "all"
        return self.fault.target == "job-driver"

    @property
    def held_after_firing(self) -> bool:
        # a server killed to stay lost (`restart: at_heal`) comes back at the heal: `for` after the kill or the
        # window's end; any other kill's victim is restarted at once, so the fault heals right after it
        return self.params.get("restart") == "at_heal"

    def fire(self) -> None:
        """One kill at a lifecycle event; the restart waits for after_fire (the held request is released first)."""
        if not self.injected:
            self._record("injecting")
            self.injected = True
            self._between = threading.Event()
            self._thread = threading.Thread(target=lambda: None, name="kill", daemon=True)
            self._thread.start()
            self._record("injected")
        self._kill()

    def _kill(self) -> None:
        hit = self._signal(self.params["signal"])
        if not hit:
            return
        self._down = [name for name in hit if self.fault.target in self.SERVERS]
        # the handle each server had when it was signalled: until the stack restarts it, it is the one dying
        self._killed.update({name: self.ctx.stack.handles[name] for name in self._down})
        self._kills_so_far += 1
        self.ctx.history.job("exited", self.fault.target, cause=f"signal {self.params['signal']}", hit=hit)

    def after_fire(self) -> None:
        self._restart_if_down(just_killed=True)

    def inject(self) -> None:
        count = self.params["count"]
        interval = self.params.get("interval") or self.fault.duration / count
        self._between = threading.Event()  # set by heal: no kill after the fault's window
        self._thread = threading.Thread(target=self._kills, args=(count, interval), name="kill", daemon=True)
        self._thread.start()

    def _kills(self, count: int, interval: float) -> None:
        try:
            for n in range(count):
                if n and self._between.wait(interval):
                    return
                self._kill()
                self._restart_if_down(just_killed=True)
                if self.job_ended:
                    return
        except InfraError as exc:
            self.ctx.history.error(f"kill of {self.fault.target}: {exc}")

    def _restart_if_down(self, just_killed: bool = False) -> None:
        """Restart the target if it is down. Right after a kill, wait (briefly) for the process to be gone first;
        a heal only looks."""
        if self.fault.target in self.SERVERS:
            if just_killed and self.params.get("restart") == "at_heal":
                return  # lost until the fault heals
            # right after a kill: what it hit; at the heal: everything this fault killed (and nothing else, so
            # another fault's `restart: at_heal` broker stays down for its own window)
            components = self._down if just_killed else list(self._killed)
            for component in components:
                handle = self.ctx.stack.handles[component]
                if handle is self._killed.get(component):
                    self._let_die(handle, at_heal=not just_killed)
                if not handle.alive():
                    seconds = self.ctx.stack.restart(component)
                    self.ctx.history.job("restarted", self.fault.target, ready_after_s=round(seconds, 1),
                                         component=component)
            return
        if self.fault.target != "job-driver":
            return  # the worker relaunches lost executors itself
        job = self.ctx.arm.job
        if job is not None and just_killed:
            job.wait(30)
        # the driver this fault killed comes back (as a platform would restart it); one that ended by itself, before
        # or after the kill, stays down
        if job is not None and not job.alive() and self.ended_by_itself(job):
            self.job_ended = True
            return
        self.bring_back()

    def _let_die(self, handle: Any, at_heal: bool) -> None:
        """A server not restarted since its kill finishes dying: a SIGKILLed group in a moment, a broker's controlled
        shutdown after SIGTERM in seconds. At the heal the wait is not cut short by the arm's end (the server must
        be back for the next arm), and one still alive after it is killed outright."""
        deadline = time.monotonic() + (30.0 if self.params["signal"] == 15 else 10.0)
        while handle.alive() and time.monotonic() < deadline and (at_heal or not self.stop.is_set()):
            time.sleep(0.1)
        if at_heal and handle.alive():
            handle.signal(signal.SIGKILL)
            for _ in range(50):
                if not handle.alive():
                    break
                time.sleep(0.1)

    def heal(self) -> None:
        self._between.set()
        # a kill in progress may be restarting a server: up to 30 s of shutdown and a start bounded by its timeout
        self._thread.join(200)
        if self._thread.is_alive():
            self.ctx.history.error(f"kill of {self.fault.target}: still restarting {', '.join(self._down)} 200 s "
                                   "after the fault healed")
            return
        self._restart_if_down()
        if self.fault.on is None and self._kills_so_far < self.params["count"] and not self.job_ended:
            # each interval counts from the previous restart: a window too short for the restarts loses kills
            self.ctx.history.error(f"kill of {self.fault.target}: {self._kills_so_far} of {self.params['count']} "
                                   "kills before the fault healed (each interval counts from the previous restart); "
                                   "give the fault a longer duration")


def _validate_targeting(fault: Fault, path: tuple[str, ...]) -> None:
    """`broker` picks a broker, `executors` executors, `restart` when a killed server comes back."""
    p: Mapping[str, Any] = fault.params
    for name, default, applies in (("broker", "leader", ("broker",)), ("executors", "all", ("executor",)),
                                   ("restart", "at_once", ("broker", "minio"))):
        if p.get(name, default) != default and fault.target not in applies:
            raise Invalid(path + ("params", name), f"applies to target {' or '.join(applies)}, not {fault.target}",
                          f"no {name} for {fault.target}")


def _validate_kill(fault: Fault, path: tuple[str, ...]) -> None:
    _validate_targeting(fault, path)
    validate_repeats(fault, path, "kill")


def validate_repeats(fault: Fault, path: tuple[str, ...], noun: str) -> None:
    """`count` acts `interval` apart fit in the fault's window; a triggered fault fires on events, not intervals."""
    p: Mapping[str, Any] = fault.params
    if p["interval"] is None:
        return
    if fault.on is not None:
        raise Invalid(path + ("params", "interval"), f"a triggered {noun} fires on its events, not at intervals",
                      "no interval with on")
    span = (p["count"] - 1) * p["interval"]
    if span >= fault.duration - EPSILON:
        raise Invalid(path + ("params", "interval"), f"{p['count']} {noun}s {fmt_seconds(p['interval'])} apart span "
                      f"{fmt_seconds(span)}, not within the fault's duration {fmt_seconds(fault.duration)}",
                      "(count - 1) * interval < duration")


class Pause(ProcessFault):
    def inject(self) -> None:
        self._paused = self._signal(signal.SIGSTOP)

    def heal(self) -> None:
        # continue what was stopped, not whoever leads now or another executor the seed would draw
        if self.fault.target in ("broker", "minio"):
            for component in getattr(self, "_paused", []):
                self.ctx.stack.handles[component].signal(signal.SIGCONT)
        elif self.fault.target == "executor" and "executor" in self.ctx.stack.handles:
            self.ctx.stack.handles["executor"].signal(signal.SIGCONT)
        elif self.fault.target == "executor":
            for pid in getattr(self, "_executor_pids", []):
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        else:
            self._signal(signal.SIGCONT)


# Which broker (of a cluster's three; `single` has one), which executors (of every worker's).
_TARGETING = {
    "broker": Param("int", "broker target: a node number, `leader` (leading the most partitions of the job's "
                    "topic when it fires) or `each` (the brokers in turn, one per kill: a rolling restart)",
                    default="leader", minimum=1, maximum=3, words=("leader", "each")),
    "executors": Param("choice", "executor target: every executor of the run, or one (chosen by the seed)",
                       default="all", choices=("all", "one")),
}

KINDS = (
    FaultKind("process.kill", "the process is killed `count` times, `interval` apart (default: spread evenly over "
              "the fault); heal restarts what it killed that is still down (a driver that ended by itself stays "
              "down)", TARGETS, params(
                  signal=Param("choice", "signal sent (15 lets a broker shut down cleanly, moving its leadership "
                               "first)", default=9, choices=(9, 15)),
                  count=Param("int", "number of kills", default=1, minimum=1),
                  interval=Param("duration", "time between kills (default: duration / count)", minimum=0.001,
                                 scaled=True),
                  restart=Param("choice", "when a killed broker or MinIO comes back: at once, or when the fault "
                                "heals (lost for its window)", default="at_once", choices=("at_once", "at_heal")),
                  **_TARGETING,
              ), implementation=Kill, validate=_validate_kill, triggerable=True, instant=True, momentary=True,
              restarts_processes=True, kills=True, needs=Needs(hook=True)),
    FaultKind("process.pause", "the process is stopped (SIGSTOP) for the fault's duration, then continued",
              TARGETS, params(**_TARGETING), implementation=Pause, validate=_validate_targeting, triggerable=True,
              restarts_processes=True, needs=Needs(hook=True)),
)
