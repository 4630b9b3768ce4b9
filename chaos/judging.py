"""An arm's outputs judged: oracle.json's report from the ledger file and the job's emitted rows, in bounded memory
(chaos/oracle_bounded.py), with what judging cost (`judging`: its time and its peak resident memory).

Both JobArm.judge (chaos/arm/job.py) and the benchmark (chaos/bench/oracle.py) judge through `judge_outputs`, so
the figures the benchmark prints are the harness's own.
"""
from __future__ import annotations

import resource
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Set
from pathlib import Path

from .oracle import emission_waits
from .oracle_bounded import judge_compare, judge_coverage, partitions_for
from .spill import Spill
from .workload import Acked, Failed, Ledger

_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


def reset_peak_rss() -> bool:
    """Start measuring this process's peak resident memory anew (Linux: its high-water mark set to what it holds
    now); False where that cannot be done, and the peak is then the process's since it started."""
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


def peak_rss_bytes() -> int:
    """This process's peak resident memory: since reset_peak_rss, or since it started."""
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux counts it in KiB


def judge_outputs(ledger_path: Path, emitted: Iterable[Mapping[str, object]], *, event_time: bool, gap_ms: int,
                  max_len_ms: int | None, extra_copies: Mapping[str, Mapping[int, int]],
                  audit: Mapping[str, object], batch_done_ms: Mapping[int, int], workdir: Path,
                  landed: Set[tuple[str, int]] = frozenset()) -> tuple[dict[str, object], int]:
    """(oracle.json's report, rows emitted). Event time: compare over the expected sessions, else coverage; then
    `audit` (the topic read back), then, event time only, `emission` (emission_waits over the rows and
    `batch_done_ms`); then `judging`: the ledger's records, the rows, the partitions, the seconds from the first
    ledger line to the last wait, and the peak resident memory over them (`peak_rss_of`: "process" where the peak
    could not be started anew). The spill lives in a temporary directory under `workdir`, removed after. A failed
    delivery in `landed` (the topic holds it: chaos/topic_audit.py) is judged as the acknowledged event it was."""
    started = time.monotonic()
    anew = reset_peak_rss()
    ledger_records = 0

    def ledger() -> Iterator[Acked | Failed]:
        nonlocal ledger_records
        for record in Ledger.records(ledger_path):
            ledger_records += 1
            if isinstance(record, Failed) and (record.key, record.seq) in landed:
                yield Acked(record.key, record.seq, record.event_time_ms, -1, -1)  # where it landed is not needed
            else:
                yield record

    partitions = partitions_for(ledger_path.stat().st_size)
    with tempfile.TemporaryDirectory(dir=workdir, prefix=".judging-") as tmp:
        with Spill(tmp, "emitted", 1) as kept:  # the rows again, for the emission waits

            def rows() -> Iterator[Mapping[str, object]]:
                for row in emitted:
                    kept.add("", dict(row))
                    yield row

            report: dict[str, object]
            if event_time:
                report = judge_compare(ledger(), rows(), gap_ms, max_len_ms, extra_copies=extra_copies,
                                       workdir=tmp, partitions=partitions).to_dict()
            else:
                report = judge_coverage(ledger(), rows(), extra_copies=extra_copies, workdir=tmp,
                                        partitions=partitions).to_dict()
        report.update(audit)
        if event_time:
            report["emission"] = emission_waits(kept.read(0), batch_done_ms)
    report["judging"] = {"events": ledger_records, "sessions": kept.added, "partitions": partitions,
                         "seconds": round(time.monotonic() - started, 1),
                         "peak_rss_mb": round(peak_rss_bytes() / 2**20, 1),
                         **({} if anew else {"peak_rss_of": "process"})}
    return report, kept.added
