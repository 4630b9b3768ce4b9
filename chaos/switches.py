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

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True)
class Switch:
    name: str
    summary: str  # what the feature does, in the job (docs/job.md)
    off: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))  # arm settings
    job_off: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))  # spec `job` changes
    # Why no experiment's outcome depends on it here, as measured (a survivor of `chaos mutate`, docs/job.md); None:
    # some experiment must kill it.
    explained: str | None = None


def _hardened_keys(option: str) -> dict[str, None]:
    from job.settings import hardened

    return {key: None for key in getattr(hardened("t", "d", "p"), option)}


def _switches() -> dict[str, Switch]:
    entries = (
        Switch("lease", "a lease in the checkpoint: a second deployment is refused, a taken-over one stops",
               {"lease": False}),
        Switch("verify_state", "manifests, verification of the whole checkpoint before every start, repair",
               {"verify_state": False}),
        Switch("supervise", "restarts of a failed query with backoff (off: the first failure ends the job)",
               {"supervise": False}),
        Switch("failure_budget", "a bound on restarts (off: restart forever, an outage never reported)",
               {"failure_budget": 1_000_000}),
        # killed by scale-slow-checkpoint-storage (max_lag): at a gigabyte, with uploads capped, a snapshot per
        # version held every commit for the whole cap (docs/job.md)
        Switch("changelog_checkpointing", "RocksDB changelog checkpointing (off: a full snapshot per version)",
               {"changelog_checkpointing": False}),
        Switch("kafka_options", "Kafka reconnect backoff and bounded request/API/connection-setup timeouts",
               {"kafka_options": _hardened_keys("kafka_options")},
               explained=("on one broker Spark's Kafka source retries its offset lookups itself: measured, an 80 s "
                          "broker outage (past the clients' 60 s API timeout) failed neither the naive job nor this "
                          "mutant in kafka-broker-disconnect, and both caught up; it is killed on the cluster only "
                          "(cluster-broker-lost: max lag past its bound), so a run without the cluster leaves it a "
                          "survivor")),
        Switch("s3a_options", "an S3 client that gives up in bounded time (timeouts, retries)",
               {"s3a_options": _hardened_keys("s3a_options")},
               # killed by s3-silent-endpoint (recovery, progress): a request S3 never answers holds the batch
               # for the SDK's 60 s attempt timeout with Hadoop's defaults, 15 s hardened (docs/job.md)
               ),
        # An arm setting, not the `job` section; the oracle judges the mutant by its own rules (no cut), and the
        # output a key that never pauses withholds is judged by emitted_within (chaos/checks/output_latency.py).
        Switch("max_session", "a maximum session length: a key that never pauses still closes sessions",
               {"max_session_ms": None}),
        Switch("aggregate_state", "sessions keep aggregates only, removed once the watermark passes their end (off: "
               "every event of the open session in list state and per-key bookkeeping never expired, the naive "
               "job's state shape, under the hardened rules otherwise)",
               {"aggregate_state": False}),
        Switch("stop_on_repeat", "a failure that repeats the same way on every restart stops the job with exit 7 "
               "(off: the job restarts through the repeats until its failure budget is spent)",
               {"stop_on_repeat": False}),
        Switch("local_disk_outage", "a failure of the executors' local disk (ENOSPC, EIO under RocksDB) is restarted "
               "as an outage within the failure budget (off: it repeats the same way on every restart, and the repeat "
               "rule stops the job with exit 7)",
               {"local_disk_outage": False}),
        Switch("stop_on_takeover", "a deployment whose lease another one took over stops with exit 6 before its "
               "next commit (off: it goes on writing beside the new holder)",
               {"stop_on_takeover": False}),
        Switch("lease_store_clock", "lease expiry judged by S3's clock (the age of the lease's last write) and the "
               "holder's own by the monotonic clock since its last renewal (off: by the wall-clock expiry times in "
               "the records, so a holder whose clock runs behind writes leases already expired to everyone else)",
               {"lease_store_clock": False}),
        Switch("restart_on_clock_step", "a wall-clock step back restarts the query, whose processing-time trigger "
               "waits by the wall clock (off: no batch for as long as the clock stepped back)",
               {"restart_on_clock_step": False}),
    )
    return {switch.name: switch for switch in entries}


SWITCHES: Mapping[str, Switch] = MappingProxyType(_switches())
