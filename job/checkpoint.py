"""The layout of a Structured Streaming checkpoint as this job writes it, and what "intact" means for each file.

Layout (RocksDB state store, checkpoint format 1; FACTS.md), relative to the checkpoint root:

    metadata                      {"id": "<query uuid>"}: read on every start
    sources/<s>/0                 the Kafka source's initial offsets (an optional NUL byte, "v1", JSON): batch 0's start
    offsets/<b>                   "v1", a JSON line of batch metadata, one JSON line (or "-") per source: what batch b
                                  reads
    commits/<b>                   "v1", {"nextBatchWatermarkMs": ...}: batch b is done
    state/<op>/_metadata/...      operator metadata; state/<op>/<part>/_metadata/schema: the state schema
    state/<op>/<part>/<v>.zip     a RocksDB snapshot of state version v (its `metadata` entry lists its SSTs)
    state/<op>/<part>/SSTs/*.sst  SST files the snapshots share
    state/<op>/<part>/<v>.changelog   with changelog checkpointing: version v's changes over v-1

Batch b commits state version b+1. On a start Spark reads `metadata`, the newest offsets entry L and the one before
it (L-1), the newest commit C, and loads state version C+1 from the newest snapshot <= C+1 and the changelogs after
it; `sources/` only when no batch has been planned yet. Files whose name starts with "." are uploads or renames that
did not finish (S3 has no rename: Spark writes a temporary object, copies it, deletes it) and are never read.

Everything here is pure (bytes in, a verdict out), so tests/unit exercise it without S3.
"""
from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field

from .objectstore import Listed

SST_MAGIC = bytes.fromhex("f7cff485b741e288")  # RocksDB block-based table magic 0x88e241b785f4cff7, little endian
_STATE_FILE = re.compile(r"^state/(?P<partition>\d+/\d+(?:/[^/]+)*?)/(?:(?P<version>\d+)\.(?P<kind>zip|changelog)"
                         r"|SSTs/(?P<sst>[^/]+\.sst))$")
_BATCH_FILE = re.compile(r"^(offsets|commits)/(\d+)$")
_SOURCE_FILE = re.compile(r"^sources/\d+/\d+$")
_VERSION_LINE = re.compile(r"^v\d+$")
_STATE_METADATA = re.compile(r"^state/\d+/(?:\d+/)?(?:_metadata|_stateSchema)/")
_STATE_PARTITION = re.compile(r"^state/(?P<operator>\d+)/(?P<part>\d+)(?P<store>(?:/[^/_][^/]*)*?)/"
                              r"(?:\d+\.(?:zip|changelog)|SSTs/[^/]+\.sst)$")
_OPERATOR = re.compile(r"^state/(?P<operator>\d+)/")


@dataclass(frozen=True)
class StateFile:
    key: str          # relative to the checkpoint root, e.g. state/0/3/12.changelog
    partition: str    # e.g. 0/3
    kind: str         # zip | changelog | sst
    version: int | None
    size: int
    etag: str


@dataclass
class Partition:
    snapshots: dict[int, StateFile] = field(default_factory=dict)
    changelogs: dict[int, StateFile] = field(default_factory=dict)
    ssts: dict[str, StateFile] = field(default_factory=dict)  # by file name


@dataclass
class Checkpoint:
    offsets: set[int] = field(default_factory=set)
    commits: set[int] = field(default_factory=set)
    partitions: dict[str, Partition] = field(default_factory=dict)
    # Every finished file, relative key -> (size, etag): what the checks and the start-over below work from.
    files: dict[str, tuple[int, str]] = field(default_factory=dict)

    @property
    def version_to_load(self) -> int | None:
        """The state version Spark loads on start: last committed batch + 1 (None: nothing committed yet)."""
        return max(self.commits) + 1 if self.commits else None

    @property
    def last_commit(self) -> int | None:
        return max(self.commits) if self.commits else None

    @property
    def state_keys(self) -> list[str]:
        """Every file under state/: snapshots, changelogs, SSTs, and the operator metadata and schemas."""
        return sorted(key for key in self.files if key.startswith("state/"))

    @property
    def copied_keys(self) -> list[str]:
        """Small files written once that the manifests keep a copy of: the query's `metadata`, the sources' initial
        offsets, and the state operators' metadata and schemas."""
        return sorted(key for key in self.files
                      if key == "metadata" or _SOURCE_FILE.match(key) or _STATE_METADATA.match(key))

    def size_etag(self, key: str) -> tuple[int, str] | None:
        return self.files.get(key)


def shuffle_partitions(offsets_entry: bytes) -> int | None:
    """How many state partitions every stateful operator has: `spark.sql.shuffle.partitions` as the query fixed it
    at its first batch, in the conf of an offsets entry's metadata line (None if the entry does not say)."""
    try:
        lines = _versioned_lines(offsets_entry, "offsets entry")
        conf = _json_object(lines[1], "its batch metadata").get("conf", {})
        return int(conf["spark.sql.shuffle.partitions"])
    except (ValueError, IndexError, KeyError, TypeError, AttributeError):
        return None


def source_start(data: bytes) -> dict[str, dict[str, int]]:
    """Where batch 0 began reading: a Kafka source's initial offsets file (sources/<s>/0) as {topic: {partition:
    offset}}. Raises ValueError when it does not parse."""
    lines = _versioned_lines(data.lstrip(b"\x00"), "the source's initial offsets")
    start = _json_object("\n".join(lines[1:]).strip(), "the source's initial offsets")
    try:
        return {str(topic): {str(part): int(offset) for part, offset in offsets.items()}
                for topic, offsets in start.items()}
    except (AttributeError, TypeError, ValueError):
        raise ValueError("the source's initial offsets are not {topic: {partition: offset}}") from None


def expected_partitions(keys: Iterable[str], partitions: int | None) -> set[str]:
    """Every state partition (as `Partition` names them: "<operator>/<part>[/<store>]") a state version needs: each
    stateful operator found in `keys` (the checkpoint's state files, its operator metadata, and what the manifests
    recorded), with `partitions` partitions each, in every store that operator was seen with. With `partitions`
    unknown, only the partitions named in `keys`."""
    operators: dict[str, set[str]] = {}
    named: set[str] = set()
    for key in keys:
        state = _STATE_PARTITION.match(key)
        if state:
            operators.setdefault(state.group("operator"), set()).add(state.group("store"))
            named.add(f"{state.group('operator')}/{state.group('part')}{state.group('store')}")
            continue
        operator = _OPERATOR.match(key)
        if operator:
            operators.setdefault(operator.group("operator"), set())
    if partitions is None:
        return named
    return named | {f"{operator}/{part}{store}" for operator, stores in operators.items()
                    for store in (stores or {""}) for part in range(partitions)}


def parse_listing(listing: Iterable[Listed], root: str) -> Checkpoint:
    """Objects under `root/` (the checkpoint prefix) -> what the checkpoint holds. Temporary files, directory markers
    and the job's own bookkeeping (`_lease`, `_integrity/`) are left out."""
    checkpoint = Checkpoint()
    prefix = root.rstrip("/") + "/"
    for obj in listing:
        if not obj.key.startswith(prefix) or obj.key.endswith("/"):
            continue
        key = obj.key[len(prefix):]
        if key.rsplit("/", 1)[-1].startswith(".") or key.startswith("_"):
            continue  # .<name>.<uuid>.tmp: an upload or rename that did not finish; _lease, _integrity/: ours
        checkpoint.files[key] = (obj.size, obj.etag)
        batch = _BATCH_FILE.match(key)
        if batch:
            (checkpoint.offsets if batch.group(1) == "offsets" else checkpoint.commits).add(int(batch.group(2)))
            continue
        state = _STATE_FILE.match(key)
        if not state:
            continue
        partition = checkpoint.partitions.setdefault(state.group("partition"), Partition())
        if state.group("sst"):
            partition.ssts[state.group("sst")] = StateFile(key, state.group("partition"), "sst", None, obj.size,
                                                           obj.etag)
        else:
            version, kind = int(state.group("version")), state.group("kind")
            file = StateFile(key, state.group("partition"), kind, version, obj.size, obj.etag)
            (partition.snapshots if kind == "zip" else partition.changelogs)[version] = file
    return checkpoint


def snapshot_ssts(zip_bytes: bytes) -> dict[str, int]:
    """The SST files (name -> size) a snapshot zip needs, from its `metadata` entry ("v1\\n{json}").

    Raises ValueError when the zip is damaged (bad CRC, unreadable, no metadata)."""
    try:
        with zipfile.ZipFile(io.BytesIO(zip_bytes)) as archive:
            bad = archive.testzip()
            if bad is not None:
                raise ValueError(f"CRC mismatch in entry {bad}")
            text = archive.read("metadata").decode()
    except (zipfile.BadZipFile, KeyError, UnicodeDecodeError, EOFError, OSError) as error:
        raise ValueError(f"unreadable zip ({type(error).__name__}: {error})") from None
    body = text.split("\n", 1)[1] if text.startswith("v") else text
    try:
        files = json.loads(body).get("sstFiles", [])
        return {entry["dfsSstFileName"]: int(entry["sizeBytes"]) for entry in files}
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"unreadable snapshot metadata ({error})") from None


# -- the query's records: what parses ------------------------------------------------------------------------
def _json_object(text: str, what: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as error:
        raise ValueError(f"{what} is not JSON ({str(error)[:80]})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{what} is not a JSON object")
    return value


def _versioned_lines(data: bytes, what: str) -> list[str]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{what} is not UTF-8 text") from None
    lines = text.split("\n")
    if not lines or not _VERSION_LINE.match(lines[0]):
        raise ValueError(f"{what} does not start with a version line (v1)")
    return lines


def is_state_metadata(key: str) -> bool:
    return bool(_STATE_METADATA.match(key))


def record_problem(key: str, data: bytes) -> str | None:
    """Why this query record (metadata, sources/*, offsets/N, commits/N) would not load, or None if it parses.
    State operator metadata and schemas have no syntax checked here: only their recorded checksums.

    A parse catches torn and garbled files; a same-size change inside a number parses, which is why the manifests
    also record each file's checksum (job/integrity.py)."""
    try:
        if key == "metadata":
            record = _json_object(data.decode("utf-8", errors="replace"), "metadata")
            if not isinstance(record.get("id"), str) or not re.fullmatch(r"[0-9a-f-]{36}", record["id"]):
                return "metadata has no query id"
            return None
        if _SOURCE_FILE.match(key):
            lines = _versioned_lines(data.lstrip(b"\x00"), key)
            _json_object("\n".join(lines[1:]).strip(), f"{key}'s offsets")
            return None
        batch = _BATCH_FILE.match(key)
        if batch and batch.group(1) == "commits":
            lines = _versioned_lines(data, key)
            body = _json_object("\n".join(lines[1:]).strip(), key)
            if not isinstance(body.get("nextBatchWatermarkMs"), int):
                return f"{key} has no watermark"
            return None
        if batch:
            lines = [line for line in _versioned_lines(data, key)[1:]]
            while lines and lines[-1] == "":
                lines.pop()
            if len(lines) < 2:
                return f"{key} names no source offsets (torn)"
            meta = _json_object(lines[0], f"{key}'s batch metadata")
            if not isinstance(meta.get("batchWatermarkMs"), int):
                return f"{key} has no batch watermark"
            for line in lines[1:]:
                if line != "-":
                    _json_object(line, f"{key}'s source offsets")
            return None
    except ValueError as error:
        return str(error)
    return None
