"""The harness's view of a job's checkpoint in MinIO: its lineage (for the lineage checker) and deliberate damage
(the checkpoint.corrupt fault).

The harness reads MinIO directly (not through the `s3` proxy), so what it sees does not depend on the faults it
injects. The layout is parsed by job.integrity.parse_listing, the one place that knows it.
"""
from __future__ import annotations

import io
import json
import random

from job.integrity import INTEGRITY_DIR, SST_MAGIC, Checkpoint, StateFile, parse_listing
from job.objectstore import Listed

METHODS = ("bit_flip", "truncate", "footer", "zero_fill")
KINDS = ("sst", "zip", "changelog")


def _listing(s3, bucket: str, prefix: str) -> list[Listed]:
    return [Listed(o.object_name, o.size or 0, (o.etag or "").strip('"'))
            for o in s3.list_objects(bucket, prefix=prefix.rstrip("/") + "/", recursive=True) if not o.is_dir]


def _read(s3, bucket: str, key: str) -> bytes:
    response = s3.get_object(bucket, key)
    try:
        return response.read()
    finally:
        response.close()
        response.release_conn()


def lineage(s3, bucket: str, prefix: str) -> dict:
    """What the lineage checker judges (chaos/checkers.py): batch ids in offsets/ and commits/, per state partition
    the snapshot and changelog versions, the integrity manifests and rollbacks, and the lease, if any."""
    listed = _listing(s3, bucket, prefix)
    checkpoint = parse_listing(listed, prefix)
    keys = {obj.key[len(prefix.rstrip("/")) + 1:] for obj in listed}
    rollbacks = []
    for key in sorted(k for k in keys if k.startswith(f"{INTEGRITY_DIR}/rollbacks/")):
        try:
            rollbacks.append(json.loads(_read(s3, bucket, f"{prefix.rstrip('/')}/{key}")))
        except ValueError:
            rollbacks.append({"unreadable": key})
    lease = None
    if "_lease" in keys:
        try:
            lease = json.loads(_read(s3, bucket, f"{prefix.rstrip('/')}/_lease"))
        except ValueError:
            lease = {"unreadable": True}
    return {
        "prefix": prefix,
        "metadata": "metadata" in keys,
        "offsets": sorted(checkpoint.offsets),
        "commits": sorted(checkpoint.commits),
        "state": {name: {"snapshots": sorted(p.snapshots), "changelogs": sorted(p.changelogs), "ssts": len(p.ssts)}
                  for name, p in sorted(checkpoint.partitions.items())},
        "manifests": sorted(int(k.rsplit("/", 1)[1].split(".")[0]) for k in keys
                            if k.startswith(f"{INTEGRITY_DIR}/manifests/") and k.endswith(".json")),
        "temporary_files": sorted(k for k in keys if k.rsplit("/", 1)[-1].startswith(".")),
        "rollbacks": rollbacks,
        "lease": lease,
    }


class NothingToCorrupt(Exception):
    """The checkpoint has no file of the requested kind (and version)."""


def choose(checkpoint: Checkpoint, kind: str, version: int | str, rng: random.Random,
           snapshot_ssts=None, count: int = 1) -> list[StateFile]:
    """The files to damage: of `kind`, in the newest state version that has one (or exactly `version`).

    For an SST, the snapshot of that version names the candidates (`snapshot_ssts(zip_file)` -> names); one is
    drawn with `rng` so a seed reproduces the choice. With `count` > 1 (and version "newest") the other files come
    from other partitions, each at its own newest version (what that partition loads on a restart); an SST kind
    takes further SSTs of the same snapshots once the partitions run out."""
    committed = max(checkpoint.commits) + 1 if checkpoint.commits else None
    by_partition: dict[str, list[tuple[int, StateFile]]] = {}
    for name, partition in checkpoint.partitions.items():
        files = partition.snapshots if kind in ("zip", "sst") else partition.changelogs
        for v, file in files.items():
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
    chosen: list[StateFile] = []
    spare: list[StateFile] = []
    for snapshot in files:
        partition = checkpoint.partitions[snapshot.partition]
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


def can_corrupt(s3, bucket: str, prefix: str, kind: str, version: int | str, count: int = 1) -> bool:
    """Are there `count` files of this kind (and version) to damage yet? (A snapshot appears only every few
    versions.)"""
    from job.integrity import snapshot_ssts as parse_zip

    root = prefix.rstrip("/")
    try:
        choose(parse_listing(_listing(s3, bucket, root), root), kind, version, random.Random(0), count=count,
               snapshot_ssts=lambda zip_file: parse_zip(_read(s3, bucket, f"{root}/{zip_file.key}")))
    except (NothingToCorrupt, ValueError):
        return False
    return True


def corrupt(s3, bucket: str, prefix: str, kind: str, version: int | str, method: str | list[str],
            seed: int = 0) -> dict:
    """Damage state files in place (the job must be stopped): one per method. Returns what was done, for the
    history: the first file's fields, and every file under `files`."""
    from job.integrity import snapshot_ssts as parse_zip

    root = prefix.rstrip("/")
    methods = [method] if isinstance(method, str) else list(method)
    checkpoint = parse_listing(_listing(s3, bucket, root), root)
    rng = random.Random(seed)
    targets = choose(checkpoint, kind, version, rng, count=len(methods),
                     snapshot_ssts=lambda zip_file: parse_zip(_read(s3, bucket, f"{root}/{zip_file.key}")))
    done = []
    for target, how in zip(targets, methods):
        key = f"{root}/{target.key}"
        original = _read(s3, bucket, key)
        damaged = damage(original, how, rng)
        s3.put_object(bucket, key, io.BytesIO(damaged), len(damaged))
        done.append({"file": target.key, "kind": target.kind, "version": target.version, "method": how,
                     "size_before": len(original), "size_after": len(damaged),
                     "sst_magic_before": original[-8:] == SST_MAGIC if target.kind == "sst" else None})
    return {**done[0], "file": ", ".join(d["file"] for d in done), "method": "+".join(d["method"] for d in done),
            "files": done}
