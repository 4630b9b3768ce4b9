"""The harness's reading of a job's checkpoint in MinIO: its layout (`parse_listing`, `read_layout`) and its lineage
(`lineage`: what the lineage check judges, and every file a restart would load read back). The deliberate damage of the
checkpoint.corrupt fault is chaos/checkpoint_damage.py, which chooses its files from this same reading.

The harness reads MinIO directly (not through the `s3` proxy), so what it sees does not depend on the faults it
injects. It parses the checkpoint's layout with its own code (`parse_listing` below) and imports nothing from the
job: a fault that chose its targets with the job's own parser could only ever land where the job's verification
already looks (issue 20). Layout, relative to the checkpoint root (Spark 4.3, RocksDB state store, checkpoint
format 1; FACTS.md "Checkpoints and RocksDB state"):

    metadata                              the query id; read on every start                      kind `metadata`
    sources/<s>/<p>                       a source's initial offsets                              kind `sources`
    offsets/<b>                           what batch b reads (the newest may be in flight)         kind `offsets`
    commits/<b>                           batch b is done                                          kind `commits`
    state/<op>/_metadata/*, state/<op>/<part>/_metadata/*, state/<op>/[<part>/]_stateSchema/*
                                          operator metadata and state schemas                      kind `state_metadata`
    state/<op>/<part>[/<store>]/<v>.zip   a RocksDB snapshot of state version v                    kind `zip`
    state/<op>/<part>[/<store>]/<v>.changelog   version v's changes over v-1                       kind `changelog`
    state/<op>/<part>[/<store>]/SSTs/<n>-<uuid>.sst   SST files the snapshots share                kind `sst`
    .<name>.<uuid>.tmp (any directory)    an upload or rename that did not finish: never read, never damaged
    _lease, _integrity/...                the hardened job's own bookkeeping: never damaged

A snapshot zip's `metadata` entry is a "v1" line, then {"sstFiles": [{"dfsSstFileName": ..., "sizeBytes": ...}]}.
Batch b commits state version b+1.
"""
from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

STATE_KINDS = ("sst", "zip", "changelog")           # `version`: the state version
BATCH_KINDS = ("offsets", "commits")                # `version`: the batch id
RECORD_KINDS = ("metadata", "sources", "state_metadata")  # written once: no version (only `newest`)
KINDS = STATE_KINDS + ("metadata", "sources", "offsets", "commits", "state_metadata")
ANY = "any"  # one of KINDS that has a file, drawn with the seeded rng
KIND_CHOICES = KINDS + (ANY,)

# RocksDB's block-based table magic number 0x88e241b785f4cff7 as it ends an SST file (little endian). The job has
# the same constant (job/checkpoint.py); it is written out again here on purpose: the harness must not share the
# job's notion of an intact file, or a bug there would hide from the faults that are meant to find it.
SST_MAGIC = bytes.fromhex("f7cff485b741e288")

# What reads the SSTs and changelogs a restart loads (infra/state_files.py): (kind, key, content) of each ->
# {key: None if its reader read it whole, else what is wrong}.
StateReader = Callable[[list[tuple[str, str, bytes]]], Mapping[str, str | None]]
READERS = "RocksDB's SstFileReader with every block checksum, Spark's changelog reader"

INTEGRITY_DIR = "_integrity"
LEASE = "_lease"

_DIGITS = re.compile(r"\d+")
_SNAPSHOT_OR_CHANGELOG = re.compile(r"(\d+)\.(zip|changelog)")
_STATE_METADATA_DIRS = ("_metadata", "_stateSchema")


@dataclass(frozen=True)
class Listed:
    """One object of a listing: key (full, inside the bucket), size, ETag."""
    key: str
    size: int
    etag: str


@dataclass(frozen=True)
class CheckpointFile:
    key: str                # relative to the checkpoint root, e.g. state/0/3/12.changelog or offsets/7
    kind: str               # one of KINDS
    partition: str | None   # state data files: e.g. 0/3; else None
    version: int | None     # zip/changelog: the state version; offsets/commits: the batch id; else None
    size: int
    etag: str


@dataclass
class Partition:
    snapshots: dict[int, CheckpointFile] = field(default_factory=dict)
    changelogs: dict[int, CheckpointFile] = field(default_factory=dict)
    ssts: dict[str, CheckpointFile] = field(default_factory=dict)  # by file name


@dataclass
class Layout:
    """What a checkpoint holds, as the harness reads it."""
    metadata: CheckpointFile | None = None
    sources: dict[str, CheckpointFile] = field(default_factory=dict)         # key -> file
    offsets: dict[int, CheckpointFile] = field(default_factory=dict)         # batch id -> file
    commits: dict[int, CheckpointFile] = field(default_factory=dict)         # batch id -> file
    state_metadata: dict[str, CheckpointFile] = field(default_factory=dict)  # key -> file
    partitions: dict[str, Partition] = field(default_factory=dict)
    temporary: list[str] = field(default_factory=list)    # unfinished uploads and renames, anywhere
    bookkeeping: list[str] = field(default_factory=list)  # _integrity/... (manifests, rollbacks, quarantine)
    lease: bool = False
    other: list[str] = field(default_factory=list)        # anything else (not damaged: nobody is known to read it)

    @property
    def last_commit(self) -> int | None:
        return max(self.commits) if self.commits else None

    def files(self, kind: str) -> list[CheckpointFile]:
        """Every file of one kind, by key."""
        if kind == "metadata":
            found = [self.metadata] if self.metadata is not None else []
        elif kind == "sources":
            found = list(self.sources.values())
        elif kind in BATCH_KINDS:
            found = list((self.offsets if kind == "offsets" else self.commits).values())
        elif kind == "state_metadata":
            found = list(self.state_metadata.values())
        elif kind in STATE_KINDS:
            found = [f for p in self.partitions.values()
                     for f in (p.snapshots.values() if kind == "zip" else p.changelogs.values() if kind == "changelog"
                               else p.ssts.values())]
        else:
            raise ValueError(f"unknown checkpoint file kind {kind!r}; allowed: {', '.join(KIND_CHOICES)}")
        return sorted(found, key=lambda f: f.key)


def classify(key: str) -> tuple[str, str | None, int | None]:
    """(kind, partition, version) of a key relative to the checkpoint root. Kinds beyond KINDS: `temporary`,
    `lease`, `bookkeeping`, `other`."""
    parts = key.split("/")
    if parts[-1].startswith("."):
        return "temporary", None, None  # .<name>.<uuid>.tmp: S3 has no rename; Spark writes, copies, deletes
    if key == LEASE:
        return "lease", None, None
    if parts[0] == INTEGRITY_DIR:
        return "bookkeeping", None, None
    if key == "metadata":
        return "metadata", None, None
    if len(parts) == 3 and parts[0] == "sources" and _DIGITS.fullmatch(parts[1]) and _DIGITS.fullmatch(parts[2]):
        return "sources", None, None
    if len(parts) == 2 and parts[0] in BATCH_KINDS and _DIGITS.fullmatch(parts[1]):
        return parts[0], None, int(parts[1])
    if parts[0] != "state" or len(parts) < 4 or not _DIGITS.fullmatch(parts[1]):
        return "other", None, None
    # state/<op>/_metadata/..., state/<op>/_stateSchema/..., and the same two under state/<op>/<part>/
    if parts[2] in _STATE_METADATA_DIRS or (_DIGITS.fullmatch(parts[2]) and parts[3] in _STATE_METADATA_DIRS
                                            and len(parts) >= 5):
        return "state_metadata", None, None
    if not _DIGITS.fullmatch(parts[2]):
        return "other", None, None
    if "SSTs" in parts[3:-1]:
        at = parts.index("SSTs", 3)
        if at == len(parts) - 2 and parts[-1].endswith(".sst"):
            return "sst", "/".join(parts[1:at]), None
        return "other", None, None
    data = _SNAPSHOT_OR_CHANGELOG.fullmatch(parts[-1])
    if data:
        return data.group(2), "/".join(parts[1:-1]), int(data.group(1))
    return "other", None, None


def parse_listing(listing: Iterable, root: str) -> Layout:
    """Objects under `root/` (each with .key, .size, .etag; keys are full keys in the bucket) -> the layout.
    Directory markers and objects outside the root are left out."""
    layout = Layout()
    prefix = root.rstrip("/") + "/"
    for obj in listing:
        if not obj.key.startswith(prefix) or obj.key.endswith("/"):
            continue
        key = obj.key[len(prefix):]
        kind, partition, version = classify(key)
        file = CheckpointFile(key, kind, partition, version, obj.size, obj.etag)
        if kind == "temporary":
            layout.temporary.append(key)
        elif kind == "lease":
            layout.lease = True
        elif kind == "bookkeeping":
            layout.bookkeeping.append(key)
        elif kind == "other":
            layout.other.append(key)
        elif kind == "metadata":
            layout.metadata = file
        elif kind == "sources":
            layout.sources[key] = file
        elif kind == "offsets":
            assert version is not None  # classify gives offsets, commits and state files a version
            layout.offsets[version] = file
        elif kind == "commits":
            assert version is not None
            layout.commits[version] = file
        elif kind == "state_metadata":
            layout.state_metadata[key] = file
        else:
            assert partition is not None  # classify gives every state file its partition
            part = layout.partitions.setdefault(partition, Partition())
            if kind == "sst":
                part.ssts[key.rsplit("/", 1)[1]] = file
            else:
                assert version is not None
                (part.snapshots if kind == "zip" else part.changelogs)[version] = file
    layout.temporary.sort()
    layout.bookkeeping.sort()
    layout.other.sort()
    return layout


def snapshot_ssts(zip_bytes: bytes) -> dict[str, int]:
    """The SST files (name -> size) a snapshot zip lists in its `metadata` entry ("v1\\n{json}").

    Raises ValueError when the zip cannot be read (bad CRC, not a zip, no metadata entry)."""
    try:
        with zipfile.ZipFile(io.BytesIO(zip_bytes)) as archive:
            bad = archive.testzip()
            if bad is not None:
                raise ValueError(f"CRC mismatch in entry {bad}")
            text = archive.read("metadata").decode()
    except (zipfile.BadZipFile, KeyError, UnicodeDecodeError, EOFError, OSError) as error:
        raise ValueError(f"unreadable zip ({type(error).__name__}: {error})") from None
    first, _, rest = text.partition("\n")
    body = rest if re.fullmatch(r"v\d+", first.strip()) else text
    try:
        return {entry["dfsSstFileName"]: int(entry["sizeBytes"]) for entry in json.loads(body).get("sstFiles", [])}
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"unreadable snapshot metadata ({error})") from None


# -- reading MinIO ---------------------------------------------------------------------------------------------
def _listing(s3, bucket: str, prefix: str) -> list[Listed]:
    return [Listed(o.object_name, o.size or 0, (o.etag or "").strip('"'))
            for o in s3.list_objects(bucket, prefix=prefix.rstrip("/") + "/", recursive=True) if not o.is_dir]


def read_object(s3, bucket: str, key: str) -> bytes:
    response = s3.get_object(bucket, key)
    try:
        return response.read()
    finally:
        response.close()
        response.release_conn()


def read_layout(s3, bucket: str, prefix: str) -> Layout:
    root = prefix.rstrip("/")
    return parse_listing(_listing(s3, bucket, root), root)


def lineage(s3, bucket: str, prefix: str, read_state: StateReader | None = None) -> dict:
    """What the lineage checker judges (chaos/checks/lineage.py): batch ids in offsets/ and commits/, per state
    partition the snapshot and changelog versions, the integrity manifests and rollbacks, the lease, if any, and
    what a restart reads (`read_state`: the SSTs and changelogs read with RocksDB's and Spark's own readers)."""
    root = prefix.rstrip("/")
    layout = read_layout(s3, bucket, root)
    rollbacks = []
    for key in (k for k in layout.bookkeeping if k.startswith(f"{INTEGRITY_DIR}/rollbacks/")):
        try:
            rollbacks.append(json.loads(read_object(s3, bucket, f"{root}/{key}")))
        except ValueError:
            rollbacks.append({"unreadable": key})
    lease = None
    if layout.lease:
        try:
            lease = json.loads(read_object(s3, bucket, f"{root}/{LEASE}"))
        except ValueError:
            lease = {"unreadable": True}
    return {
        "prefix": prefix,
        "metadata": layout.metadata is not None,
        "offsets": sorted(layout.offsets),
        "commits": sorted(layout.commits),
        "state": {name: {"snapshots": sorted(p.snapshots), "changelogs": sorted(p.changelogs), "ssts": len(p.ssts)}
                  for name, p in sorted(layout.partitions.items())},
        "manifests": sorted(int(k.rsplit("/", 1)[1].split(".")[0]) for k in layout.bookkeeping
                            if k.startswith(f"{INTEGRITY_DIR}/manifests/") and k.endswith(".json")),
        "temporary_files": layout.temporary,
        "rollbacks": rollbacks,
        "lease": lease,
        "content": read_what_a_restart_loads(layout, lambda key: read_object(s3, bucket, f"{root}/{key}"),
                                             read_state),
    }


def _text_problem(kind: str, data: bytes) -> str | None:
    """Does a small checkpoint text file read as Spark writes it? (The harness's own reading, not the job's.)"""
    try:
        text = data.lstrip(b"\x00").decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8"
    if kind == "metadata":
        try:
            return None if isinstance(json.loads(text).get("id"), str) else "no query id"
        except (ValueError, AttributeError):
            return "not JSON"
    lines = [line for line in text.split("\n") if line]
    if not lines or not re.fullmatch(r"v\d+", lines[0]):
        return "no version line"
    if kind == "offsets" and len(lines) < 3:
        return "torn: no source offsets"
    for line in lines[1:]:
        if line == "-":
            continue
        try:
            if not isinstance(json.loads(line), dict):
                return "a line is not a JSON object"
        except ValueError:
            return "a line is not JSON"
    return None


def read_what_a_restart_loads(layout: Layout, read: Callable[[str], bytes],
                              read_state: StateReader | None = None) -> dict:
    """Read every file a restart of the query would read now and report what would not load: `metadata`, the newest
    offsets entry and the one before it, the newest commit, and per state partition the newest snapshot at or below
    the version to load (its CRCs, its SSTs' presence, listed sizes and footer magic) and the changelogs after it
    (present and not empty). Lineage by content, not by file names alone.

    `read_state` (infra/state_files.py read_state_files) then reads every one of those SSTs and changelogs with the
    readers a restart loads them with: RocksDB's (every block's checksum) and Spark's changelog reader (every record).
    Which files is this module's reading of the checkpoint (the snapshots' own SST lists), never the job's
    manifests. `readers` names them; `readers_failed` says why they could not run (the check is then NODATA)."""
    problems: list[str] = []
    read_count = 0
    state_files: list[tuple[str, str, bytes]] = []  # (kind, key, content) for read_state

    def load(file: CheckpointFile) -> bytes | None:
        nonlocal read_count
        read_count += 1
        try:
            return read(file.key)
        except Exception as error:  # gone between the listing and the read, or S3 trouble
            problems.append(f"{file.key}: cannot be read ({type(error).__name__})")
            return None

    texts = [layout.metadata] if layout.metadata is not None else []
    if layout.offsets:
        newest = max(layout.offsets)
        texts += [layout.offsets[b] for b in (newest, newest - 1) if b in layout.offsets]
    if layout.commits:
        texts.append(layout.commits[max(layout.commits)])
    for file in texts:
        data = load(file)
        why = None if data is None else _text_problem(file.kind, data)
        if why:
            problems.append(f"{file.key}: {why}")
    if layout.commits:
        version = max(layout.commits) + 1
        for name, partition in sorted(layout.partitions.items()):
            base = max((v for v in partition.snapshots if v <= version), default=0)
            if base:
                data = load(partition.snapshots[base])
                try:
                    needed = snapshot_ssts(data) if data is not None else {}
                except ValueError as error:
                    problems.append(f"{partition.snapshots[base].key}: {error}")
                    needed = {}
                for sst_name, size in sorted(needed.items()):
                    sst = partition.ssts.get(sst_name)
                    if sst is None:
                        problems.append(f"state/{name}: snapshot {base} needs SSTs/{sst_name}, which is missing")
                    elif sst.size != size:
                        problems.append(f"{sst.key}: {sst.size} bytes, its snapshot lists {size}")
                    else:
                        content = load(sst)
                        if content is not None and content[-8:] != SST_MAGIC:
                            problems.append(f"{sst.key}: bad table magic number")
                        elif content is not None:
                            state_files.append(("sst", sst.key, content))
            for v in range(base + 1, version + 1):
                changelog = partition.changelogs.get(v)
                if changelog is None:
                    problems.append(f"state/{name}: version {version} needs changelog {v}, which is missing")
                    break
                if changelog.size == 0:
                    problems.append(f"{changelog.key}: empty")
                elif read_state is not None:
                    content = load(changelog)
                    if content is not None:
                        state_files.append(("changelog", changelog.key, content))
    result: dict = {"files_read": read_count, "problems": problems}
    if read_state is not None:
        try:
            answers = read_state(state_files)
        except Exception as error:  # noqa: BLE001 - no JDK, a reader that did not answer: said, never a pass
            result["readers_failed"] = f"{type(error).__name__}: {error}"
        else:
            problems += [f"{key}: {why}" for _kind, key, _ in state_files if (why := answers.get(key))]
            result["readers"] = f"{len(state_files)} SSTs and changelogs read whole ({READERS})"
    return result
