"""Checkpoint faults: a second deployment of the job on the same checkpoint, or a checkpoint file damaged while the
job is down. The damage is chosen and done by the harness's own reading of a checkpoint (chaos/checkpoint_damage.py
over chaos/checkpoint_tools.py),
never by the job's code: a fault must not land only where the job's hardening looks."""
from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import checkpoint_damage
from ..outputs import read_progress
from ..spec.fields import EPSILON, Invalid, fmt_seconds
from .base import (
    JOB_EXIT_LEASE_LOST,
    JOB_EXIT_REFUSED,
    BaseFault,
    FaultError,
    FaultKind,
    Needs,
    Param,
    job_line,
    params,
)

if TYPE_CHECKING:
    from ..spec.model import Fault


class SecondDeployment(BaseFault):
    """Another deployment of the job on the same checkpoint. simultaneous: the first is restarted at the
    moment the second starts (two deployments rolled out at once); staggered: the first keeps running and the
    second starts `stagger` into the fault (a second deployment started later by mistake).

    `pause_first_after`: a second deployment still running that long after its start was not refused, and the
    first deployment's driver is then paused (SIGSTOP) until the second has completed a batch on the checkpoint
    (or ended, or the fault heals), then continued. Spark lets whichever query writes a log entry first go on and
    fails the other at its next one (CONCURRENT_STREAM_LOG_UPDATE); left alone, the running deployment wins that
    race against one still starting, so the second is the one Spark stops. Paused, the first wakes up behind a
    deployment that took its checkpoint over (as after a long GC pause or a frozen host), and is the one stopped.
    A second deployment refused before then (a lease) pauses nothing.

    `restart_first: taken_over`: a first deployment that stopped because the second took its lease over (exit 6: the
    second started while the first was paused past its lease's TTL, by another fault) is started again at the heal,
    once the second is stopped and its lease has run out, as the platform restarts the deployment of record once the
    one started by mistake is removed. The takeover is this fault's doing, so its exit is brought back like a stop of
    this fault's own; any other exit of the first stays down (and is judged)."""

    POLL_S = 0.5
    LEASE_WAIT_S = 90.0  # the longest a lease is waited for to run out before the first is started anyway
    LEASE_MARGIN_S = 2.0  # past the TTL: Last-Modified has whole seconds, and the job's store clock adds one

    def inject(self) -> None:
        arm, history = self.ctx.arm, self.ctx.history
        if self.params["mode"] == "simultaneous" and self.stop_job("stopped for a second deployment"):
            first = arm.start_job()
            history.job("restarted", "job-driver", pid=first.pid)
        elif self.stop.wait(self.params.get("stagger") or 10.0):
            return  # the arm ended during the stagger
        self.second = arm.start_second_deployment()
        history.job("started", "second-deployment", pid=self.second.pid,
                    log=str(self.second.log_path.relative_to(self.ctx.stack.run_dir)))
        self._watch = threading.Thread(target=self._watch_second, name="second-deployment", daemon=True)
        self._watch.start()
        if self.params.get("pause_first_after") is not None:
            self._resume = threading.Event()
            self._pauser = threading.Thread(target=self._pause_first, name="pause-first", daemon=True)
            self._pauser.start()

    def _watch_second(self) -> None:
        code = self.second.wait(None)
        if code == JOB_EXIT_REFUSED:
            self.ctx.history.job("refused", "second-deployment", code=code, reason=job_line(self.second.log_path))
        else:
            self.ctx.history.job("exited", "second-deployment", code=code)

    def _pause_first(self) -> None:
        second, history = self.second, self.ctx.history
        if second.wait(self.params["pause_first_after"]) is not None or self.stop.is_set() or self._resume.is_set():
            return  # refused (or ended) in time: it took nothing over
        first = self.ctx.arm.job
        if first is None or not first.alive():
            return  # the first ended before (Spark stopped it in an earlier window): nothing to pause
        progress = self.ctx.arm.second_progress_path
        seen = _batches(progress)
        first.signal(signal.SIGSTOP)
        try:  # whatever happens here, the first is continued
            history.job("paused", "job-driver", pid=first.pid, cause="the second deployment was not refused")
            while second.alive() and _batches(progress) <= seen:
                if self._resume.wait(self.POLL_S) or self.stop.is_set():
                    break
        finally:
            first.signal(signal.SIGCONT)
            history.job("continued", "job-driver", pid=first.pid,
                        cause=f"the second deployment completed {_batches(progress) - seen} batch(es)")

    @property
    def spent(self) -> bool:
        second = getattr(self, "second", None)
        return second is not None and not second.alive()  # refused (or failed) and gone

    def heal(self) -> None:
        pauser = getattr(self, "_pauser", None)
        if pauser is not None:  # the first deployment is continued before the second stops
            self._resume.set()
            pauser.join()
        second = getattr(self, "second", None)
        if second is not None and second.alive():
            second.signal_leader(signal.SIGTERM)  # a graceful stop first: the driver stops its query and Spark
            if second.wait(20) is None:
                second.stop(grace=10)
        if self.params.get("restart_first") == "taken_over" and self._taken_over():
            self._wait_for_lease_expiry()
            first = self.ctx.arm.start_job()
            self.ctx.history.job("restarted", "job-driver", pid=first.pid,
                                 cause="its lease was taken over by the second deployment, now stopped")
            return
        self.bring_back()

    def _taken_over(self) -> bool:
        """The first deployment ended by itself on losing its lease (exit 6) while this fault's second ran."""
        first = self.ctx.arm.job
        if first is None or first.alive() or first.signalled_to_end or first.returncode != JOB_EXIT_LEASE_LOST:
            return False
        self.ctx.arm.record_own_exit()  # its exit stays in the history (and is judged); the deployment comes back
        return getattr(self, "second", None) is not None

    def _wait_for_lease_expiry(self) -> None:
        """Until the lease object's last write is older than its TTL and a margin: a deployment started before would
        be refused while the stopped second's lease still counts."""
        s3, bucket = self.ctx.stack.s3_client(direct=True), self.ctx.stack.info.bucket
        key = f"{self.ctx.arm.checkpoint_prefix}/_lease"
        deadline = time.monotonic() + self.LEASE_WAIT_S
        while time.monotonic() < deadline:
            try:
                stat = s3.stat_object(bucket, key)
                response = s3.get_object(bucket, key)
                try:
                    ttl_s = json.loads(response.read()).get("ttl_ms", 15_000) / 1000
                finally:
                    response.close()
                    response.release_conn()
            except Exception:  # no lease, or MinIO not answering: nothing to wait for that can be known
                return
            if (datetime.now(UTC) - stat.last_modified).total_seconds() > ttl_s + self.LEASE_MARGIN_S:
                return
            time.sleep(self.POLL_S)
        self.ctx.history.error(f"the lease on {key} did not run out within {self.LEASE_WAIT_S:.0f} s of the second "
                               "deployment's stop; the first is started anyway")


def _batches(progress: Path) -> int:
    """Batches the second deployments completed so far (each progress line is written after the batch's commit)."""
    return sum(1 for record in read_progress(progress) if record.get("event") == "progress")


def _validate_second_deployment(fault: Fault, path: tuple[str, ...]) -> None:
    p: Mapping[str, Any] = fault.params
    ppath = path + ("params",)
    if p["mode"] == "simultaneous" and p["stagger"] is not None:
        raise Invalid(ppath + ("stagger",), "only applies to mode staggered", "no stagger with simultaneous")
    if p["mode"] == "staggered":
        if p["stagger"] is None:
            raise Invalid(ppath + ("stagger",), "missing", "a duration: how long after the first deployment "
                          "restarts the second one starts")
        if p["stagger"] >= fault.duration - EPSILON:
            raise Invalid(ppath + ("stagger",), f"{fmt_seconds(p['stagger'])} is not shorter than the fault "
                          f"({fmt_seconds(fault.duration)}; stagger is not scaled)", "stagger < duration")
    after = p.get("pause_first_after")
    if after is not None and (p["stagger"] or 0.0) + after >= fault.duration - EPSILON:
        start = f"stagger {fmt_seconds(p['stagger'])} + " if p["stagger"] else ""
        raise Invalid(ppath + ("pause_first_after",), f"{start}{fmt_seconds(after)} is not shorter than the fault "
                      f"({fmt_seconds(fault.duration)}; neither is scaled): the first would never be paused",
                      "stagger + pause_first_after < duration")


class CorruptCheckpoint(BaseFault):
    """Stop the job, damage state files in MinIO (one per method), start the job again on the damaged checkpoint.

    A snapshot exists only every few versions: the inject first waits (up to WAIT_S) for a file of the kind to
    damage, so the fault does not depend on how many batches the job happened to run before it."""

    WAIT_S = 90.0
    damaged: dict | None = None  # what was damaged in place (while_job: running)
    kills_sender = True  # on a trigger the job is killed at the event (a crash), not stopped
    held_after_firing = False  # the job restarts on the damage at once: nothing stays in place to heal

    def fire(self) -> None:
        self._record("injecting")
        self.injected = True
        job = self.ctx.arm.job
        if job is None:
            raise FaultError("checkpoint.corrupt fired with no job running to kill")
        if self.ended_by_itself(job):
            return  # nothing to kill: the job failed first, and stays down
        job.signal(signal.SIGKILL)
        self.stopped_jobs.append(job)
        job.wait(30)
        self.ctx.history.job("exited", "job-driver", cause="killed at a lifecycle event to corrupt its checkpoint")

    def after_fire(self) -> None:
        if self.stopped_jobs:
            self._damage_and_restart()
        self._record("injected")

    def _damage_and_restart(self) -> None:
        """Damage the (stopped or killed) job's checkpoint, then start the job on it whatever happened: it is the
        driver this fault stopped that comes back."""
        arm = self.ctx.arm
        try:
            damaged = self._damage()
        finally:
            new = arm.start_job()
        self.ctx.say(f"corrupted {damaged['file']} ({damaged['method']})")
        self.ctx.history.job("restarted", "job-driver", pid=new.pid, corrupted=damaged)

    def inject(self) -> None:
        arm, p = self.ctx.arm, self.params
        s3, bucket = self.ctx.stack.s3_client(direct=True), self.ctx.stack.info.bucket
        deadline = time.monotonic() + self.WAIT_S
        count = 1 if isinstance(p["method"], str) else len(p["method"])
        while not checkpoint_damage.can_corrupt(s3, bucket, arm.checkpoint_prefix, p["kind"], p["version"], count):
            if arm.job is not None and not arm.job.alive() and not arm.job.signalled_to_end:
                break  # the job ended by itself while the fault waited: stop_job below records it
            if time.monotonic() > deadline:
                raise FaultError(f"checkpoint.corrupt {p['kind']}: {count} such file(s) did not appear in the "
                                 f"checkpoint within {self.WAIT_S:.0f} s")
            if self.stop.wait(2):
                return
        if p["while_job"] == "running":
            self._damage_in_place()
        elif self.stop_job("stopped to corrupt its checkpoint"):  # else it ended by itself: it stays down
            self._damage_and_restart()

    def _damage_in_place(self) -> None:
        """Damage the files while the job runs (bit rot at rest): the running job holds its state in memory and
        meets the damage only when something reloads it from S3 (an executor lost, a restart)."""
        self.damaged = self._damage()
        self.ctx.say(f"corrupted {self.damaged['file']} ({self.damaged['method']}) while the job runs")

    def _record(self, state: str) -> None:
        if self.damaged is None:
            super()._record(state)
            return
        # the damage done in place goes with the fault's record: no job record tells of it
        self.ctx.history.fault(self.fault.fault, self.fault.target, state, {**self.params, "corrupted": self.damaged})
        self.ctx.say(f"fault {self.fault.fault} on {self.fault.target}: {state}")

    def _damage(self) -> dict:
        p = self.params
        try:
            return checkpoint_damage.corrupt(self.ctx.stack.s3_client(direct=True), self.ctx.stack.info.bucket,
                                             self.ctx.arm.checkpoint_prefix, kind=p["kind"], version=p["version"],
                                             method=p["method"], seed=self.ctx.seed)
        except checkpoint_damage.NothingToCorrupt as nothing:
            raise FaultError(f"checkpoint.corrupt {p['kind']}: {nothing}") from None

    def heal(self) -> None:
        self.bring_back()


def _validate_corrupt(fault: Fault, path: tuple[str, ...]) -> None:
    p: Mapping[str, Any] = fault.params
    vpath = path + ("params", "version")
    if p["version"] != "newest" and p["kind"] in ("metadata", "sources", "state_metadata"):
        raise Invalid(vpath, f"{p['version']}: a {p['kind']} file has no version", "newest")
    if p["version"] != "newest" and p["kind"] in ("sst", "zip", "changelog") and p["version"] < 1:
        raise Invalid(vpath, f"{p['version']} is not a state version", "an integer >= 1 or newest")
    if p["while_job"] == "running" and fault.on is not None:
        raise Invalid(path + ("params", "while_job"), "running: a trigger's `on` kills the job to damage it",
                      "while_job: down with `on`, or no `on`")
    many = not isinstance(p["method"], str) and len(p["method"]) > 1
    if many and p["kind"] != "sst" and p["version"] != "newest":
        # checkpoint_damage.choose takes further files from other partitions' newest versions only
        raise Invalid(vpath, f"{p['version']} with {len(p['method'])} methods: only one "
                      f"{p['kind']} file can be damaged at a fixed version", "newest, or one method")


KINDS = (
    FaultKind("checkpoint.second_deployment", "a second deployment of the job starts on the same checkpoint",
              ("checkpoint",), params(
                  mode=Param("choice", "simultaneous: the job restarts as the second starts; staggered: the job "
                             "keeps running and the second starts `stagger` into the fault", required=True,
                             choices=("simultaneous", "staggered")),
                  stagger=Param("duration", "delay of the second start (staggered only)", minimum=0.001),
                  pause_first_after=Param("duration", "if the second is still running this long after its "
                                          "start (not refused), the first deployment's driver is paused until the "
                                          "second has completed a batch, then continued (default: never paused)",
                                          minimum=0.001),
                  restart_first=Param("choice", "taken_over: a first deployment that stopped because the second took "
                                      "its lease over (exit 6) is started again at the heal, once the second is "
                                      "stopped and its lease has run out; never: it stays down", default="never",
                                      choices=("never", "taken_over")),
              ), implementation=SecondDeployment, validate=_validate_second_deployment, restarts_processes=True,
              starts_deployment=True),
    FaultKind("checkpoint.corrupt", "a checkpoint file is damaged while the job is down (stopped, or killed at a "
              "lifecycle event with `on`); the job then restarts on it", ("checkpoint",), params(
                  kind=Param("choice", "which kind of file (any: drawn with the seed among those present)",
                             required=True, choices=("sst", "zip", "changelog", "metadata", "sources", "offsets",
                                                     "commits", "state_metadata", "any")),
                  version=Param("int", "state version (sst, zip, changelog) or batch id (offsets, commits) to "
                                "damage", default="newest", minimum=0, words=("newest",)),
                  method=Param("choice", "how; a list damages one file per method (other partitions or older "
                               "entries first)", required=True, choices=("bit_flip", "truncate", "footer",
                                                                         "zero_fill"), many=True),
                  while_job=Param("choice", "down: the job is stopped (or killed at `on`), damaged and restarted "
                                  "on it; running: the files are damaged while the job runs and nothing is "
                                  "restarted (the job meets the damage when it next loads state from S3: an "
                                  "executor lost, a restart)", default="down", choices=("down", "running")),
              ), implementation=CorruptCheckpoint, validate=_validate_corrupt, triggerable=True, instant=True,
              harmless=lambda p: p.get("while_job") == "running",
              momentary=True, restarts_processes=True,
              needs=Needs(code=("chaos/checkpoint_tools.py", "chaos/checkpoint_damage.py"))),
)
