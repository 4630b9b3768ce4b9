"""The repair plan of a checkpoint (`plan_recovery`): which point of it a start can load and what must be set
aside, rolled back or restored to get there. Pure: it judges files through the `check` functions it is given and
does no I/O; job/integrity.py reads the checkpoint, verifies its files against the manifests and carries the plan
out. The rules, per kind of damage, are in job/integrity.py's docstring and docs/job.md.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .checkpoint import Checkpoint, Partition, StateFile, is_state_metadata


class IntegrityError(Exception):
    """No retained point of the checkpoint verifies: the job cannot start without losing or duplicating output."""


# -- load sets -----------------------------------------------------------------------------------------------
Check = Callable[[StateFile, "int | None"], "str | None"]  # (state file, expected size) -> None if intact, else why
CheckRecord = Callable[[str], "str | None"]  # (metadata / sources / offsets / commits key) -> None if intact, else why


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


def _base_name(base: int) -> str:
    return f"snapshot {base}" if base else "nothing (no snapshot)"


def newest_loadable(partition: Partition, version: int, check: Check, refs: Callable[[StateFile], dict[str, int]],
                    damage: dict[str, str], unusable: set[int], name: str = "?") -> int:
    """The newest version <= `version` this partition (`name`, e.g. 0/3) can load once the snapshots in `unusable`
    (filled in here: damaged ones) are quarantined; every file that version needs must be there and intact, and the
    first one missing or damaged is named in `damage`. 0 means: only from nothing (replay every batch)."""
    if not partition.snapshots and not partition.changelogs:
        return 0  # nothing of it is there: only a start from nothing rebuilds it
    target = version
    while target > 0:
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
            else:
                damage.setdefault(f"state/{name}/{base + broken + 1}.changelog",
                                  f"missing (version {target} is loaded from {_base_name(base)} and the "
                                  f"changelogs after it)")
            # An older base cannot help (Spark always starts from the newest usable snapshot <= target), and every
            # target from the broken changelog up needs it: the next one to try is the version just before it.
            target = base + broken
            break
    return 0


@dataclass
class Plan:
    version: int | None                 # what Spark would load without repair
    restart_version: int | None         # what it loads after the repair (== version: no rollback; 0: start over)
    damaged: dict[str, str] = field(default_factory=dict)  # key -> why
    quarantine: list[str] = field(default_factory=list)    # damaged files and snapshots that need them
    drop_state: list[str] = field(default_factory=list)    # state files of versions > restart_version
    drop_batches: list[int] = field(default_factory=list)  # offsets/commits of these batch ids are removed
    restore: list[str] = field(default_factory=list)       # metadata / sources files put back from the manifests
    start_over: bool = False            # every batch is replayed from the input: state/ is emptied entirely

    @property
    def needed(self) -> bool:
        return bool(self.quarantine or self.drop_state or self.drop_batches or self.restore)

    def describe(self) -> str:
        damage = summary(self.damaged) or "no damage"
        restored = f"; restored {', '.join(self.restore)} from the manifests" if self.restore else ""
        if self.start_over:
            return (f"no committed state version can be loaded ({damage}); starting over from the input: every "
                    f"batch is replayed from Kafka, earlier output moved aside{restored}")
        if self.restart_version == self.version:
            return (f"state version {self.version}: set aside {len(self.quarantine)} file(s) that cannot be trusted "
                    f"({damage}); no committed batch is replayed{restored}")
        batches = f"{self.drop_batches[0]}..{self.drop_batches[-1]}" if self.drop_batches else "none"
        return (f"state version {self.version} does not verify ({damage}); rolled back to version "
                f"{self.restart_version}: batches {batches} are replayed from Kafka, their output moved aside"
                f"{restored}")


def summary(damage: dict[str, str], most: int = 3) -> str:
    """The first `most` damaged or missing parts, a partition with no files at all first (it decides the repair)."""
    ordered = sorted(damage.items(), key=lambda item: (not item[0].endswith("/"), item[0]))
    return "; ".join(f"{key}: {why}" for key, why in ordered[:most])


def input_gap(start: dict[str, dict[str, int]], earliest: dict[str, dict[str, int]]) -> str | None:
    """Why Kafka can no longer replay from `start` (where batch 0 began: {topic: {partition: offset}}), given the
    offsets it now begins at; None when it still holds every one."""
    for topic, offsets in sorted(start.items()):
        for part, offset in sorted(offsets.items(), key=lambda item: int(item[0])):
            now = earliest.get(topic, {}).get(part)
            if now is None:
                return f"topic {topic} has no partition {part} any more (batch 0 began there at offset {offset})"
            if now > offset:
                return (f"{topic}-{part} now begins at offset {now}, batch 0 began at {offset}: retention removed "
                        f"{now - offset} record(s) a replay needs")
    return None


def record_key(log: str, batch: int) -> str:
    return f"{log}/{batch}"


UNPROVEN = "not recorded in a manifest: the batch may not have got that far; it is run again"


def absent(name: str) -> str:
    """The damage key of a state partition none of whose files is there."""
    return f"state/{name}/"


def plan_recovery(checkpoint: Checkpoint, check: Check, refs: Callable[[StateFile], dict[str, int]],
                  check_record: CheckRecord = lambda key: None, copies: frozenset[str] | set[str] = frozenset(),
                  recorded: frozenset[str] | set[str] | None = None, expected: Iterable[str] = ()) -> Plan:
    """The repair that makes `checkpoint` loadable (see the module's docstring); pure. `check` judges state files,
    `check_record` the query's records; `copies` are the records the manifests hold a copy of; `recorded` the keys
    they hold a checksum of (None: treat every record as recorded). The newest commit and an offsets entry of the
    batch in flight are trusted only when recorded: a same-size change inside a number parses, and with the
    manifest written inside the batch, an unrecorded one means that batch never got as far as its manifest.
    `expected` names every state partition a version needs (job.checkpoint.expected_partitions): one the listing
    lacks altogether has nothing to load a committed version from."""
    damage: dict[str, str] = {}
    last_commit = checkpoint.last_commit  # None exactly when there are no commits
    commit_key = record_key("commits", last_commit) if last_commit is not None else None
    unproven = set() if recorded is None else {
        key for key in [commit_key, *(record_key("offsets", b) for b in checkpoint.offsets
                                      if checkpoint.last_commit is None or b > checkpoint.last_commit)]
        if key is not None and key not in recorded}
    plan = Plan(checkpoint.version_to_load, checkpoint.version_to_load, damaged=damage)
    lost_state_metadata = []  # damaged, no copy: only a start over rebuilds them
    for key in checkpoint.copied_keys:
        why = check_record(key)
        if why:
            damage[key] = why
            if key in copies:
                plan.restore.append(key)
            elif is_state_metadata(key):
                lost_state_metadata.append(key)
            else:
                plan.quarantine.append(key)  # Spark writes a new one; nothing reads the old one after batch 0
    last_commit = checkpoint.last_commit
    if last_commit is None:
        # Batch 0 ran and never committed: Spark runs it again from offsets/0 over what it left. If offsets/0 does
        # not parse, or something else is damaged, the leftovers are set aside and batch 0 starts clean.
        if 0 in checkpoint.offsets:
            key = record_key("offsets", 0)
            why = UNPROVEN if key in unproven else check_record(key)
            if why:
                damage[key] = why
        if damage and (checkpoint.offsets or checkpoint.state_keys):
            _start_over(plan, checkpoint)
        return plan

    def records_intact(version: int) -> bool:
        """Can Spark restart at `version` (batch `version` planned next)? It reads commits/v-1, offsets/v-1 and
        offsets/v-2."""
        needed = [record_key("commits", version - 1), record_key("offsets", version - 1)]
        if version >= 2:
            needed.append(record_key("offsets", version - 2))
        for key in needed:
            if key not in checkpoint.files:
                damage.setdefault(key, "missing")
                return False
            why = UNPROVEN if key in unproven else check_record(key)
            if why:
                damage[key] = why
                return False
        return True

    version = last_commit + 1
    # Every partition loads the same version; one with nothing to load it from can only be rebuilt from nothing.
    partitions = dict(checkpoint.partitions)
    for name in sorted(set(expected)):
        partition = partitions.setdefault(name, Partition())
        if partition.snapshots or partition.changelogs:
            continue
        operator, part = name.split("/", 2)[:2]
        damage[absent(name)] = (f"operator {operator}, partition {part}: its state files are missing (no snapshot "
                                "or changelog to load any version from)")
    # The batch in flight (planned, not committed): its offsets entry is read on a start; a damaged one is removed
    # and Spark plans the batch again. Entries past it cannot be legitimate.
    for batch in sorted(b for b in checkpoint.offsets if b > last_commit):
        key = record_key("offsets", batch)
        why = ("beyond the batch in flight" if batch > version else UNPROVEN if key in unproven
               else check_record(key))
        if why:
            damage[key] = why
            plan.quarantine.append(key)
    unusable: dict[str, set[int]] = {name: set() for name in partitions}
    restart = 0 if lost_state_metadata else version
    while restart > 0:
        loadable = [newest_loadable(p, restart, check, refs, damage, unusable[name], name)
                    for name, p in sorted(partitions.items())]
        restart = min(loadable, default=restart)
        if restart == 0 or records_intact(restart):
            break
        restart -= 1
    for name, partition in sorted(partitions.items()):
        plan.quarantine += [partition.snapshots[v].key for v in sorted(unusable[name])]
    plan.quarantine += sorted(key for key in damage if key.endswith(".sst"))
    bad_changelogs = {key for key in damage if key.endswith(".changelog")}
    if restart == 0:
        if min(checkpoint.offsets | checkpoint.commits) != 0:
            have = f"{min(checkpoint.commits)}..{max(checkpoint.commits)}"
            raise IntegrityError(
                f"state version {version} does not verify ({summary(damage)}) and no retained version does "
                f"(commits {have}; "
                "the batches before them are gone, so the job cannot start over from its input either); restore "
                "the checkpoint from a backup or start a new deployment with a new checkpoint path")
        _start_over(plan, checkpoint)
        return plan
    plan.restart_version = restart
    if restart < version:
        for _name, partition in sorted(checkpoint.partitions.items()):
            for kind_files in (partition.snapshots, partition.changelogs):
                for v, file in sorted(kind_files.items()):
                    if v > restart and file.key not in plan.quarantine:
                        (plan.quarantine if file.key in bad_changelogs else plan.drop_state).append(file.key)
        plan.drop_batches = sorted(b for b in checkpoint.offsets | checkpoint.commits if b >= restart)
        plan.quarantine = [k for k in plan.quarantine if not k.startswith(("offsets/", "commits/"))]
    else:
        # A damaged changelog newer than the version loaded is never read; it is rewritten by its batch.
        plan.quarantine += sorted(k for k in bad_changelogs if k not in plan.quarantine)
    plan.quarantine = [key for key in dict.fromkeys(plan.quarantine) if key in checkpoint.files]  # not the missing
    return plan


def _start_over(plan: Plan, checkpoint: Checkpoint) -> None:
    """Every batch replayed from the input: all state (operator metadata and schemas too: Spark insists on an empty
    state directory on batch 0) and every offsets and commits entry go; damaged files to quarantine."""
    plan.start_over = True
    plan.restart_version = 0
    plan.restore = [key for key in plan.restore if not key.startswith("state/")]  # rebuilt by batch 0
    damaged = set(plan.damaged)
    plan.quarantine = list(dict.fromkeys([*plan.quarantine, *(k for k in checkpoint.state_keys if k in damaged)]))
    plan.drop_state = [k for k in checkpoint.state_keys if k not in damaged]
    plan.drop_batches = sorted(checkpoint.offsets | checkpoint.commits)
