"""The checkpoint.corrupt fault's damage: which files of a checkpoint to damage (`choose`, drawn with the
experiment's seed) and how (`damage`), done in place in MinIO while the job is stopped (`corrupt`).

The files are chosen from the harness's own reading of the checkpoint (chaos/checkpoint_tools.py: `Layout`), never
with the job's parser: a fault that chose its targets with the job's code could only land where the job's
verification already looks (issue 20).
"""
from __future__ import annotations

import io
import random
from collections.abc import Callable, Iterable
from typing import Any

from .checkpoint_tools import (
    ANY,
    BATCH_KINDS,
    KIND_CHOICES,
    KINDS,
    RECORD_KINDS,
    SST_MAGIC,
    STATE_KINDS,
    CheckpointFile,
    Layout,
    read_layout,
    read_object,
    snapshot_ssts,
)

METHODS = ("bit_flip", "truncate", "footer", "zero_fill")


# -- choosing what to damage -----------------------------------------------------------------------------------
class NothingToCorrupt(Exception):
    """The checkpoint has no file of the requested kind (and version)."""


SnapshotSsts = Callable[[CheckpointFile], Iterable[str]]


def choose(checkpoint: Layout, kind: str, version: int | str, rng: random.Random,
           snapshot_ssts: SnapshotSsts | None = None, count: int = 1) -> list[CheckpointFile]:
    """The files to damage (`count` of them, one per method).

    - `sst`, `zip`, `changelog`: in the newest committed state version that has one (or exactly `version`). For an
      SST, the snapshot of that version names the candidates (`snapshot_ssts(zip_file)` -> names); one is drawn with
      `rng` so a seed reproduces the choice. With `count` > 1 (and version "newest") the other files come from other
      partitions, each at its own newest version (what that partition loads on a restart); an SST kind takes further
      SSTs of the same snapshots once the partitions run out.
    - `offsets`, `commits`: the entry of batch `version`; "newest" is the highest entry present (for offsets that
      may be the batch in flight, which no commit has closed yet), and with `count` > 1 the next older entries.
    - `metadata`, `sources` (sources/<s>/<p>), `state_metadata` (operator metadata and state schemas): files written
      once, with no version (`version` must be "newest"); `count` distinct ones drawn with `rng`.
    - `any`: one of the kinds above that has `count` such files (at `version`), drawn with `rng`, then its files."""
    if kind == ANY:
        kind = choose_kind(checkpoint, version, rng, snapshot_ssts, count)
    if kind in STATE_KINDS:
        return _choose_state(checkpoint, kind, version, rng, snapshot_ssts, count)
    if kind in BATCH_KINDS:
        return _choose_batch(checkpoint, kind, version, count)
    if kind in RECORD_KINDS:
        return _choose_record(checkpoint, kind, version, rng, count)
    raise ValueError(f"unknown checkpoint file kind {kind!r}; allowed: {', '.join(KIND_CHOICES)}")


def available_kinds(checkpoint: Layout, version: int | str, snapshot_ssts: SnapshotSsts | None = None,
                    count: int = 1) -> list[str]:
    """The kinds that have `count` files to damage (at `version`), in KINDS order. Uses no caller's rng."""
    found = []
    for kind in KINDS:
        if kind in RECORD_KINDS and version != "newest":
            continue  # written-once files have no version
        try:
            choose(checkpoint, kind, version, random.Random(0), snapshot_ssts=snapshot_ssts, count=count)
        except (NothingToCorrupt, ValueError):
            continue
        found.append(kind)
    return found


def choose_kind(checkpoint: Layout, version: int | str, rng: random.Random,
                snapshot_ssts: SnapshotSsts | None = None, count: int = 1) -> str:
    """`any`: one kind that has files, drawn with `rng` (a seed reproduces it on the same checkpoint)."""
    kinds = available_kinds(checkpoint, version, snapshot_ssts, count)
    if not kinds:
        raise NothingToCorrupt(f"the checkpoint has no file of any kind to damage ({count} wanted"
                               f"{'' if version == 'newest' else f' at version {version}'})")
    return rng.choice(kinds)


def _choose_state(checkpoint: Layout, kind: str, version: int | str, rng: random.Random,
                  snapshot_ssts: SnapshotSsts | None, count: int) -> list[CheckpointFile]:
    committed = max(checkpoint.commits) + 1 if checkpoint.commits else None
    by_partition: dict[str, list[tuple[int, CheckpointFile]]] = {}
    for name, partition in checkpoint.partitions.items():
        versions = partition.snapshots if kind in ("zip", "sst") else partition.changelogs
        for v, file in versions.items():
            if committed is not None and v > committed:
                continue  # a version no commit refers to is never loaded: damaging it proves nothing
            by_partition.setdefault(name, []).append((v, file))
    candidates = [pair for pairs in by_partition.values() for pair in pairs]
    if not candidates:
        raise NothingToCorrupt(f"the checkpoint has no {'snapshot' if kind != 'changelog' else 'changelog'} file "
                               f"of a committed version yet")
    wanted = max(v for v, _ in candidates) if version == "newest" else int(version)
    at_version = sorted((f for v, f in candidates if v == wanted), key=lambda f: f.key)
    if not at_version:
        raise NothingToCorrupt(f"no {kind} file at state version {wanted}; have versions "
                               f"{sorted({v for v, _ in candidates})[-5:]}")
    first = rng.choice(at_version)
    files = [first]
    if count > 1 and version == "newest":
        others = sorted((max(pairs, key=lambda pair: pair[0]) for name, pairs in by_partition.items()
                         if name != first.partition), key=lambda pair: (-pair[0], pair[1].key))
        files += [file for _v, file in others]
    if kind != "sst":
        if len(files) < count:
            raise NothingToCorrupt(f"{count} {kind} files to damage wanted, the checkpoint has {len(files)}")
        return files[:count]
    if snapshot_ssts is None:
        raise ValueError("choosing an SST needs snapshot_ssts (the SST names a snapshot zip lists)")
    chosen: list[CheckpointFile] = []
    spare: list[CheckpointFile] = []
    for snapshot in files:
        partition = checkpoint.partitions[str(snapshot.partition)]  # a snapshot always has its partition
        ssts = [partition.ssts[n] for n in sorted(snapshot_ssts(snapshot)) if n in partition.ssts]
        rng.shuffle(ssts)
        if ssts:
            chosen.append(ssts[0])
            spare += ssts[1:]
    if not chosen:
        raise NothingToCorrupt(f"snapshot {first.key} lists no SST file that exists")
    chosen += spare
    if len(chosen) < count:
        raise NothingToCorrupt(f"{count} SST files to damage wanted, the newest snapshots list {len(chosen)}")
    return chosen[:count]


def _choose_batch(checkpoint: Layout, kind: str, version: int | str, count: int) -> list[CheckpointFile]:
    entries = checkpoint.offsets if kind == "offsets" else checkpoint.commits
    if not entries:
        raise NothingToCorrupt(f"the checkpoint has no {kind} entry yet")
    if version == "newest":
        files = [entries[b] for b in sorted(entries, reverse=True)[:count]]
    else:
        batch = int(version)
        if batch not in entries:
            have = sorted(entries)
            raise NothingToCorrupt(f"no {kind}/{batch}; have batches {have[0]}..{have[-1]}" if len(have) > 1
                                   else f"no {kind}/{batch}; have batch {have[0]}")
        files = [entries[batch]]
    if len(files) < count:
        raise NothingToCorrupt(f"{count} {kind} entries to damage wanted, "
                               + (f"the checkpoint has {len(files)}" if version == "newest"
                                  else f"batch {version} has one"))
    return files


def _choose_record(checkpoint: Layout, kind: str, version: int | str, rng: random.Random,
                   count: int) -> list[CheckpointFile]:
    if version != "newest":
        raise ValueError(f"{kind} files are written once and have no version: use version newest, not {version!r}")
    files = checkpoint.files(kind)
    what = {"metadata": "metadata file", "sources": "sources/<s>/<p> file",
            "state_metadata": "state operator metadata or schema file"}[kind]
    if not files:
        raise NothingToCorrupt(f"the checkpoint has no {what} yet")
    if len(files) < count:
        raise NothingToCorrupt(f"{count} {kind} files to damage wanted, the checkpoint has {len(files)}")
    return rng.sample(files, count)


# -- damaging --------------------------------------------------------------------------------------------------
def damage(data: bytes, method: str, rng: random.Random) -> bytes:
    """The damaged content. Every method changes the bytes (a no-op corruption would prove nothing)."""
    if not data:
        raise NothingToCorrupt("the file is empty")
    if method == "bit_flip":
        position = rng.randrange(len(data))
        return data[:position] + bytes([data[position] ^ (1 << rng.randrange(8))]) + data[position + 1:]
    if method == "truncate":
        return data[: len(data) // 2]
    if method == "footer":  # the last 8 bytes: an SST's magic number (RocksDB: "Bad table magic number")
        tail = bytes(b ^ 0xFF for b in data[-8:])
        return data[:-8] + tail
    if method == "zero_fill":
        start = len(data) // 4
        end = max(start + 1, len(data) // 2)
        zeroed = data[:start] + bytes(end - start) + data[end:]
        return zeroed if zeroed != data else data[:start] + b"\xff" * (end - start) + data[end:]
    raise ValueError(f"unknown corruption method {method!r}; allowed: {', '.join(METHODS)}")


def _zip_reader(s3, bucket: str, root: str) -> SnapshotSsts:
    return lambda zip_file: snapshot_ssts(read_object(s3, bucket, f"{root}/{zip_file.key}"))


def can_corrupt(s3, bucket: str, prefix: str, kind: str, version: int | str, count: int = 1) -> bool:
    """Are there `count` files of this kind (and version) to damage yet? (A snapshot appears only every few
    versions.)"""
    root = prefix.rstrip("/")
    try:
        choose(read_layout(s3, bucket, root), kind, version, random.Random(0), count=count,
               snapshot_ssts=_zip_reader(s3, bucket, root))
    except (NothingToCorrupt, ValueError):
        return False
    return True


def corrupt(s3, bucket: str, prefix: str, kind: str, version: int | str, method: str | list[str],
            seed: int = 0) -> dict:
    """Damage checkpoint files in place (the job must be stopped): one per method. Returns what was done, for the
    history: the first file's fields (`kind` is the kind of file damaged, also when `any` was asked for;
    `requested_kind` what was asked for), and every file under `files`."""
    root = prefix.rstrip("/")
    methods = [method] if isinstance(method, str) else list(method)
    rng = random.Random(seed)
    targets = choose(read_layout(s3, bucket, root), kind, version, rng, count=len(methods),
                     snapshot_ssts=_zip_reader(s3, bucket, root))
    done: list[dict[str, Any]] = []
    for target, how in zip(targets, methods):
        key = f"{root}/{target.key}"
        original = read_object(s3, bucket, key)
        damaged = damage(original, how, rng)
        s3.put_object(bucket, key, io.BytesIO(damaged), len(damaged))
        done.append({"file": target.key, "kind": target.kind, "version": target.version, "method": how,
                     "size_before": len(original), "size_after": len(damaged),
                     "sst_magic_before": original[-8:] == SST_MAGIC if target.kind == "sst" else None})
    return {**done[0], "file": ", ".join(d["file"] for d in done), "method": "+".join(d["method"] for d in done),
            "requested_kind": kind, "files": done}
