"""Process faults: the job driver, a Spark executor, the broker or MinIO killed or paused by signal."""
from __future__ import annotations

import os
import signal
import threading
from typing import TYPE_CHECKING, Any, Mapping

from infra.errors import InfraError
from infra.procs import descendants_running

from ..spec.fields import EPSILON, Invalid, fmt_seconds
from .base import BaseFault, FaultError, FaultKind, Param, params

if TYPE_CHECKING:
    from ..spec.model import Fault

TARGETS = ("job-driver", "executor", "broker", "minio")


def executor_pids(worker_pid: int) -> list[int]:
    """Spark executors of this run: CoarseGrainedExecutorBackend JVMs descending from our worker."""
    return descendants_running(worker_pid, b"CoarseGrainedExecutorBackend")


class ProcessFault(BaseFault):
    def _signal(self, signum: int) -> None:
        target, stack = self.fault.target, self.ctx.stack
        if target == "job-driver":
            job = self.ctx.arm.job
            if job is None or not job.alive():
                raise FaultError("the job driver is not running")
            job.signal(signum)  # the whole group: the Python driver and its JVM
        elif target == "executor":
            worker = stack.handles.get("spark-worker")
            worker_pid = getattr(worker, "pid", None)  # a local process group, or a container's init on this host
            if worker_pid is None:
                raise FaultError("executor faults need the worker's processes visible on this host (a Docker engine "
                                 "in another PID namespace hides them)")
            pids = executor_pids(worker_pid)
            if not pids:
                raise FaultError("no Spark executor of this run is running")
            for pid in pids:
                os.kill(pid, signum)
        else:
            component = {"broker": "kafka", "minio": "minio"}[target]
            stack.handles[component].signal(signum)


class Kill(ProcessFault):
    """Killed `count` times, `interval` apart. A killed job driver is restarted at once, as a platform (a
    Kubernetes deployment, a YARN retry) would; a killed broker or MinIO is restarted in place by the stack (same
    ports, same data), as its supervisor would; heal makes sure it runs. The worker relaunches executors."""

    SERVERS = {"broker": "kafka", "minio": "minio"}

    @property
    def firings(self) -> int:
        return self.params["count"]

    @property
    def kills_sender(self) -> bool:
        return self.fault.target in ("job-driver", "executor")

    def fire(self) -> None:
        """One kill at a lifecycle event; the restart waits for after_fire (the held request is released first)."""
        if not self.injected:
            self._record("injecting")
            self.injected = True
            self._between = threading.Event()
            self._thread = threading.Thread(target=lambda: None, name="kill", daemon=True)
            self._thread.start()
            self._record("injected")
        self._signal(self.params["signal"])
        self.ctx.history.job("exited", self.fault.target, cause=f"signal {self.params['signal']}")

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
                self._signal(self.params["signal"])
                self.ctx.history.job("exited", self.fault.target, cause=f"signal {self.params['signal']}")
                self._restart_if_down(just_killed=True)
        except InfraError as exc:
            self.ctx.history.error(f"kill of {self.fault.target}: {exc}")

    def _restart_if_down(self, just_killed: bool = False) -> None:
        """Restart the target if it is down. Right after a kill, wait (briefly) for the process to be gone first;
        a heal only looks."""
        if self.fault.target in self.SERVERS:
            component = self.SERVERS[self.fault.target]
            handle = self.ctx.stack.handles[component]
            for _ in range(100):  # a SIGKILLed process group takes a moment to be gone
                if not handle.alive():
                    break
                self._between.wait(0.1)
            if not handle.alive():
                seconds = self.ctx.stack.restart(component)
                self.ctx.history.job("restarted", self.fault.target, ready_after_s=round(seconds, 1))
            return
        if self.fault.target != "job-driver":
            return  # the worker relaunches lost executors itself
        job = self.ctx.arm.job
        if job is not None and just_killed:
            job.wait(30)
        if job is None or not job.alive():
            new = self.ctx.arm.start_job()
            self.ctx.history.job("restarted", "job-driver", pid=new.pid)

    def heal(self) -> None:
        self._between.set()
        self._thread.join(60)
        self._restart_if_down()


def _validate_kill(fault: Fault, path: tuple[str, ...]) -> None:
    p: Mapping[str, Any] = fault.params
    if p["interval"] is None:
        return
    if fault.on is not None:
        raise Invalid(path + ("params", "interval"), "a triggered kill fires on its events, not at intervals",
                      "no interval with on")
    span = (p["count"] - 1) * p["interval"]
    if span >= fault.duration - EPSILON:
        raise Invalid(path + ("params", "interval"), f"{p['count']} kills {fmt_seconds(p['interval'])} apart span "
                      f"{fmt_seconds(span)}, not within the fault's duration {fmt_seconds(fault.duration)}",
                      "(count - 1) * interval < duration")


class Pause(ProcessFault):
    def inject(self) -> None:
        self._signal(signal.SIGSTOP)

    def heal(self) -> None:
        self._signal(signal.SIGCONT)


KINDS = (
    FaultKind("process.kill", "the process is killed `count` times, `interval` apart (default: spread evenly over "
              "the fault); heal restarts whatever is still down", TARGETS, params(
                  signal=Param("choice", "signal sent", default=9, choices=(9, 15)),
                  count=Param("int", "number of kills", default=1, minimum=1),
                  interval=Param("duration", "time between kills (default: duration / count)", minimum=0.001,
                                 scaled=True),
              ), implementation=Kill, validate=_validate_kill, triggerable=True, instant=True, momentary=True),
    FaultKind("process.pause", "the process is stopped (SIGSTOP) for the fault's duration, then continued",
              TARGETS, implementation=Pause, triggerable=True),
)
