"""The steps of one arm run (chaos/run.py ArmRun puts them in order), each with the state it owns stated:

  ArmContext       what every step shares: the stack, the spec, the job (JobArm: ctx.arm), the history, the log scanner, the
                   lifecycle watch; and the three things steps tell each other: events acknowledged (the producer),
                   the last driver start (the job's start hook) and the sampler (while it runs)
  warm_up          drain-key events until the job's first batch is done and a later one is fast
  produce          the planned workload, counting acknowledgements into the context
  FaultSchedule    a thread per fault: inject and heal at their times, or fire on the job's events (`on:`)
  PhaseClock       the phase boundaries in the history, progress lines, and the two early ends: a control that
                   reproduced its incident, a recover phase that has visibly recovered
  clean_up         every fault healed again, every process stopped, the job's outputs stored (store_outputs)
"""
from __future__ import annotations

import dataclasses
import random
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

from infra.errors import InfraError
from infra.stack import StackLike
from job.settings import FACTORIES

from .checks.logs import control_signatures
from .checks.recovery import Since, healthy_after
from .checks.registry import holding_back, outcomes_set
from .faults.base import job_line
from .history import HistoryWriter
from .jobrun import DRAIN_KEY, ArmConfig, JobArm
from .lifecycle import LifecycleWatch
from .outputs import read_progress
from .probes import LogScanner, Sampler
from .spec import ExperimentSpec, Recovery
from .store import write_lineage, write_oracle, write_sessions
from .triggers import EVENTS, LAUNCH_EVENTS, draw
from .workload import Event

WARMUP_TIMEOUT_S = 240.0
WARM_FAST_WAIT_S = 45.0  # after the first batch, how long the warm-up waits for a fast one (chaos.arm_steps.warm_up)
PROGRESS_EVERY_S = 15.0
ARM_OVERHEAD_S = 35.0  # job start and warm-up (~21-27 s with class-data archives), drain, stop, outputs

# The recover phase ends early only after this long, however soon recovery shows: the workload keeps running past
# the last fault, so exactly-once and progress are judged on batches that came after it, not on a phase of 1 s.
MIN_RECOVER_S = 10.0

# An arm with no recovery target of its own still ends its recover phase once it is visibly healthy again.
DEFAULT_RECOVERY = Recovery(within=0.0, healthy_samples=3, lag_below=2500)

# How long the recover phase may wait, past its planned end, for a heal still under way and then the recovery
# bound after it (a broker restarted from its log took 16-24 s on two cores).
RECOVERY_EXTENSION_MAX_S = 180.0


def recovery_window_end(planned_end: float, healed_at: float | None, recovery: Recovery | None) -> float:
    """When the recover phase may end: its planned end, or later if the last heal came so late that the recovery
    bound would not fit after it (a recovery is measured from the last heal: a heal that took most of the phase
    must not leave the bound too little time to be seen). Margin: the healthy samples plus two."""
    if recovery is None or healed_at is None:
        return planned_end
    return max(planned_end, healed_at + recovery.within + recovery.healthy_samples + 2)


def ends_early(arm, subject=None) -> bool:
    """May this arm stop as soon as its incident shows? A control that must reproduce an incident, has expected log
    signatures to show it, and sets no target whose check needs the arm run to its end (the registry's ends_early,
    chaos/checks/registry.py: only logs, lineage and environment do not) has nothing more to show once its signatures
    have matched as often as they must (its job may still run: the incident has been seen).

    Unless `subject` (the experiment's hardened arm) sets an outcome target (lost, duplicated, lineage, progress,
    ...): discrimination judges the control by those alone, so the control runs to its end and is drained, as the
    hardened arm is. A control that runs faults the hardened arm never ran may still stop: its outcomes could not
    stand for the hardened targets however long it ran (chaos.checks.base.settle)."""
    targets = arm.targets
    early = (arm.role == "control" and arm.expect == "incident" and not holding_back(targets)
             and targets.logs is not None and bool(targets.logs.expected))
    if not early or subject is None or not outcomes_set(subject.targets):
        return early
    return not _within_schedule(arm.faults, subject.faults)


def _within_schedule(control: tuple[int, ...] | None, subject: tuple[int, ...] | None) -> bool:
    """The control runs the hardened arm's faults or some of them (None: every fault of the spec)."""
    if subject is None:
        return True
    return control is not None and set(control) <= set(subject)


def sleep_until(deadline: float, stop: threading.Event | None = None) -> bool:
    """Sleep until the monotonic deadline; True if `stop` was set first."""
    delay = deadline - time.monotonic()
    if stop is not None:
        return stop.wait(max(0.0, delay))
    if delay > 0:
        time.sleep(delay)
    return False


# -- what the steps share ----------------------------------------------------------------------------------------
class ArmContext:
    def __init__(self, stack: StackLike, spec: ExperimentSpec, profile: str, arm_dir: Path, config: ArmConfig,
                 say: Callable[[str], None]):
        self.stack, self.spec, self.profile, self.dir = stack, spec, profile, arm_dir
        self.say = lambda message: say(f"{spec.name}/{profile}: {message}")
        self.arm = JobArm(stack, arm_dir, config, progress=self.say)
        self.history = HistoryWriter(arm_dir / "history.jsonl")
        targets = spec.arm(profile).targets
        patterns = list(targets.logs.expected + targets.logs.forbidden) if targets.logs else []
        # Every arm also counts the control's incident signatures, so a signature the hardened job logs as well is
        # seen for what it is (chaos/checks/logs.py signature_ratio).
        patterns += [p for p in control_signatures(spec) if p not in patterns]
        self.history.watch(patterns)
        self.logs = LogScanner(patterns, self.history, stack.run_dir)
        self.arm.on_start = self._job_started
        self.arm.before_start = self.record_own_exit  # a start replacing a driver that ended by itself
        self.arm.record_own_exit = self.record_own_exit  # a fault finding the driver ended by itself
        # The faults this arm runs, by their index in the spec (the realised schedule is the same for both arms).
        chosen = spec.arm(profile).faults
        self.fault_indices = list(range(len(spec.faults))) if chosen is None else list(chosen)
        self.phases = spec.phases_of(profile)  # with a subset of the faults, the inject phase covers only those
        settings = spec.apply_settings(profile, FACTORIES[profile]("t", "d", "p"))
        # Events this arm's job can make: no lease renewals without a lease, no manifests without verification.
        self.events_possible = {name for name, event in EVENTS.items()
                                if not event.hardened_only
                                or (settings.lease if name == "lease_renewed" else settings.verify_state)}
        self.watch = LifecycleWatch(stack.s3proxy, self.arm.state.deployment, checkpoint_lister=self._checkpoint_keys)
        self.acked = 0  # events the broker acknowledged so far (produce)
        self.last_start: float | None = None  # monotonic time of the latest driver start (a disruption, like a heal)
        self.sampler: Sampler | None = None  # while the probes sample
        self.own_exit_recorded: object | None = None  # the driver whose own exit the history has (at its time)

    def record_own_exit(self) -> None:
        """A driver that ended by itself, with no signal of the harness's, is recorded as it is seen to end (the
        phase clock looks every second), so the history says when, not only that it had ended by the arm's end."""
        job = self.arm.job
        if job is None or job is self.own_exit_recorded or job.alive() or job.signalled_to_end:
            return
        self.own_exit_recorded = job
        # its last `job:` line goes with it, so the exits check (chaos/checks/deployment.py) can say what it said
        self.history.job("exited", "job-driver", code=job.returncode, line=job_line(job.log_path))
        self.say(f"the job's driver ended by itself (exit {job.returncode}); see {job.log_path}")

    def driver_ended_by_itself(self) -> bool:
        """The latest driver has ended and no signal of the harness's asked it to (recorded, if not yet)."""
        job = self.arm.job
        if job is None or job.alive() or job.signalled_to_end:
            return False
        self.record_own_exit()
        return True

    def _job_started(self, process) -> None:
        self.logs.watch(process.log_path)
        name = "second-deployment" if process is self.arm.second else "job-driver"
        if name == "job-driver":
            self.history.job("started", name, pid=process.pid,
                             log=str(process.log_path.relative_to(self.stack.run_dir)))
            self.watch.job_started()
            self.last_start = time.monotonic()
            if self.sampler is not None:
                self.sampler.driver_started()

    def _checkpoint_keys(self) -> list[str]:
        prefix = self.arm.checkpoint_prefix + "/"
        return [obj.object_name[len(prefix):] for obj in self.stack.s3_client(direct=True).list_objects(
            self.stack.info.bucket, prefix=prefix, recursive=True)]

    def processes(self) -> dict:
        alive = {"job-driver": self.arm.job is not None and self.arm.job.alive()}
        if self.arm.second is not None:
            alive["second-deployment"] = self.arm.second.alive()
        return alive

    def sampler_for(self) -> Sampler:
        return Sampler(self.history, self.arm.state.topic, self.stack.info.kafka_internal_bootstrap,
                       self.stack.s3_client(direct=True), self.stack.info.bucket, self.arm.checkpoint_prefix,
                       self.arm.progress_path, self.processes, lambda: self.acked, self.logs)


# -- warm-up and workload ----------------------------------------------------------------------------------------
def is_warm(batches: list[dict], warm_batch_ms: int) -> bool:
    """A batch after the first (StreamingQueryProgress dicts, in order) took at most warm_batch_ms."""
    durations = [b.get("durationMs", {}).get("triggerExecution") for b in batches[1:]]
    return any(isinstance(d, int) and d <= warm_batch_ms for d in durations)


def warm_up(ctx: ArmContext) -> bool:
    """Drain-key events until the job has finished one batch and then one fast one; False (recorded) if it never
    finishes a batch.

    The first batches of a new job are slow whatever they carry (measured on a fresh cluster stack: 7.7 s, then 3.1 s
    for 3 rows and 4.7 s for 463, where a warm job takes well under a second): class loading, the state stores'
    first loads and uploads. A steady phase that began after the first batch judged those, not the job's steady
    state, and failed `progress` before any fault. So the warm-up goes on until a batch takes at most
    `warm_batch_ms` (twice the trigger, at least 2 s), for at most WARM_FAST_WAIT_S more; past that the steady
    phase starts anyway, and the warm-up says how long the last batch took."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": ctx.stack.info.kafka_internal_bootstrap, "log_level": 3})
    deadline = time.monotonic() + WARMUP_TIMEOUT_S
    warm_batch_ms = max(2_000, 2 * int((ctx.spec.job.trigger or 1.0) * 1000))
    seq, next_event, first_done = 0, 0.0, None
    while time.monotonic() < deadline:
        job = ctx.arm.job
        assert job is not None, "the arm's job is started before its warm-up"
        if not job.alive():
            ctx.history.job("exited", "job-driver", code=job.returncode, cause="during start-up",
                            line=job_line(job.log_path))
            ctx.own_exit_recorded = job
            ctx.say(f"the job exited during start-up; see {job.log_path}")
            return False
        batches = [r["progress"] for r in read_progress(ctx.arm.progress_path)
                   if r.get("event") == "progress" and r["progress"].get("numInputRows", 0) > 0]
        durations = [b.get("durationMs", {}).get("triggerExecution") for b in batches[1:]]
        if batches and first_done is None:
            first_done = time.monotonic()
        if is_warm(batches, warm_batch_ms):
            ctx.say(f"job warmed up ({len(batches)} batches, the last in {durations[-1]} ms) after {seq} warm-up "
                    "events")
            return True
        if first_done is not None and time.monotonic() - first_done > WARM_FAST_WAIT_S:
            last = f"the last took {durations[-1]} ms" if durations and durations[-1] is not None else \
                "no second batch"
            ctx.say(f"job warmed up (first batch done; no batch within {warm_batch_ms} ms in "
                    f"{WARM_FAST_WAIT_S:.0f} s more: {last}) after {seq} warm-up events")
            return True
        # A trickle of events, every 2 s until the first batch, then every 0.5 s: each trigger has a batch to run.
        if time.monotonic() >= next_event:
            # A minute in the past: the watermark these events move cannot pass any workload event.
            past = int(time.time() * 1000) - 60_000
            producer.produce(ctx.arm.state.topic, key=DRAIN_KEY, value=Event(DRAIN_KEY, seq, past, "").to_json())
            producer.flush(10)
            seq += 1
            next_event = time.monotonic() + (2.0 if first_done is None else 0.5)
        time.sleep(0.25)
    ctx.history.error(f"the job did not finish its first batch within {WARMUP_TIMEOUT_S:.0f} s")
    return False


def produce(ctx: ArmContext, stop: threading.Event, events: list[Event], start_ms: int) -> None:
    """The planned workload (the producer thread's body); acknowledgements counted into ctx.acked."""
    def counted(result) -> None:
        ctx.acked = result.acked

    try:
        result = ctx.arm.produce(stop_event=stop, events=events, start_ms=start_ms, on_progress=counted)
        ctx.acked = result["acked"]
    except Exception as exc:
        ctx.history.error(f"producer failed: {type(exc).__name__}: {exc}")


# -- faults ------------------------------------------------------------------------------------------------------
class FaultSchedule:
    """A thread per fault, injecting and healing it at its times (or on the job's events). A fault that takes a
    while to inject (a job restarted on a damaged checkpoint, a staggered second deployment) delays only its own heal,
    never the phases or the other faults. A fault that cannot be injected or healed is an environment error for the
    history (UNKNOWN), not a job failure."""

    def __init__(self, ctx: ArmContext):
        self.ctx = ctx
        self.threads: list[tuple[Any, threading.Thread]] = []  # (fault, its thread), in start order
        # `schedule: compact`: seconds the windows so far ended before their planned ends (the job having recovered);
        # every later window, and the phase marks after the inject phase's start, move up by it.
        self.saved_s = 0.0

    def start(self, t0: float, faults: list, jitters: dict[int, float]) -> None:
        spec = self.ctx.spec
        if spec.schedule == "compact":
            thread = threading.Thread(target=self._run_in_turn, args=(t0, faults, jitters), name="faults",
                                      daemon=True)
            self.threads = [(fault, thread) for _index, fault in faults]
            thread.start()
            return
        for index, fault in faults:
            start, end = self._window(t0, index, jitters)
            run = self._run_triggered if spec.faults[index].on is not None else self._run_fault
            thread = threading.Thread(target=run, args=(fault, start, end),
                                      kwargs={"index": index} if spec.faults[index].on is not None else {},
                                      name=f"fault-{index}", daemon=True)
            self.threads.append((fault, thread))
            thread.start()

    def _window(self, t0: float, index: int, jitters: dict[int, float]) -> tuple[float, float]:
        """(start, end) of a fault's window in monotonic time, moved up by the time saved so far."""
        planned = self.ctx.spec.faults[index]
        start = t0 + self.ctx.phases.steady + planned.at + jitters[index] - self.saved_s
        return start, start + planned.duration

    def _run_in_turn(self, t0: float, faults: list, jitters: dict[int, float]) -> None:
        """`schedule: compact`: the faults one after another, each window an upper bound. A fault done before its
        window ends (a triggered one that has fired its count; a timed one that is `spent`, e.g. a second deployment
        refused) lets the next window open once the job has recovered from it (or at its planned time, whichever
        comes first); after the last, the inject phase ends at once. The windows keep their lengths: a fault given
        40 s for its events still has them."""
        for position, (index, fault) in enumerate(faults):
            if fault.stop.is_set():
                return
            try:
                self._run_one_in_turn(t0, index, fault, jitters, last=position == len(faults) - 1)
            except Exception as exc:  # a harness bug: recorded (UNKNOWN), not lost with the thread
                self._failed(fault, exc)
                return

    def _run_one_in_turn(self, t0: float, index: int, fault, jitters: dict[int, float], last: bool) -> None:
        ctx = self.ctx
        start, end = self._window(t0, index, jitters)
        if ctx.spec.faults[index].on is not None:
            self._run_triggered(fault, start, end, index=index)
        else:
            self._run_fault(fault, start, end)
        if last:  # the inject phase ends at once, even where it was planned longer than the faults' windows
            end = t0 + ctx.phases.steady + ctx.phases.inject - self.saved_s
        if fault.stop.is_set() or time.monotonic() >= end:
            return
        if not last:
            since = max(fault.healed_at or 0.0, ctx.last_start or 0.0)
            while time.monotonic() < end and not fault.stop.is_set() and not recovered_since(ctx, since):
                time.sleep(0.5)
        saved = end - time.monotonic()
        if saved > 0 and not fault.stop.is_set():
            self.saved_s += saved
            ctx.history.schedule(index, name=fault.fault.fault, target=fault.fault.target, saved_s=round(saved, 1),
                                 total_saved_s=round(self.saved_s, 1))
            ctx.say(f"{fault.fault.fault} on {fault.fault.target} done {saved:.0f} s before "
                    + ("the inject phase's end" if last else "its window's end")
                    + ("" if last else " and the job recovered") + ": "
                    + ("the inject phase ends now" if last else "the next window opens now"))

    def any_alive(self) -> bool:
        return any(thread.is_alive() for _fault, thread in self.threads)

    def healed_at(self) -> float | None:
        """Monotonic time of the last heal so far (None: nothing healed)."""
        return max((fault.healed_at for fault, _thread in self.threads if fault.healed_at), default=None)

    def stop(self) -> None:
        for fault, _thread in self.threads:
            fault.stop.set()

    def join(self, timeout: float | None = None) -> None:
        for _fault, thread in self.threads:
            thread.join(timeout)

    def _run_fault(self, fault, inject_at: float, heal_at: float) -> None:
        try:
            if sleep_until(inject_at, fault.stop):
                return
            fault.run_inject()
            if self.ctx.spec.schedule == "compact":  # the window ends early once the fault has nothing in place
                while time.monotonic() < heal_at and not fault.spent and not fault.stop.is_set():
                    sleep_until(min(heal_at, time.monotonic() + 0.5), fault.stop)
            else:
                sleep_until(heal_at, fault.stop)
            fault.run_heal()
        except Exception as exc:
            self._failed(fault, exc)

    def _failed(self, fault, exc: Exception) -> None:
        """A fault that could not be injected or healed is an environment error (UNKNOWN), never a job failure; so
        is a harness bug in it."""
        what = f"{fault.fault.fault} on {fault.fault.target}"
        if isinstance(exc, InfraError):
            self.ctx.history.error(f"{what}: {exc}")
            self.ctx.say(f"environment error: {exc}")
        else:
            self.ctx.history.error(f"{what}: {type(exc).__name__}: {exc}")

    def _run_triggered(self, fault, window_start: float, window_end: float, index: int) -> None:
        """A fault with `on:` (chaos/triggers.py): armed at its start, it fires on the job's events within its window
        (`firings` times), the held request released after each; then it heals: at once where the fault does not
        hold (a kill whose victim is restarted, a corruption), else `for` after the last firing or at the window's
        end (a server killed with `restart: at_heal` stays lost that long)."""
        ctx = self.ctx
        trigger, what = ctx.spec.faults[index].on, f"{fault.fault.fault} on {fault.fault.target}"
        assert trigger is not None, "only a fault with `on:` runs triggered"
        rng = random.Random(f"{ctx.spec.seed}:{index}")  # the same draws for every arm and every rerun of a seed
        events = tuple(e for e in trigger.events if e in ctx.events_possible)
        fired_at = None
        try:
            if sleep_until(window_start, fault.stop):
                return
            if not events:
                ctx.history.error(f"{what}: none of the trigger's events ({', '.join(trigger.events)}) can happen "
                                  f"in the {ctx.profile} arm")
                return
            for firing in range(1, fault.firings + 1):
                # A launch event (job_started, first_batch) only while the latest driver has not begun its first
                # batch: otherwise it would wait for a restart that nothing else brings.
                launching = ctx.watch.launch_pending()
                possible = tuple(e for e in events if launching or e not in LAUNCH_EVENTS) or events
                chosen = draw(dataclasses.replace(trigger, events=possible), rng)
                occurrence = ctx.watch.wait(trigger, chosen, window_end, fault.stop)
                if occurrence is None:
                    if not fault.stop.is_set() and ctx.driver_ended_by_itself():
                        # no event can come from a driver that is gone: the job failed (its own exit, recorded and
                        # judged by the exits check), not the environment
                        ctx.say(f"{what}: trigger {chosen.event} (firing {firing} of {fault.firings}) did not "
                                "happen: the job's driver had ended by itself")
                    elif not fault.stop.is_set():
                        ctx.history.error(f"{what}: trigger {chosen.event} (firing {firing} of {fault.firings}) did "
                                          f"not happen within the fault's window")
                    break
                position = ctx.watch.position()
                try:
                    fault.fire()
                finally:
                    ctx.watch.release(occurrence, "drop" if fault.kills_sender else "forward")
                fired_at = time.monotonic()
                ctx.history.trigger(index, fault.fault.fault, fault.fault.target, firing, fault.firings,
                                    released=occurrence.released, **occurrence.to_dict(), **position)
                ctx.say(f"trigger {occurrence.event}"
                        f"{'' if occurrence.batch is None else f' (batch {occurrence.batch})'}: {what} fired "
                        f"({firing} of {fault.firings})")
                fault.after_fire()
            if fault.held_after_firing and fired_at is not None:
                end = window_end if trigger.hold_for is None else min(window_end, fired_at + trigger.hold_for)
                sleep_until(end, fault.stop)
            fault.run_heal()
        except Exception as exc:
            self._failed(fault, exc)


def recovered_since(ctx: ArmContext, since: float) -> bool:
    """After `since` (monotonic), the arm's recovery target's healthy samples in a row plus a margin of two, the
    latest samples (so the checkers, judging the same history, see them too), by the checkers' rule: each shows a
    batch that started after `since` (a killed driver's last batches are no evidence)."""
    target = ctx.spec.arm(ctx.profile).targets.recovery or DEFAULT_RECOVERY
    if ctx.sampler is None:
        return False
    after = [sample for at, sample in list(ctx.sampler.recent) if at > since]
    need = target.healthy_samples + 2
    if len(after) < need + 1:
        return False
    window = after[-(need + 1):]
    after_since = Since(datetime.now(timezone.utc) - timedelta(seconds=time.monotonic() - since))
    return all(healthy_after(sample, previous, target.lag_below, after_since)
               for previous, sample in zip(window, window[1:]))


# -- the phase clock ---------------------------------------------------------------------------------------------
class PhaseClock:
    """Phase boundaries into the history at their times, while the faults run; progress lines now and then. Ends
    early when a control reproduced its incident (`ended_early`: no drain) or the recover phase visibly recovered
    (`recovered_early`)."""

    def __init__(self, ctx: ArmContext, faults: FaultSchedule, remaining_after_s: float = 0.0):
        self.ctx, self.faults, self.remaining_after_s = ctx, faults, remaining_after_s
        self.ended_early = False  # a control that showed its incident: no drain
        self.recovered_early = False  # the recover phase ended once recovery was seen
        self.recovered_at: float | None = None  # when recovery was first seen (the still_healthy watch starts)
        self.t0 = 0.0
        self.phase: tuple[str, float, float] = ("steady", 0.0, ctx.phases.steady)  # (name, start, end) now
        self.last_progress = time.monotonic()
        arm = ctx.spec.arm(ctx.profile)  # the hardened arm is looked up only for a control that could end early
        self.early = ends_early(arm) and ends_early(arm, next((a for a in ctx.spec.arms if a.profile == "hardened"),
                                                              None))

    def run(self, t0: float) -> None:
        phases = self.ctx.phases
        marks = []
        for name, start, end in phases.windows():
            marks += [(start, 0, name, "start"), (end, 1, name, "end")]
        self.t0, self.phase = t0, ("steady", 0.0, phases.steady)
        self.last_progress = time.monotonic()
        inject_start = phases.steady
        for at, _order, name, boundary in sorted(marks):
            # Marks after the inject phase's start move up by the time a compact schedule saved (0 otherwise).
            moves = at > inject_start
            outcome = self._watch_until(self._mark_time(t0 + at, moves))
            if outcome is None and (name, boundary) == ("recover", "end"):
                outcome = self._watch_past_late_heal()
            if outcome == "reproduced":
                self.faults.stop()
                break
            if (name, boundary) == ("inject", "start"):
                self.ctx.logs.mark()  # lines so far are recorded before the mark: warm-up is no evidence
            self.ctx.history.phase(name, boundary)
            if outcome == "recovered":
                self.recovered_early = True
                break  # that was the recover phase's end, recorded above
            if boundary == "start":  # where the phase runs now (moved up by a compact schedule's savings)
                moved = self._moved_by(moves)
                self.phase = next((n, a - moved, b - moved) for n, a, b in phases.windows() if n == name)
        self.faults.join()

    def _mark_time(self, planned: float, moves: bool) -> Callable[[], float]:
        return lambda: planned - self._moved_by(moves)

    def _moved_by(self, moves: bool) -> float:
        """Seconds a mark after the inject phase's start has moved up (a compact schedule's savings so far)."""
        return self.faults.saved_s if moves else 0.0

    def _watch_past_late_heal(self) -> str | None:
        """At the recover phase's planned end: if a fault is still healing, or healed too late for the recovery
        bound to fit after it, the phase goes on until the bound has passed (ending early once recovery is seen)."""
        ctx = self.ctx
        recovery = ctx.spec.arm(ctx.profile).targets.recovery
        if recovery is None:
            return None
        limit = time.monotonic() + RECOVERY_EXTENSION_MAX_S
        if self.faults.any_alive():
            ctx.say("a fault is still healing at the recover phase's end: the phase waits for the heal")
            while self.faults.any_alive() and time.monotonic() < limit:
                self._watch_until(min(limit, time.monotonic() + 1.0))
        end = min(limit, recovery_window_end(time.monotonic(), self.faults.healed_at(), recovery))
        if end <= time.monotonic():
            return None
        ctx.say(f"the last heal came late: the recover phase goes on {end - time.monotonic():.0f} s, until the "
                f"{recovery.within:g} s recovery bound after it has passed")
        return self._watch_until(end)

    def _watch_until(self, deadline: float | Callable[[], float]) -> str | None:
        """Wait for the next phase mark (a time, or a function giving it: a compact schedule moves marks up while
        they are waited for), saying how the arm is doing now and then. Ends the wait early with "reproduced" (a
        control whose job died showing its incident: the arm stops) or "recovered" (in the recover phase, every
        fault healed and the arm's recovery target visibly met: the phase has shown what it is for)."""
        due = deadline if callable(deadline) else (lambda: deadline)
        while time.monotonic() < due():
            time.sleep(min(1.0, max(0.0, due() - time.monotonic())))
            now = time.monotonic()
            self.ctx.record_own_exit()
            if now - self.last_progress >= PROGRESS_EVERY_S:
                self.last_progress = now
                self.ctx.say(self._progress_line(now))
            if self.early and self._reproduced():
                self.ended_early = True
                self.ctx.say("control reproduced its incident: the arm stops here")
                return "reproduced"
            in_recover = now - self.t0 - self.phase[1] if self.phase[0] == "recover" else None
            if in_recover is not None and in_recover >= MIN_RECOVER_S and (self.recovered_at is not None
                                                                          or self._recovered()):
                watch = self._still_healthy_watch()
                if watch and self.recovered_at is None:
                    self.recovered_at = now
                    self.ctx.say(f"recovered: watching {watch:.0f} s more before the recover phase ends "
                                 "(still_healthy judges those samples)")
                if self.recovered_at is None or now - self.recovered_at >= watch:
                    self.ctx.say(f"recovered: the recover phase ends {due() - now:.0f} s before its bound")
                    return "recovered"
        return None

    def _still_healthy_watch(self) -> float:
        """Seconds the recover phase goes on once recovery is seen, when the arm sets still_healthy: its samples
        (one a second) plus one, so the check judges samples taken after the moment recovery ended the wait, not
        the very samples that ended it (which would make it pass by construction)."""
        still = self.ctx.spec.arm(self.ctx.profile).targets.extra.get("still_healthy")
        samples = still.get("samples") if still else None
        return float(samples) + 1.0 if isinstance(samples, (int, float)) else 0.0

    def _recovered(self) -> bool:
        """Every fault healed, and after the last heal (or driver start) the job recovered (recovered_since)."""
        ctx = self.ctx
        targets = ctx.spec.arm(ctx.profile).targets
        judged_in_recover = ((targets.state is not None and "recover" in targets.state.during)
                             or any("recover" in probe.phases for probe in targets.probes))
        if judged_in_recover or self.faults.any_alive():
            return False
        healed_at = self.faults.healed_at()
        if healed_at is None:
            return False
        return recovered_since(ctx, max(healed_at, ctx.last_start if ctx.last_start is not None else healed_at))

    def _reproduced(self) -> bool:
        ctx = self.ctx
        ctx.logs.scan()
        logs = ctx.spec.arm(ctx.profile).targets.logs
        if logs is None:  # ends_early needs expected log signatures: never None here
            return False
        return all(ctx.logs.count_since_mark(pattern) >= logs.min_matches for pattern in logs.expected)

    def _progress_line(self, now: float) -> str:
        name, start, end = self.phase
        sampler = self.ctx.sampler
        sample = (sampler.last_sample if sampler is not None else None) or {}
        elapsed = now - self.t0
        left = max(0.0, self.ctx.phases.total - elapsed) + ARM_OVERHEAD_S / 2 + self.remaining_after_s

        def show(key: str, unit: str = "") -> str:
            value = sample.get(key)
            return "?" if value is None else f"{value:.0f}{unit}"

        return (f"{name} {max(0.0, elapsed - start):.0f}/{end - start:.0f} s · lag {show('lag')} · in "
                f"{show('input_rate', '/s')} · done {show('processed_rate', '/s')} · batch {show('batch_id')} · "
                f"about {left / 60:.0f} min left in the run")


# -- clean-up ----------------------------------------------------------------------------------------------------
def clean_up(ctx: ArmContext, faults: list, schedule: FaultSchedule, stop_producing: threading.Event) -> None:
    """Whatever happened: the producer stopped, every fault healed again, the proxies reset, every job process
    stopped; the logs scanned a last time, the job's outputs stored, the history closed."""
    stop_producing.set()
    for _index, fault in faults:  # no fault thread may inject after (or while) it is healed below
        fault.stop.set()
    schedule.join(120)
    for _index, fault in faults:  # healed again, whatever happened
        try:
            fault.run_heal()
        except Exception as exc:
            ctx.history.error(f"heal of {fault.fault.fault} failed: {exc}")
    try:
        ctx.stack.reset()
    except InfraError as exc:
        ctx.history.error(f"toxiproxy reset failed: {exc}")
    for process in (ctx.arm.second, ctx.arm.job):
        if process is not None and process.alive():
            process.stop(grace=10)
    ctx.logs.scan()
    ctx.logs.tally()
    store_outputs(ctx)
    ctx.history.close()


def store_outputs(ctx: ArmContext) -> None:
    """sessions.jsonl, oracle.json and lineage.json of the arm; a failure is an `error` record, never a crash."""
    try:
        sessions = ctx.arm.sessions()
        write_sessions(ctx.dir, sessions)
        # Judged even without a complete drain: sessions the job never emitted are lost, and say so.
        summary = ctx.arm.judge()
        oracle = {**summary["oracle"], "drained": ctx.arm.state.drained}
        write_oracle(ctx.dir, oracle)
    except Exception as exc:
        ctx.history.error(f"reading the job's output failed: {type(exc).__name__}: {exc}")
    try:
        from infra.state_files import read_state_files

        from . import checkpoint_tools

        lineage = checkpoint_tools.lineage(ctx.stack.s3_client(direct=True), ctx.stack.info.bucket,
                                           ctx.arm.checkpoint_prefix, read_state=read_state_files)
        write_lineage(ctx.dir, lineage)
    except Exception as exc:
        ctx.history.error(f"listing the checkpoint failed: {type(exc).__name__}: {exc}")
