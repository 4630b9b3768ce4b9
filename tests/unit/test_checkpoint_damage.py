"""Which state files the checkpoint.corrupt fault damages, and how (chaos/checkpoint_tools.py): pure functions over
a parsed listing; the fault itself runs in the corrupted-sst experiment."""
import random

import pytest

from chaos.checkpoint_tools import NothingToCorrupt, choose, damage
from job.integrity import parse_listing
from job.objectstore import Listed

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
