"""Exactly-once output: each micro-batch's closed sessions become one object named by the batch id.

A batch that is replayed after a failure (same offsets, same state version) writes the same object
again, which replaces the first; an S3 PUT is atomic, so a reader never sees half a batch. Sessions are
small (aggregates), so collecting one batch to the driver is cheap and avoids Hadoop's rename-based file
committers, which S3 can only emulate by copy and delete.

With checkpoint ownership on, `guard` (the lease's check) runs before the batch is computed and again before
its object is written: a deployment that cannot prove it still holds the checkpoint fails the batch, so it
neither updates state nor writes output nor commits (job/lease.py). The remaining window — the lease lost
between the last check and the PUT — is as long as one PUT; S3 has no fencing on writes to close it.

With state verification on, `on_state_committed` (job/integrity.py's recorder) writes the manifest of the state
version the batch just uploaded, inside the batch: a batch whose manifest cannot be written fails and is run again,
so no version is ever committed without one.
"""
from __future__ import annotations

import json
from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession


def batch_object_name(batch_id: int) -> str:
    return f"batch-{batch_id:012d}.jsonl"


class BatchWriter:
    def __init__(self, spark: SparkSession, output_uri: str, guard: Callable[[], None] | None = None,
                 on_state_committed: Callable[[int], object] | None = None):
        self.output_uri = output_uri.rstrip("/")
        self.guard = guard or (lambda: None)
        self.on_state_committed = on_state_committed or (lambda batch_id: None)
        jvm = spark.sparkContext._jvm
        assert jvm is not None  # typed Optional by pyspark; a driver's SparkContext always has its JVM gateway
        self._jvm = jvm
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()
        self._fs = jvm.org.apache.hadoop.fs.Path(self.output_uri).getFileSystem(self._conf)

    def __call__(self, sessions: DataFrame, batch_id: int) -> None:
        self.guard()
        rows = sessions.collect()  # runs the stateful tasks: state version batch_id + 1 is uploaded when it returns
        body = "".join(json.dumps(row.asDict(), sort_keys=True) + "\n" for row in rows).encode()
        self.guard()
        self.on_state_committed(batch_id)  # the integrity manifest, before Spark can write commits/<batch_id>
        path = self._jvm.org.apache.hadoop.fs.Path(f"{self.output_uri}/{batch_object_name(batch_id)}")
        stream = self._fs.create(path, True)
        try:
            stream.write(bytearray(body))
        finally:
            stream.close()
