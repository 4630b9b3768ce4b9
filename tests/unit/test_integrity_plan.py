"""The job's integrity planning (job/integrity.py), pure: a checkpoint listing and a verdict per file in, the
repair out. The S3 side is exercised on the real stack in tests/integration/test_hardening.py."""
from __future__ import annotations

import io
import json
import zipfile

import pytest

from job.checkpoint import expected_partitions, record_problem, shuffle_partitions, source_start
from job.integrity import IntegrityError, StateFile, parse_listing, plan_recovery, snapshot_ssts
from job.objectstore import Listed
from job.repair_plan import input_gap
from job.supervisor import BudgetExceeded, RestartPolicy, classify, out_of_reach, root_cause

ROOT = "dep/checkpoint"


def listing(commits, partitions=("0/0", "0/1"), changelogs=(), snapshots=(), ssts=None, offsets=None):
    """changelogs/snapshots: versions present in every partition; ssts: {snapshot version: [names]}."""
    return parse_listing(_listed(commits, partitions, changelogs, snapshots, ssts, offsets), ROOT)


def _listed(commits, partitions=("0/0", "0/1"), changelogs=(), snapshots=(), ssts=None, offsets=None):
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
    return objects


def verdicts(bad: dict[str, str] | None = None):
    bad = bad or {}
    calls = []

    def check(file: StateFile, expected_size):
        calls.append(file.key)
        return bad.get(file.key)

    return check, calls


def records(bad: dict[str, str]):
    """A check of the query's records (metadata, sources, offsets, commits) that finds `bad` damaged."""
    calls = []

    def check(key: str):
        calls.append(key)
        return bad.get(key)

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
    assert "no committed batch is replayed" in plan.describe()


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
    with pytest.raises(IntegrityError, match="no retained version does .* cannot start over from its input"):
        plan_recovery(cp, check, refs_from({6: ["s.sst"]}))


def test_a_fresh_checkpoint_has_nothing_to_verify():
    plan = plan_recovery(parse_listing([Listed(f"{ROOT}/metadata", 45, "m")], ROOT), verdicts()[0], refs_from({}))
    assert plan.version is None and not plan.needed


def test_a_first_batch_that_never_committed_is_run_again_by_spark_or_set_aside_when_damaged():
    """The defect of issue 15: killed after batch 0 uploaded state version 1, before commits/0. Spark runs batch 0
    again from offsets/0 over what it left (measured); removing offsets/0 instead makes every start fail with
    STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY, so when batch 0 must be planned afresh, every state file goes, the
    operator metadata included."""
    objects = [Listed(f"{ROOT}/state/0/_metadata/metadata", 167, "om"),
               Listed(f"{ROOT}/state/0/0/_metadata/schema", 970, "sc")]
    cp = parse_listing([*objects, *_listed(commits=[], offsets=[0], changelogs=[1])], ROOT)
    assert not plan_recovery(cp, verdicts()[0], refs_from({})).needed
    check_record, _ = records({"offsets/0": "offsets/0 names no source offsets (torn)"})
    plan = plan_recovery(cp, verdicts()[0], refs_from({}), check_record)
    assert plan.start_over and plan.restart_version == 0 and plan.needed
    assert plan.drop_batches == [0]
    assert "state/0/_metadata/metadata" in plan.drop_state and "state/0/0/_metadata/schema" in plan.drop_state
    assert "state/0/0/1.changelog" in plan.drop_state
    assert "starting over from the input" in plan.describe()


# -- the query's records: metadata, sources, offsets, commits ------------------------------------------------
def test_a_torn_offsets_entry_of_the_batch_in_flight_is_set_aside_and_the_batch_planned_again():
    cp = listing(commits=range(0, 8), offsets=range(0, 9), changelogs=range(1, 9))
    check_record, _ = records({"offsets/8": "offsets/8 names no source offsets (torn)"})
    plan = plan_recovery(cp, verdicts()[0], refs_from({}), check_record)
    assert plan.restart_version == plan.version == 8 and not plan.start_over
    assert plan.quarantine == ["offsets/8"] and plan.drop_batches == []


def test_a_damaged_newest_commit_rolls_back_one_batch():
    cp = listing(commits=range(0, 8), changelogs=range(1, 9))
    check_record, _ = records({"commits/7": "commits/7 is not JSON"})
    plan = plan_recovery(cp, verdicts()[0], refs_from({}), check_record)
    assert plan.version == 8 and plan.restart_version == 7
    assert plan.drop_batches == [7]  # batch 7 is planned again from offsets/6's end and replayed
    assert sorted(plan.drop_state) == ["state/0/0/8.changelog", "state/0/1/8.changelog"]


def test_a_damaged_offsets_entry_a_start_reads_rolls_back_below_it():
    cp = listing(commits=range(0, 8), changelogs=range(1, 9))
    check_record, _ = records({"offsets/6": "checksum differs from the recorded one (overwritten)"})
    plan = plan_recovery(cp, verdicts()[0], refs_from({}), check_record)
    # a start at 8 reads offsets/7 and offsets/6; at 7, offsets/6; at 6, offsets/5 and offsets/4: intact
    assert plan.restart_version == 6 and plan.drop_batches == [6, 7]


def test_the_newest_commit_and_the_batch_in_flight_count_only_when_a_manifest_recorded_them():
    """A same-size change inside a number parses; a record proves the file is the one the job wrote. After a crash
    the newest commit is usually unrecorded (the next batch never reached its manifest): one batch runs again."""
    cp = listing(commits=range(0, 8), offsets=range(0, 9), changelogs=range(1, 9))
    recorded = {f"offsets/{b}" for b in range(0, 8)} | {f"commits/{b}" for b in range(0, 7)}
    plan = plan_recovery(cp, verdicts()[0], refs_from({}), records({})[0], recorded=recorded)
    assert plan.restart_version == 7 and plan.drop_batches == [7, 8]
    assert "not recorded" in plan.damaged["commits/7"]
    graceful = plan_recovery(cp, verdicts()[0], refs_from({}), records({})[0],
                             recorded=recorded | {"commits/7", "offsets/8"})
    assert not graceful.needed
    in_flight = plan_recovery(cp, verdicts()[0], refs_from({}), records({})[0], recorded=recorded | {"commits/7"})
    assert in_flight.restart_version == 8 and in_flight.quarantine == ["offsets/8"]


def test_damage_in_old_log_entries_that_no_start_reads_costs_nothing():
    cp = listing(commits=range(0, 8), changelogs=range(1, 9))
    check_record, calls = records({"offsets/2": "garbled", "commits/3": "garbled"})
    plan = plan_recovery(cp, verdicts()[0], refs_from({}), check_record)
    assert not plan.needed
    assert "offsets/2" not in calls and "commits/3" not in calls


def test_damaged_metadata_is_restored_from_the_manifests_copy_or_set_aside_without_one():
    cp = listing(commits=range(0, 8), changelogs=range(1, 9))
    check_record, _ = records({"metadata": "metadata is not JSON"})
    restored = plan_recovery(cp, verdicts()[0], refs_from({}), check_record, copies={"metadata"})
    assert restored.restore == ["metadata"] and restored.restart_version == 8 and not restored.quarantine
    set_aside = plan_recovery(cp, verdicts()[0], refs_from({}), check_record)
    assert set_aside.quarantine == ["metadata"] and set_aside.restart_version == 8


def test_lost_state_metadata_without_a_copy_starts_over_when_the_whole_history_is_there():
    objects = [*_listed(commits=range(0, 8), changelogs=range(1, 9)),
               Listed(f"{ROOT}/state/0/0/_metadata/schema", 970, "sc")]
    check_record, _ = records({"state/0/0/_metadata/schema": "checksum differs from the recorded one"})
    plan = plan_recovery(parse_listing(objects, ROOT), verdicts()[0], refs_from({}), check_record)
    assert plan.start_over and plan.drop_batches == list(range(0, 8))
    assert plan.quarantine == ["state/0/0/_metadata/schema"]
    trimmed = [*_listed(commits=range(5, 10), changelogs=range(6, 11)),
               Listed(f"{ROOT}/state/0/0/_metadata/schema", 970, "sc")]
    with pytest.raises(IntegrityError, match="cannot start over"):
        plan_recovery(parse_listing(trimmed, ROOT), verdicts()[0], refs_from({}), check_record)


def test_a_rollback_to_nothing_starts_over_with_an_empty_state_directory():
    cp = listing(commits=range(0, 3), changelogs=range(1, 4))
    check, _ = verdicts({"state/0/0/1.changelog": "damaged"})
    plan = plan_recovery(cp, check, refs_from({}))
    assert plan.start_over and plan.restart_version == 0 and plan.drop_batches == [0, 1, 2]
    assert plan.quarantine == ["state/0/0/1.changelog"]
    assert "state/0/1/1.changelog" in plan.drop_state and "state/0/0/1.changelog" not in plan.drop_state


# -- every partition a version needs, not only those still listed (issue 36 part 8) ---------------------------
FOUR = ("0/0", "0/1", "0/2", "0/3")


def _without(objects, partition):
    return [obj for obj in objects if not obj.key.startswith(f"{ROOT}/state/{partition}/")]


def test_a_partition_with_every_state_file_removed_is_never_verified():
    """The defect: the job said "state version 27 verified" with partition 3's files gone, because it checked the
    files that were there; Spark then failed with FileNotFoundException on every start."""
    objects = _without(_listed(commits=range(0, 8), partitions=FOUR, changelogs=range(1, 9)), "0/3")
    cp = parse_listing(objects, ROOT)
    assert sorted(cp.partitions) == ["0/0", "0/1", "0/2"]  # the listing alone cannot tell
    plan = plan_recovery(cp, verdicts()[0], refs_from({}), expected=FOUR)
    assert plan.needed and plan.restart_version != plan.version
    assert "state/0/3/" in plan.damaged and "operator 0, partition 3" in plan.damaged["state/0/3/"]
    assert plan.describe().startswith("no committed state version can be loaded (state/0/3/: operator 0, partition 3")


def test_a_partition_with_nothing_to_load_from_is_rebuilt_by_starting_over_when_the_log_reaches_batch_0():
    """Every partition of a batch loads the same version, and a partition with no files can load only version 0:
    the whole query starts over and every batch is replayed from Kafka, its earlier output moved aside."""
    sst_only = [obj for obj in _listed(commits=range(0, 8), partitions=FOUR, changelogs=range(1, 9),
                                       snapshots=[5], ssts={5: ["a.sst"]})
                if not (obj.key.startswith(f"{ROOT}/state/0/3/") and "/SSTs/" not in obj.key)]
    for objects in (_without(_listed(commits=range(0, 8), partitions=FOUR, changelogs=range(1, 9)), "0/3"), sst_only):
        cp = parse_listing(objects, ROOT)
        plan = plan_recovery(cp, verdicts()[0], refs_from({5: ["a.sst"]}), expected=FOUR)
        assert plan.start_over and plan.restart_version == 0 and plan.drop_batches == list(range(0, 8))
        assert "state/0/0/8.changelog" in plan.drop_state


def test_a_partition_with_nothing_to_load_from_and_the_early_batches_gone_stops_with_exit_5_naming_it():
    objects = _without(_listed(commits=range(5, 10), partitions=FOUR, changelogs=range(6, 11), snapshots=[6],
                               ssts={6: ["s.sst"]}), "0/2")
    with pytest.raises(IntegrityError) as raised:
        plan_recovery(parse_listing(objects, ROOT), verdicts()[0], refs_from({6: ["s.sst"]}), expected=FOUR)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("state version 10 does not verify (state/0/2/: operator 0, partition 2: its state "
                              "files are missing"), message
    assert "cannot start over from its input" in message


def test_a_missing_changelog_rolls_every_partition_back_to_the_newest_version_all_can_load_and_is_named():
    objects = [obj for obj in _listed(commits=range(0, 12), partitions=FOUR, changelogs=range(1, 13),
                                      snapshots=[5], ssts={5: ["a.sst"]})
               if obj.key != f"{ROOT}/state/0/1/9.changelog"]
    plan = plan_recovery(parse_listing(objects, ROOT), verdicts()[0], refs_from({5: ["a.sst"]}), expected=FOUR)
    assert plan.version == 12 and plan.restart_version == 8 and plan.drop_batches == [8, 9, 10, 11]
    assert plan.damaged == {"state/0/1/9.changelog":
                            "missing (version 12 is loaded from snapshot 5 and the changelogs after it)"}
    assert "state/0/1/9.changelog" not in plan.quarantine + plan.drop_state  # nothing to move: it is not there
    assert "state/0/3/12.changelog" in plan.drop_state


def test_a_missing_snapshot_with_the_changelogs_before_it_needs_nothing():
    """Spark loads from the newest snapshot that is there: a zip gone (and its SSTs) costs nothing while the
    changelogs from an older one, or from version 1, are all there."""
    objects = [obj for obj in _listed(commits=range(0, 8), partitions=FOUR, changelogs=range(1, 9),
                                      snapshots=[5], ssts={5: ["a.sst"]})
               if not obj.key.startswith((f"{ROOT}/state/0/2/5.zip", f"{ROOT}/state/0/2/SSTs/"))]
    plan = plan_recovery(parse_listing(objects, ROOT), verdicts()[0], refs_from({5: ["a.sst"]}), expected=FOUR)
    assert not plan.needed and plan.restart_version == 8


def test_the_expected_partitions_come_from_the_offsets_log_conf_and_every_operator_seen():
    offsets = (b'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{"spark.sql.shuffle.partitions":"4",'
               b'"spark.sql.streaming.stateStore.providerClass":"x"}}\n{"events":{"0":12}}')
    assert shuffle_partitions(offsets) == 4
    assert shuffle_partitions(b'v1\n{"batchWatermarkMs":0,"conf":{}}\n{"events":{"0":12}}') is None
    assert shuffle_partitions(b"v1\n{torn") is None
    keys = ["metadata", "offsets/3", "state/0/_metadata/metadata", "state/0/0/_metadata/schema",
            "state/0/0/1.changelog", "state/0/1/SSTs/a.sst", "state/1/_metadata/metadata"]
    assert expected_partitions(keys, 2) == {"0/0", "0/1", "1/0", "1/1"}
    assert expected_partitions(keys, None) == {"0/0", "0/1"}  # unknown count: only what is named
    # a join's stores are partitions of their own, as job.checkpoint names them
    join = ["state/0/0/left-keyToNumValues/1.changelog", "state/0/1/right-keyWithIndexToValue/2.zip"]
    assert expected_partitions(join, 2) == {f"0/{p}/{store}" for p in (0, 1)
                                            for store in ("left-keyToNumValues", "right-keyWithIndexToValue")}
    assert set(parse_listing([Listed(f"{ROOT}/{key}", 1, "e") for key in join], ROOT).partitions) <= \
        expected_partitions(join, 2)


def test_record_syntax_catches_torn_and_garbled_entries():
    offsets = (b'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n{"events":{"0":12,"1":7}}')
    assert record_problem("offsets/3", offsets) is None
    assert record_problem("offsets/3", offsets[: len(offsets) // 2])  # torn: Unexpected end-of-input in Spark
    assert record_problem("offsets/3", b"v1\n" + offsets[3:].replace(b"{", b"[", 1))
    assert record_problem("commits/3", b'v1\n{"nextBatchWatermarkMs":1795578638724}') is None
    assert record_problem("commits/3", b'v1\n{"nextBatchWatermarkMs":17955') is not None
    assert record_problem("metadata", b'{"id":"ec23d6a1-ec1b-416d-8ae9-19963a8a95a1"}') is None
    assert record_problem("metadata", b'{"id":"ec23d6a1-ec1b-416d-8ae9-1996\xff') is not None
    assert record_problem("sources/0/0", b'\x00v1\n{"events":{"0":0,"1":0}}') is None
    assert record_problem("sources/0/0", b'\x00v1\n{"events":{"0":0,') is not None


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


def test_the_same_failure_on_every_restart_is_not_transient_but_an_outage_that_repeats_is():
    """The loop of issue 15: every start failed the same way (a state directory Spark would not start on) and was
    restarted as transient until the budget ran out. Three in a row, no batch between: repeating."""
    policy = RestartPolicy(budget=20)
    location = ("[STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY] The checkpoint location s3a://chaos/dep-{}/checkpoint/"
                "state should be empty on batch 0")
    for n in range(2):
        policy.failed(location.format(n))
        assert not policy.repeating()
    policy.failed(location.format(7))  # numbers differ between occurrences: still the same failure
    assert policy.repeating()
    policy.progressed()  # a batch in between: it starts counting again
    policy.failed(location.format(8))
    assert not policy.repeating()
    outage = RestartPolicy(budget=20)
    for _ in range(5):
        outage.failed("org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node assignment")
    assert not outage.repeating()
    mixed = RestartPolicy(budget=20)
    for cause in ("java.io.EOFException: x", "java.io.EOFException: x", "java.lang.NullPointerException"):
        mixed.failed(cause)
    assert not mixed.repeating()


def test_failures_that_name_the_checkpoints_records_verify_it_before_the_restart():
    assert classify("[STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY] The checkpoint location ...") == "state"
    assert classify("com.fasterxml.jackson.core.io.JsonEOFException: Unexpected end-of-input: expected close "
                    "marker for Object") == "state"


# -- carrying a repair out (an in-memory store in place of S3) ---------------------------------------------------
class MemoryStore:
    def __init__(self, keys):
        self.objects = {key: b"x" for key in keys}

    def list(self, prefix, markers=False):
        for key in sorted(self.objects):
            if key.startswith(prefix) and (markers or not key.endswith("/")):
                yield Listed(key, len(self.objects[key]), "e")

    def get(self, key):
        from job.objectstore import Missing

        if key not in self.objects:
            raise Missing(key)
        return self.objects[key], "e"

    def put(self, key, data):
        self.objects[key] = data
        return "e"

    def delete(self, key):
        self.objects.pop(key, None)

    def move(self, key, to_key):
        from job.objectstore import Missing

        if key not in self.objects:
            raise Missing(key)
        self.objects[to_key] = self.objects.pop(key)


def test_a_start_over_leaves_state_offsets_and_commits_empty_markers_and_unfinished_uploads_included():
    """Spark refuses batch 0 while any of them holds anything (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY: found by
    a kill between offsets/1 and its commit, which left offsets/.1.<uuid>.tmp behind)."""
    import json

    from job.integrity import Integrity

    left = [f"{ROOT}/{k}" for k in ("metadata", "sources/0/0", "offsets/", "offsets/0", "offsets/1",
                                    "offsets/.1.abc.tmp", "commits/", "commits/0", "state/0/_metadata/metadata",
                                    "state/0/0/", "state/0/0/1.changelog", "state/0/0/.2.changelog.x.TID1.tmp")]
    store = MemoryStore([*left, "dep/output/batch-000000000000.jsonl"])
    integrity = Integrity(store, ROOT, "dep/output", say=lambda line: None)
    cp = parse_listing(store.list(ROOT + "/"), ROOT)
    plan = plan_recovery(cp, verdicts()[0], refs_from({}), records({})[0], recorded=set())
    assert plan.start_over
    integrity._apply(plan, {})
    remaining = sorted(k[len(ROOT) + 1:] for k in store.objects if k.startswith(ROOT + "/")
                       and not k.startswith(f"{ROOT}/_integrity/"))
    assert remaining == ["metadata", "sources/0/0"]
    assert not [k for k in store.objects if k.startswith("dep/output/")]  # moved aside, to quarantine
    journal = [json.loads(v) for k, v in store.objects.items() if "/rollbacks/" in k]
    assert [j["status"] for j in journal] == ["done"]


def test_a_stage_spark_gave_up_on_is_named_by_its_reason_not_by_the_python_proxy_wrapping_it():
    # the shape of a foreachBatch failure (measured: cluster-executor-lost's crash loop, 2026-11-26): py4j's
    # wrapper first, the Java exception on a line of its own after ": ", no `Caused by:` naming anything better
    text = "\n".join([
        "[STREAM_FAILED] Query [id = 1] terminated with exception: An exception was raised by the Python Proxy. "
        "Return Message: Traceback (most recent call last):",
        '  File "/x/py4j/protocol.py", line 327, in get_return_value',
        "py4j.protocol.Py4JJavaError: An error occurred while calling o1247.collectToPython.",
        ": org.apache.spark.SparkException: Job aborted due to stage failure: ResultStage 49 (call at "
        "/x/.venv/lib/python3.11/site-packages/py4j/clientserver.py:644) has failed the maximum allowable number of "
        "times: 4. Most recent failure reason: org.apache.spark.shuffle.MetadataFetchFailedException: Missing an "
        "output location for shuffle 24 partition 3",
        "\tat org.apache.spark.MapOutputTracker$.validateStatus(MapOutputTracker.scala:1983)",
        "Caused by: py4j.Py4JException: An exception was raised by the Python Proxy. Return Message: Traceback",
    ])
    cause = root_cause(text)
    assert cause.startswith("org.apache.spark.SparkException: Job aborted due to stage failure: ResultStage 49 has "
                            "failed the maximum allowable number of times: 4."), cause
    assert "Missing an output location" in cause and "call at" not in cause
    assert classify(f"{cause}\n{text}") == "transient"  # as job/__main__.py classifies it: restarted
    # ...but not as an outage: the same stage given up on three times with no batch between is a repeat (executors
    # killed by their own task, a poison batch, read like executors lost to an outage)
    assert not out_of_reach(cause)
    policy = RestartPolicy(budget=20, clock=lambda: 0.0)
    for _ in range(3):
        policy.failed(root_cause(text.replace("ResultStage 49", "ResultStage 50")))
    assert policy.repeating()
    lost = text.replace("org.apache.spark.shuffle.MetadataFetchFailedException: Missing an output location for "
                        "shuffle 24 partition 3", "ExecutorLostFailure (executor 7 exited caused by one of the "
                        "running tasks) Reason: Command exited with code 137").replace("(call at", "(start at")
    assert "start at" not in root_cause(lost) and not out_of_reach(root_cause(lost))
    # a deeper cause below a stage failure still wins, and a plain wrapper never names a failure
    deeper = text + "\nCaused by: java.net.SocketTimeoutException: Read timed out"
    assert root_cause(deeper) == "java.net.SocketTimeoutException: Read timed out"
    assert root_cause(": org.apache.spark.SparkException: Writing job aborted") == \
        ": org.apache.spark.SparkException: Writing job aborted"
    # py4j's own line tops a chain: a `Caused by:` names the failure even when the chain is printed again after it
    assert root_cause("Caused by: java.net.SocketTimeoutException: Read timed out\n"
                      ": java.io.IOException: an upload failed") == "java.net.SocketTimeoutException: Read timed out"


def test_an_http_5xx_is_an_outage_only_as_a_status_never_as_a_number_inside_another():
    # as the S3 clients print them: the AWS SDK, minio-py (the lease and the manifests), a bare status line
    for outage in ("software.amazon.awssdk.services.s3.model.S3Exception: Please reduce your request rate. "
                   "(Service: S3, Status Code: 503, Request ID: 1)",
                   "minio.error.ServerError: server failed with HTTP status code 500",
                   "java.io.IOException: 503 Slow Down"):
        assert out_of_reach(outage), outage
    # a number that only contains 500 or 503 says nothing about reach: such a failure repeated is a repeat
    for repeat in ("java.lang.IllegalStateException: batch 1503 has no offsets entry",
                   "java.lang.IllegalStateException: expected offset 25003, found 25000"):
        assert not out_of_reach(repeat), repeat


def test_kafka_must_still_hold_every_offset_batch_0_read_for_a_start_over():
    start = {"events": {"0": 0, "1": 0, "2": 5}}
    assert input_gap(start, {"events": {"0": 0, "1": 0, "2": 5, "3": 0}}) is None
    assert input_gap(start, {"events": {"0": 0, "1": 120, "2": 5}}) == (
        "events-1 now begins at offset 120, batch 0 began at 0: retention removed 120 record(s) a replay needs")
    assert input_gap(start, {"events": {"0": 0, "1": 0}}) == (
        "topic events has no partition 2 any more (batch 0 began there at offset 5)")
    assert input_gap(start, {}) is not None
    assert source_start(b'\x00v1\n{"events":{"0":0,"1":7}}') == {"events": {"0": 0, "1": 7}}
    with pytest.raises(ValueError):
        source_start(b'\x00v1\n{"events":{"0":0,')


def _start_over_store(partition_removed: str | None):
    """A checkpoint in memory with batches 0..7 committed, every file recorded in a manifest, and every state file
    of one partition removed afterwards."""
    keys = [obj.key for obj in _listed(commits=range(0, 8), partitions=FOUR, changelogs=range(1, 9))]
    store = MemoryStore([*keys, f"{ROOT}/sources/0/0", "dep/output/batch-000000000003.jsonl"])
    store.objects[f"{ROOT}/metadata"] = b'{"id":"ec23d6a1-ec1b-416d-8ae9-19963a8a95a1"}'
    store.objects[f"{ROOT}/sources/0/0"] = b'\x00v1\n{"events":{"0":0,"1":0}}'
    offsets = b'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{"spark.sql.shuffle.partitions":"4"}}\n{}'
    for b in range(0, 8):
        store.objects[f"{ROOT}/offsets/{b}"] = offsets.replace(b"{}", b'{"events":{"0":%d,"1":%d}}' % (b, b))
        store.objects[f"{ROOT}/commits/{b}"] = b'v1\n{"nextBatchWatermarkMs":0}'
    files = {key[len(ROOT) + 1:]: {"size": len(data), "etag": "e"} for key, data in store.objects.items()
             if key.startswith(ROOT + "/") and "/." not in key}
    manifest = json.dumps({"version": 8, "files": files}).encode()
    store.objects[f"{ROOT}/_integrity/manifests/000000000008.json"] = manifest
    for key in [k for k in store.objects if partition_removed and k.startswith(f"{ROOT}/state/{partition_removed}/")]:
        del store.objects[key]
    return store


def test_the_job_starts_over_for_a_partition_with_no_files_only_while_kafka_holds_the_input():
    from job.integrity import Integrity

    asked, said = [], []

    def retained(gap):
        def check(start):
            asked.append(start)
            return gap
        return check

    intact = Integrity(_start_over_store(None), ROOT, "dep/output", say=said.append, input_retained=retained(None))
    assert not intact.verify_and_repair().needed and said == ["integrity: state version 8 verified"] and not asked
    said.clear()
    store = _start_over_store("0/3")
    integrity = Integrity(store, ROOT, "dep/output", say=said.append, input_retained=retained(None))
    plan = integrity.verify_and_repair()  # offsets/7 says 4 partitions: 0/3 is missing although nothing lists it
    assert plan.start_over and asked == [{"events": {"0": 0, "1": 0}}]
    assert said == [f"integrity: {plan.describe()}; Kafka still holds every offset from batch 0's start"]
    assert "state/0/3/" in said[0] and not [k for k in store.objects if k.startswith(f"{ROOT}/offsets/")]

    store = _start_over_store("0/3")
    before = dict(store.objects)
    gone = "events-1 now begins at offset 120, batch 0 began at 0: retention removed 120 record(s) a replay needs"
    integrity = Integrity(store, ROOT, "dep/output", say=said.append, input_retained=retained(gone))
    with pytest.raises(IntegrityError) as raised:
        integrity.verify_and_repair()
    assert str(raised.value).startswith("the checkpoint cannot be repaired without replaying its input (state/0/3/: "
                                        "operator 0, partition 3: its state files are missing")
    assert gone in str(raised.value)
    assert store.objects == before  # refused before anything was moved: the checkpoint is as it was


def test_with_the_repeat_rule_off_a_repeating_failure_restarts_until_the_budget_ends_it():
    """The switch stop_on_repeat off (chaos/switches.py): the same failure with no batch in between is never taken
    for one a restart cannot fix; the budget is what ends it (exit 4, not exit 7)."""
    cause = "java.io.FileNotFoundException: s3a://chaos/dep/checkpoint/state/0/3/12.zip"
    on, off = RestartPolicy(budget=5), RestartPolicy(budget=5, stop_on_repeat=False)
    for _ in range(3):
        on.failed(cause)
        off.failed(cause)
    assert on.repeating() and not off.repeating()
    with pytest.raises(BudgetExceeded):
        for _ in range(3):
            off.failed(cause)
            assert not off.repeating()
