"""The job's integrity planning (job/integrity.py), pure: a checkpoint listing and a verdict per file in, the
repair out. The S3 side is exercised on the real stack in tests/integration/test_hardening.py."""
from __future__ import annotations

import io
import json
import zipfile

import pytest

from job.integrity import IntegrityError, StateFile, parse_listing, plan_recovery, snapshot_ssts
from job.objectstore import Listed
from job.supervisor import BudgetExceeded, RestartPolicy, classify

ROOT = "dep/checkpoint"


def listing(commits, partitions=("0/0", "0/1"), changelogs=(), snapshots=(), ssts=None, offsets=None):
    """changelogs/snapshots: versions present in every partition; ssts: {snapshot version: [names]}."""
    objects = [Listed(f"{ROOT}/metadata", 45, "m")]
    for b in (offsets if offsets is not None else commits):
        objects.append(Listed(f"{ROOT}/offsets/{b}", 100, f"o{b}"))
    for b in commits:
        objects.append(Listed(f"{ROOT}/commits/{b}", 41, f"c{b}"))
    for p in partitions:
        for v in changelogs:
            objects.append(Listed(f"{ROOT}/state/{p}/{v}.changelog", 500, f"cl{p}{v}"))
        for v in snapshots:
            objects.append(Listed(f"{ROOT}/state/{p}/{v}.zip", 4000, f"z{p}{v}"))
            for name in (ssts or {}).get(v, []):
                objects.append(Listed(f"{ROOT}/state/{p}/SSTs/{name}", 9000, f"s{p}{name}"))
        objects.append(Listed(f"{ROOT}/state/{p}/.9.changelog.abc.TID1.tmp", 1, "t"))  # ignored
    return parse_listing(objects, ROOT)


def verdicts(bad: dict[str, str] | None = None):
    bad = bad or {}
    calls = []

    def check(file: StateFile, expected_size):
        calls.append(file.key)
        return bad.get(file.key)

    return check, calls


def refs_from(ssts: dict[int, list[str]]):
    return lambda zip_file: {name: 9000 for name in ssts.get(zip_file.version, [])}


def test_the_listing_maps_files_to_partitions_versions_and_batches():
    cp = listing(commits=range(0, 8), changelogs=range(1, 9), snapshots=[5], ssts={5: ["000008-a.sst"]})
    assert cp.version_to_load == 8
    assert sorted(cp.partitions) == ["0/0", "0/1"]
    assert sorted(cp.partitions["0/0"].changelogs) == list(range(1, 9))
    assert sorted(cp.partitions["0/1"].snapshots) == [5]
    assert list(cp.partitions["0/1"].ssts) == ["000008-a.sst"]


def test_an_intact_checkpoint_needs_no_repair_and_reads_only_what_spark_loads():
    cp = listing(commits=range(0, 8), changelogs=range(1, 9), snapshots=[5], ssts={5: ["000008-a.sst"]})
    check, calls = verdicts()
    plan = plan_recovery(cp, check, refs_from({5: ["000008-a.sst"]}))
    assert not plan.needed and plan.restart_version == plan.version == 8
    # snapshot 5, its SST, and changelogs 6..8 in each partition: nothing older
    assert sorted(calls) == sorted(f"state/{p}/{f}" for p in ("0/0", "0/1")
                                   for f in ("5.zip", "SSTs/000008-a.sst", "6.changelog", "7.changelog",
                                             "8.changelog"))


def test_a_damaged_snapshot_sst_is_set_aside_and_changelogs_rebuild_the_same_version():
    cp = listing(commits=range(0, 8), changelogs=range(1, 9), snapshots=[5], ssts={5: ["000008-a.sst"]})
    check, _ = verdicts({"state/0/1/SSTs/000008-a.sst": "bad table magic number"})
    plan = plan_recovery(cp, check, refs_from({5: ["000008-a.sst"]}))
    assert plan.restart_version == plan.version == 8  # changelogs 1..8 exist: no batch is replayed
    assert plan.quarantine == ["state/0/1/5.zip", "state/0/1/SSTs/000008-a.sst"]
    assert plan.drop_batches == [] and plan.drop_state == []
    assert "no batch is replayed" in plan.describe()


def test_a_damaged_newest_changelog_rolls_every_partition_back_one_version():
    cp = listing(commits=range(0, 8), changelogs=range(1, 9))
    check, _ = verdicts({"state/0/0/8.changelog": "checksum differs"})
    plan = plan_recovery(cp, check, refs_from({}))
    assert plan.version == 8 and plan.restart_version == 7
    assert plan.drop_batches == [7]  # batch 7 (which wrote version 8) is replayed
    assert plan.quarantine == ["state/0/0/8.changelog"]
    assert plan.drop_state == ["state/0/1/8.changelog"]
    assert plan.damaged == {"state/0/0/8.changelog": "checksum differs"}


def test_without_changelogs_every_version_is_a_snapshot_and_rollback_goes_to_the_newest_good_one():
    cp = listing(commits=range(0, 4), snapshots=[1, 2, 3, 4], ssts={v: [f"00000{v}-x.sst"] for v in (1, 2, 3, 4)})
    check, _ = verdicts({"state/0/0/SSTs/000004-x.sst": "truncated"})
    plan = plan_recovery(cp, check, refs_from({v: [f"00000{v}-x.sst"] for v in (1, 2, 3, 4)}))
    assert plan.restart_version == 3
    assert plan.drop_batches == [3]
    assert "state/0/0/4.zip" in plan.quarantine and "state/0/0/SSTs/000004-x.sst" in plan.quarantine
    assert plan.drop_state == ["state/0/1/4.zip"]


def test_a_damaged_old_changelog_below_a_good_snapshot_does_not_matter():
    cp = listing(commits=range(0, 8), changelogs=range(1, 9), snapshots=[5], ssts={5: ["s.sst"]})
    check, calls = verdicts({"state/0/0/2.changelog": "damaged"})
    plan = plan_recovery(cp, check, refs_from({5: ["s.sst"]}))
    assert not plan.needed
    assert "state/0/0/2.changelog" not in calls


def test_nothing_verifies_within_the_retained_batches_is_a_clear_error():
    # batches 0..4 were trimmed (offsets/commits 5..9 retained); every changelog of version 7 is damaged
    cp = listing(commits=range(5, 10), changelogs=range(6, 11), snapshots=[6], ssts={6: ["s.sst"]})
    check, _ = verdicts({"state/0/0/6.zip": "unreadable zip", "state/0/1/6.zip": "unreadable zip"})
    with pytest.raises(IntegrityError, match="older than the retained batches"):
        plan_recovery(cp, check, refs_from({6: ["s.sst"]}))


def test_a_fresh_checkpoint_has_nothing_to_verify():
    plan = plan_recovery(listing(commits=[], offsets=[0], changelogs=[1]), verdicts()[0], refs_from({}))
    assert plan.version is None and not plan.needed


def test_snapshot_metadata_is_read_and_a_damaged_zip_is_reported():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("CURRENT", "MANIFEST-000005\n")
        archive.writestr("metadata", "v1\n" + json.dumps({"sstFiles": [
            {"localFileName": "000008.sst", "dfsSstFileName": "000008-e3.sst", "sizeBytes": 59251}], "numKeys": 30}))
    data = buffer.getvalue()
    assert snapshot_ssts(data) == {"000008-e3.sst": 59251}
    with pytest.raises(ValueError):
        snapshot_ssts(data[: len(data) // 2])
    flipped = bytearray(data)
    flipped[40] ^= 0x10  # inside the first entry's data: its CRC no longer matches
    with pytest.raises(ValueError):
        snapshot_ssts(bytes(flipped))


# -- supervised restarts ------------------------------------------------------------------------------------
def test_failures_are_classified_so_that_only_transient_ones_restart():
    assert classify("org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node assignment") \
        == "transient"
    assert classify("[CANNOT_LOAD_STATE_STORE.UNCATEGORIZED] ... RocksDBException: Bad table magic number") == "state"
    assert classify("job.lease.LeaseLost: lost the lease on s3a://chaos/x") == "fatal"
    assert classify("org.apache.spark.sql.AnalysisException: [UNRESOLVED_COLUMN] ...") == "fatal"


def test_backoff_doubles_to_its_cap_and_resets_after_progress():
    now = [0.0]
    policy = RestartPolicy(budget=10, window_s=300, backoff_initial_s=1, backoff_max_s=5, clock=lambda: now[0])
    assert [policy.failed("x") for _ in range(4)] == [1, 2, 4, 5]
    policy.progressed()
    assert policy.failed("x") == 1


def test_the_budget_counts_failures_in_a_sliding_window_and_names_the_last_causes():
    now = [0.0]
    policy = RestartPolicy(budget=2, window_s=60, clock=lambda: now[0])
    policy.failed("kafka timeout")
    now[0] = 30
    policy.failed("s3 reset")
    now[0] = 61  # the first failure has left the window
    policy.failed("s3 reset")
    now[0] = 70
    with pytest.raises(BudgetExceeded, match=r"3 failures within 60 s \(budget 2\); last causes: s3 reset"):
        policy.failed("s3 timeout")


def test_a_budget_of_zero_stops_at_the_first_failure_like_the_incident_threshold():
    with pytest.raises(BudgetExceeded):
        RestartPolicy(budget=0).failed("checkpoint failed")
