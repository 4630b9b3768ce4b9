"""checkpoint.second_deployment's `pause_first_after` (issue 36): a second deployment that was not refused in time
pauses the first deployment's driver until it has completed a batch, then continues it; one refused in time pauses
nothing. Stand-ins for the drivers and the arm: no process is started."""
from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from types import MappingProxyType, SimpleNamespace

from chaos.faults.base import FaultContext
from chaos.faults.checkpoint import SecondDeployment
from chaos.history import HistoryWriter, read_history
from chaos.spec.model import Fault


class Driver:
    """infra.procs.ManagedProcess as the fault uses it: signals recorded, an end that wait() sees."""

    def __init__(self, pid: int, log_path: Path):
        self.pid, self.log_path = pid, log_path
        self.signals: list[int] = []
        self.signalled_to_end = False
        self.code: int | None = None
        self._ended = threading.Event()

    def alive(self) -> bool:
        return not self._ended.is_set()

    @property
    def returncode(self) -> int | None:
        return self.code

    def wait(self, timeout: float | None = None) -> int | None:
        self._ended.wait(timeout)
        return self.code

    def end(self, code: int) -> None:
        self.code = code
        self._ended.set()

    def signal(self, signum: int) -> None:
        self.signals.append(signum)

    def signal_leader(self, signum: int) -> None:
        self.signals.append(signum)
        if signum == signal.SIGTERM:
            self.signalled_to_end = True
            self.end(0)

    def stop(self, grace: float = 5.0) -> None:
        self.end(-15)


class Arm:
    """chaos.faults.base.ArmControl: the first deployment's driver, and the second one it starts."""

    def __init__(self, tmp_path: Path):
        (tmp_path / "logs").mkdir()
        self.job = Driver(1, tmp_path / "logs" / "job.log")
        self.second = Driver(2, tmp_path / "logs" / "second.log")
        self.second_progress_path = tmp_path / "progress-second.jsonl"

    def start_second_deployment(self) -> Driver:
        return self.second

    def record_own_exit(self) -> None:
        pass


def _fault(tmp_path: Path, **params) -> tuple[SecondDeployment, Arm, HistoryWriter]:
    history = HistoryWriter(tmp_path / "history.jsonl")
    arm = Arm(tmp_path)
    fault = Fault(fault="checkpoint.second_deployment", target="checkpoint", at=0.0, duration=60.0,
                  start_jitter=0.0, params=MappingProxyType({"mode": "staggered", "stagger": 0.01, **params}))
    ctx = FaultContext(stack=SimpleNamespace(run_dir=tmp_path), arm=arm, history=history,  # type: ignore[arg-type]
                       say=lambda _line: None)
    deployment = SecondDeployment(fault, ctx)
    deployment.POLL_S = 0.01
    return deployment, arm, history


def _until(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _jobs(fault: SecondDeployment, history: HistoryWriter) -> list[tuple[str, str]]:
    fault._watch.join(5)  # the second's end is recorded by its watcher
    history.close()
    return [(r["event"], r["process"]) for r in read_history(history.path) if r["type"] == "job"]


def test_a_second_deployment_not_refused_pauses_the_first_until_it_completed_a_batch(tmp_path):
    fault, arm, history = _fault(tmp_path, pause_first_after=0.05)
    # a batch of an earlier window's second deployment: not this one's
    arm.second_progress_path.write_text(json.dumps({"event": "progress", "progress": {"batchId": 3}}) + "\n")
    fault.run_inject()
    _until(lambda: arm.job.signals == [signal.SIGSTOP])
    with arm.second_progress_path.open("a") as progress:
        progress.write(json.dumps({"event": "started"}) + "\n")  # its query started: no batch yet
    time.sleep(0.1)
    assert arm.job.signals == [signal.SIGSTOP]
    with arm.second_progress_path.open("a") as progress:
        progress.write(json.dumps({"event": "progress", "progress": {"batchId": 7}}) + "\n")
    _until(lambda: arm.job.signals == [signal.SIGSTOP, signal.SIGCONT])
    fault.run_heal()
    assert arm.job.signals == [signal.SIGSTOP, signal.SIGCONT]  # continued once, and never stopped
    assert arm.second.signals == [signal.SIGTERM]
    assert _jobs(fault, history) == [("started", "second-deployment"), ("paused", "job-driver"),
                              ("continued", "job-driver"), ("exited", "second-deployment")]


def test_a_second_deployment_refused_in_time_pauses_nothing(tmp_path):
    fault, arm, history = _fault(tmp_path, pause_first_after=0.5)
    fault.run_inject()
    arm.second.end(3)  # refused: another deployment holds the lease
    fault._pauser.join(5)
    fault.run_heal()
    assert arm.job.signals == [] and arm.second.signals == []
    assert _jobs(fault, history) == [("started", "second-deployment"), ("refused", "second-deployment")]


def test_the_heal_continues_a_paused_first_before_it_stops_the_second(tmp_path):
    fault, arm, history = _fault(tmp_path, pause_first_after=0.05)
    fault.run_inject()
    _until(lambda: arm.job.signals == [signal.SIGSTOP])
    fault.run_heal()  # the second never completed a batch
    assert arm.job.signals == [signal.SIGSTOP, signal.SIGCONT]
    assert _jobs(fault, history) == [("started", "second-deployment"), ("paused", "job-driver"),
                              ("continued", "job-driver"), ("exited", "second-deployment")]


def test_without_pause_first_after_the_first_is_never_paused(tmp_path):
    fault, arm, history = _fault(tmp_path)
    fault.run_inject()
    time.sleep(0.1)
    fault.run_heal()
    assert arm.job.signals == [] and not hasattr(fault, "_pauser")


class LeaseStore:
    """The few calls of minio.Minio the lease wait makes: the lease object written `age_s` ago with `ttl_ms`."""

    def __init__(self, age_s: float, ttl_ms: int):
        from datetime import UTC, datetime, timedelta

        self.written = datetime.now(UTC) - timedelta(seconds=age_s)
        self.ttl_ms = ttl_ms
        self.keys: list[str] = []

    def stat_object(self, bucket: str, key: str) -> SimpleNamespace:
        self.keys.append(key)
        return SimpleNamespace(last_modified=self.written)

    def get_object(self, bucket: str, key: str) -> SimpleNamespace:
        body = json.dumps({"owner": "x-second", "ttl_ms": self.ttl_ms}).encode()
        return SimpleNamespace(read=lambda: body, close=lambda: None, release_conn=lambda: None)


def _restarting(tmp_path: Path, store: LeaseStore, **params) -> tuple[SecondDeployment, Arm, HistoryWriter, list]:
    fault, arm, history = _fault(tmp_path, **params)
    fault.ctx.stack = SimpleNamespace(run_dir=tmp_path, info=SimpleNamespace(bucket="chaos"),
                                      s3_client=lambda direct=False: store)
    arm.checkpoint_prefix = "dep/checkpoint"  # type: ignore[attr-defined]
    started: list[float] = []

    def start_job() -> Driver:
        started.append(time.monotonic())
        arm.job = Driver(3, tmp_path / "logs" / "job-2.log")
        return arm.job

    arm.start_job = start_job  # type: ignore[attr-defined]
    fault.LEASE_MARGIN_S = 0.3
    return fault, arm, history, started


def test_a_first_taken_over_is_started_again_once_the_second_is_stopped_and_its_lease_ran_out(tmp_path):
    store = LeaseStore(age_s=0.0, ttl_ms=200)
    fault, arm, history, started = _restarting(tmp_path, store, restart_first="taken_over")
    fault.run_inject()
    _until(lambda: hasattr(fault, "second"))
    arm.job.end(6)  # it found the second's takeover at its next lease check
    healed = time.monotonic()
    fault.run_heal()
    assert arm.second.signals == [signal.SIGTERM]  # the second is stopped first
    assert len(started) == 1 and started[0] - healed >= 0.4  # not before the lease's TTL (0.2 s) and margin (0.3 s)
    assert store.keys and set(store.keys) == {"dep/checkpoint/_lease"}
    assert _jobs(fault, history)[-2:] == [("exited", "second-deployment"), ("restarted", "job-driver")]


def test_a_first_that_ended_otherwise_stays_down(tmp_path):
    fault, arm, history, started = _restarting(tmp_path, LeaseStore(age_s=60.0, ttl_ms=200),
                                               restart_first="taken_over")
    fault.run_inject()
    _until(lambda: hasattr(fault, "second"))
    arm.job.end(1)  # Spark stopped it (a naive job on a shared checkpoint): its own failure, judged
    fault.run_heal()
    assert started == []


def test_without_restart_first_a_first_taken_over_stays_down(tmp_path):
    fault, arm, history, started = _restarting(tmp_path, LeaseStore(age_s=60.0, ttl_ms=200))
    fault.run_inject()
    _until(lambda: hasattr(fault, "second"))
    arm.job.end(6)
    fault.run_heal()
    assert started == []
