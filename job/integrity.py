"""State integrity: a manifest per state version, verification before every start, and rollback to the newest
version that verifies.

Incident 001: a restore failed with RocksDB "Bad table magic number" because a checkpointed state file was
damaged; the job could not start again. A damaged file in this job's checkpoint is found before Spark loads it,
and the job starts from the newest state that is intact instead, replaying the rest from Kafka.

Layout (RocksDB state store, checkpoint format 1; FACTS.md): `state/<op>/<part>/` holds `<v>.zip` snapshots
(their `metadata` entry lists the SST files they need, with sizes), `SSTs/<name>.sst`, and with changelog
checkpointing `<v>.changelog` files. Spark loads version u of a partition from the newest snapshot s <= u and
the changelogs s+1..u (from nothing when there is no snapshot). Batch b commits state version b+1.

- Recording (`Recorder`, after each committed batch): the files that version v = b+1 is loaded from, with
  their sizes and checksums (the object's MD5 ETag), go to `<checkpoint>/_integrity/manifests/<v>.json`.
- Verifying (`plan_recovery`, before each start): for the version Spark is about to load, every file it would
  read is checked. A file named in a manifest must still have its recorded size and checksum (the content is
  downloaded and hashed). A file written after the last manifest (a snapshot the maintenance thread uploaded
  later) is checked on its own: a zip must pass its CRCs and parse, an SST must have the size its snapshot
  lists and RocksDB's footer magic number. A changelog with no recorded checksum cannot be proven intact and
  is treated as damaged (at most one batch is replayed because of that).
- Repairing: a damaged snapshot (or one whose SSTs are damaged) is quarantined, so Spark falls back to an older
  snapshot and the changelogs; if a partition still cannot load the version, every partition rolls back to the
  newest version u that all of them can load: offsets and commits of batches >= u are removed (batch u is
  planned again and replayed from Kafka), state files of versions > u and manifests > u are removed, and the
  output of batches >= u is moved to quarantine, so each session is emitted exactly once by the replay.
  Damaged files are moved to `_integrity/quarantine/<stamp>/`, never destroyed; every repair is written to
  `_integrity/rollbacks/<stamp>.json` and logged.
- If no retained version verifies (the commits needed to restart from it are gone), the job refuses to start
  with one line saying so (IntegrityError).

The planning is pure (a listing and a `check` callback in, a plan out), so tests/unit exercise it without S3.
"""
from __future__ import annotations

import hashlib
import io
import json
import re
import time
import zipfile
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable

from .objectstore import Listed, ObjectStore

SST_MAGIC = bytes.fromhex("f7cff485b741e288")  # RocksDB block-based table magic 0x88e241b785f4cff7, little endian
INTEGRITY_DIR = "_integrity"
_STATE_FILE = re.compile(r"^state/(?P<partition>\d+/\d+(?:/[^/]+)*?)/(?:(?P<version>\d+)\.(?P<kind>zip|changelog)"
                         r"|SSTs/(?P<sst>[^/]+\.sst))$")
_BATCH_FILE = re.compile(r"^(offsets|commits)/(\d+)$")
_OUTPUT_FILE = re.compile(r"batch-(\d+)\.jsonl$")


class IntegrityError(Exception):
    """No retained state version verifies: the job cannot start without losing or duplicating output."""


# -- the checkpoint as listed --------------------------------------------------------------------------------
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

    @property
    def version_to_load(self) -> int | None:
        """The state version Spark loads on start: last committed batch + 1 (None: nothing committed yet)."""
        return max(self.commits) + 1 if self.commits else None


def parse_listing(listing: Iterable[Listed], root: str) -> Checkpoint:
    """Objects under `root/` (the checkpoint prefix) -> what the checkpoint holds. Temporary files are ignored."""
    checkpoint = Checkpoint()
    prefix = root.rstrip("/") + "/"
    for obj in listing:
        if not obj.key.startswith(prefix):
            continue
        key = obj.key[len(prefix):]
        if key.rsplit("/", 1)[-1].startswith("."):
            continue  # .<name>.<uuid>.tmp: an upload or rename that did not finish
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


# -- load sets -----------------------------------------------------------------------------------------------
Check = Callable[[StateFile, "int | None"], "str | None"]  # (file, expected size) -> None if intact, else why


@dataclass(frozen=True)
class Damage:
    key: str
    reason: str


def _snapshot_usable(partition: Partition, version: int, check: Check, refs: Callable[[StateFile], dict[str, int]],
                     damage: dict[str, str]) -> bool:
    zip_file = partition.snapshots[version]
    why = check(zip_file, None)
    if why:
        damage[zip_file.key] = why
        return False
    try:
        needed = refs(zip_file)
    except ValueError as error:
        damage[zip_file.key] = str(error)
        return False
    for name, size in sorted(needed.items()):
        sst = partition.ssts.get(name)
        if sst is None:
            damage[zip_file.key] = f"needs SSTs/{name}, which is missing"
            return False
        why = check(sst, size)
        if why:
            damage[sst.key] = why
            damage.setdefault(zip_file.key, f"needs the damaged {sst.key}")
            return False
    return True


def newest_loadable(partition: Partition, version: int, check: Check, refs: Callable[[StateFile], dict[str, int]],
                    damage: dict[str, str], unusable: set[int]) -> int:
    """The newest version <= `version` this partition can load once the snapshots in `unusable` (filled in here:
    damaged ones) are quarantined. 0 means: only from nothing (replay every batch)."""
    for target in range(version, 0, -1):
        candidates = sorted((v for v in partition.snapshots if v <= target and v not in unusable), reverse=True)
        for base in candidates + [0]:
            if base and not _snapshot_usable(partition, base, check, refs, damage):
                unusable.add(base)
                continue
            # Spark replays changelogs base+1..target; every one must be there and intact.
            chain = [partition.changelogs.get(v) for v in range(base + 1, target + 1)]
            broken = next((i for i, f in enumerate(chain) if f is None or check(f, None)), None)
            if broken is None:
                return target
            missing = chain[broken]
            if missing is not None:
                damage[missing.key] = check(missing, None) or "damaged"
            break  # an older base cannot help: Spark always starts from the newest usable snapshot <= target
    return 0


@dataclass
class Plan:
    version: int | None                 # what Spark would load without repair
    restart_version: int | None         # what it loads after the repair (== version: no rollback)
    damaged: dict[str, str] = field(default_factory=dict)  # key -> why
    quarantine: list[str] = field(default_factory=list)    # damaged files and snapshots that need them
    drop_state: list[str] = field(default_factory=list)    # state files of versions > restart_version
    drop_batches: list[int] = field(default_factory=list)  # offsets/commits of these batch ids are removed

    @property
    def needed(self) -> bool:
        return bool(self.quarantine or self.drop_state or self.drop_batches)

    def describe(self) -> str:
        damage = "; ".join(f"{key}: {why}" for key, why in sorted(self.damaged.items())[:3])
        if self.restart_version == self.version:
            return (f"state version {self.version}: quarantined {len(self.quarantine)} damaged file(s) ({damage}); "
                    f"Spark rebuilds it from older snapshots and changelogs, no batch is replayed")
        batches = f"{self.drop_batches[0]}..{self.drop_batches[-1]}" if self.drop_batches else "none"
        return (f"state version {self.version} does not verify ({damage}); rolled back to version "
                f"{self.restart_version}: batches {batches} are replayed from Kafka, their output moved aside")


def plan_recovery(checkpoint: Checkpoint, check: Check, refs: Callable[[StateFile], dict[str, int]]) -> Plan:
    version = checkpoint.version_to_load
    if version is None:
        return Plan(None, None)
    damage: dict[str, str] = {}
    unusable: dict[str, set[int]] = {}
    loadable = {}
    for name, partition in sorted(checkpoint.partitions.items()):
        unusable[name] = set()
        loadable[name] = newest_loadable(partition, version, check, refs, damage, unusable[name])
    restart = min(loadable.values(), default=version)
    plan = Plan(version, restart, damaged=damage)
    for name, partition in sorted(checkpoint.partitions.items()):
        plan.quarantine += [partition.snapshots[v].key for v in sorted(unusable[name])]
    bad_ssts = {key for key in damage if key.endswith(".sst")}
    plan.quarantine += sorted(bad_ssts)
    bad_changelogs = {key for key in damage if key.endswith(".changelog")}
    if restart < version:
        if restart and (restart - 1) not in checkpoint.commits or restart == 0 and 0 not in checkpoint.offsets:
            have = f"{min(checkpoint.commits)}..{max(checkpoint.commits)}" if checkpoint.commits else "none"
            raise IntegrityError(
                f"state version {version} does not verify ({'; '.join(f'{k}: {w}' for k, w in sorted(damage.items())[:3])}) "
                f"and the newest version that does ({restart}) is older than the retained batches (commits {have}); "
                "restore the checkpoint from a backup or start a new deployment with a new checkpoint path")
        for name, partition in sorted(checkpoint.partitions.items()):
            for kind_files in (partition.snapshots, partition.changelogs):
                for v, file in sorted(kind_files.items()):
                    if v > restart and file.key not in plan.quarantine:
                        (plan.quarantine if file.key in bad_changelogs else plan.drop_state).append(file.key)
        plan.drop_batches = sorted(b for b in checkpoint.offsets | checkpoint.commits if b >= restart)
    else:
        # A damaged changelog newer than the version loaded is never read; it is rewritten by its batch.
        plan.quarantine += sorted(k for k in bad_changelogs if k not in plan.quarantine)
    plan.quarantine = list(dict.fromkeys(plan.quarantine))
    return plan


# -- I/O: verification against manifests, recording, applying a plan ----------------------------------------
def _md5_hex(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def _is_md5(etag: str) -> bool:
    return bool(re.fullmatch(r"[0-9a-f]{32}", etag))


class Integrity:
    """Recording and verification for one checkpoint (`root` = the checkpoint's key prefix in the bucket)."""

    def __init__(self, store: ObjectStore, root: str, output_root: str, say: Callable[[str], None] = print):
        self.store = store
        self.root = root.rstrip("/")
        self.output_root = output_root.rstrip("/")
        self.say = say
        self._zip_refs: dict[tuple[str, str], dict[str, int]] = {}  # (key, etag) -> SSTs

    def _key(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def listing(self) -> Checkpoint:
        return parse_listing(self.store.list(self.root + "/"), self.root)

    def refs(self, zip_file: StateFile) -> dict[str, int]:
        cached = self._zip_refs.get((zip_file.key, zip_file.etag))
        if cached is None:
            cached = snapshot_ssts(self.store.get(self._key(zip_file.key))[0])
            self._zip_refs[(zip_file.key, zip_file.etag)] = cached
        return cached

    # -- recording ---------------------------------------------------------------------------------------
    def load_set(self, checkpoint: Checkpoint, version: int) -> dict[str, dict]:
        """Every file version `version` is loaded from, as Spark would pick them now."""
        files: dict[str, dict] = {}
        for partition in checkpoint.partitions.values():
            bases = [v for v in partition.snapshots if v <= version]
            base = max(bases, default=0)
            if base:
                zip_file = partition.snapshots[base]
                files[zip_file.key] = {"size": zip_file.size, "etag": zip_file.etag}
                for name in self.refs(zip_file):
                    sst = partition.ssts.get(name)
                    if sst is not None:
                        files[sst.key] = {"size": sst.size, "etag": sst.etag}
            for v in range(base + 1, version + 1):
                changelog = partition.changelogs.get(v)
                if changelog is not None:
                    files[changelog.key] = {"size": changelog.size, "etag": changelog.etag}
        return files

    def record(self, batch_id: int) -> int:
        """Write the manifest of state version batch_id + 1; returns how many files it names."""
        version = batch_id + 1
        files = self.load_set(self.listing(), version)
        manifest = {"version": version, "batch": batch_id, "written_at_ms": int(time.time() * 1000),
                    "files": files}
        self.store.put(self._key(f"{INTEGRITY_DIR}/manifests/{version:012d}.json"),
                       json.dumps(manifest, sort_keys=True).encode())
        return len(files)

    def recorded(self) -> dict[str, dict]:
        """key -> {size, etag} from every manifest; a later manifest's entry wins (a replayed batch rewrites)."""
        known: dict[str, dict] = {}
        for obj in sorted(self.store.list(self._key(f"{INTEGRITY_DIR}/manifests/")), key=lambda o: o.key):
            try:
                manifest = json.loads(self.store.get(obj.key)[0])
            except ValueError:
                continue  # a torn manifest proves nothing; files it named count as unrecorded
            known.update(manifest.get("files", {}))
        return known

    # -- verification ------------------------------------------------------------------------------------
    def checker(self, recorded: dict[str, dict]) -> Check:
        verdicts: dict[tuple[str, str], str | None] = {}

        def check(file: StateFile, expected_size: int | None) -> str | None:
            memo = (file.key, file.etag)
            if memo not in verdicts:
                verdicts[memo] = self._verify(file, expected_size, recorded.get(file.key))
            return verdicts[memo]

        return check

    def _verify(self, file: StateFile, expected_size: int | None, record: dict | None) -> str | None:
        if record is not None:
            if file.size != record["size"]:
                return f"size {file.size} bytes, recorded {record['size']} (truncated or overwritten)"
            if file.etag != record["etag"]:
                return "checksum differs from the recorded one (overwritten)"
            data = self.store.get(self._key(file.key))[0]
            if _is_md5(record["etag"]) and _md5_hex(data) != record["etag"]:
                return "content MD5 differs from the recorded checksum"
            if file.kind == "sst" and data[-8:] != SST_MAGIC:
                return "bad table magic number (footer damaged)"
            return None
        if file.kind == "changelog":
            return "no checksum recorded for it (written after the last manifest): cannot prove it intact"
        if expected_size is not None and file.size != expected_size:
            return f"size {file.size} bytes, its snapshot lists {expected_size}"
        data = self.store.get(self._key(file.key))[0]
        if file.kind == "sst":
            return None if data[-8:] == SST_MAGIC else "bad table magic number (footer damaged)"
        try:
            snapshot_ssts(data)
        except ValueError as error:
            return str(error)
        return None

    def verify_and_repair(self) -> Plan:
        """Before a start: verify what Spark will load; repair (quarantine, roll back) if needed."""
        checkpoint = self.listing()
        plan = plan_recovery(checkpoint, self.checker(self.recorded()), self.refs)
        if plan.needed:
            self._apply(plan, checkpoint)
            self.say(f"integrity: {plan.describe()}")
        elif plan.version is not None:
            self.say(f"integrity: state version {plan.version} verified")
        return plan

    def _apply(self, plan: Plan, checkpoint: Checkpoint) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"-{int(time.time() * 1000) % 1000:03d}"
        quarantine = f"{INTEGRITY_DIR}/quarantine/{stamp}"
        for key in plan.quarantine:
            self.store.move(self._key(key), self._key(f"{quarantine}/{key}"))
        for key in plan.drop_state:
            self.store.delete(self._key(key))
        moved_output = []
        if plan.drop_batches:
            first = plan.drop_batches[0]
            # Newest first: a crash half-way leaves a shorter but still consistent log.
            for batch in sorted(plan.drop_batches, reverse=True):
                for log in ("commits", "offsets"):
                    if batch in (checkpoint.commits if log == "commits" else checkpoint.offsets):
                        self.store.delete(self._key(f"{log}/{batch}"))
            for obj in self.store.list(self.output_root + "/"):
                match = _OUTPUT_FILE.search(obj.key)
                if match and int(match.group(1)) >= first:
                    relative = obj.key[len(self.output_root) + 1:]
                    self.store.move(obj.key, self._key(f"{quarantine}/output/{relative}"))
                    moved_output.append(relative)
            for obj in self.store.list(self._key(f"{INTEGRITY_DIR}/manifests/")):
                if int(obj.key.rsplit("/", 1)[-1].split(".")[0]) > plan.restart_version:
                    self.store.delete(obj.key)
        record = {**asdict(plan), "at": stamp, "quarantine_dir": quarantine, "moved_output": moved_output,
                  "description": plan.describe()}
        self.store.put(self._key(f"{INTEGRITY_DIR}/rollbacks/{stamp}.json"),
                       json.dumps(record, indent=1, sort_keys=True).encode())
