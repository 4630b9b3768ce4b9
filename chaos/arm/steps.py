"""The steps of one arm run (chaos/run.py ArmRun puts them in order), each with the state it owns stated:

  ArmContext       what every step shares: the stack, the spec, the job (JobArm: ctx.arm), the history, the log scanner,
                   the lifecycle watch; and the three things steps tell each other: events acknowledged (the producer),
                   the last driver start (the job's start hook) and the sampler (while it runs)
  warm_up          drain-key events until the job's first batch is done and a later one is fast
  produce          the planned workload, counting acknowledgements into the context
  (then the faults and the phases while the workload runs: FaultSchedule and PhaseClock, in chaos/arm/schedule.py)
  clean_up         every fault healed again, every process stopped, the job's outputs stored (store_outputs)
  judge_stored     the outputs judged (oracle.json) and the checkpoint's state files read, unless interrupted
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from infra.errors import InfraError
from infra.stack import StackLike
from job.settings import FACTORIES

from ..checks.logs import control_signatures
from ..faults.base import job_line
from ..faults.registry import FAULTS
from ..history import HistoryWriter
from ..outputs import read_progress
from ..spec import ExperimentSpec
from ..store import JUDGE_LATER_FILE, write_json, write_lineage, write_oracle, write_sessions
from ..triggers import EVENTS
from ..workload import Event
from .job import DRAIN_KEY, ArmConfig, JobArm
from .lifecycle import LifecycleWatch
from .sampler import LogScanner, Sampler

if TYPE_CHECKING:  # chaos/arm/schedule.py imports this module: the schedule runs on an ArmContext
    from .schedule import FaultSchedule

WARMUP_TIMEOUT_S = 240.0
# An interrupted run stops its job with this grace before SIGKILL (10 s otherwise): the run must be gone within 15 s
# of the signal, and an interrupted arm is judged INTERRUPTED whatever its job's last batch did.
INTERRUPTED_GRACE_S = 2.0
WARM_FAST_WAIT_S = 45.0  # after the first batch, how long the warm-up waits for a fast one (chaos.arm.steps.warm_up)
# Batches after the first that show the job warm whatever they took: on two busy cores a warm job's batches take
# 1.6-4.5 s (a smoke of 2026-11-28: the first 11-38 s, the next three within 1.3x of the steady ones after them), so
# waiting for one under the bound spent 30-45 s per arm on a dip that may never come.
WARM_SETTLED_BATCHES = 3
ARM_OVERHEAD_S = 35.0  # job start and warm-up (~21-27 s with class-data archives), drain, stop, outputs


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
        # the shims this arm's faults need in its driver (clock.jump's), from its first start
        self.arm.preload(shim for index in self.fault_indices
                         for shim in FAULTS[spec.faults[index].fault].needs.driver_shims)
        settings = spec.apply_settings(profile, FACTORIES[profile]("t", "d", "p"))
        # Events this arm's job can make: no lease renewals without a lease, no manifests without verification.
        self.events_possible = {name for name, event in EVENTS.items()
                                if not event.hardened_only
                                or (settings.lease if name == "lease_renewed" else settings.verify_state)}
        self.watch = LifecycleWatch(stack.s3proxy, self.arm.state.deployment, checkpoint_lister=self._checkpoint_keys,
                                    progress_path=self.arm.progress_path)
        self.acked = 0  # events the broker acknowledged so far (produce)
        self.last_start: float | None = None  # monotonic time of the latest driver start (a disruption, like a heal)
        self.sampler: Sampler | None = None  # while it samples
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
def is_warm(batches: list[dict], warm_batch_ms: int, settled: int = WARM_SETTLED_BATCHES) -> bool:
    """A batch after the first (StreamingQueryProgress dicts, in order) took at most warm_batch_ms, or `settled`
    batches after the first have completed (the start-up's cost is the first batch's: the later ones are the
    job's steady pace on this machine, fast or not)."""
    durations = [b.get("durationMs", {}).get("triggerExecution") for b in batches[1:]]
    completed = [d for d in durations if isinstance(d, int)]
    return len(completed) >= settled or any(d <= warm_batch_ms for d in completed)


def warm_up(ctx: ArmContext) -> bool:
    """Drain-key events until the job has finished one batch and then one fast one; False (recorded) if it never
    finishes a batch.

    The first batches of a new job are slow whatever they carry (measured on a fresh cluster stack: 7.7 s, then 3.1 s
    for 3 rows and 4.7 s for 463, where a warm job takes well under a second): class loading, the state stores'
    first loads and uploads. A steady phase that began after the first batch judged those, not the job's steady
    state, and failed `progress` before any fault. So the warm-up goes on until a batch takes at most
    `warm_batch_ms` (twice the trigger, at least 2 s) or WARM_SETTLED_BATCHES batches after the first are done,
    for at most WARM_FAST_WAIT_S more; past that the steady phase starts anyway, and the warm-up says how long the
    last batch took."""
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


# -- clean-up ----------------------------------------------------------------------------------------------------
def clean_up(ctx: ArmContext, faults: list, schedule: FaultSchedule, stop_producing: threading.Event,
             interrupted: bool = False) -> None:
    """Whatever happened: the producer stopped, every fault healed again, the proxies reset, every job process
    stopped; the logs scanned a last time, the job's outputs stored unjudged (store_outputs). Run with signals held
    (chaos/run.py): none of it may be skipped, and none of it waits on the arm's size but the reading of the job's
    output. `interrupted` (Ctrl-C, SIGTERM): the run must end within seconds, so the job gets a short grace."""
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
            process.stop(grace=INTERRUPTED_GRACE_S if interrupted else 10)
    ctx.logs.scan()
    ctx.logs.tally()
    store_outputs(ctx)


def store_outputs(ctx: ArmContext) -> None:
    """sessions.jsonl with judge-later.json (what judging needs from the stack that is about to go: chaos/rejudge.py
    judge_left), and lineage.json from the checkpoint's listing; a failure is an `error` record, never a crash."""
    try:
        write_sessions(ctx.dir, ctx.arm.iter_sessions())
        write_json(ctx.dir / JUDGE_LATER_FILE, {"drained": ctx.arm.state.drained, "topic_audit": (
            "not read back: the run was interrupted, and the topic went with its stack")})
    except Exception as exc:
        ctx.history.error(f"reading the job's output failed: {type(exc).__name__}: {exc}")
    _write_lineage(ctx, read_state=False)


def judge_stored(ctx: ArmContext) -> None:
    """oracle.json (the topic read back, the oracle) and lineage.json with the state files a restart loads read:
    after clean_up, with signals let through, since they take as long as the arm is large (a minute for millions of
    events, a download of the whole state). An interrupt here leaves judge-later.json, and `chaos check` judges."""
    try:
        # Judged even without a complete drain: sessions the job never emitted are lost, and say so.
        summary = ctx.arm.judge()
        write_oracle(ctx.dir, {**summary["oracle"], "drained": ctx.arm.state.drained})
        (ctx.dir / JUDGE_LATER_FILE).unlink(missing_ok=True)
    except Exception as exc:
        ctx.history.error(f"reading the job's output failed: {type(exc).__name__}: {exc}")
    _write_lineage(ctx, read_state=True)
    measure_s3_read(ctx)
    free_checkpoint(ctx)


def measure_s3_read(ctx: ArmContext) -> None:
    """A `measure` record of this stack's S3 read throughput on the job's path, read from the arm's own checkpoint
    (chaos/restore_floor.py), when its SST objects hold more than MEASURE_ABOVE_BYTES: the floor a report puts beside
    a recovery. Taken after judging, with every fault healed; a failure is said, never raised."""
    from ..restore_floor import MEASURE_ABOVE_BYTES, READ_BYTES, read_throughput

    try:
        listing = ctx.stack.s3_client(direct=True).list_objects(
            ctx.stack.info.bucket, prefix=ctx.arm.checkpoint_prefix + "/", recursive=True)
        if sum(o.size or 0 for o in listing if o.object_name.endswith(".sst")) <= MEASURE_ABOVE_BYTES:
            return
        read, seconds = read_throughput(ctx.stack, ctx.arm.checkpoint_prefix, READ_BYTES)
        rate = read / seconds if seconds > 0 else None
        ctx.history.measure("s3_read", bytes=read, seconds=round(seconds, 3),
                            bytes_per_s=None if rate is None else round(rate))
        ctx.say(f"S3 read through the proxy: {read / 2**20:.0f} MiB in {seconds:.1f} s"
                + (f" ({rate / 2**20:.0f} MiB/s): the restore floor's rate" if rate else ""))
    except Exception as exc:
        ctx.say(f"the S3 read throughput could not be measured: {type(exc).__name__}: {exc}")


# A checkpoint this large goes once its arm is judged: the scale suite's arms leave 4-15 GiB each in MinIO, and eight
# of them on one stack would not fit this machine's disk. Smaller ones stay with the stack for whoever looks.
FREE_CHECKPOINT_ABOVE_BYTES = 1 << 30


def free_checkpoint(ctx: ArmContext) -> None:
    """Remove the arm's checkpoint from S3 when it holds more than FREE_CHECKPOINT_ABOVE_BYTES; judging (the oracle,
    lineage.json) has read what it needs. A failure is said, never raised: the verdict does not depend on it."""
    try:
        from minio.deleteobjects import DeleteObject

        client, bucket = ctx.stack.s3_client(direct=True), ctx.stack.info.bucket
        objects = list(client.list_objects(bucket, prefix=ctx.arm.checkpoint_prefix + "/", recursive=True))
        total = sum(obj.size or 0 for obj in objects)
        if total <= FREE_CHECKPOINT_ABOVE_BYTES:
            return
        failed = list(client.remove_objects(bucket, (DeleteObject(obj.object_name) for obj in objects)))
        ctx.say(f"its checkpoint of {total / 2**30:.2f} GiB ({len(objects)} objects) removed from S3 after judging"
                + (f"; {len(failed)} could not be removed" if failed else ""))
    except Exception as exc:
        ctx.say(f"its checkpoint could not be removed from S3 after judging: {type(exc).__name__}: {exc}")


def _write_lineage(ctx: ArmContext, read_state: bool) -> None:
    try:
        from infra.state_files import read_state_files

        from .. import checkpoint_tools

        reader = read_state_files if read_state else None
        lineage = checkpoint_tools.lineage(ctx.stack.s3_client(direct=True), ctx.stack.info.bucket,
                                           ctx.arm.checkpoint_prefix, read_state=reader)
        write_lineage(ctx.dir, lineage)
    except Exception as exc:
        ctx.history.error(f"listing the checkpoint failed: {type(exc).__name__}: {exc}")
