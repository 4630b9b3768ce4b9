"""The state an arm really held: the peaks of the state store's own metrics (rows; RocksDB SST bytes on disk; the
operators' memory) and of the checkpoint's bytes in MinIO, over the arm's samples (chaos/arm/sampler.py).

Recorded in each arm's result (`state_held`, chaos/checks/arm.py), printed beside its verdict and shown in the
report, so a run says at what state size its verdicts hold. A pure function of the history: `chaos check` of an
interrupted run records it too.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

# result key -> sample field (chaos/history.py SAMPLE_FIELDS)
PEAKS = {"rows": "state_rows", "sst_bytes": "state_sst_bytes", "memory_bytes": "state_memory_bytes",
         "checkpoint_bytes": "checkpoint_bytes"}


def peak_state(samples: Iterable[Mapping[str, object]]) -> dict[str, int | None]:
    """The largest value of each measure over the samples; None where no sample measured it (a history written
    before a measure existed, or an arm whose job never completed a batch)."""
    peaks: dict[str, int | None] = dict.fromkeys(PEAKS)
    for sample in samples:
        for name, field in PEAKS.items():
            value = sample.get(field)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                current = peaks[name]
                peaks[name] = int(value) if current is None else max(current, int(value))
    return peaks


def size(value: int | None) -> str:
    """Bytes in binary units, three significant figures: 45.0 KiB, 1.02 GiB."""
    if value is None:
        return "?"
    amount, unit = float(value), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if amount < 1024 or unit == "TiB":
            break
        amount /= 1024
    return f"{value} B" if unit == "B" else f"{amount:.3g} {unit}"


def describe(held: Mapping[str, object] | None) -> str | None:
    """One line, 'state 1.02 GiB SST, 1,000,000 rows, 1.31 GiB in memory; checkpoint 2.2 GiB', or None when nothing
    was measured."""
    if not held or all(held.get(name) is None for name in PEAKS):
        return None

    def number(name: str) -> int | None:
        value = held.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    store = [f"{size(number('sst_bytes'))} SST" if number("sst_bytes") is not None else None,
             f"{number('rows'):,} rows" if number("rows") is not None else None,
             f"{size(number('memory_bytes'))} in memory" if number("memory_bytes") is not None else None]
    text = "state " + (", ".join(s for s in store if s) or "not measured")
    checkpoint = number("checkpoint_bytes")
    return text + (f"; checkpoint {size(checkpoint)}" if checkpoint is not None else "")


def sst_bytes(progress: Mapping) -> int:
    """RocksDB SST bytes one StreamingQueryProgress reports, summed over its state operators: the state's size on
    disk, by the state store's own metric (what an arm samples and records, and what `state_reached` compares)."""
    return sum(int(op.get("customMetrics", {}).get("rocksdbSstFileSize", 0) or 0)
               for op in progress.get("stateOperators", []) or [])
