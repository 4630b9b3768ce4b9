"""Checkpoint integrity: a manifest per state version written before its batch commits, verification of the
whole checkpoint before every start, and repairs that are journaled so a crash in the middle of one is finished by
the next start.

Incident 001: a restore failed with RocksDB "Bad table magic number" because a checkpointed state file was
damaged; the job could not start again. Here a damaged file anywhere in the job's checkpoint is found before Spark
reads it, and the job starts from the newest point that is intact instead, replaying the rest from Kafka. What is
read on a start, and what "intact" means per file, is in job/checkpoint.py.

- Recording (`Integrity.record`, called by the sink inside batch b, after the batch's state is committed and before
  Spark writes commits/b): the files state version v = b+1 is loaded from (snapshot, its SSTs, the changelogs after
  it), the newest offsets and commits entries, each with size and checksum (the object's MD5 ETag), and a copy of
  `metadata` and of the sources' initial offsets, go to `<checkpoint>/_integrity/manifests/<v>.json`. Because the
  manifest comes before the commit, every committed version has one: a crash at any moment leaves either a
  committed, recorded version or an uncommitted batch that Spark runs again.
- Verifying (before each start, and before a restart after a failure that names the checkpoint; the plan is
  `plan_recovery` in job/repair_plan.py, pure, over the checks this module gives it): every file Spark would read
  is checked: recorded files against their size and checksum (content downloaded and hashed); other files on their
  own (a zip's CRCs, an SST's listed size and footer magic, a log entry's syntax). A changelog with no recorded
  checksum cannot be proven intact and counts as damaged (it costs one batch's replay). Every state partition the
  query has (each operator's `spark.sql.shuffle.partitions` partitions, from the offsets log, and every partition a
  manifest recorded) must load the version from files that are there: one whose files are all gone is damage too.
- Repairing, per kind of damage (docs/job.md has the table):
  * `metadata` or a source's initial offsets: restored from the copy in the manifests (without one: set aside, and
    Spark writes a new one; nothing reads the old content once a batch is committed);
  * an uncommitted offsets entry (the batch in flight) that is damaged or not recorded (the batch never reached its
    manifest, so it wrote no output): removed, so Spark plans that batch again;
  * the newest commit, when not recorded (the job crashed before the next batch's manifest; a graceful stop records
    it): not proven, so that batch is rolled back and run again (one batch);
  * a damaged snapshot or SST: quarantined, so Spark rebuilds the same version from an older snapshot and changelogs;
  * a damaged changelog, or a damaged offsets or commits entry that a start reads: every partition rolls back to the
    newest version u that all of them can load and whose batch records are intact: offsets and commits of batches
    >= u are removed (batch u is planned again and replayed from Kafka), state files of versions > u and manifests
    > u are removed, and the output of batches >= u moved to quarantine, so each session is written exactly once;
  * nothing committed yet, or no version > 0 loadable (a partition with no files can load only version 0, and every
    partition of a batch loads the same version): the job starts over from its input (every state file, offsets
    and commits entry and output object set aside; `metadata` and `sources/` kept), as long as the checkpoint still
    holds its whole history (offsets from batch 0) and Kafka still holds every offset batch 0 read
    (`input_retained`, asked before anything is moved);
  * otherwise: the job refuses to start, with one line naming the missing or damaged part (IntegrityError: exit 5).
  Damaged files are moved to `_integrity/quarantine/<stamp>/`, never destroyed. A repair is first written to
  `_integrity/rollbacks/<stamp>.json` as "applying", then carried out, then marked "done"; a start that finds one
  still "applying" (the job was killed during a repair) carries it out again before anything else. Every step is
  idempotent.
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import asdict

from .checkpoint import (
    SST_MAGIC,
    Checkpoint,
    StateFile,
    expected_partitions,
    parse_listing,
    record_problem,
    shuffle_partitions,
    snapshot_ssts,
    source_start,
)
from .objectstore import Missing, ObjectStore
from .repair_plan import Check, CheckRecord, IntegrityError, Plan, plan_recovery, record_key, summary

__all__ = ["INTEGRITY_DIR", "Integrity", "IntegrityError", "Plan", "plan_recovery", "SST_MAGIC", "Checkpoint",
           "StateFile", "parse_listing", "snapshot_ssts"]

INTEGRITY_DIR = "_integrity"
# (where batch 0 began: {topic: {partition: offset}}) -> None while Kafka still holds every offset from there, else
# why not. A start over replays every batch from there: without that input it would lose what it cannot read.
InputRetained = Callable[[dict[str, dict[str, int]]], "str | None"]
_OUTPUT_FILE = re.compile(r"batch-(\d+)\.jsonl$")
# What a start lists: the checkpoint without the job's own bookkeeping (manifests, quarantine, rollbacks, lease).
_LISTED_PREFIXES = ("metadata", "sources/", "offsets/", "commits/", "state/")


# -- I/O: verification against manifests, recording, applying a plan ----------------------------------------
def _md5_hex(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def _is_md5(etag: str) -> bool:
    return bool(re.fullmatch(r"[0-9a-f]{32}", etag))


def _stamp() -> str:
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"-{int(time.time() * 1000) % 1000:03d}"


class Integrity:
    """Recording and verification for one checkpoint (`root` = the checkpoint's key prefix in the bucket)."""

    def __init__(self, store: ObjectStore, root: str, output_root: str, say: Callable[[str], None] = print,
                 input_retained: InputRetained | None = None):
        self.store = store
        self.input_retained = input_retained
        self.root = root.rstrip("/")
        self.output_root = output_root.rstrip("/")
        self.say = say
        self._zip_refs: dict[tuple[str, str], dict[str, int]] = {}  # (key, etag) -> SSTs
        self._copies: dict[tuple[str, str], str] = {}  # (key, etag) -> base64 content, for the manifests

    def _key(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def listing(self) -> Checkpoint:
        objects = [obj for prefix in _LISTED_PREFIXES for obj in self.store.list(self._key(prefix))]
        return parse_listing(objects, self.root)

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

    def _copy_of(self, key: str, etag: str) -> str:
        cached = self._copies.get((key, etag))
        if cached is None:
            cached = base64.b64encode(self.store.get(self._key(key))[0]).decode()
            self._copies[(key, etag)] = cached
        return cached

    def record(self, batch_id: int) -> int:
        """Write the manifest of state version batch_id + 1 (inside batch `batch_id`, before its commit); returns how
        many files it names. Raises on an S3 failure: the batch then fails and is run again, never committed
        unrecorded."""
        version = batch_id + 1
        checkpoint = self.listing()
        files = self.load_set(checkpoint, version)
        for log in ("offsets", "commits"):
            for batch in (batch_id - 2, batch_id - 1, batch_id):
                found = checkpoint.size_etag(record_key(log, batch))
                if found is not None:
                    files[record_key(log, batch)] = {"size": found[0], "etag": found[1]}
        copies = {}
        for key in checkpoint.copied_keys:
            size, etag = checkpoint.files[key]
            files[key] = {"size": size, "etag": etag}
            copies[key] = self._copy_of(key, etag)
        manifest = {"version": version, "batch": batch_id, "written_at_ms": int(time.time() * 1000),
                    "files": files, "copies": copies}
        self.store.put(self._key(f"{INTEGRITY_DIR}/manifests/{version:012d}.json"),
                       json.dumps(manifest, sort_keys=True).encode())
        return len(files)

    def recorded(self) -> tuple[dict[str, dict], dict[str, str]]:
        """(key -> {size, etag}, key -> base64 copy) from every manifest; a later manifest's entry wins (a replayed
        batch rewrites)."""
        known: dict[str, dict] = {}
        copies: dict[str, str] = {}
        for obj in sorted(self.store.list(self._key(f"{INTEGRITY_DIR}/manifests/")), key=lambda o: o.key):
            try:
                manifest = json.loads(self.store.get(obj.key)[0])
            except (ValueError, Missing):
                continue  # a torn manifest proves nothing; files it named count as unrecorded
            known.update(manifest.get("files", {}))
            copies.update(manifest.get("copies", {}))
        return known, copies

    # -- verification ------------------------------------------------------------------------------------
    def checker(self, recorded: dict[str, dict]) -> Check:
        verdicts: dict[tuple[str, str], str | None] = {}

        def check(file: StateFile, expected_size: int | None) -> str | None:
            memo = (file.key, file.etag)
            if memo not in verdicts:
                verdicts[memo] = self._verify(file, expected_size, recorded.get(file.key))
            return verdicts[memo]

        return check

    def record_checker(self, checkpoint: Checkpoint, recorded: dict[str, dict]) -> CheckRecord:
        verdicts: dict[str, str | None] = {}

        def check(key: str) -> str | None:
            if key not in verdicts:
                verdicts[key] = self._verify_record(key, checkpoint.files.get(key), recorded.get(key))
            return verdicts[key]

        return check

    def _verify_record(self, key: str, listed: tuple[int, str] | None, record: dict | None) -> str | None:
        if listed is None:
            return "missing"
        size, etag = listed
        if record is not None and (size, etag) != (record["size"], record["etag"]):
            return (f"size {size} bytes, recorded {record['size']}" if size != record["size"]
                    else "checksum differs from the recorded one (overwritten)")
        try:
            data = self.store.get(self._key(key))[0]
        except Missing:
            return "missing"
        if record is not None and _is_md5(record["etag"]) and _md5_hex(data) != record["etag"]:
            return "content MD5 differs from the recorded checksum"
        return record_problem(key, data)

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

    def expected_partitions(self, checkpoint: Checkpoint, recorded: dict[str, dict]) -> set[str]:
        """Every state partition a version needs: each operator's partitions, as many as the query's offsets log
        fixed (`spark.sql.shuffle.partitions`), and every partition a manifest recorded files of; not only those
        that still have files."""
        partitions = None
        for batch in sorted(checkpoint.offsets, reverse=True)[:3]:  # the conf is the same in every entry
            try:
                partitions = shuffle_partitions(self.store.get(self._key(record_key("offsets", batch)))[0])
            except Missing:
                continue
            if partitions is not None:
                break
        return expected_partitions([*checkpoint.files, *recorded], partitions)

    def verify_and_repair(self) -> Plan:
        """Before a start: finish a repair a crash interrupted, then verify what Spark will read and repair it."""
        self._finish_interrupted_repairs()
        checkpoint = self.listing()
        recorded, copies = self.recorded()
        plan = plan_recovery(checkpoint, self.checker(recorded), self.refs,
                             self.record_checker(checkpoint, recorded), copies=set(copies), recorded=set(recorded),
                             expected=self.expected_partitions(checkpoint, recorded))
        retained = self._input_checked(plan, checkpoint, copies)
        if plan.needed:
            self._apply(plan, {key: copies[key] for key in plan.restore}, self._carried(plan, recorded, copies))
            self.say(f"integrity: {plan.describe()}{retained}")
        elif plan.version is not None:
            self.say(f"integrity: state version {plan.version} verified")
        return plan

    def _batch_0_start(self, checkpoint: Checkpoint, copies: dict[str, str]) -> dict[str, dict[str, int]]:
        """Where batch 0 began reading, from sources/*/0 (the manifests' copy where the file does not parse)."""
        start: dict[str, dict[str, int]] = {}
        for key in (k for k in checkpoint.copied_keys if k.startswith("sources/")):
            try:
                start.update(source_start(self.store.get(self._key(key))[0]))
                continue
            except (ValueError, Missing):
                pass
            if key in copies:
                try:
                    start.update(source_start(base64.b64decode(copies[key])))
                except ValueError:
                    pass
        return start

    def _input_checked(self, plan: Plan, checkpoint: Checkpoint, copies: dict[str, str]) -> str:
        """Before a start over replays committed batches: Kafka must still hold every offset batch 0 read, or the
        replay would silently miss what retention removed. Raises IntegrityError then; returns what the log line
        adds."""
        if not (plan.start_over and plan.drop_batches) or self.input_retained is None:
            return ""
        start = self._batch_0_start(checkpoint, copies)
        if not start:
            return " (the sources' initial offsets are unreadable: Spark reads the topic from its earliest offsets)"
        why = self.input_retained(start)
        if why:
            raise IntegrityError(
                f"the checkpoint cannot be repaired without replaying its input ({summary(plan.damaged)}), and "
                f"Kafka no longer holds it: {why}; restore the checkpoint from a backup or start a new deployment "
                "with a new checkpoint path")
        return "; Kafka still holds every offset from batch 0's start"

    # -- repairs, journaled ------------------------------------------------------------------------------
    @staticmethod
    def _carried(plan: Plan, recorded: dict[str, dict], copies: dict[str, str]) -> dict | None:
        """A rollback deletes the manifests of the versions it drops; what they recorded of the files it keeps (the
        newest kept commit above all) goes into one manifest of the version it restarts at, so a second crash
        before any progress does not roll back further."""
        if not plan.drop_batches or plan.start_over:
            return None
        gone = set(plan.quarantine) | set(plan.drop_state) | {
            record_key(log, b) for b in plan.drop_batches for log in ("offsets", "commits")}
        files = {key: entry for key, entry in recorded.items() if key not in gone}
        return {"version": plan.restart_version, "batch": (plan.restart_version or 0) - 1, "carried": True,
                "written_at_ms": int(time.time() * 1000), "files": files, "copies": copies}

    def _apply(self, plan: Plan, restore: dict[str, str], carried: dict | None = None) -> None:
        stamp = _stamp()
        journal = self._key(f"{INTEGRITY_DIR}/rollbacks/{stamp}.json")
        record = {**asdict(plan), "at": stamp, "quarantine_dir": f"{INTEGRITY_DIR}/quarantine/{stamp}",
                  "description": plan.describe(), "status": "applying", "restore_copies": restore,
                  "carried_manifest": carried}
        self.store.put(journal, json.dumps(record, indent=1, sort_keys=True).encode())
        record["moved_output"] = self._carry_out(record)
        record["status"] = "done"
        record.pop("restore_copies")
        record.pop("carried_manifest")
        self.store.put(journal, json.dumps(record, indent=1, sort_keys=True).encode())

    def _carry_out(self, record: dict) -> list[str]:
        """Every step is idempotent, so a journal found "applying" is simply carried out again."""
        quarantine = record["quarantine_dir"]
        for key, content in sorted(record.get("restore_copies", {}).items()):
            self.store.put(self._key(key), base64.b64decode(content))
        for key in record["quarantine"]:
            self._move(self._key(key), self._key(f"{quarantine}/{key}"))
        for key in record["drop_state"]:
            self.store.delete(self._key(key))
        if record.get("start_over"):
            # Spark wants state/, offsets/ and commits/ empty on batch 0: directory markers and unfinished uploads
            # (a `.N.<uuid>.tmp` of an offsets entry whose rename never came) count too.
            for prefix in ("state/", "offsets/", "commits/"):
                for obj in self.store.list(self._key(prefix), markers=True):
                    self.store.delete(obj.key)
        moved_output = []
        if record["drop_batches"]:
            first = record["drop_batches"][0]
            # Output first: a crash after it leaves the logs as they were, and the next start repeats the repair.
            for obj in self.store.list(self.output_root + "/"):
                match = _OUTPUT_FILE.search(obj.key)
                if match and int(match.group(1)) >= first:
                    relative = obj.key[len(self.output_root) + 1:]
                    self._move(obj.key, self._key(f"{quarantine}/output/{relative}"))
                    moved_output.append(relative)
            # Newest first: a crash half-way leaves a shorter but still consistent log.
            for batch in sorted(record["drop_batches"], reverse=True):
                for log in ("commits", "offsets"):
                    self.store.delete(self._key(record_key(log, batch)))
            restart = record["restart_version"] or 0
            for obj in self.store.list(self._key(f"{INTEGRITY_DIR}/manifests/")):
                if record.get("start_over") or int(obj.key.rsplit("/", 1)[-1].split(".")[0]) >= restart:
                    self.store.delete(obj.key)
            if record.get("carried_manifest"):
                self.store.put(self._key(f"{INTEGRITY_DIR}/manifests/{restart:012d}.json"),
                               json.dumps(record["carried_manifest"], sort_keys=True).encode())
        return moved_output

    def _move(self, key: str, to_key: str) -> None:
        try:
            self.store.move(key, to_key)
        except Missing:
            pass  # moved by the interrupted attempt already

    def _finish_interrupted_repairs(self) -> None:
        for obj in sorted(self.store.list(self._key(f"{INTEGRITY_DIR}/rollbacks/")), key=lambda o: o.key):
            try:
                record = json.loads(self.store.get(obj.key)[0])
            except (ValueError, Missing):
                continue
            if record.get("status") != "applying":
                continue
            self.say(f"integrity: finishing the repair interrupted at {record.get('at')}: {record.get('description')}")
            record["moved_output"] = self._carry_out(record)
            record["status"] = "done"
            record.pop("restore_copies", None)
            record.pop("carried_manifest", None)
            self.store.put(obj.key, json.dumps(record, indent=1, sort_keys=True).encode())
