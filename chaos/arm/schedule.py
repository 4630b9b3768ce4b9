"""The schedule of one arm's phases while the workload runs (chaos/run.py ArmRun starts it as the workload begins):

  FaultSchedule    a thread per fault: inject and heal at their times, or fire on the job's events (`on:`)
  PhaseClock       the phase boundaries in the history, progress lines, and the three early ends: a control that
                   reproduced its incident, a recover phase that has visibly recovered, a job that ended by itself
                   with the exit its targets expect

and the rules they keep: when a control may end early (ends_early), how long a recover phase may wait for a late
heal (recovery_window_end), when the job counts as recovered (recovered_since).
"""
from __future__ import annotations

import dataclasses
import random
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from infra.errors import InfraError

from ..checks.base import OUTPUT_CHECKS
from ..checks.recovery import Since, healthy_after
from ..checks.registry import holding_back, outcomes_set
from ..spec import Recovery
from ..triggers import LAUNCH_EVENTS, draw
from .steps import ARM_OVERHEAD_S, ArmContext

PROGRESS_EVERY_S = 15.0

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


def drain_judged(arm, subject=None) -> bool:
    """Does anything judge what this arm's drain waits for (every session closed and written)? Its own targets, if
    they set a check that reads the output back (OUTPUT_CHECKS); or, for a control, discrimination, which judges it
    by the hardened arm's outcome targets, but only if it runs the hardened arm's faults (`_within_schedule`). A
    control that runs faults of its own is not drained: nothing would read the sessions it closes."""
    if arm.role != "control" or any(name in OUTPUT_CHECKS for name in outcomes_set(arm.targets)):
        return True
    return subject is not None and bool(outcomes_set(subject.targets)) and _within_schedule(arm.faults, subject.faults)


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
    after_since = Since(datetime.now(UTC) - timedelta(seconds=time.monotonic() - since))
    return all(healthy_after(sample, previous, target.lag_below, after_since)
               for previous, sample in zip(window, window[1:]))


# -- the phase clock ---------------------------------------------------------------------------------------------
class PhaseClock:
    """Phase boundaries into the history at their times, while the faults run; progress lines now and then. Ends
    early when a control reproduced its incident (`ended_early`: no drain), the recover phase visibly recovered
    (`recovered_early`), or the job ended by itself with the exit its targets expect (`exited_as_expected`)."""

    def __init__(self, ctx: ArmContext, faults: FaultSchedule, remaining_after_s: float = 0.0):
        self.ctx, self.faults, self.remaining_after_s = ctx, faults, remaining_after_s
        self.ended_early = False  # a control that showed its incident: no drain
        self.recovered_early = False  # the recover phase ended once recovery was seen
        self.exited_as_expected = False  # the job ended by itself with the exit code its targets expect
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
            if outcome in ("reproduced", "exited"):
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
            if self._exited_as_expected():
                self.exited_as_expected = True
                self.ctx.say("the job ended by itself with the exit its targets expect: nothing is left to watch, "
                             "the arm stops here")
                return "exited"
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

    def _exited_as_expected(self) -> bool:
        """The latest driver ended by itself with the code the arm's exit_code target names (a failure budget's
        stop): with no job left and none to be restarted (a heal restarts only what its fault stopped), the rest of
        the phases would only wait. Not a control that must run to its end (`ends_early`, as for a reproduced
        incident): discrimination judges it by the hardened outcome targets, so it goes on to be drained and judged
        (cluster-executor-lost's control, stopped at its exit 1, left every outcome unjudged: inconclusive)."""
        arm = self.ctx.spec.arm(self.ctx.profile)
        expected = arm.targets.exit_code
        if expected is None or (arm.role == "control" and not self.early):
            return False
        job = self.ctx.arm.job
        return job is not None and self.ctx.driver_ended_by_itself() and job.returncode == expected

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
