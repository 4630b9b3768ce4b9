"""The hardening switches of job/settings.py, by name, and how to turn each one off: the mutants of `chaos mutate`.

A switch is one hardening feature. An experiment `claims` the switches it exists to need (its spec's `claims`);
`chaos mutate` runs the experiment's hardened arm once per claimed switch with only that switch off, and the mutant
is killed when the arm then FAILS an outcome check. A switch no experiment kills is a finding: sharpen an
experiment until it does, or remove the feature (docs/job.md says which and why).

Each entry: the settings an arm gets to turn the feature off (a mapping of job.settings.Settings fields; in the
option mappings a None value removes the hardened profile's key), and the `job` section changes for features that
live there (the maximum session length).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping


@dataclass(frozen=True)
class Switch:
    name: str
    summary: str  # what the feature does, in the job (docs/job.md)
    off: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))  # arm settings
    job_off: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))  # spec `job` changes


def _hardened_keys(option: str) -> dict[str, None]:
    from job.settings import hardened

    return {key: None for key in getattr(hardened("t", "d", "p"), option)}


def _switches() -> dict[str, Switch]:
    entries = (
        Switch("lease", "a lease in the checkpoint: a second deployment is refused, a taken-over one stops",
               {"lease": False}),
        Switch("verify_state", "manifests, verification of the whole checkpoint before every start, repair",
               {"verify_state": False}),
        Switch("spark_snapshot_repair", "Spark's own autoSnapshotRepair (a damaged snapshot rebuilt from changelogs)",
               {"spark_snapshot_repair": False}),
        Switch("supervise", "restarts of a failed query with backoff (off: the first failure ends the job)",
               {"supervise": False}),
        Switch("failure_budget", "a bound on restarts (off: restart forever, an outage never reported)",
               {"failure_budget": 1_000_000}),
        Switch("changelog_checkpointing", "RocksDB changelog checkpointing (off: a full snapshot per version)",
               {"changelog_checkpointing": False}),
        Switch("max_offsets_per_trigger", "bounded batches (off: a backlog becomes one batch)",
               {"max_offsets_per_trigger": None}),
        Switch("kafka_options", "Kafka reconnect backoff and bounded request/API/connection-setup timeouts",
               {"kafka_options": _hardened_keys("kafka_options")}),
        Switch("s3a_options", "an S3 client that gives up in bounded time (timeouts, retries)",
               {"s3a_options": _hardened_keys("s3a_options")}),
        Switch("task_retries", "a failed task tried twice, not four times (spark.task.maxFailures)",
               {"spark_options": {"spark.task.maxFailures": None}}),
        # An arm setting, not the `job` section: the oracle keeps expecting the experiment's sessions (its contract).
        Switch("max_session", "a maximum session length: a key that never pauses still closes sessions",
               {"max_session_ms": None}),
    )
    return {switch.name: switch for switch in entries}


SWITCHES: Mapping[str, Switch] = MappingProxyType(_switches())
