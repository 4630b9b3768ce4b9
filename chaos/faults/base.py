"""What a fault kind is: its declaration (`FaultKind`: targets, params, validation, workload shaping, implementation)
and the protocol of its implementation (`BaseFault`: inject then heal, recorded in the history).

A fault kind lives in one module of its family (network.py, process.py, broker.py, checkpoint.py, data.py, s3.py,
disk.py, clock.py): the module declares `KINDS`, and chaos/faults/registry.py finds each by name. Nothing else names
a kind: the spec validates a fault with its kind's params and `validate`, the runner builds its `implementation` and
plans its `reshape`, and every other module asks the kind what it declares (`momentary`, `restarts_processes`, `kills`,
`starts_deployment`, `min_brokers`, `needs`) instead of testing its name or family.

Each fault is a small protocol: `inject()` then `heal()`; heal is idempotent and is called again in the runner's
`finally` whatever happened, so a fault never outlives its run. A fault acts on the world through a `FaultContext`
(the stack, the arm's job and the history) and records every transition (injecting, injected, healing, healed) in
the history.

Durations in params are resolved to seconds. A duration param is `scaled` when it places something in time inside
the inject phase (it shrinks with the suite's `scale` like the phases do); magnitudes of a fault (a latency, a
timeout) and durations tied to the job's own timing (a second deployment's stagger must outlast start-up) are not.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol

from infra.errors import InfraError

from ..history import HistoryWriter

if TYPE_CHECKING:
    from infra.procs import ManagedProcess
    from infra.stack import StackLike

    from ..arm.job import ArmState
    from ..spec.model import Fault

ParamKind = Literal["duration", "int", "number", "choice", "glob"]


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


def params(**declared: Param) -> Mapping[str, Param]:
    return MappingProxyType(declared)


# A kind's checks beyond its params' own ranges: (the fault as validated so far, the path of its spec entry) ->
# raise chaos.spec.fields.Invalid. A data kind's reshaping: its params -> the WorkloadSpec fields of its window
# (`shape` among them: chaos.run.segments plans the window with them).
Validator = Callable[["Fault", tuple[str, ...]], None]
Reshaper = Callable[[Mapping[str, Any]], Mapping[str, Any]]


@dataclass(frozen=True)
class Needs:
    """What a kind acts through. A target must provide it (chaos/target/gate.py skips an arm otherwise), and a
    change to its `code` reruns the experiments that use the kind (chaos/changed.py)."""

    toxiproxy: bool = False  # a Toxiproxy proxy in front of the component it targets
    s3_fault_proxy: bool = False  # the S3 fault proxy (s3proxy) in the job's S3 path
    hook: bool = False  # a way to signal the process it targets: on a target, a hook (the job's driver is ours)
    # Shims (infra/shims/<name>.c) the Spark workers preload: only local stacks do (infra/preloads.py)
    worker_shims: tuple[str, ...] = ()
    # Shims (infra/shims/<name>.c) every start of the arm's job driver is preloaded with: the driver always runs on
    # this host, on every backend and target, so this needs nothing of a target.
    driver_shims: tuple[str, ...] = ()
    # Files outside chaos/faults/ (fnmatch patterns) that serve this kind, and no kind that does not name them.
    code: tuple[str, ...] = ()


@dataclass(frozen=True)
class FaultKind:
    name: str
    summary: str
    targets: tuple[str, ...]
    params: Mapping[str, Param] = field(default_factory=lambda: MappingProxyType({}))
    implementation: type[BaseFault] | None = None  # None only while declaring; the registry refuses it
    validate: Validator | None = None
    triggerable: bool = False  # may fire on a lifecycle event (`on:`, chaos/triggers.py); if it heals, for `for`
    instant: bool = False  # acts at once: `for` means nothing to it
    # Its effect is over as it acts (a kill, a damaged file, leaders moved) or it only reshapes the workload: recovery
    # is measured from what it did to the job, not from its heal, and its window holds no other recovery back
    # (chaos/checks/recovery.py).
    momentary: bool = False
    reshape: Reshaper | None = None  # data kinds: the workload of their window
    # It kills, pauses or (re)starts a process (the job's driver, a server, a second driver): two such experiments
    # side by side on two cores pushed restarts past their bounds, so the lane queue runs them one at a time
    # (chaos/lanes/queue.py).
    restarts_processes: bool = False
    # It ends the process it targets by signal and the harness brings back what it killed: on a target, a hook's
    # restart command and the server's own endpoint, to see it down (chaos/target/gate.py); `chaos bench crashes`
    # counts its firings (chaos/bench/crash_tally.py).
    kills: bool = False
    # It starts another deployment of the job on the arm's checkpoint: what a `refused_within` target judges, so
    # that target needs such a fault (chaos/spec/experiment.py).
    starts_deployment: bool = False
    min_brokers: int = 1  # the brokers its stack must run: the spec refuses a topology of fewer
    needs: Needs = Needs()
    # With these params it does nothing the job must recover from (a file damaged in place while the job runs: what
    # later reloads it is the disruption), so the spacing of recoveries leaves it out (chaos/spec/order.py).
    harmless: Callable[[Mapping[str, Any]], bool] | None = None

    @property
    def shapes_workload(self) -> bool:
        """It only changes the workload's shape for its window: no outage and no hit on the job; its heal (the
        workload back to normal) is what recovery is measured from."""
        return self.reshape is not None


class ArmControl(Protocol):
    """What a fault may do to the arm's job (chaos.arm.job.JobArm provides it)."""

    job: ManagedProcess | None
    state: ArmState  # the deployment's topic and name
    clock_file: Path | None  # the clock shim's control file of the arm's driver, when it runs with the shim

    @property
    def checkpoint_prefix(self) -> str: ...

    @property
    def second_progress_path(self) -> Path: ...  # the second deployments' progress lines (their batches)

    def start_job(self) -> ManagedProcess: ...
    def start_second_deployment(self) -> ManagedProcess: ...
    def stop_job(self, timeout: float = 60.0) -> int | None: ...
    # Records the latest driver's own exit (one no signal of the harness's caused), once.
    record_own_exit: Callable[[], None]


@dataclass
class FaultContext:
    stack: StackLike
    arm: ArmControl
    history: HistoryWriter
    say: Callable[[str], None] = print
    seed: int = 0  # the experiment's seed: random choices of faults (which file to damage) reproduce


# The job's exit code for "another deployment owns the checkpoint" (job/__main__.py).
JOB_EXIT_REFUSED = 3
# ... and for "another deployment took the checkpoint's lease over while this one ran".
JOB_EXIT_LEASE_LOST = 6


def job_line(log_path: Path) -> str | None:
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
        self.stopped_jobs: list[ManagedProcess] = []  # the job's drivers this fault killed or stopped

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
        """The fault's params (every declared param, defaults filled in, durations in seconds): values as its kind
        declares them, so typed Any here."""
        return self.fault.params

    # -- the job's driver: a fault brings back what it stopped, and nothing else -------------------------------
    def ended_by_itself(self, job: ManagedProcess | None) -> bool:
        """`job` has ended and no signal of the harness's asked it to: recorded as the job's own exit (judged by the
        exits check, chaos/checks/deployment.py), and never started again by a fault."""
        if job is None or job.alive() or job.signalled_to_end:
            return False
        if job is self.ctx.arm.job:
            self.ctx.arm.record_own_exit()
        self.ctx.say(f"{self.fault.fault}: the job's driver ended by itself (exit {job.returncode}): it is left down")
        return True

    def stop_job(self, cause: str) -> bool:
        """Stop the job's driver for this fault (recorded with `cause`); False, and nothing stopped, when it had
        ended by itself first (recorded as its own exit) or another fault has it down."""
        job = self.ctx.arm.job
        if job is None or self.ended_by_itself(job) or not job.alive():
            return False
        self.ctx.arm.stop_job()
        if self.ended_by_itself(job):  # it ended by itself just before the stop reached it
            return False
        self.stopped_jobs.append(job)
        self.ctx.history.job("exited", "job-driver", cause=cause)
        return True

    def bring_back(self) -> None:
        """Start the job's driver again if it is down because this fault stopped it; a driver that ended by itself
        (before or after this fault acted) stays down, recorded as its own exit."""
        job = self.ctx.arm.job
        if job is None or job.alive() or self.ended_by_itself(job):
            return
        if any(job is stopped for stopped in self.stopped_jobs):
            new = self.ctx.arm.start_job()
            self.ctx.history.job("restarted", "job-driver", pid=new.pid)

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

    @property
    def spent(self) -> bool:
        """Whether the fault, injected, has nothing left in place before its heal (a second deployment that was
        refused and exited): under a compact schedule its window ends then (chaos/arm/schedule.py)."""
        return False

    @property
    def held_after_firing(self) -> bool:
        """Whether a triggered firing stays in place until `for` runs out or the window ends (a toxic, a pause, a
        server killed to stay lost), rather than healing at once (a kill whose victim comes back, a corruption)."""
        return True

    def fire(self) -> None:
        self.run_inject()

    def after_fire(self) -> None:
        """What must wait until the held request is released (a killed driver is restarted only then)."""
