"""Reading what a job left behind: its emitted sessions in MinIO and its progress lines on disk."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path


def read_sessions(s3, bucket: str, output_prefix: str) -> list[dict]:
    """Every session the job emitted, from its batch objects (batch-<id>.jsonl), in batch order.

    Each row gets `batch_id` so duplicates can be traced to the batches that emitted them.
    """
    return list(iter_sessions(s3, bucket, output_prefix))


def iter_sessions(s3, bucket: str, output_prefix: str) -> Iterator[dict]:
    """read_sessions' rows as a stream: one batch object in memory at a time."""
    names = sorted(o.object_name for o in s3.list_objects(bucket, prefix=output_prefix.rstrip("/") + "/",
                                                           recursive=True))
    for name in names:
        leaf = name.rsplit("/", 1)[-1]
        if not (leaf.startswith("batch-") and leaf.endswith(".jsonl")):
            continue
        batch_id = int(leaf[len("batch-"):-len(".jsonl")])
        response = s3.get_object(bucket, name)
        try:
            text = response.read().decode()
        finally:
            response.close()
            response.release_conn()
        yield from ({**json.loads(line), "batch_id": batch_id} for line in text.splitlines() if line.strip())


def read_progress(path: Path) -> list[dict]:
    """The job's progress lines; a torn last line (the driver was killed mid-write) is skipped."""
    if not path.exists():
        return []
    records = []
    lines = path.read_text().splitlines()
    for number, line in enumerate(lines, 1):
        try:
            records.append(json.loads(line))
        except ValueError:
            if number == len(lines):
                break
            raise ValueError(f"{path}:{number}: not a JSON line") from None
    return records
