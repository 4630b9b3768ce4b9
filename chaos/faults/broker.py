"""Broker faults that need no process to die: partition leadership moved to another in-sync replica while the job
reads and the workload writes (a controller's rebalance, an operator's reassignment, a rack drained); the topic's
retention passing the offsets a job that is down has committed."""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from infra.errors import InfraError
from infra.kafka_admin import compiled, move_leaders

from .base import BaseFault, FaultError, FaultKind, Needs, Param, params
from .process import validate_repeats

if TYPE_CHECKING:
    from ..spec.model import Fault


class RetentionPassed(BaseFault):
    """The job is down (stopped) for the fault's window, longer than its topic keeps records: at the heal every
    record of the topic is deleted (the brokers' DeleteRecords up to each partition's high watermark, what retention
    does to expired segments), then the job is started again. The offsets its checkpoint committed are gone; Spark's
    Kafka source (failOnDataLoss, its default) fails every start the same way, and no checkpoint repair brings the
    records back."""

    def inject(self) -> None:
        self.stop_job("stopped: down past its topic's retention")

    def heal(self) -> None:
        if self.stopped_jobs:
            self.ctx.history.job("records_deleted", "broker", **self._delete_records())
        self.bring_back()

    def _delete_records(self) -> dict[str, object]:
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import AdminClient

        topic = self.ctx.arm.state.topic
        admin = AdminClient({"bootstrap.servers": self.ctx.stack.info.kafka_internal_bootstrap, "log_level": 0})
        found = admin.list_topics(topic, timeout=10).topics.get(topic)
        if found is None or found.error is not None:
            raise FaultError(f"cannot read the partitions of topic {topic}: {found.error if found else 'missing'}")
        # OFFSET_END: up to each partition's high watermark, everything produced so far
        wanted = [TopicPartition(topic, partition, -1) for partition in sorted(found.partitions)]
        deleted: dict[str, int] = {}
        for partition, future in admin.delete_records(wanted, request_timeout=30).items():
            try:
                deleted[str(partition.partition)] = future.result(60).low_watermark  # the partition's new start
            except Exception as exc:
                raise FaultError(f"deleting the records of {topic} [{partition.partition}] failed: {exc}") from None
        return {"topic": topic, "log_start": deleted}


class LeaderMove(BaseFault):
    """`count` moves, `interval` apart (default: spread over the fault), or one per lifecycle event (`on:`). Each
    moves every partition of the job's topic to its next in-sync replica; the lines of what moved are recorded."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: None, name="leader-move", daemon=True)
        try:
            compiled()  # before the arm runs: a first move must not wait for javac while the job's request is held
        except InfraError as exc:
            raise FaultError(str(exc)) from None

    @property
    def firings(self) -> int:
        return self.params["count"]

    def _move(self) -> None:
        if len(self.ctx.stack.info.brokers) < 2:
            raise FaultError("a leader move needs a cluster: this stack has one broker (topology: cluster)")
        try:
            moved = move_leaders(self.ctx.stack.info.kafka_internal_bootstrap, self.ctx.arm.state.topic)
        except InfraError as exc:
            raise FaultError(str(exc)) from None
        self.ctx.history.job("leaders_moved", "broker", moved=moved)

    def fire(self) -> None:
        if not self.injected:
            self._record("injecting")
            self.injected = True
            self._record("injected")
        self._move()

    def inject(self) -> None:
        count = self.params["count"]
        interval = self.params.get("interval") or self.fault.duration / count
        self._move()  # the first at once, so an error is the inject's
        self._thread = threading.Thread(target=self._more, args=(count - 1, interval), name="leader-move",
                                        daemon=True)
        self._thread.start()

    def _more(self, count: int, interval: float) -> None:
        try:
            for _ in range(count):
                if self._stop.wait(interval):
                    return
                self._move()
        except InfraError as exc:
            self.ctx.history.error(f"leader move: {exc}")

    def heal(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(60)


def _validate_move(fault: Fault, path: tuple[str, ...]) -> None:
    validate_repeats(fault, path, "move")


KINDS = (
    FaultKind("broker.retention_passed", "the job is down for the fault's window; at the heal every record of its "
              "topic is deleted (as retention removes expired segments), then the job starts again on offsets the "
              "topic no longer holds", ("broker",), implementation=RetentionPassed, restarts_processes=True),
    FaultKind("broker.leader_move", "every partition of the job's topic gets a new leader (its next in-sync replica) "
              "`count` times, `interval` apart; no broker stops (topology: cluster)", ("broker",), params(
                  count=Param("int", "number of moves", default=1, minimum=1, maximum=100),
                  interval=Param("duration", "time between moves (default: duration / count)", minimum=0.001,
                                 scaled=True),
              ), implementation=LeaderMove, validate=_validate_move, triggerable=True, instant=True, momentary=True,
              min_brokers=2, needs=Needs(code=("infra/kafka_admin.py", "infra/kafka_admin/*"))),
)
