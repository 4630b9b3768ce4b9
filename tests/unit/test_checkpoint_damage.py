"""Which checkpoint files the checkpoint.corrupt fault damages, and how (chaos/checkpoint_damage.py over the layout
chaos/checkpoint_tools.py reads): pure functions over
a listing the harness parses itself, and corrupt()/lineage() over an in-memory stand-in for MinIO; the fault itself
runs in the corrupted-sst experiment, and tests/integration/test_checkpoint_damage_query.py and _state.py damage
each kind under the real job."""
import ast
import io
import json
import random
import zipfile
from pathlib import Path

import pytest

from chaos import checkpoint_damage, checkpoint_tools
from chaos.checkpoint_damage import NothingToCorrupt, choose, corrupt, damage
from chaos.checkpoint_tools import KINDS, CheckpointFile, Listed, lineage, parse_listing

ROOT = "d/checkpoint"


def checkpoint(snapshots: dict[str, list[int]], ssts_per_snapshot: int = 2, commits: int = 20):
    """Partitions 0/0..0/3 with snapshots at the given versions, each naming its own SSTs."""
    keys = [f"commits/{n}" for n in range(commits)] + [f"offsets/{n}" for n in range(commits)]
    names = {}
    for partition, versions in snapshots.items():
        for version in versions:
            keys.append(f"state/{partition}/{version}.zip")
            own = [f"{version}-{partition.replace('/', '_')}-{i}.sst" for i in range(ssts_per_snapshot)]
            names[f"state/{partition}/{version}.zip"] = own
            keys += [f"state/{partition}/SSTs/{name}" for name in own]
        keys += [f"state/{partition}/{v}.changelog" for v in range(1, commits + 1)]
    parsed = parse_listing([Listed(f"{ROOT}/{key}", 100, "e") for key in keys], ROOT)
    return parsed, (lambda zip_file: {name: 100 for name in names[zip_file.key]})


def test_one_method_damages_one_sst_of_the_newest_snapshot():
    parsed, ssts = checkpoint({"0/0": [5, 10], "0/1": [5, 15], "0/2": [10], "0/3": [5]})
    [chosen] = choose(parsed, "sst", "newest", random.Random(1), snapshot_ssts=ssts)
    assert chosen.kind == "sst" and chosen.partition == "0/1" and chosen.key.startswith("state/0/1/SSTs/15-")


def test_several_methods_damage_other_partitions_each_at_its_newest_snapshot():
    parsed, ssts = checkpoint({"0/0": [5, 10], "0/1": [5, 15], "0/2": [10], "0/3": [5]})
    chosen = choose(parsed, "sst", "newest", random.Random(1), snapshot_ssts=ssts, count=3)
    assert [f.partition for f in chosen] == ["0/1", "0/0", "0/2"]  # newest first; ties by key
    assert [f.key.split("/SSTs/")[1].split("-")[0] for f in chosen] == ["15", "10", "10"]
    assert len({f.key for f in chosen}) == 3
    # the same seed, the same files
    assert chosen == choose(parsed, "sst", "newest", random.Random(1), snapshot_ssts=ssts, count=3)


def test_more_methods_than_partitions_take_further_ssts_of_the_same_snapshots():
    parsed, ssts = checkpoint({"0/0": [5], "0/1": [5]}, ssts_per_snapshot=2)
    chosen = choose(parsed, "sst", "newest", random.Random(3), snapshot_ssts=ssts, count=3)
    assert len({f.key for f in chosen}) == 3 and {f.partition for f in chosen} == {"0/0", "0/1"}
    with pytest.raises(NothingToCorrupt, match="5 SST files to damage wanted, the newest snapshots list 4"):
        choose(parsed, "sst", "newest", random.Random(3), snapshot_ssts=ssts, count=5)


def test_uncommitted_versions_are_never_damaged():
    parsed, ssts = checkpoint({"0/0": [5, 30]}, commits=20)  # version 30 is past the last commit (19) + 1
    [chosen] = choose(parsed, "zip", "newest", random.Random(0), snapshot_ssts=ssts)
    assert chosen.key == "state/0/0/5.zip"
    nothing, _ = checkpoint({"0/0": [30]}, commits=20)
    with pytest.raises(NothingToCorrupt):
        choose(nothing, "zip", "newest", random.Random(0))


@pytest.mark.parametrize("method", ["bit_flip", "truncate", "footer", "zero_fill"])
def test_every_method_changes_the_bytes(method):
    data = bytes(range(256)) * 4
    damaged = damage(data, method, random.Random(0))
    assert damaged != data
    if method == "truncate":
        assert len(damaged) == len(data) // 2
    else:
        assert len(damaged) == len(data)
    if method == "footer":
        assert damaged[:-8] == data[:-8] and damaged[-8:] != data[-8:]


# -- every kind of checkpoint file ------------------------------------------------------------------------------
UUID = "0b9f2c64-3f1e-4c8e-9a57-1f0d2e3c4b5a"


def full_listing(commits: int = 12, in_flight: bool = True) -> dict[str, bytes]:
    """A checkpoint as the hardened job leaves it (relative key -> content): every kind of file, plus the files the
    harness must never damage (temporary uploads, the lease, the integrity bookkeeping)."""
    files = {
        "metadata": json.dumps({"id": UUID}).encode(),
        "sources/0/0": b'\x00v1\n{"events":{"0":0,"1":0}}',
        "state/0/_metadata/metadata": b'v1\n{"operatorInfo":{"operatorId":0}}',
        "state/0/_stateSchema/default/0_" + UUID + ".schema": b"v3\n{}",
        "state/0/0/_metadata/schema": b"v2\n{schema}",
        "_lease": b'{"owner": "d"}',
        "_integrity/manifests/000000000005.json": b"{}",
        "_integrity/rollbacks/20261125T000000-001.json": b'{"status": "done"}',
        "offsets/.3." + UUID + ".tmp": b"v1\n",
        "state/0/1/.7.changelog." + UUID + ".tmp": b"x",
    }
    for batch in range(commits + (1 if in_flight else 0)):
        files[f"offsets/{batch}"] = b'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1}\n{"events":{"0":%d}}' % batch
    for batch in range(commits):
        files[f"commits/{batch}"] = b'v1\n{"nextBatchWatermarkMs":0}'
    for p in ("0/0", "0/1"):
        for v in range(1, commits + 2):  # version commits + 1 is the batch in flight's: never loaded
            files[f"state/{p}/{v}.changelog"] = b"changelog %d" % v
        for v in (5, 10):
            names = [f"{v:06d}-{p.replace('/', '')}-{i}-{UUID}.sst" for i in range(3)]
            files[f"state/{p}/{v}.zip"] = snapshot_zip({n: 100 for n in names})
            for name in names:
                files[f"state/{p}/SSTs/{name}"] = bytes(92) + checkpoint_tools.SST_MAGIC
    return files


def snapshot_zip(ssts: dict[str, int]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        body = {"sstFiles": [{"localFileName": n, "dfsSstFileName": n, "sizeBytes": s} for n, s in ssts.items()],
                "numKeys": 3}
        archive.writestr("metadata", "v1\n" + json.dumps(body))
        archive.writestr("000001.log", b"log")
    return buffer.getvalue()


def parsed(files: dict[str, bytes]):
    return parse_listing([Listed(f"{ROOT}/{k}", len(v), f"etag-{k}") for k, v in files.items()], ROOT)


def zip_reader(files: dict[str, bytes]):
    return lambda zip_file: checkpoint_tools.snapshot_ssts(files[zip_file.key])


def _imports(module) -> set[str]:
    imported = set()
    for node in ast.walk(ast.parse(Path(module.__file__).read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add("." * node.level + (node.module or ""))
    return imported


def test_the_harness_reads_the_layout_without_the_job():
    imported = _imports(checkpoint_tools)
    assert not [name for name in imported if name == "job" or name.startswith(("job.", "."))], imported
    # the damage chooses its files from that reading alone
    imported = _imports(checkpoint_damage) - {".checkpoint_tools"}
    assert not [name for name in imported if name == "job" or name.startswith(("job.", "."))], imported


def test_every_file_is_classified():
    layout = parsed(full_listing())
    assert layout.metadata.key == "metadata"
    assert list(layout.sources) == ["sources/0/0"]
    assert sorted(layout.offsets) == list(range(13)) and sorted(layout.commits) == list(range(12))
    assert layout.offsets[12] == CheckpointFile("offsets/12", "offsets", None, 12, layout.offsets[12].size,
                                                "etag-offsets/12")
    assert sorted(layout.state_metadata) == ["state/0/0/_metadata/schema", "state/0/_metadata/metadata",
                                             f"state/0/_stateSchema/default/0_{UUID}.schema"]
    assert sorted(layout.partitions) == ["0/0", "0/1"]
    partition = layout.partitions["0/1"]
    assert sorted(partition.snapshots) == [5, 10] and sorted(partition.changelogs) == list(range(1, 14))
    assert len(partition.ssts) == 6 and all(f.kind == "sst" and f.partition == "0/1" for f in partition.ssts.values())
    assert layout.temporary == [f"offsets/.3.{UUID}.tmp", f"state/0/1/.7.changelog.{UUID}.tmp"]
    assert layout.lease and layout.bookkeeping == ["_integrity/manifests/000000000005.json",
                                                   "_integrity/rollbacks/20261125T000000-001.json"]
    assert layout.other == []
    every = {f.key for kind in KINDS for f in layout.files(kind)}
    assert not any(k.startswith("_") or k.rsplit("/", 1)[-1].startswith(".") for k in every)


def test_a_store_directory_under_a_partition_is_part_of_the_partition():
    layout = parse_listing([Listed(f"{ROOT}/state/0/2/left-keyToNumValues/{name}", 10, "e")
                    for name in ("4.changelog", "5.zip", "SSTs/000001-x.sst")], ROOT)
    assert list(layout.partitions) == ["0/2/left-keyToNumValues"]


@pytest.mark.parametrize("kind,expected", [
    ("metadata", ["metadata"]),
    ("sources", ["sources/0/0"]),
    ("offsets", ["offsets/12"]),  # newest: the batch in flight
    ("commits", ["commits/11"]),
    ("changelog", None),  # newest committed state version: 12
    ("zip", None),
])
def test_each_kind_chooses_its_newest_file(kind, expected):
    files = full_listing()
    [chosen] = choose(parsed(files), kind, "newest", random.Random(4), snapshot_ssts=zip_reader(files))
    assert chosen.kind == kind
    if expected is not None:
        assert [chosen.key] == expected
    if kind == "changelog":
        assert chosen.version == 12 and chosen.key.endswith("/12.changelog")
    if kind == "zip":
        assert chosen.version == 10


def test_state_metadata_is_one_of_the_operator_metadata_and_schema_files():
    layout = parsed(full_listing())
    drawn = {choose(layout, "state_metadata", "newest", random.Random(seed))[0].key for seed in range(30)}
    assert drawn == set(layout.state_metadata)
    both = choose(layout, "state_metadata", "newest", random.Random(1), count=3)
    assert {f.key for f in both} == set(layout.state_metadata)
    with pytest.raises(NothingToCorrupt, match="4 state_metadata files to damage wanted, the checkpoint has 3"):
        choose(layout, "state_metadata", "newest", random.Random(1), count=4)


def test_a_batch_id_picks_that_offsets_or_commits_entry():
    layout = parsed(full_listing())
    [offsets] = choose(layout, "offsets", 0, random.Random(0))
    assert (offsets.key, offsets.version) == ("offsets/0", 0)
    [commit] = choose(layout, "commits", 7, random.Random(0))
    assert (commit.key, commit.version) == ("commits/7", 7)
    with pytest.raises(NothingToCorrupt, match="no commits/12; have batches 0..11"):
        choose(layout, "commits", 12, random.Random(0))
    assert [f.key for f in choose(layout, "offsets", "newest", random.Random(0), count=2)] == ["offsets/12",
                                                                                             "offsets/11"]
    with pytest.raises(NothingToCorrupt):
        choose(layout, "commits", 7, random.Random(0), count=2)


def test_files_written_once_have_no_version():
    layout = parsed(full_listing())
    for kind in ("metadata", "sources", "state_metadata"):
        with pytest.raises(ValueError, match="use version newest"):
            choose(layout, kind, 3, random.Random(0))
    with pytest.raises(NothingToCorrupt, match="2 metadata files to damage wanted, the checkpoint has 1"):
        choose(layout, "metadata", "newest", random.Random(0), count=2)


def test_a_young_checkpoint_has_nothing_of_some_kinds():
    files = {"metadata": b'{"id":"x"}', "sources/0/0": b"v1\n{}", "offsets/0": b"v1\n{}\n{}"}
    layout = parsed(files)
    for kind in ("commits", "state_metadata", "changelog", "zip"):
        with pytest.raises(NothingToCorrupt):
            choose(layout, kind, "newest", random.Random(0))
    assert checkpoint_damage.available_kinds(layout, "newest") == ["metadata", "sources", "offsets"]
    assert checkpoint_damage.available_kinds(layout, 0) == ["offsets"]  # only a batch id can be 0 here
    with pytest.raises(NothingToCorrupt, match="no file of any kind"):
        choose(parse_listing([], ROOT), "any", "newest", random.Random(0))
    with pytest.raises(ValueError, match="unknown checkpoint file kind"):
        choose(layout, "lease", "newest", random.Random(0))


def test_any_draws_a_kind_that_has_files_and_a_seed_reproduces_it():
    files = full_listing()
    layout, ssts = parsed(files), zip_reader(files)
    draws = {seed: choose(layout, "any", "newest", random.Random(seed), snapshot_ssts=ssts) for seed in range(60)}
    assert {chosen.kind for [chosen] in draws.values()} == set(KINDS)  # every kind is reachable
    for seed, chosen in draws.items():
        assert choose(layout, "any", "newest", random.Random(seed), snapshot_ssts=ssts) == chosen
    # A batch id or state version narrows the draw to the kinds that have one.
    fixed = {choose(layout, "any", 5, random.Random(seed), snapshot_ssts=ssts)[0].kind for seed in range(60)}
    assert fixed == {"offsets", "commits", "changelog", "zip", "sst"}


def test_a_seed_reproduces_every_kinds_choice_and_another_seed_can_differ():
    files = full_listing()
    layout, ssts = parsed(files), zip_reader(files)
    for kind in KINDS:
        count = 1 if kind in ("metadata", "sources") else 2
        first = choose(layout, kind, "newest", random.Random(11), snapshot_ssts=ssts, count=count)
        assert choose(layout, kind, "newest", random.Random(11), snapshot_ssts=ssts, count=count) == first
    ssts_drawn = {choose(layout, "sst", "newest", random.Random(seed), snapshot_ssts=ssts)[0].key
                  for seed in range(20)}
    assert len(ssts_drawn) > 1


@pytest.mark.parametrize("method", ["bit_flip", "truncate", "footer", "zero_fill"])
@pytest.mark.parametrize("content", [b'v1\n{"nextBatchWatermarkMs":0}', json.dumps({"id": UUID}).encode(), b"v",
                                     b"\x00\x00\x00\x00"])
def test_every_method_changes_small_files_too(method, content):
    assert damage(content, method, random.Random(0)) != content


def test_a_snapshot_lists_its_ssts_and_a_damaged_one_is_unreadable():
    data = snapshot_zip({"000001-a.sst": 1234, "000002-b.sst": 99})
    assert checkpoint_tools.snapshot_ssts(data) == {"000001-a.sst": 1234, "000002-b.sst": 99}
    with pytest.raises(ValueError, match="unreadable zip"):
        checkpoint_tools.snapshot_ssts(damage(data, "truncate", random.Random(0)))


class FakeS3:
    """The few minio calls checkpoint_tools makes, over a dict."""

    class Object:
        def __init__(self, name: str, data: bytes):
            self.object_name, self.size, self.etag, self.is_dir = name, len(data), f'"{hash(data) & 0xffff:x}"', False

    class Response(io.BytesIO):
        def release_conn(self):
            pass

    def __init__(self, files: dict[str, bytes], root: str = ROOT):
        self.objects = {f"{root}/{key}": data for key, data in files.items()}

    def list_objects(self, bucket, prefix, recursive):
        return [self.Object(k, v) for k, v in sorted(self.objects.items()) if k.startswith(prefix)]

    def get_object(self, bucket, key):
        return self.Response(self.objects[key])

    def put_object(self, bucket, key, stream, length):
        self.objects[key] = stream.read(length)


@pytest.mark.parametrize("kind", KINDS)
def test_corrupt_damages_one_file_of_each_kind_in_place(kind):
    files = full_listing()
    s3 = FakeS3(files)
    done = corrupt(s3, "b", ROOT, kind, "newest", "truncate", seed=2)
    assert done["kind"] == kind and done["requested_kind"] == kind and done["method"] == "truncate"
    assert done["size_after"] == done["size_before"] // 2 and len(done["files"]) == 1
    key = f"{ROOT}/{done['file']}"
    assert s3.objects[key] == files[done["file"]][: len(files[done["file"]]) // 2]
    changed = [k for k, v in s3.objects.items() if files[k[len(ROOT) + 1:]] != v]
    assert changed == [key]
    assert done["sst_magic_before"] is (True if kind == "sst" else None)
    if kind in ("offsets", "commits"):
        assert done["version"] == int(done["file"].split("/")[1])


def test_corrupt_any_is_reproduced_by_its_seed():
    files = full_listing()
    first = corrupt(FakeS3(files), "b", ROOT, "any", "newest", ["bit_flip", "zero_fill"], seed=8)
    again = corrupt(FakeS3(files), "b", ROOT, "any", "newest", ["bit_flip", "zero_fill"], seed=8)
    assert first == again and first["requested_kind"] == "any" and first["kind"] in KINDS
    assert len(first["files"]) == 2 and {f["kind"] for f in first["files"]} == {first["kind"]}
    kinds = {corrupt(FakeS3(files), "b", ROOT, "any", "newest", "bit_flip", seed=s)["kind"] for s in range(40)}
    assert len(kinds) >= 5


def test_lineage_keeps_its_shape():
    files = full_listing()
    files["_integrity/rollbacks/20261125T000000-001.json"] = b'{"status": "done", "restart_version": 3}'
    files["_lease"] = b'{"owner": "d", "fencing": 2}'
    result = lineage(FakeS3(files), "b", ROOT)
    assert set(result) == {"prefix", "metadata", "offsets", "commits", "state", "manifests", "temporary_files",
                           "rollbacks", "lease", "content"}
    assert result["prefix"] == ROOT and result["metadata"] is True
    assert result["offsets"] == list(range(13)) and result["commits"] == list(range(12))
    assert result["state"] == {p: {"snapshots": [5, 10], "changelogs": list(range(1, 14)), "ssts": 6}
                               for p in ("0/0", "0/1")}
    assert result["manifests"] == [5]
    assert result["temporary_files"] == [f"offsets/.3.{UUID}.tmp", f"state/0/1/.7.changelog.{UUID}.tmp"]
    assert result["rollbacks"] == [{"status": "done", "restart_version": 3}]
    assert result["lease"] == {"owner": "d", "fencing": 2}
    from chaos.checks.lineage import check_lineage

    assert check_lineage(result).verdict == "PASSED"


def test_lineage_agrees_with_the_jobs_own_reading():
    """Two independent parsers of one layout: where both read the same thing, they must agree."""
    from job.checkpoint import parse_listing as job_parse
    from job.objectstore import Listed as JobListed

    files = full_listing()
    mine = parsed(files)
    theirs = job_parse([JobListed(f"{ROOT}/{k}", len(v), "e") for k, v in files.items()], ROOT)
    assert sorted(mine.offsets) == sorted(theirs.offsets) and sorted(mine.commits) == sorted(theirs.commits)
    assert {n: (sorted(p.snapshots), sorted(p.changelogs), sorted(p.ssts)) for n, p in mine.partitions.items()} == \
        {n: (sorted(p.snapshots), sorted(p.changelogs), sorted(p.ssts)) for n, p in theirs.partitions.items()}
    assert sorted(f.key for kind in ("metadata", "sources", "state_metadata") for f in mine.files(kind)) == \
        theirs.copied_keys


def test_lineage_reads_back_what_a_restart_loads_and_fails_on_damage_there():
    """Lineage by content: a damaged file where a restart reads fails it; damage nobody reads does not."""
    from chaos.checks.lineage import check_lineage

    sst = next(k for k in full_listing() if k.startswith("state/0/1/SSTs/000010-"))
    for key, damaged in (("offsets/12", b'v1\n{"batchWatermarkMs":0,"batchT'),  # the batch in flight, torn
                         ("commits/11", b"v1\n{nextBatch"),
                         ("metadata", b"{\"id\""),
                         (sst, bytes(100)),                                        # footer zeroed, same size
                         ("state/0/0/10.zip", b"PK not a zip")):
        files = full_listing()
        files[key] = damaged
        check = check_lineage(lineage(FakeS3(files), "b", ROOT))
        assert check.verdict == "FAILED" and key in check.message, (key, check)
    files = full_listing()
    files["state/0/0/3.changelog"] = b""  # below snapshot 10: never read
    files["offsets/4"] = b"garbled"       # an old entry no restart reads
    assert check_lineage(lineage(FakeS3(files), "b", ROOT)).verdict == "PASSED"


def test_lineage_hands_every_sst_and_changelog_a_restart_loads_to_the_readers():
    """Which files the readers get (RocksDB's and Spark's, infra/state_files.py) is the harness's own reading: the
    newest snapshot's SSTs and the changelogs after it, per partition; what they find is a problem of the lineage."""
    from chaos.checks.lineage import check_lineage

    files = full_listing()  # commits 0..11: state version 12 loads from snapshot 10 and changelogs 11, 12
    handed: list[tuple[str, str]] = []

    def readers(state_files):
        handed.extend((kind, key) for kind, key, _ in state_files)
        assert all(content == files[key] for _, key, content in state_files)
        return {key: ("RocksDBException: block checksum mismatch" if key.endswith("-1-" + UUID + ".sst") else None)
                for _, key, _ in state_files}

    result = lineage(FakeS3(files), "b", ROOT, read_state=readers)
    expected = [(kind, key) for p in ("0/0", "0/1") for kind, key in
                [("sst", f"state/{p}/SSTs/000010-{p.replace('/', '')}-{i}-{UUID}.sst") for i in range(3)]
                + [("changelog", f"state/{p}/{v}.changelog") for v in (11, 12)]]
    assert handed == expected
    assert result["content"]["readers"].startswith("10 SSTs and changelogs read whole")
    check = check_lineage(result)
    assert check.verdict == "FAILED" and "2 problem(s)" in check.message
    assert f"state/0/0/SSTs/000010-00-1-{UUID}.sst: RocksDBException: block checksum mismatch" in check.message

    def no_jdk(state_files):
        raise RuntimeError("javac was not found")

    unread = lineage(FakeS3(files), "b", ROOT, read_state=no_jdk)
    assert unread["content"]["readers_failed"] == "RuntimeError: javac was not found"
    assert check_lineage(unread).verdict == "NODATA"


def test_the_readers_answers_are_matched_to_their_keys():
    from infra.state_files import parse_answers

    paths = {"/t/0.sst": "state/0/0/SSTs/a.sst", "/t/1.changelog": "state/0/0/5.changelog"}
    out = "ok\t/t/0.sst\t28\nbad\t/t/1.changelog\tEOFException: Stream ended prematurely\nnoise\n"
    assert parse_answers(out, paths) == {"state/0/0/SSTs/a.sst": None,
                                         "state/0/0/5.changelog": "EOFException: Stream ended prematurely"}
    assert parse_answers("ok\t/t/0.sst\t28\n", paths) == {"state/0/0/SSTs/a.sst": None}  # one unanswered: caller raises
