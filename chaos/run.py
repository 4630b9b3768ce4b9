"""`chaos run`: experiments on one stack, each arm through steady → inject → heal → recover, into the run store.

One stack serves the whole run (its proxies are reset between arms); every arm gets its own topic, deployment
(checkpoint and output paths) and history. An arm:

  1. creates its topic, starts the job and warms it up (a few drain-key events until its first batch is done,
     so start-up time is not counted as a fault's effect);
  2. produces the planned workload (data faults reshape their window of it) while the probes sample every
     second and the schedule injects and heals faults at their times, recording each phase boundary;
  3. heals every fault again (whatever happened), drains the open sessions, stops the job;
  4. stores the job's sessions, the oracle's comparison and the checkpoint lineage, and judges the arm with
     the pure checkers (chaos.checks), which `chaos check RUN_DIR` can re-run offline.

Those steps, each with the state it owns, are in chaos/arm/steps.py and chaos/arm/schedule.py; `ArmRun` here puts
them in order.

The environment failing (a toxiproxy call, a broker that did not start) is recorded as an `error`, which the
checkers turn into UNKNOWN: never reported as a broken job.
"""
from __future__ import annotations

import heapq
import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from infra.errors import InfraError
from infra.stack import Stack, StackLike, signals_deferred

from .arm.config import arm_config, workload_of
from .arm.schedule import FaultSchedule, PhaseClock, drain_judged
from .arm.steps import ARM_OVERHEAD_S, ArmContext, clean_up, judge_stored, produce, warm_up
from .faults import FaultContext, build
from .faults.registry import FAULTS
from .lanes.gate import LaneGate, span_from_env
from .rejudge import rejudge
from .spec import ExperimentSpec
from .store import RunRecord, RunStore, now
from .target.model import Target
from .workload import Event, WorkloadSpec, plan


# -- the workload, with data faults reshaping their windows ---------------------------------------------------
def segments(spec: ExperimentSpec, jitters: dict[int, float], only: Iterable[int] | None = None,
             total: float | None = None) -> list[tuple[float, WorkloadSpec]]:
    """(start second, workload) pieces covering the whole run (`total` seconds, default the spec's phases): the
    spec's workload, except inside the window of a fault whose kind reshapes the workload (of the faults `only`
    names, default all), where the kind's shape runs instead."""
    total = spec.phases.total if total is None else total
    windows = []
    chosen = set(range(len(spec.faults)) if only is None else only)
    for index, fault in enumerate(spec.faults):
        if FAULTS[fault.fault].reshape is not None and index in chosen:
            start = spec.phases.steady + fault.at + jitters.get(index, 0.0)
            windows.append((start, min(total, start + fault.duration), fault))
    windows.sort(key=lambda w: w[0])
    pieces, cursor = [], 0.0
    for number, (start, end, fault) in enumerate(windows):
        if start > cursor:
            pieces.append((cursor, workload_of(spec, spec.workload.shape, round((start - cursor) * 1000),
                                             spec.seed + 2 * number)))
        reshape = FAULTS[fault.fault].reshape
        assert reshape is not None
        changes = dict(reshape(fault.params))  # the kind's own shape of its window (chaos/faults/data.py)
        pieces.append((start, workload_of(spec, changes.pop("shape"), round((end - start) * 1000),
                                        spec.seed + 2 * number + 1, **changes)))
        cursor = max(cursor, end)
    if cursor < total:
        pieces.append((cursor, workload_of(spec, spec.workload.shape, round((total - cursor) * 1000),
                                         spec.seed + 2 * len(windows))))
    return pieces


def planned_events(pieces: Iterable[tuple[float, WorkloadSpec]], start_ms: int) -> Iterator[Event]:
    """All events of the run in event-time order, planned as they are produced (a run of millions of events is
    never held in memory: issue 37 measured 3.0 GB resident for 3.6 million); sequence numbers continue per key
    across pieces, in event-time order, so (key, seq) stays unique for the oracle and seq follows event time. Pieces
    that overlap in time (two data faults' windows) are merged; at equal times the earlier piece's event first."""
    planned = [plan(workload, start_ms=start_ms + round(offset_s * 1000)) for offset_s, workload in pieces]
    next_seq: dict[str, int] = {}
    for event in heapq.merge(*planned, key=lambda e: e.event_time_ms):
        seq = next_seq.get(event.key, 0)
        next_seq[event.key] = seq + 1
        yield Event(event.key, seq, event.event_time_ms, event.payload)


# -- one arm -----------------------------------------------------------------------------------------------------
class ArmRun:
    """One arm: topic and job started, warm-up, the workload produced while the faults run on their schedule and
    the phase clock marks the phases, drain, stop; then clean-up, whatever happened. The steps and the state each
    owns are in chaos/arm/steps.py."""

    def __init__(self, stack: StackLike, spec: ExperimentSpec, profile: str, arm_dir: Path,
                 say: Callable[[str], None], remaining_after_s: float = 0.0, gate: LaneGate | None = None):
        self.ctx = ArmContext(stack, spec, profile, arm_dir, arm_config(spec, profile), say)
        self.remaining_after_s = remaining_after_s
        self.gate = gate  # in a lane: the job's start and the steady phase take turns with the other lanes

    def run(self) -> None:
        ctx, spec = self.ctx, self.ctx.spec
        rng = random.Random(spec.seed)
        jitters = {i: rng.uniform(0, f.start_jitter) for i, f in enumerate(spec.faults)}
        faults: list = []
        schedule = FaultSchedule(ctx)
        fault_context = FaultContext(ctx.stack, ctx.arm, ctx.history, say=ctx.say, seed=spec.seed)
        stop_producing = threading.Event()
        interrupted = False
        turn = self.gate.start(ctx.say) if self.gate is not None else None
        try:
            ctx.arm.create_topic()
            ctx.arm.start_job()
            if spec.warm_up and not warm_up(ctx):
                return
            if turn is not None:
                turn.steady(ctx.phases.steady)
            start_ms = int(time.time() * 1000) + 500
            events = planned_events(segments(spec, jitters, ctx.fault_indices, ctx.phases.total), start_ms)
            ctx.say(f"events planned over {ctx.phases.total:.0f} s, produced as they fall due")
            producer = threading.Thread(target=produce, args=(ctx, stop_producing, events, start_ms),
                                        name="producer", daemon=True)
            with ctx.sampler_for() as sampler:
                ctx.sampler = sampler
                producer.start()
                t0 = time.monotonic()
                faults = [(i, build(spec.faults[i], fault_context)) for i in ctx.fault_indices]
                schedule.start(t0, faults, jitters)
                clock = PhaseClock(ctx, schedule, self.remaining_after_s)
                clock.run(t0)
                if clock.ended_early or clock.recovered_early or clock.exited_as_expected or schedule.saved_s > 0:
                    stop_producing.set()  # the rest of the planned workload would only be waited for
                producer.join(timeout=300)
                arm, subject = spec.arm(ctx.profile), next((a for a in spec.arms if a.profile == "hardened"), None)
                if not clock.ended_early and drain_judged(arm, subject):
                    ctx.arm.drain()
                elif not clock.ended_early:
                    ctx.say("not drained: no check reads this control's output (it runs faults of its own, and "
                            "its targets read none)")
            ctx.record_own_exit()  # ended by itself in the drain: recorded as such, not as the arm's stop
            ctx.arm.stop_job()
            ctx.record_own_exit()  # ended by itself just before the stop reached it: its own exit too
            if ctx.arm.job is None or ctx.arm.job is not ctx.own_exit_recorded:
                # `stop`: the harness's own stop, never an exit the exits check judges (chaos/checks/deployment.py)
                ctx.history.job("exited", "job-driver", code=ctx.arm.job.returncode if ctx.arm.job else None,
                                stop="at the arm's end")
        except InfraError as exc:
            ctx.history.error(str(exc))
            ctx.say(f"environment error: {exc}")
        except KeyboardInterrupt:
            # cut short: whatever the checks measure of this arm, its verdict is INTERRUPTED (chaos/checks/arm.py)
            ctx.history.interrupted("the run was interrupted (Ctrl-C or SIGTERM) while this arm ran")
            interrupted = True
            raise
        finally:
            if turn is not None:
                turn.release()
            try:
                with signals_deferred():  # a second Ctrl-C must not skip the heals
                    clean_up(ctx, faults, schedule, stop_producing, interrupted)
                if not interrupted:  # judging takes as long as the arm is large: an interrupt leaves it to check
                    judge_stored(ctx)
            finally:
                ctx.history.close()


# -- a whole run -------------------------------------------------------------------------------------------------
def experiment_dirs(specs: list[ExperimentSpec], repeat: int) -> list[tuple[str, ExperimentSpec]]:
    """(directory name, spec) in run order; repeats of a suite are <name>.r1, <name>.r2, ... (checkers compare
    their verdicts and report differences as flaky)."""
    if repeat <= 1:
        return [(spec.name, spec) for spec in specs]
    return [(f"{spec.name}.r{n}", spec) for n in range(1, repeat + 1) for spec in specs]


def run_experiments(specs: list[ExperimentSpec], run_dir: Path, name: str, backend: str = "local",
                    arms: list[str] | None = None, argv: list[str] | None = None,
                    say: Callable[[str], None] = print, repeat: int = 1, lanes: int = 1,
                    target: Target | None = None) -> dict:
    """Run every experiment's arms on one stack (or, with lanes > 1, on one stack per lane side by side: see
    chaos/lanes/launch.py; or on `target`, an environment the suite did not start: one lane); judge; write run.json and
    results.json. Returns results.

    On KeyboardInterrupt (Ctrl-C, SIGTERM) every fault is healed and every process stopped by the `finally`
    blocks on the way out; the run is marked interrupted and its verdicts (INTERRUPTED) written before the interrupt
    goes on, within seconds: the oracle's judging of the cut arm's outputs and the report are left to
    `chaos check RUN_DIR` (chaos/rejudge.py)."""
    planned = experiment_dirs(specs, repeat)
    lanes = 1 if target is not None else max(1, min(lanes, len(planned)))
    if target is not None:
        backend = f"target:{target.name}"
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
            from .lanes.launch import run_lanes

            status = run_lanes(run_dir, planned, lanes, backend, arms, say,
                               seconds=lambda spec: sum(planned_seconds(spec, arms)))
        else:
            run_planned(run_dir, planned, backend, arms, say, target=target)
            status = "completed"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        run.ended, run.status = now(), status
        store.write_run(run)
        results = rejudge(run_dir, say, interrupted=status == "interrupted")
    return results


def planned_seconds(spec: ExperimentSpec, arms: list[str] | None) -> list[float]:
    """Planned seconds of each arm of `spec` that runs (phases and the per-arm overhead)."""
    return [spec.phases_of(arm.profile).total + ARM_OVERHEAD_S for arm in spec.arms
            if not arms or arm.profile in arms]


def run_planned(run_dir: Path, planned: list[tuple[str, ExperimentSpec]], backend: str, arms: list[str] | None,
                say: Callable[[str], None], lane: str | None = None, target: Target | None = None) -> None:
    """The arms of `planned` (their spec.json already written), one after another: the experiments of one topology
    share a stack; each topology gets its own, the one-node stack first (the others' files and logs go under
    stack/<topology>/ and logs/<topology>/, or stack/<lane>-<topology>/ in a lane). On a `target` every experiment
    runs on it, and an arm whose faults cannot act there is SKIPPED (chaos/target/gate.py)."""
    if target is not None:
        _run_on_target(run_dir, planned, target, arms, say)
        return
    by_topology: dict[str, list[tuple[str, ExperimentSpec]]] = {"single": []}  # the one-node stack first
    for directory, spec in planned:
        by_topology.setdefault(spec.topology, []).append((directory, spec))
    planned = [entry for group in by_topology.values() for entry in group]
    # planned seconds of every arm still to run, for the progress lines' "time left"
    remaining = [seconds for _directory, spec in planned for seconds in planned_seconds(spec, arms)]
    gate = _lane_gate(run_dir) if lane else None

    left_after = _countdown(remaining, lambda: 0.0)
    for topology, group in by_topology.items():
        if not group:
            continue
        where = lane if topology == "single" else "-".join(part for part in (lane, topology) if part)
        with Stack(run_dir, backend=backend, progress=say, lane=where, topology=topology) as stack:
            for directory, spec in group:
                _run_arms(stack, run_dir, directory, spec, arms, say, left_after, gate)


def _lane_gate(run_dir: Path) -> LaneGate | None:
    """The turns this lane takes with the run's other lanes (chaos/lanes/gate.py), None when CHAOS_LANE_GATE=off."""
    span = span_from_env()
    return LaneGate(run_dir / "stack" / "gate", span=span) if span != "off" else None


def _countdown(arm_seconds: list[float], later: Callable[[], float]) -> Callable[[], float]:
    """For the progress lines: called once per arm as it starts, the planned seconds of the arms after it in
    `arm_seconds` (consumed), plus `later()`."""
    def left_after() -> float:
        arm_seconds.pop(0)
        return sum(arm_seconds) + later()
    return left_after


def _run_arms(stack: StackLike, run_dir: Path, directory: str, spec: ExperimentSpec, arms: list[str] | None,
              say: Callable[[str], None], left_after: Callable[[], float], gate: LaneGate | None) -> None:
    """The chosen arms of one experiment, one after another on `stack`. `left_after()` is called once per arm, as
    it starts: the planned seconds left after it, for the progress lines."""
    from .target.gate import preload_missing, stack_skip_reason

    for arm in spec.arms:
        if arms and arm.profile not in arms:
            continue
        chosen = arm.faults if arm.faults is not None else range(len(spec.faults))
        reason = (preload_missing(stack.info.preloaded, spec, chosen, f"the {stack.info.backend} backend's stack")
                  or stack_skip_reason(stack.info.proxies, spec, chosen))
        if reason is not None:
            left_after()
            _skip(run_dir / directory / arm.profile, f"{directory}: {arm.profile}", reason, say)
            continue
        say(f"== {directory}: {arm.profile} arm ==")
        stack.reset()
        ArmRun(stack, spec, arm.profile, run_dir / directory / arm.profile, say,
               remaining_after_s=left_after(), gate=gate).run()


def run_queued(run_dir: Path, queue_dir: Path, backend: str, arms: list[str] | None, say: Callable[[str], None],
               lane: str) -> None:
    """One lane's share of a `--lanes` run's one-node experiments, taken from the shared queue as the lane gets
    free (chaos/lanes/queue.py), all on the lane's one stack. The stack starts only once there is work for it."""
    from .lanes.queue import LaneQueue
    from .spec import load_stored

    queue = LaneQueue(queue_dir)
    gate = _lane_gate(run_dir)
    directory = queue.claim(say)
    if directory is None:
        return
    try:
        with Stack(run_dir, backend=backend, progress=say, lane=lane, topology="single") as stack:
            while directory is not None:
                spec = load_stored(run_dir / directory / "spec.json")
                left_after = _countdown(planned_seconds(spec, arms), queue.unclaimed_s)
                _run_arms(stack, run_dir, directory, spec, arms, say, left_after, gate)
                directory = queue.claim(say)
    finally:
        queue.done()


def _run_on_target(run_dir: Path, planned: list[tuple[str, ExperimentSpec]], target: Target,
                   arms: list[str] | None, say: Callable[[str], None]) -> None:
    from .target.gate import skip_reason
    from .target.stack import TargetStack

    remaining = [seconds for _directory, spec in planned for seconds in planned_seconds(spec, arms)]
    with TargetStack(run_dir, target, progress=say) as stack:
        for directory, spec in planned:
            for arm in spec.arms:
                if arms and arm.profile not in arms:
                    continue
                remaining.pop(0)
                arm_dir = run_dir / directory / arm.profile
                chosen = arm.faults if arm.faults is not None else range(len(spec.faults))
                reason = skip_reason(target, stack.info.brokers, stack.s3proxy is not None, spec, chosen)
                if reason is not None:
                    _skip(arm_dir, f"{directory}: {arm.profile}", reason, say)
                    continue
                say(f"== {directory}: {arm.profile} arm (target {target.name}) ==")
                stack.reset()
                ArmRun(stack, spec, arm.profile, arm_dir, say, remaining_after_s=sum(remaining)).run()


def _skip(arm_dir: Path, arm: str, reason: str, say: Callable[[str], None]) -> None:
    """An arm that cannot act where it would run: SKIPPED with the reason in its history, nothing of it started."""
    from .history import HistoryWriter

    say(f"== {arm} arm SKIPPED: {reason} ==")
    arm_dir.mkdir(parents=True, exist_ok=True)
    history = HistoryWriter(arm_dir / "history.jsonl")
    try:
        history.skipped(reason)
    finally:
        history.close()


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

