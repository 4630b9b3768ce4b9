"""lineage: the checkpoint a restart would use (lineage.json): metadata, contiguous offsets and commits, at most
one batch in flight, the next state version loadable in every partition, and what a restart reads intact."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .base import CheckDef, ControlData, settle
from .timeline import Check


def _contiguous(ids: Sequence[int]) -> bool:
    return not ids or list(ids) == list(range(min(ids), max(ids) + 1))


def _loadable(version: int, snapshots: set[int], changelogs: set[int]) -> bool:
    if version in snapshots:
        return True
    bases = [s for s in snapshots if s <= version]
    if bases:
        return any(all(v in changelogs for v in range(s + 1, version + 1)) for s in bases)
    return not snapshots and all(v in changelogs for v in range(1, version + 1))


def check_lineage(lineage: Mapping[str, Any] | None, missing: str = "no lineage.json") -> Check:
    """The checkpoint a restart would use: metadata; commits ⊆ offsets; both contiguous; at most one batch in
    flight; in every state partition, version max(commits) + 1 loadable (a snapshot at it, or a snapshot at or
    below it with a changelog for every later version up to it, or changelogs from 1 when there is no snapshot)."""
    expected = ("metadata, contiguous offsets/commits, <= 1 batch in flight, next state version loadable, and what a "
                "restart reads intact")
    if lineage is None:
        return Check("lineage", "NODATA", expected, "no data", f"{missing}: the checkpoint was not listed")

    def ids(key: str) -> list[int]:
        value = lineage.get(key) or []
        return sorted(int(v) for v in value) if isinstance(value, list) else []

    offsets, commits = ids("offsets"), ids("commits")
    raw_state = lineage.get("state")
    state: Mapping[str, Any] = raw_state if isinstance(raw_state, Mapping) else {}
    measured = (f"offsets {_span(offsets)}, commits {_span(commits)}, {len(state)} state partitions"
                + (f", {len(lineage['rollbacks'])} rollbacks" if isinstance(lineage.get("rollbacks"), list)
                   and lineage["rollbacks"] else ""))

    def broken(rule: str) -> Check:
        return Check("lineage", "FAILED", expected, measured, rule)

    if not lineage.get("metadata"):
        return broken("metadata: the checkpoint has no metadata file")
    if not offsets and not commits:
        return Check("lineage", "NODATA", expected, measured, "the checkpoint holds no batch: nothing to judge")
    stray = sorted(set(commits) - set(offsets))
    if stray:
        return broken(f"commits ⊆ offsets: commit {stray[0]} has no offset file")
    if not _contiguous(offsets):
        return broken(f"offsets contiguous: gap after batch {_first_gap(offsets)}")
    if not _contiguous(commits):
        return broken(f"commits contiguous: gap after batch {_first_gap(commits)}")
    last_commit = commits[-1] if commits else -1
    in_flight = offsets[-1] - last_commit
    if in_flight not in (0, 1):
        return broken(f"at most one batch in flight: offsets end at {offsets[-1]}, commits at {last_commit}")
    if commits:
        version = last_commit + 1
        if not state:
            return broken(f"state version {version} loadable: the checkpoint has no state partition")
        for name in sorted(state):
            partition = state[name] if isinstance(state[name], Mapping) else {}
            snapshots = {int(v) for v in partition.get("snapshots") or []}
            changelogs = {int(v) for v in partition.get("changelogs") or []}
            if not _loadable(version, snapshots, changelogs):
                return broken(f"state version {version} loadable: partition {name} has snapshots "
                              f"{_span(sorted(snapshots))} and changelogs {_span(sorted(changelogs))}")
    content: Mapping[str, Any] | None = lineage.get("content") if isinstance(lineage.get("content"), Mapping) else None
    if content is not None and content.get("problems"):
        problems = [str(p) for p in content["problems"]]
        return broken(f"what a restart reads loads: {len(problems)} problem(s): {'; '.join(problems[:3])}")
    if content is not None and content.get("readers_failed"):
        return Check("lineage", "NODATA", expected, measured,
                     "the SSTs and changelogs a restart loads were not read with RocksDB's and Spark's own readers "
                     f"({content['readers_failed']}): a flipped bit in a data block would not show")
    # A lineage.json from before the readers (no `readers`) was judged by sizes, footer magic and non-empty
    # changelogs alone: it keeps that judgement, and says so.
    read = (f" ({content.get('files_read')} files a restart reads, read back and intact"
            + (f"; {content['readers']})" if content.get("readers") else "; SSTs by size and footer only)")
            if content else "")
    return Check("lineage", "PASSED", expected, measured,
                 (f"next state version {last_commit + 1} loadable in every partition" if commits
                  else "no batch committed yet; one in flight") + read)


def _span(ids: Sequence[int]) -> str:
    if not ids:
        return "none"
    return f"{ids[0]}..{ids[-1]}" if _contiguous(ids) and len(ids) > 1 else ",".join(map(str, ids[-6:]))


def _first_gap(ids: Sequence[int]) -> int:
    return next(a for a, b in zip(ids, ids[1:]) if b != a + 1)


def control_lineage(data: ControlData, _target: object) -> Check:
    why = None if data.complete else data.incomplete()
    return settle(check_lineage(data.lineage, data.why_missing("lineage")), data,
                  pass_unless=why)  # a broken checkpoint stays broken


# The checkpoint as the arm leaves it is judged whenever the arm ends: it does not hold an arm back.
LINEAGE = CheckDef("lineage", "lineage", lambda arm, _target: check_lineage(arm.lineage, arm.why_missing("lineage")),
                   control_lineage, ends_early=True)
