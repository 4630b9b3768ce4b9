"""The floor of a restore: how fast this stack reads a checkpoint back from S3 on the job's own path (through the
`s3` proxy, as the job's driver and executors read it). A restart that loads a state of B bytes cannot finish before
B / that throughput; docs/experiments.md "Recovery against state size" puts the floor beside each recovery.

Measured by reading the checkpoint's own SST objects whole, largest first, until `want_bytes` are read: the objects a
restore downloads, at their real sizes, on the same machine and stack as the arm that wrote them.
"""
from __future__ import annotations

import time

# Enough to time the read (a few seconds here), little enough to cost an arm nothing it would notice.
READ_BYTES = 256 << 20
# Below this the floor is under a tenth of a second: nothing to measure against.
MEASURE_ABOVE_BYTES = 16 << 20


def read_throughput(stack, prefix: str, want_bytes: int) -> tuple[int, float]:
    """(bytes, seconds): SST objects under `prefix`, largest first, read whole through the `s3` proxy until
    `want_bytes` are read (all of them when they hold fewer). Listed from MinIO directly, read through the proxy."""
    listing = stack.s3_client(direct=True).list_objects(stack.info.bucket, prefix=prefix + "/", recursive=True)
    ssts = sorted((o for o in listing if o.object_name.endswith(".sst")), key=lambda o: -(o.size or 0))
    s3 = stack.s3_client()
    read, started = 0, time.monotonic()
    for obj in ssts:
        if read >= want_bytes:
            break
        response = s3.get_object(stack.info.bucket, obj.object_name)
        try:
            for chunk in response.stream(1 << 20):
                read += len(chunk)
        finally:
            response.close()
            response.release_conn()
    return read, time.monotonic() - started


def floor_s(state_bytes: int | None, bytes_per_s: float | None) -> float | None:
    """Seconds to read `state_bytes` at `bytes_per_s` (None when either is unknown)."""
    if not state_bytes or not bytes_per_s:
        return None
    return round(state_bytes / bytes_per_s, 1)
