"""Fault implementations, registered by the names of chaos.faults_catalog.

Each fault is a small protocol: `inject()` then `heal()`; heal is idempotent and is called again in the
runner's `finally` whatever happened, so a fault never outlives its run. A fault acts on the world through a
`FaultContext` (the stack, the arm's job and the history) and records every transition
(injecting, injected, healing, healed) in the history.

Network faults act on the stack's Toxiproxy proxies (`kafka`, `s3`, `spark-driver`); process faults signal
the job driver, a Spark executor, the broker or MinIO; checkpoint faults start a second deployment or damage
a state file; data faults change the workload's shape (the runner plans the events; their inject/heal only
mark the window).
"""
from __future__ import annotations

import os
import re
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol

from infra.errors import InfraError
from infra.procs import ManagedProcess, descendants_running

from .faults_catalog import FAULTS
from .history import HistoryWriter
from .spec import Fault

if TYPE_CHECKING:
    from infra.stack import Stack

    from .jobrun import ArmState

# `spark-driver` covers both driver ports executors connect to (RPC and block manager).
PROXIES = {"kafka": ("kafka",), "s3": ("s3",), "spark-driver": ("spark-driver", "spark-driver-blocks")}
TOXIC_TYPES = {"network.latency": "latency", "network.bandwidth": "bandwidth", "network.timeout": "timeout",
               "network.reset_peer": "reset_peer", "network.slicer": "slicer", "network.limit_data": "limit_data"}


class ArmControl(Protocol):
    """What a fault may do to the arm's job (chaos.jobrun.JobArm provides it)."""

    job: ManagedProcess | None
    state: ArmState  # the deployment's topic and name

    @property
    def checkpoint_prefix(self) -> str: ...

    def start_job(self) -> ManagedProcess: ...
    def start_second_deployment(self) -> ManagedProcess: ...
    def stop_job(self, timeout: float = 60.0) -> int | None: ...


@dataclass
class FaultContext:
    stack: Stack
    arm: ArmControl
    history: HistoryWriter
    say: Callable[[str], None] = print
    seed: int = 0  # the experiment's seed: random choices of faults (which file to damage) reproduce


# The job's exit code for "another deployment owns the checkpoint" (job/__main__.py).
JOB_EXIT_REFUSED = 3


def _job_line(log_path: Path) -> str | None:
    """The job's own last `job:` line in its log: what it said when it ended."""
    try:
        lines = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.startswith("job: ")]
    except OSError:
        return None
    return lines[-1][:500] if lines else None


class FaultError(InfraError):
    """A fault could not be injected or healed: the environment failed, not the job."""


class BaseFault:
    def __init__(self, fault: Fault, ctx: FaultContext):
        self.fault = fault
        self.ctx = ctx
        self.injected = False
        self.healed = False
        self.healed_at: float | None = None  # monotonic time of the heal
        self.stop = threading.Event()  # set when the arm ends: a fault's own waits return at once

    # The runner calls run_inject/run_heal; subclasses implement inject/heal.
    def run_inject(self) -> None:
        self._record("injecting")
        self.injected = True  # set before acting: a half-done inject must still be healed
        self.inject()
        self._record("injected")

    def run_heal(self) -> None:
        if not self.injected or self.healed:
            return
        self._record("healing")
        try:
            self.heal()
        finally:
            self.healed = True
            self.healed_at = time.monotonic()
        self._record("healed")

    @property
    def params(self) -> Mapping[str, Any]:
        """The fault's params (every catalog param, defaults filled in, durations in seconds): values as the catalog
        declares them (chaos/faults_catalog.py), so typed Any here."""
        return self.fault.params

    def _record(self, state: str) -> None:
        self.ctx.history.fault(self.fault.fault, self.fault.target, state, self.params)
        self.ctx.say(f"fault {self.fault.fault} on {self.fault.target}: {state}")

    def inject(self) -> None:
        raise NotImplementedError

    def heal(self) -> None:
        raise NotImplementedError

    # -- lifecycle triggers (chaos/triggers.py): the runner calls fire() when the event happens, releases the held
    # request (dropped if `kills_sender`: its process is dead), then calls after_fire().
    @property
    def firings(self) -> int:
        """How many events this fault fires on."""
        return 1

    @property
    def kills_sender(self) -> bool:
        return False

    def fire(self) -> None:
        self.run_inject()

    def after_fire(self) -> None:
        """What must wait until the held request is released (a killed driver is restarted only then)."""


# -- network ---------------------------------------------------------------------------------------------------
class ProxyDown(BaseFault):
    def inject(self) -> None:
        for proxy in PROXIES[self.fault.target]:
            self.ctx.stack.toxiproxy.set_enabled(proxy, False)

    def heal(self) -> None:
        for proxy in PROXIES[self.fault.target]:
            self.ctx.stack.toxiproxy.set_enabled(proxy, True)


class Toxic(BaseFault):
    """One toxic per proxy and direction; `both` adds an upstream and a downstream toxic."""

    def _attributes(self) -> dict:
        p = self.params
        kind = self.fault.fault
        if kind == "network.latency":
            return {"latency": round(p["latency"] * 1000), "jitter": round(p["jitter"] * 1000)}
        if kind == "network.bandwidth":
            return {"rate": p["rate_kbps"]}
        if kind in ("network.timeout", "network.reset_peer"):
            return {"timeout": p["timeout_ms"]}
        if kind == "network.slicer":
            return {"average_size": p["average_size"], "size_variation": p["size_variation"], "delay": p["delay_us"]}
        if kind == "network.limit_data":
            return {"bytes": p["bytes"]}
        raise AssertionError(kind)

    def _streams(self) -> tuple[str, ...]:
        direction = self.params["direction"]
        return ("upstream", "downstream") if direction == "both" else (direction,)

    def _names(self):
        for proxy in PROXIES[self.fault.target]:
            for stream in self._streams():
                yield proxy, stream, f"chaos-{TOXIC_TYPES[self.fault.fault]}-{stream}"

    def inject(self) -> None:
        for proxy, stream, name in self._names():
            self.ctx.stack.toxiproxy.add_toxic(proxy, name, TOXIC_TYPES[self.fault.fault], self._attributes(),
                                               stream=stream, toxicity=self.params["toxicity"])

    def heal(self) -> None:
        for proxy, _stream, name in self._names():
            self.ctx.stack.toxiproxy.remove_toxic(proxy, name)


class Flap(BaseFault):
    """Down for `down` at the start of every `period` until healed; a thread does the cycling."""

    def inject(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._cycle, name="flap", daemon=True)
        self._thread.start()

    def _set(self, enabled: bool) -> None:
        for proxy in PROXIES[self.fault.target]:
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


# -- processes ---------------------------------------------------------------------------------------------------
def _executor_pids(worker_pid: int) -> list[int]:
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
            pids = _executor_pids(worker_pid)
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


class Pause(ProcessFault):
    def inject(self) -> None:
        self._signal(signal.SIGSTOP)

    def heal(self) -> None:
        self._signal(signal.SIGCONT)


# -- checkpoint ------------------------------------------------------------------------------------------------
class SecondDeployment(BaseFault):
    """Another deployment of the job on the same checkpoint. simultaneous: the first is restarted at the
    moment the second starts (two deployments rolled out at once); staggered: the first keeps running and the
    second starts `stagger` into the fault (a second deployment started later by mistake)."""

    def inject(self) -> None:
        arm, history = self.ctx.arm, self.ctx.history
        if self.params["mode"] == "simultaneous":
            arm.stop_job()
            history.job("exited", "job-driver", cause="stopped for a second deployment")
            first = arm.start_job()
            history.job("restarted", "job-driver", pid=first.pid)
        elif self.stop.wait(self.params.get("stagger") or 10.0):
            return  # the arm ended during the stagger
        self.second = arm.start_second_deployment()
        history.job("started", "second-deployment", pid=self.second.pid,
                    log=str(self.second.log_path.relative_to(self.ctx.stack.run_dir)))
        self._watch = threading.Thread(target=self._watch_second, name="second-deployment", daemon=True)
        self._watch.start()

    def _watch_second(self) -> None:
        code = self.second.wait(None)
        if code == JOB_EXIT_REFUSED:
            self.ctx.history.job("refused", "second-deployment", code=code, reason=_job_line(self.second.log_path))
        else:
            self.ctx.history.job("exited", "second-deployment", code=code)

    def heal(self) -> None:
        second = getattr(self, "second", None)
        if second is not None and second.alive():
            second.signal_leader(signal.SIGTERM)  # a graceful stop first: the driver stops its query and Spark
            if second.wait(20) is None:
                second.stop(grace=10)
        job = self.ctx.arm.job
        if job is None or not job.alive():
            new = self.ctx.arm.start_job()
            self.ctx.history.job("restarted", "job-driver", pid=new.pid)


class CorruptCheckpoint(BaseFault):
    """Stop the job, damage state files in MinIO (one per method), start the job again on the damaged checkpoint.

    A snapshot exists only every few versions: the inject first waits (up to WAIT_S) for a file of the kind to
    damage, so the fault does not depend on how many batches the job happened to run before it."""

    WAIT_S = 90.0
    kills_sender = True  # on a trigger the job is killed at the event (a crash), not stopped

    def fire(self) -> None:
        self._record("injecting")
        self.injected = True
        job = self.ctx.arm.job
        if job is None:
            raise FaultError("checkpoint.corrupt fired with no job running to kill")
        job.signal(signal.SIGKILL)
        job.wait(30)
        self.ctx.history.job("exited", "job-driver", cause="killed at a lifecycle event to corrupt its checkpoint")

    def after_fire(self) -> None:
        self._damage_and_restart()
        self._record("injected")

    def _damage_and_restart(self) -> None:
        """Damage the (stopped or killed) job's checkpoint, then start the job on it whatever happened."""
        from . import checkpoint_tools

        arm, p = self.ctx.arm, self.params
        try:
            damaged = checkpoint_tools.corrupt(self.ctx.stack.s3_client(direct=True), self.ctx.stack.info.bucket,
                                               arm.checkpoint_prefix, kind=p["kind"], version=p["version"],
                                               method=p["method"], seed=self.ctx.seed)
        except checkpoint_tools.NothingToCorrupt as nothing:
            raise FaultError(f"checkpoint.corrupt {p['kind']}: {nothing}") from None
        finally:
            new = arm.start_job()
        self.ctx.say(f"corrupted {damaged['file']} ({damaged['method']})")
        self.ctx.history.job("restarted", "job-driver", pid=new.pid, corrupted=damaged)

    def inject(self) -> None:
        from . import checkpoint_tools

        arm, history, p = self.ctx.arm, self.ctx.history, self.params
        s3, bucket = self.ctx.stack.s3_client(direct=True), self.ctx.stack.info.bucket
        deadline = time.monotonic() + self.WAIT_S
        count = 1 if isinstance(p["method"], str) else len(p["method"])
        while not checkpoint_tools.can_corrupt(s3, bucket, arm.checkpoint_prefix, p["kind"], p["version"], count):
            if time.monotonic() > deadline:
                raise FaultError(f"checkpoint.corrupt {p['kind']}: {count} such file(s) did not appear in the "
                                 f"checkpoint within {self.WAIT_S:.0f} s")
            if self.stop.wait(2):
                return
        arm.stop_job()
        history.job("exited", "job-driver", cause="stopped to corrupt its checkpoint")
        self._damage_and_restart()

    def heal(self) -> None:
        job = self.ctx.arm.job
        if job is None or not job.alive():
            new = self.ctx.arm.start_job()
            self.ctx.history.job("restarted", "job-driver", pid=new.pid)


# -- S3, at the HTTP level (infra/s3proxy.py) --------------------------------------------------------------------
def glob_regex(glob: str) -> str:
    """A spec's key glob (* any run of characters, ? one) as an RE2-compatible regex body."""
    return "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob)


class S3Rule(BaseFault):
    """One s3proxy rule for the fault's window, on this arm's deployment only (other arms and the harness's direct
    reads are never touched)."""

    def _rule(self) -> dict:
        p, kind = self.params, self.fault.fault
        key = "^" + re.escape(self.ctx.arm.state.deployment + "/") + glob_regex(p["keys"]) + "$"
        if kind == "s3.slow_put":
            return {"ops": list(p["ops"]), "key": key, "action": "delay", "delay_ms": round(p["delay"] * 1000),
                    "jitter_ms": round(p["jitter"] * 1000)}
        if kind == "s3.error":
            return {"ops": list(p["ops"]), "key": key, "action": "error", "status": p["status"],
                    "code": {503: "SlowDown", 500: "InternalError"}[p["status"]], "probability": p["probability"]}
        if kind == "s3.drop_response":
            return {"ops": list(p["ops"]), "key": key, "action": "drop_response", "probability": p["probability"]}
        if kind == "s3.list_latency":
            return {"ops": ["LIST"], "key": key, "action": "delay", "delay_ms": round(p["delay"] * 1000),
                    "jitter_ms": round(p["jitter"] * 1000)}
        raise AssertionError(kind)

    def inject(self) -> None:
        self.rule_id = self.ctx.stack.s3proxy.add_rule(**self._rule())

    def heal(self) -> None:
        rule_id = getattr(self, "rule_id", None)
        if rule_id is not None:
            self.ctx.stack.s3proxy.remove_rule(rule_id)


# -- data ------------------------------------------------------------------------------------------------------
class WorkloadWindow(BaseFault):
    """The runner plans the workload with this window's shape (chaos.run.segments); here only the marks."""

    def inject(self) -> None:
        pass

    def heal(self) -> None:
        pass


IMPLEMENTATIONS: dict[str, type[BaseFault]] = {
    "network.down": ProxyDown,
    "network.flap": Flap,
    **{name: Toxic for name in TOXIC_TYPES},
    "process.kill": Kill,
    "process.pause": Pause,
    "checkpoint.second_deployment": SecondDeployment,
    "checkpoint.corrupt": CorruptCheckpoint,
    "data.hot_key": WorkloadWindow,
    "data.key_rotation": WorkloadWindow,
    **{name: S3Rule for name in ("s3.slow_put", "s3.error", "s3.drop_response", "s3.list_latency")},
}

assert set(IMPLEMENTATIONS) == set(FAULTS), "every catalogued fault needs an implementation and vice versa"


def build(fault: Fault, ctx: FaultContext) -> BaseFault:
    return IMPLEMENTATIONS[fault.fault](fault, ctx)
