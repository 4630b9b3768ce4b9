"""Records partitioned to disk by a string's hash, so data too big for memory is judged one partition at a time.

    with Spill(directory, "events", partitions=8) as events:
        for e in ledger:
            events.add(e.key, (e.key, e.seq))
    for partition in range(events.partitions):
        for key, seq in events.read(partition):   # in the order they were added
            ...

Records are tuples (or dicts) of str, int, bool and None, written with marshal in chunks, each after its length:
one chunk of each partition is in memory at a time, and a partition's file is opened only to append a chunk, so any
number of partitions fits the limit on open files. The hash is crc32, not Python's hash(): a partition's content is
the same in every process.
"""
from __future__ import annotations

import marshal
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Records held in memory over all partitions before a partition's chunk is appended to its file, and at most in one
# chunk.
BUFFERED_RECORDS = 40_000
CHUNK_RECORDS = 2_000


def partition_of(name: str, partitions: int) -> int:
    """The partition of `name` (any str, lone surrogates included: keys are what the JSON said)."""
    return zlib.crc32(name.encode("utf-8", "surrogatepass")) % partitions


class Spill:
    """Append-only, then read partition by partition; the files live in `directory` (the caller removes it)."""

    def __init__(self, directory: str | Path, name: str, partitions: int) -> None:
        if partitions < 1:
            raise ValueError(f"partitions: must be >= 1, got {partitions}")
        self.partitions = partitions
        self.added = 0
        self._paths = [Path(directory) / f"{name}-{i:04d}.marshal" for i in range(partitions)]
        self._buffers: list[list[Any]] = [[] for _ in range(partitions)]
        self._chunk = min(CHUNK_RECORDS, max(64, BUFFERED_RECORDS // partitions))

    def add(self, name: str, record: Any) -> None:
        """`record` into the partition of `name`."""
        index = partition_of(name, self.partitions)
        buffer = self._buffers[index]
        buffer.append(record)
        self.added += 1
        if len(buffer) >= self._chunk:
            self._write(index)

    def _write(self, index: int) -> None:
        buffer = self._buffers[index]
        if buffer:
            data = marshal.dumps(buffer)
            with open(self._paths[index], "ab") as f:
                f.write(len(data).to_bytes(8, "little") + data)
            buffer.clear()

    def close(self) -> None:
        """Every buffered record onto disk; `read` needs it first."""
        for index in range(self.partitions):
            self._write(index)

    def __enter__(self) -> Spill:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def read(self, index: int) -> Iterator[Any]:
        """Partition `index`'s records in the order they were added, one chunk in memory at a time."""
        path = self._paths[index]
        if not path.exists():
            return
        with open(path, "rb") as f:
            while size := int.from_bytes(f.read(8), "little"):
                yield from marshal.loads(f.read(size))  # marshal.load(f) reads a file in small pieces: slower
