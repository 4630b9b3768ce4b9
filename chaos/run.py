"""`chaos run`: experiments on one stack, each arm through steady → inject → heal → recover, into the run store.

One stack serves the whole run (its proxies are reset between arms); every arm gets its own topic, deployment
(checkpoint and output paths) and history. An arm:

  1. creates its topic, starts the job and warms it up (a few drain-key events until its first batch is done,
     so start-up time is not counted as a fault's effect);
  2. produces the planned workload (data faults reshape their window of it) while the probes sample every
     second and the schedule injects and heals faults at their times, recording each phase boundary;
  3. heals every fault again (whatever happened), drains the open sessions, stops the job;
  4. stores the job's sessions, the oracle's comparison and the checkpoint lineage, and judges the arm with
     the pure checkers (chaos.checkers), which `chaos check RUN_DIR` can re-run offline.

The environment failing (a toxiproxy call, a broker that did not start) is recorded as an `error`, which the
checkers turn into UNKNOWN: never reported as a broken job.
"""
from __future__ import annotations

import dataclasses
import json
import os
import random
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from infra.errors import InfraError
from infra.stack import Stack, signals_deferred
from job.settings import FACTORIES

from .checks.logs import control_signatures
from .checks.recovery import healthy_sample
from .checks.registry import holding_back
from .faults import FaultContext, build
from .history import HistoryWriter
from .jobrun import DRAIN_KEY, ArmConfig, JobArm
from .lifecycle import LifecycleWatch
from .triggers import EVENTS, LAUNCH_EVENTS, draw
from .outputs import read_progress
from .probes import LogScanner, Sampler
from .spec import ExperimentSpec, Recovery
from .store import RunRecord, RunStore, now
from .workload import Event, WorkloadSpec, plan

WARMUP_TIMEOUT_S = 240.0


# -- the workload, with data faults reshaping their windows ---------------------------------------------------
def _workload(spec: ExperimentSpec, shape: str, duration_ms: int, seed: int, **changes) -> WorkloadSpec:
    w = spec.workload
    fields: dict[str, Any] = dict(shape=shape, keys=w.keys or 1, rate=w.rate, duration_ms=duration_ms, seed=seed,
                  payload_bytes=w.payload_bytes)
    for name, value in (("zipf_s", w.zipf_s), ("hot_key_share", w.hot_key_share),
                        ("rotation_live_actors", w.rotation_live_actors)):
        if value is not None:
            fields[name] = value
    if w.rotation_gap is not None:
        fields["rotation_gap_ms"] = round(w.rotation_gap * 1000)
    fields.update(changes)
    if fields["shape"] == "rotating":
        fields["rate"] = 2000 * fields["rotation_live_actors"] / fields["rotation_gap_ms"]
    if fields["shape"] == "hot_key" and fields["keys"] < 2:
        fields["keys"] = 100
    return WorkloadSpec(**fields)


def segments(spec: ExperimentSpec, jitters: dict[int, float], only: Iterable[int] | None = None,
             total: float | None = None) -> list[tuple[float, WorkloadSpec]]:
    """(start second, workload) pieces covering the whole run (`total` seconds, default the spec's phases): the
    spec's workload, except inside the window of a data fault (of the faults `only` names, default all), where the
    fault's shape runs instead."""
    total = spec.phases.total if total is None else total
    windows = []
    chosen = set(range(len(spec.faults)) if only is None else only)
    for index, fault in enumerate(spec.faults):
        if fault.fault.startswith("data.") and index in chosen:
            start = spec.phases.steady + fault.at + jitters.get(index, 0.0)
            windows.append((start, min(total, start + fault.duration), fault))
    windows.sort(key=lambda w: w[0])
    pieces, cursor = [], 0.0
    for number, (start, end, fault) in enumerate(windows):
        if start > cursor:
            pieces.append((cursor, _workload(spec, spec.workload.shape, round((start - cursor) * 1000),
                                             spec.seed + 2 * number)))
        params: Mapping[str, Any] = fault.params
        if fault.fault == "data.hot_key":
            shaped = _workload(spec, "hot_key", round((end - start) * 1000), spec.seed + 2 * number + 1,
                               hot_key_share=params["share"])
        else:
            shaped = _workload(spec, "rotating", round((end - start) * 1000), spec.seed + 2 * number + 1,
                               rotation_live_actors=params["live_actors"],
                               rotation_gap_ms=round(params["gap"] * 1000))
        pieces.append((start, shaped))
        cursor = max(cursor, end)
    if cursor < total:
        pieces.append((cursor, _workload(spec, spec.workload.shape, round((total - cursor) * 1000),
                                         spec.seed + 2 * len(windows))))
    return pieces


def planned_events(pieces: Iterable[tuple[float, WorkloadSpec]], start_ms: int) -> list[Event]:
    """All events of the run in event-time order; sequence numbers continue per key across pieces, so
    (key, seq) stays unique for the oracle."""
    next_seq: dict[str, int] = {}
    events = []
    for offset_s, workload in pieces:
        for event in plan(workload, start_ms=start_ms + round(offset_s * 1000)):
            seq = next_seq.get(event.key, 0)
            next_seq[event.key] = seq + 1
            events.append(Event(event.key, seq, event.event_time_ms, event.payload))
    events.sort(key=lambda e: e.event_time_ms)
    return events


# -- one arm -----------------------------------------------------------------------------------------------------
def arm_config(spec: ExperimentSpec, profile: str) -> ArmConfig:
    """The job settings this arm runs with: the profile's, the spec's `job` section, the arm's settings."""
    base = FACTORIES[profile]("t", "d", "p")
    final = spec.apply_settings(profile, base)
    changes = {f.name: getattr(final, f.name) for f in dataclasses.fields(final)
               if f.name not in ("topic", "deployment", "progress_file", "profile")
               and getattr(final, f.name) != getattr(base, f.name)}
    if profile == "naive":  # processing-time sessions without bounds: event-time settings mean nothing there
        changes = {k: v for k, v in changes.items() if k not in ("watermark_ms", "max_session_ms")}
    placeholder = _workload(spec, spec.workload.shape, round(spec.phases.total * 1000), spec.seed)
    # The sessions the oracle expects follow the experiment's contract (the profile and the `job` section), not an
    # arm's own settings: an arm that turns the maximum session length off (a mutant) is judged by the contract.
    contract = spec.apply_settings(profile, base, arm_settings=False)
    return ArmConfig(profile=profile, workload=placeholder, partitions=spec.workload.partitions,
                     gap_ms=final.gap_ms, max_session_ms=contract.max_session_ms,
                     watermark_ms=final.watermark_ms or 0, trigger_ms=final.trigger_ms,
                     settings=changes, drain_timeout_s=180.0)


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


def ends_early(arm) -> bool:
    """May this arm stop as soon as its incident shows? A control that must reproduce an incident, has expected log
    signatures to show it, and sets no target whose check needs the arm run to its end (the registry's ends_early,
    chaos/checks/registry.py: only logs, lineage and environment do not) has nothing more to show once its signatures
    have matched as often as they must (its job may still run: the incident has been seen)."""
    targets = arm.targets
    return (arm.role == "control" and arm.expect == "incident" and not holding_back(targets)
            and targets.logs is not None and bool(targets.logs.expected))


class ArmRun:
    def __init__(self, stack: Stack, spec: ExperimentSpec, profile: str, arm_dir: Path,
                 say: Callable[[str], None], remaining_after_s: float = 0.0):
        self.stack, self.spec, self.profile, self.dir = stack, spec, profile, arm_dir
        self.remaining_after_s = remaining_after_s
        self.ended_early = False  # a control that showed its incident: no drain
        self.recovered_early = False  # the recover phase ended once recovery was seen
        self.say = lambda message: say(f"{spec.name}/{profile}: {message}")
        self.arm = JobArm(stack, arm_dir, arm_config(spec, profile), progress=self.say)
        self.history = HistoryWriter(arm_dir / "history.jsonl")
        targets = spec.arm(profile).targets
        patterns = list(targets.logs.expected + targets.logs.forbidden) if targets.logs else []
        # Every arm also counts the control's incident signatures, so a signature the hardened job logs as well is
        # seen for what it is (chaos/checks/logs.py signature_ratio).
        patterns += [p for p in control_signatures(spec) if p not in patterns]
        self.history.watch(patterns)
        self.logs = LogScanner(patterns, self.history, stack.run_dir)
        self.arm.on_start = self._job_started
        self.acked = 0
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

    def _job_started(self, process) -> None:
        self.logs.watch(process.log_path)
        name = "second-deployment" if process is self.arm.second else "job-driver"
        if name == "job-driver":
            self.history.job("started", name, pid=process.pid,
                             log=str(process.log_path.relative_to(self.stack.run_dir)))
            self.watch.job_started()
            self.last_start = time.monotonic()  # a restart is a disruption recovery is measured from, like a heal

    def _checkpoint_keys(self) -> list[str]:
        prefix = self.arm.checkpoint_prefix + "/"
        return [obj.object_name[len(prefix):] for obj in self.stack.s3_client(direct=True).list_objects(
            self.stack.info.bucket, prefix=prefix, recursive=True)]

    def _processes(self) -> dict:
        alive = {"job-driver": self.arm.job is not None and self.arm.job.alive()}
        if self.arm.second is not None:
            alive["second-deployment"] = self.arm.second.alive()
        return alive

    def run(self) -> None:
        rng = random.Random(self.spec.seed)
        jitters = {i: rng.uniform(0, f.start_jitter) for i, f in enumerate(self.spec.faults)}
        faults = []
        ctx = FaultContext(self.stack, self.arm, self.history, say=self.say, seed=self.spec.seed)
        stop_producing = threading.Event()
        try:
            self.arm.create_topic()
            self.arm.start_job()
            if self.spec.warm_up and not self._warm_up():
                return
            start_ms = int(time.time() * 1000) + 500
            events = planned_events(segments(self.spec, jitters, self.fault_indices, self.phases.total), start_ms)
            self.say(f"{len(events)} events planned over {self.phases.total:.0f} s")
            producer = threading.Thread(target=self._produce, args=(stop_producing, events, start_ms),
                                        name="producer", daemon=True)
            sampler = Sampler(self.history, self.arm.state.topic, self.stack.info.kafka_internal_bootstrap,
                              self.stack.s3_client(direct=True), self.stack.info.bucket, self.arm.checkpoint_prefix,
                              self.arm.progress_path, self._processes, lambda: self.acked, self.logs)
            with sampler:
                self.sampler = sampler
                producer.start()
                t0 = time.monotonic()
                faults = [(i, build(self.spec.faults[i], ctx)) for i in self.fault_indices]
                self._schedule(t0, faults, jitters)
                if self.ended_early or self.recovered_early:
                    stop_producing.set()  # the rest of the planned workload would only be waited for
                producer.join(timeout=300)
                if not self.ended_early:
                    self.arm.drain()
            self.arm.stop_job()
            self.history.job("exited", "job-driver", code=self.arm.job.returncode if self.arm.job else None)
        except InfraError as exc:
            self.history.error(str(exc))
            self.say(f"environment error: {exc}")
        finally:
            with signals_deferred():  # a second Ctrl-C must not skip the heals
                self._clean_up(faults, stop_producing)

    def _clean_up(self, faults: list, stop_producing: threading.Event) -> None:
        stop_producing.set()
        for _index, fault in faults:  # no fault thread may inject after (or while) it is healed below
            fault.stop.set()
        for _fault, thread in getattr(self, "_fault_threads", []):
            thread.join(120)
        for _index, fault in faults:  # healed again, whatever happened
            try:
                fault.run_heal()
            except Exception as exc:
                self.history.error(f"heal of {fault.fault.fault} failed: {exc}")
        try:
            self.stack.reset()
        except InfraError as exc:
            self.history.error(f"toxiproxy reset failed: {exc}")
        for process in (self.arm.second, self.arm.job):
            if process is not None and process.alive():
                process.stop(grace=10)
        self.logs.scan()
        self.logs.tally()
        self._store_outputs()
        self.history.close()


    def _warm_up(self) -> bool:
        """Drain-key events until the job has finished one batch; False (recorded) if it never does."""
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.stack.info.kafka_internal_bootstrap, "log_level": 3})
        deadline = time.monotonic() + WARMUP_TIMEOUT_S
        seq, next_event = 0, 0.0
        while time.monotonic() < deadline:
            job = self.arm.job
            assert job is not None, "the arm's job is started before its warm-up"
            if not job.alive():
                self.history.job("exited", "job-driver", code=job.returncode, cause="during start-up")
                self.say(f"the job exited during start-up; see {job.log_path}")
                return False
            batches = [r for r in read_progress(self.arm.progress_path)
                       if r.get("event") == "progress" and r["progress"].get("numInputRows", 0) > 0]
            if batches:
                self.say(f"job warmed up (first batch done) after {seq} warm-up events")
                return True
            if time.monotonic() >= next_event:  # a trickle of events every 2 s; the first batch is looked for often
                # A minute in the past: the watermark these events move cannot pass any workload event.
                past = int(time.time() * 1000) - 60_000
                producer.produce(self.arm.state.topic, key=DRAIN_KEY,
                                 value=Event(DRAIN_KEY, seq, past, "").to_json())
                producer.flush(10)
                seq += 1
                next_event = time.monotonic() + 2.0
            time.sleep(0.25)
        self.history.error(f"the job did not finish its first batch within {WARMUP_TIMEOUT_S:.0f} s")
        return False

    def _produce(self, stop: threading.Event, events: list[Event], start_ms: int) -> None:
        def counted(result) -> None:
            self.acked = result.acked

        try:
            result = self.arm.produce(stop_event=stop, events=events, start_ms=start_ms, on_progress=counted)
            self.acked = result["acked"]
        except Exception as exc:
            self.history.error(f"producer failed: {type(exc).__name__}: {exc}")

    def _schedule(self, t0: float, faults: list, jitters: dict[int, float]) -> None:
        """Phase boundaries (here) and each fault's inject and heal (a thread per fault) at their times.

        A fault that takes a while to inject (a job restarted on a damaged checkpoint, a staggered second
        deployment) delays only its own heal, never the phases or the other faults. A fault that cannot be
        injected or healed is an environment error for the history (UNKNOWN), not a job failure."""
        phases = self.phases
        self._fault_threads = []
        for index, fault in faults:
            planned = self.spec.faults[index]
            start = phases.steady + planned.at + jitters[index]
            run = self._run_triggered if planned.on is not None else self._run_fault
            thread = threading.Thread(target=run, args=(fault, t0 + start, t0 + start + planned.duration),
                                      kwargs={"index": index} if planned.on is not None else {},
                                      name=f"fault-{index}", daemon=True)
            self._fault_threads.append((fault, thread))
            thread.start()
        marks = []
        for name, start, end in phases.windows():
            marks += [(start, 0, name, "start"), (end, 1, name, "end")]
        self._t0, self._phase = t0, ("steady", 0.0, phases.steady)
        self._last_progress = time.monotonic()
        for at, _order, name, boundary in sorted(marks):
            outcome = self._watch_until(t0 + at)
            if outcome is None and (name, boundary) == ("recover", "end"):
                outcome = self._watch_past_late_heal()
            if outcome == "reproduced":
                for fault, _thread in self._fault_threads:
                    fault.stop.set()
                break
            if (name, boundary) == ("inject", "start"):
                self.logs.mark()  # lines so far are recorded before the mark: warm-up is no evidence
            self.history.phase(name, boundary)
            if outcome == "recovered":
                self.recovered_early = True
                break  # that was the recover phase's end, recorded above
            if boundary == "start":
                self._phase = next((n, a, b) for n, a, b in phases.windows() if n == name)
        for _fault, thread in self._fault_threads:
            thread.join()

    def _watch_past_late_heal(self) -> str | None:
        """At the recover phase's planned end: if a fault is still healing, or healed too late for the recovery
        bound to fit after it, the phase goes on until the bound has passed (ending early once recovery is seen)."""
        recovery = self.spec.arm(self.profile).targets.recovery
        if recovery is None:
            return None
        limit = time.monotonic() + RECOVERY_EXTENSION_MAX_S
        if any(thread.is_alive() for _fault, thread in self._fault_threads):
            self.say("a fault is still healing at the recover phase's end: the phase waits for the heal")
            while any(thread.is_alive() for _fault, thread in self._fault_threads) and time.monotonic() < limit:
                self._watch_until(min(limit, time.monotonic() + 1.0))
        healed_at = max((fault.healed_at for fault, _thread in self._fault_threads if fault.healed_at), default=None)
        end = min(limit, recovery_window_end(time.monotonic(), healed_at, recovery))
        if end <= time.monotonic():
            return None
        self.say(f"the last heal came late: the recover phase goes on {end - time.monotonic():.0f} s, until the "
                 f"{recovery.within:g} s recovery bound after it has passed")
        return self._watch_until(end)

    def _watch_until(self, deadline: float) -> str | None:
        """Wait for the next phase mark, saying how the arm is doing now and then. Ends the wait early with
        "reproduced" (a control whose job died showing its incident: the arm stops) or "recovered" (in the recover
        phase, every fault healed and the arm's recovery target visibly met: the phase has shown what it is for)."""
        early = ends_early(self.spec.arm(self.profile))
        while time.monotonic() < deadline:
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
            now = time.monotonic()
            if now - self._last_progress >= PROGRESS_EVERY_S:
                self._last_progress = now
                self.say(self._progress_line(now))
            if early and self._reproduced():
                self.ended_early = True
                self.say("control reproduced its incident: the arm stops here")
                return "reproduced"
            in_recover = now - self._t0 - self._phase[1] if self._phase[0] == "recover" else None
            if in_recover is not None and in_recover >= MIN_RECOVER_S and self._recovered():
                self.say(f"recovered: the recover phase ends {deadline - now:.0f} s before its bound")
                return "recovered"
        return None

    def _recovered(self) -> bool:
        """Every fault healed, and after the last heal the recovery target's healthy samples in a row plus a margin
        of two (so the checkers, judging the same history, see them too)."""
        targets = self.spec.arm(self.profile).targets
        target = targets.recovery or DEFAULT_RECOVERY
        judged_in_recover = ((targets.state is not None and "recover" in targets.state.during)
                             or any("recover" in probe.phases for probe in targets.probes))
        if judged_in_recover or any(thread.is_alive() for _fault, thread in self._fault_threads):
            return False
        healed_at = max((fault.healed_at for fault, _thread in self._fault_threads if fault.healed_at), default=None)
        if healed_at is not None:
            healed_at = max(healed_at, getattr(self, "last_start", healed_at))
        sampler = getattr(self, "sampler", None)
        if healed_at is None or sampler is None:
            return False
        after = [sample for at, sample in list(sampler.recent) if at > healed_at]
        need = target.healthy_samples + 2
        if len(after) < need + 1:
            return False
        window = after[-(need + 1):]
        return all(healthy_sample(sample, previous, target.lag_below) for previous, sample in zip(window, window[1:]))

    def _reproduced(self) -> bool:
        self.logs.scan()
        logs = self.spec.arm(self.profile).targets.logs
        if logs is None:  # ends_early needs expected log signatures: never None here
            return False
        return all(self.logs.count_since_mark(pattern) >= logs.min_matches for pattern in logs.expected)

    def _progress_line(self, now: float) -> str:
        name, start, end = self._phase
        sample = getattr(getattr(self, "sampler", None), "last_sample", None) or {}
        elapsed = now - self._t0
        left = max(0.0, self.phases.total - elapsed) + ARM_OVERHEAD_S / 2 + self.remaining_after_s

        def show(key: str, unit: str = "") -> str:
            value = sample.get(key)
            return "?" if value is None else f"{value:.0f}{unit}"

        return (f"{name} {max(0.0, elapsed - start):.0f}/{end - start:.0f} s · lag {show('lag')} · in "
                f"{show('input_rate', '/s')} · done {show('processed_rate', '/s')} · batch {show('batch_id')} · "
                f"about {left / 60:.0f} min left in the run")

    def _run_fault(self, fault, inject_at: float, heal_at: float) -> None:
        try:
            if self._sleep_until(inject_at, fault.stop):
                return
            fault.run_inject()
            self._sleep_until(heal_at, fault.stop)
            fault.run_heal()
        except Exception as exc:
            self._fault_failed(fault, exc)

    def _fault_failed(self, fault, exc: Exception) -> None:
        """A fault that could not be injected or healed is an environment error (UNKNOWN), never a job failure; so
        is a harness bug in it."""
        what = f"{fault.fault.fault} on {fault.fault.target}"
        if isinstance(exc, InfraError):
            self.history.error(f"{what}: {exc}")
            self.say(f"environment error: {exc}")
        else:
            self.history.error(f"{what}: {type(exc).__name__}: {exc}")

    def _run_triggered(self, fault, window_start: float, window_end: float, index: int) -> None:
        """A fault with `on:` (chaos/triggers.py): armed at its start, it fires on the job's events within its window
        (`firings` times), the held request released after each; then it heals (at once for a kill: whatever is
        still down is restarted; else `for` after the last firing, or at the window's end)."""
        trigger, what = self.spec.faults[index].on, f"{fault.fault.fault} on {fault.fault.target}"
        assert trigger is not None, "only a fault with `on:` runs triggered"
        rng = random.Random(f"{self.spec.seed}:{index}")  # the same draws for every arm and every rerun of a seed
        events = tuple(e for e in trigger.events if e in self.events_possible)
        fired_at = None
        try:
            if self._sleep_until(window_start, fault.stop):
                return
            if not events:
                self.history.error(f"{what}: none of the trigger's events ({', '.join(trigger.events)}) can happen "
                                   f"in the {self.profile} arm")
                return
            for firing in range(1, fault.firings + 1):
                # A launch event (job_started, first_batch) only while the latest driver has not begun its first
                # batch: otherwise it would wait for a restart that nothing else brings.
                launching = self.watch.launch_pending()
                possible = tuple(e for e in events if launching or e not in LAUNCH_EVENTS) or events
                chosen = draw(dataclasses.replace(trigger, events=possible), rng)
                occurrence = self.watch.wait(trigger, chosen, window_end, fault.stop)
                if occurrence is None:
                    if not fault.stop.is_set():
                        self.history.error(f"{what}: trigger {chosen.event} (firing {firing} of {fault.firings}) did "
                                           f"not happen within the fault's window")
                    break
                position = self.watch.position()
                try:
                    fault.fire()
                finally:
                    self.watch.release(occurrence, "drop" if fault.kills_sender else "forward")
                fired_at = time.monotonic()
                self.history.trigger(index, fault.fault.fault, fault.fault.target, firing, fault.firings,
                                     released=occurrence.released, **occurrence.to_dict(), **position)
                self.say(f"trigger {occurrence.event}"
                         f"{'' if occurrence.batch is None else f' (batch {occurrence.batch})'}: {what} fired "
                         f"({firing} of {fault.firings})")
                fault.after_fire()
            if fault.fault.fault not in ("process.kill", "checkpoint.corrupt") and fired_at is not None:
                end = window_end if trigger.hold_for is None else min(window_end, fired_at + trigger.hold_for)
                self._sleep_until(end, fault.stop)
            fault.run_heal()
        except Exception as exc:
            self._fault_failed(fault, exc)

    @staticmethod
    def _sleep_until(deadline: float, stop: threading.Event | None = None) -> bool:
        """Sleep until the monotonic deadline; True if `stop` was set first."""
        delay = deadline - time.monotonic()
        if stop is not None:
            return stop.wait(max(0.0, delay))
        if delay > 0:
            time.sleep(delay)
        return False

    def _store_outputs(self) -> None:
        try:
            sessions = self.arm.sessions()
            with open(self.dir / "sessions.jsonl", "w") as handle:
                for row in sessions:
                    handle.write(json.dumps(row) + "\n")
            # Judged even without a complete drain: sessions the job never emitted are lost, and say so.
            summary = self.arm.judge()
            oracle = {**summary["oracle"], "drained": self.arm.state.drained}
            (self.dir / "oracle.json").write_text(json.dumps(oracle, indent=1) + "\n")
        except Exception as exc:
            self.history.error(f"reading the job's output failed: {type(exc).__name__}: {exc}")
        try:
            from . import checkpoint_tools

            lineage = checkpoint_tools.lineage(self.stack.s3_client(direct=True), self.stack.info.bucket,
                                               self.arm.checkpoint_prefix)
            (self.dir / "lineage.json").write_text(json.dumps(lineage, indent=1) + "\n")
        except Exception as exc:
            self.history.error(f"listing the checkpoint failed: {type(exc).__name__}: {exc}")


# -- a whole run -------------------------------------------------------------------------------------------------
def experiment_dirs(specs: list[ExperimentSpec], repeat: int) -> list[tuple[str, ExperimentSpec]]:
    """(directory name, spec) in run order; repeats of a suite are <name>.r1, <name>.r2, ... (checkers compare
    their verdicts and report differences as flaky)."""
    if repeat <= 1:
        return [(spec.name, spec) for spec in specs]
    return [(f"{spec.name}.r{n}", spec) for n in range(1, repeat + 1) for spec in specs]


def run_experiments(specs: list[ExperimentSpec], run_dir: Path, name: str, backend: str = "local",
                    arms: list[str] | None = None, argv: list[str] | None = None,
                    say: Callable[[str], None] = print, repeat: int = 1, lanes: int = 1) -> dict:
    """Run every experiment's arms on one stack (or, with lanes > 1, on one stack per lane side by side: see
    chaos/lanes.py); judge; write run.json and results.json. Returns results.

    On KeyboardInterrupt (Ctrl-C, SIGTERM) every fault is healed and every process stopped by the `finally`
    blocks on the way out; the run is marked interrupted and judged as such before the interrupt goes on."""
    from .checks.judge import judge_run

    planned = experiment_dirs(specs, repeat)
    lanes = max(1, min(lanes, len(planned)))
    store = RunStore(run_dir)
    run = RunRecord(suite=name, backend=backend, scale=specs[0].scale if specs else 1.0, argv=argv or [],
                    commit=source_commit(), pid=os.getpid(), started=now(), ended=None, status="running",
                    lanes=lanes, repeat=repeat, experiments=[directory for directory, _ in planned])
    store.write_run(run)
    status = "error"
    try:
        for directory, spec in planned:
            store.write_spec(directory, spec.to_dict())
        if lanes > 1:
            from .lanes import run_lanes

            status = run_lanes(run_dir, planned, lanes, backend, arms, say,
                               seconds=lambda spec: sum(planned_seconds(spec, arms)))
        else:
            run_planned(run_dir, planned, backend, arms, say)
            status = "completed"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        run.ended, run.status = now(), status
        store.write_run(run)
        results = judge_run(run_dir)
        store.write_results(results)
        write_report(run_dir, say)
    return results


def planned_seconds(spec: ExperimentSpec, arms: list[str] | None) -> list[float]:
    """Planned seconds of each arm of `spec` that runs (phases and the per-arm overhead)."""
    return [spec.phases_of(arm.profile).total + ARM_OVERHEAD_S for arm in spec.arms
            if not arms or arm.profile in arms]


def run_planned(run_dir: Path, planned: list[tuple[str, ExperimentSpec]], backend: str, arms: list[str] | None,
                say: Callable[[str], None], lane: str | None = None) -> None:
    """The arms of `planned` (their spec.json already written), one after another on one stack."""
    # planned seconds of every arm still to run, for the progress lines' "time left"
    remaining = [seconds for _directory, spec in planned for seconds in planned_seconds(spec, arms)]
    with Stack(run_dir, backend=backend, progress=say, lane=lane) as stack:
        for directory, spec in planned:
            experiment_dir = run_dir / directory
            for arm in spec.arms:
                if arms and arm.profile not in arms:
                    continue
                say(f"== {directory}: {arm.profile} arm ==")
                stack.reset()
                remaining.pop(0)
                ArmRun(stack, spec, arm.profile, experiment_dir / arm.profile, say,
                       remaining_after_s=sum(remaining)).run()


def write_report(run_dir: Path, say: Callable[[str], None]) -> None:
    try:
        from . import report
    except ImportError as exc:
        say(f"report not written: {exc}")
        return
    # junit.xml first and on its own: a page that cannot be drawn (its plots) must not take the CI's file with it.
    for write, what in ((report.write_junit, "junit.xml"), (report.write_report, "index.html")):
        try:
            write(run_dir)
        except Exception as exc:  # the results are already stored; a report failure must not hide them
            say(f"{what} not written: {type(exc).__name__}: {exc}")
    try:  # a pre-release run repeats the suite: the arms whose verdicts differ, on the console too
        for line in report.flaky_lines(json.loads((run_dir / "results.json").read_text())):
            say(line)
    except (OSError, ValueError):
        pass


def source_commit(root: Path | None = None) -> str | None:
    """The git commit the harness ran from ("<sha>-dirty" with uncommitted changes), for the report's rerun facts;
    None outside a git checkout (an installed package)."""
    import subprocess

    root = root or Path(__file__).resolve().parents[1]
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{sha}-dirty" if dirty else sha or None

