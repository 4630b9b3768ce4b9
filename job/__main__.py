"""`python -m job --profile hardened|naive|baseline --topic T --deployment D [deployment options]`: run the
sessionization job as a driver process (or under spark-submit: job/submit_main.py; docs/job.md).

Runs until SIGTERM/SIGINT (graceful stop), until --run-seconds pass, or until it gives up. Where Kafka and S3 are
comes from explicit options with environment fallbacks (job/spark.py); S3 credentials from the standard AWS
providers (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, or a profile), never from the command line. Nothing here
imports the harness: the harness passes options like any deployer (infra/driver.py).

Start-up order (hardened): take the checkpoint's lease (refused in seconds if another deployment holds it),
verify the state version to be loaded (repair or roll back if damaged; a start over only while Kafka still holds
the input it replays, asked through Spark's JVM), then start Spark and the query under the supervisor. Every outcome
that ends the job is one line on stderr starting with `job:`; exit codes:

    0  stopped on request (or after --run-seconds)
    1  the query failed and is not restarted (unsupervised, or a fatal error)
    2  bad arguments
    3  refused: another deployment owns the checkpoint
    4  failure budget exceeded (supervised restarts gave up)
    5  no retained state version verifies (every file each state partition needs), and no start over can rebuild
       one: the line names the missing or damaged part
    6  the lease was lost while running (another deployment took the checkpoint over)
    7  a failure repeats the same way on every restart, even after the checkpoint was verified and repaired
"""
from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterable
from typing import TypedDict

from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from . import sessions
from . import spark as deploy
from .clock import WallClockSteps
from .integrity import Integrity, IntegrityError
from .lease import CheckpointLease, LeaseHeld
from .objectstore import ObjectStore
from .progress import ProgressFileListener
from .repair_plan import input_gap
from .settings import Settings, add_arguments, parser, settings_from
from .sink import BatchWriter
from .supervisor import BudgetExceeded, RestartPolicy, classify, local_disk, root_cause

EXIT_BAD_ARGUMENTS = 2
EXIT_STOPPED, EXIT_FAILED, EXIT_REFUSED, EXIT_BUDGET, EXIT_INTEGRITY, EXIT_LEASE_LOST, EXIT_REPEATING = (
    0, 1, 3, 4, 5, 6, 7)


class _RunState(TypedDict):
    """What Job._supervise carries across restarts."""
    leased: bool                 # the checkpoint lease is held (acquired once)
    verify: bool                 # verify (and repair) the checkpoint before the next start
    spark: SparkSession | None   # started once, reused by every restart
    policy: RestartPolicy


def say(message: str) -> None:
    print(f"job: {message}", file=sys.stderr, flush=True)


def _configure(spark, settings: Settings) -> None:
    conf = spark.conf
    conf.set("spark.sql.streaming.minBatchesToRetain", str(settings.min_batches_to_retain))
    conf.set("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled",
             str(settings.changelog_checkpointing).lower())
    # Spark 4.3 turns it on by default: set it either way, so the switch means what it says.
    conf.set("spark.sql.streaming.stateStore.autoSnapshotRepair.enabled", str(settings.spark_snapshot_repair).lower())
    for name, value in settings.state_store_options.items():
        conf.set(f"spark.sql.streaming.stateStore.{name}", value)


def _start_query(spark, settings: Settings, deployment: deploy.Deployment, guard, record):
    reader = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", deployment.kafka_bootstrap_servers)
              .option("subscribe", settings.topic)
              .option("startingOffsets", "earliest"))
    if settings.batch_cap is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(settings.batch_cap))
    # The profile's client tuning, then the deployer's (security settings, say).
    for option, value in {**settings.kafka_options, **deployment.kafka_options}.items():
        reader = reader.option(option, value)
    return (sessions.build(sessions.parse_events(reader.load()), settings)
            .writeStream
            .foreachBatch(BatchWriter(spark, deployment.output_uri, guard=guard, on_state_committed=record))
            .option("checkpointLocation", deployment.checkpoint_uri)
            .outputMode("append")
            .trigger(processingTime=f"{settings.trigger_ms} milliseconds")
            .queryName(f"sessionize_{settings.profile}")
            .start())


def _earliest_offsets(spark, servers: str, options: dict[str, str], topics: Iterable[str]) -> dict[str, dict[str, int]]:
    """{topic: {partition: the offset it now begins at}} from the brokers, by a consumer in the driver's JVM."""
    jvm = spark.sparkContext._jvm
    properties = jvm.java.util.Properties()
    properties.setProperty("bootstrap.servers", servers)
    for option, value in options.items():
        if option.startswith("kafka."):  # the source's client options; the others are the source's own
            properties.setProperty(option[len("kafka."):], value)
    for role in ("key", "value"):
        properties.setProperty(f"{role}.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer")
    wait = jvm.java.time.Duration.ofSeconds(30)
    consumer = jvm.org.apache.kafka.clients.consumer.KafkaConsumer(properties)
    try:
        earliest: dict[str, dict[str, int]] = {}
        for topic in topics:
            partitions = jvm.java.util.ArrayList()
            for info in consumer.partitionsFor(topic, wait) or []:
                partitions.add(jvm.org.apache.kafka.common.TopicPartition(topic, info.partition()))
            begins = consumer.beginningOffsets(partitions, wait)
            earliest[topic] = {str(tp.partition()): int(begins.get(tp)) for tp in partitions}
        return earliest
    finally:
        consumer.close()


class Job:
    def __init__(self, settings: Settings, deployment: deploy.Deployment):
        self.settings = settings
        self.deployment = deployment
        self.stop_requested: list[int] = []
        self.lease_lost: list[str] = []
        self.lease: CheckpointLease | None = None
        self.integrity: Integrity | None = None
        self.checkpoint_uri = deployment.checkpoint_uri
        # Keys in the bucket of the lease and the integrity manifests (the output is in the same bucket).
        self.checkpoint_key = deploy.bucket_and_key(deployment.checkpoint_uri)[1]
        self.output_key = deploy.bucket_and_key(deployment.output_uri)[1]

    def _store(self) -> ObjectStore:
        s3 = self.deployment.s3
        return ObjectStore.from_providers(s3.host, self.deployment.bucket, secure=s3.tls, region=s3.region)

    def run(self) -> int:
        settings = self.settings
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda number, frame: self.stop_requested.append(number))
        if settings.lease or settings.verify_state:
            store = self._store()
            if settings.lease:
                self.lease = CheckpointLease(store, f"{self.checkpoint_key}/_lease", settings.deployment,
                                             self.checkpoint_uri, ttl_s=settings.lease_ttl_ms / 1000, say=say,
                                             stop_when_lost=settings.stop_on_takeover,
                                             store_clock=settings.lease_store_clock)
            if settings.verify_state:
                self.integrity = Integrity(store, self.checkpoint_key, self.output_key, say=say)
        try:
            return self._supervise()
        finally:
            if self.lease is not None:
                self.lease.stop()

    def _start(self, state: _RunState, guard):
        """One attempt to (re)start: the lease first (a refusal must come before Spark starts), then the state
        check, then Spark and the query. Raises whatever failed; LeaseHeld and IntegrityError are final."""
        settings = self.settings
        if self.lease is not None and not state["leased"]:
            self.lease.acquire()
            self.lease.start_renewing(on_lost=self.lease_lost.append)
            state["leased"] = True
        elif self.lease is not None:
            # A restart proves the lease first: after a lapse another deployment may have taken it over, and the
            # query would write its next offsets entry (and a state check repair files) before any batch's guard.
            self.lease.check()
        if self.integrity is not None and state["verify"]:
            self.integrity.verify_and_repair()
            state["verify"] = False
        record = self.integrity.record if self.integrity is not None else None
        return _start_query(self._session(state), settings, self.deployment, guard, record)

    def _session(self, state: _RunState) -> SparkSession:
        """Spark, started once and reused by every restart."""
        spark = state["spark"]
        if spark is None:
            settings = self.settings
            spark = deploy.session(deploy.session_conf(
                f"sessionize-{settings.profile}-{settings.deployment}", self.deployment.s3,
                self.deployment.spark_conf, s3a_options=settings.s3a_options, spark_options=settings.spark_options))
            spark.sparkContext.setLogLevel("WARN")
            _configure(spark, settings)
            spark.streams.addListener(ProgressFileListener(settings.progress_file,
                                                           on_progress=self._on_progress(state["policy"])))
            state["spark"] = spark
        return spark

    def _kafka_gap(self, state: _RunState, start: dict[str, dict[str, int]]) -> str | None:
        """Before a start over: why Kafka can no longer replay from batch 0's start, or None. Asked of the brokers
        with the deployment's client options, through the Kafka client Spark's Kafka source brings."""
        options = {**self.settings.kafka_options, **self.deployment.kafka_options}
        earliest = _earliest_offsets(self._session(state), self.deployment.kafka_bootstrap_servers, options, start)
        return input_gap(start, earliest)

    def _failed(self, policy: RestartPolicy, state: _RunState, kind: str, cause: str, text: str = "") -> int | None:
        """A failed attempt: an exit code, or None after backing off for a restart (which verifies the checkpoint
        first when the failure names it). `text`: the whole failure, where a local disk's error is told."""
        if kind == "fatal" or not self.settings.supervise:
            say(f"query failed: {cause}")
            return EXIT_LEASE_LOST if "LeaseLost" in cause or "lost the lease" in cause else EXIT_FAILED
        disk = self.settings.local_disk_outage and local_disk(text)
        if disk:
            kind = "local disk"  # the checkpoint is intact: nothing to verify; restarted until the disk is back
        try:
            backoff = policy.failed(cause, outage=disk)
        except BudgetExceeded as exceeded:
            say(f"stopped: {exceeded}")
            return EXIT_BUDGET
        if policy.repeating():
            if self.integrity is None or policy.repair_tried:
                checked = "after verifying the checkpoint" if policy.repair_tried else "(state verification is off)"
                say(f"stopped: the same failure {len(policy.streak)} times in a row with no batch in between, "
                    f"{checked}: a restart cannot fix it: {cause}")
                return EXIT_REPEATING
            policy.repair_tried = True
            kind = "state"
            say(f"query failed the same way {len(policy.streak)} times in a row: the checkpoint is verified before "
                f"the next start")
        state["verify"] = state["verify"] or kind == "state"
        say(f"query failed ({kind}): {cause}; restart {len(policy.failures)} of budget {policy.budget} "
            f"in {backoff:.1f} s")
        return EXIT_STOPPED if self._sleep(backoff) else None

    def _supervise(self) -> int:
        settings = self.settings
        policy = RestartPolicy(budget=settings.failure_budget if settings.supervise else 0,
                               window_s=settings.failure_window_ms / 1000,
                               backoff_initial_s=settings.backoff_initial_ms / 1000,
                               backoff_max_s=settings.backoff_max_ms / 1000,
                               stop_on_repeat=settings.stop_on_repeat)
        state: _RunState = {"leased": False, "verify": True, "spark": None, "policy": policy}
        if self.integrity is not None:  # a start over first asks Kafka whether it still holds batch 0's input
            self.integrity.input_retained = lambda start: self._kafka_gap(state, start)
        deadline = time.monotonic() + settings.run_seconds if settings.run_seconds else None
        guard = self.lease.check if self.lease is not None else None
        try:
            while True:
                if self.stop_requested:
                    return EXIT_STOPPED
                if self.lease_lost:  # found by the renewal thread during a backoff
                    say(f"stopped: {self.lease_lost[0]}")
                    return EXIT_LEASE_LOST
                try:
                    query = self._start(state, guard)
                except LeaseHeld as held:
                    say(f"refused: {held}")
                    return EXIT_REFUSED
                except IntegrityError as error:
                    say(f"cannot start: {error}")
                    return EXIT_INTEGRITY
                except Exception as error:  # S3 or Kafka unreachable while starting: as transient as a failure
                    if self.stop_requested:
                        return EXIT_STOPPED  # stopped while starting: the failure is the stop's doing
                    named = f"{type(error).__module__}.{type(error).__name__}: {error}"  # the name says LeaseLost
                    code = self._failed(policy, state, classify(named), root_cause(named), named)
                    if code is not None:
                        return code
                    continue
                # Short waits so a stop request or a lost lease is seen promptly (handlers run between py4j calls).
                steps = WallClockSteps(settings.trigger_ms / 1000 + 1.0) if settings.restart_on_clock_step else None
                stepped = None
                while (query.isActive and not self.stop_requested and not self.lease_lost
                       and (deadline is None or time.monotonic() < deadline)):
                    try:
                        query.awaitTermination(1)
                    except StreamingQueryException:
                        break  # the query failed: query.exception() below says how
                    stepped = steps.stepped_back() if steps is not None else None
                    if stepped is not None:
                        break
                failure = query.exception()
                if query.isActive:
                    query.stop()
                if self.lease_lost:
                    say(f"stopped: {self.lease_lost[0]}")
                    return EXIT_LEASE_LOST
                if stepped is not None and failure is None and not self.stop_requested:
                    # Its trigger would wait out the step (job/clock.py): a new query starts from the clock as it is.
                    say(f"the wall clock stepped back {stepped:.0f} s: the query is restarted, its trigger anew")
                    continue
                if failure is None or self.stop_requested:
                    self._record_after_stop()
                    return EXIT_STOPPED
                text = str(failure)
                cause = root_cause(text)
                code = self._failed(policy, state, classify(f"{cause}\n{text}"), cause, text)
                if code is not None:
                    return code
        finally:
            if state["spark"] is not None:
                try:
                    state["spark"].stop()
                except Exception as error:  # the JVM is already gone (its group was signalled): nothing to stop
                    say(f"spark did not stop cleanly ({type(error).__name__}); its JVM had already ended")

    @staticmethod
    def _on_progress(policy: RestartPolicy):
        def handle(progress: dict) -> None:
            if progress.get("numInputRows", 0) > 0 or progress.get("stateOperators"):
                policy.progressed()
        return handle

    def _record_after_stop(self) -> None:
        """After a graceful stop, record the last commit too (the next start then need not run that batch again)."""
        if self.integrity is None:
            return
        try:
            commits = self.integrity.listing().commits
            if commits:
                self.integrity.record(max(commits))
        except Exception as error:  # S3 trouble at the stop: the next start replays one batch instead
            say(f"integrity: the last commit was not recorded at the stop ({type(error).__name__})")

    def _sleep(self, seconds: float) -> bool:
        """Back off; True if a stop was requested meanwhile. A lease found lost ends the wait early (the loop then
        stops the job)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.stop_requested:
                return True
            if self.lease_lost:
                return False
            time.sleep(min(0.2, deadline - time.monotonic()))
        return bool(self.stop_requested)


def parse(argv: list[str] | None = None, environ=None) -> tuple[Settings, deploy.Deployment]:
    """The job's settings and its deployment, from options and the environment; exits 2 on bad ones."""
    job_parser = parser()
    add_arguments(job_parser)
    deploy.add_arguments(job_parser)
    args = job_parser.parse_args(argv)
    settings = settings_from(args, job_parser)
    try:
        deployment = deploy.deployment_from(args, settings.checkpoint_suffix, settings.output_suffix,
                                            os.environ if environ is None else environ)
    except deploy.OptionError as error:
        job_parser.error(str(error))
    return settings, deployment


def main(argv: list[str] | None = None) -> int:
    return Job(*parse(argv)).run()


if __name__ == "__main__":
    sys.exit(main())
