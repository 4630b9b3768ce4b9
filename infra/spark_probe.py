"""A tiny Spark streaming driver that proves the stack end to end.

Reads a Kafka topic through the `kafka` proxy, keeps a per-partition count in the RocksDB state store,
checkpoints to s3a:// on MinIO through the `s3` proxy, runs to the end of the topic (availableNow) and
prints one JSON line: {"rows": N, "batches": B}.

    python -m infra.spark_probe TOPIC CHECKPOINT_PREFIX
"""
from __future__ import annotations

import json
import sys

from .driver import load_stack_info, spark_session


def main(topic: str, prefix: str) -> int:
    info = load_stack_info()
    spark = spark_session(info, "stack-probe")
    spark.sparkContext.setLogLevel("WARN")
    events = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", info.kafka_bootstrap)
              .option("subscribe", topic)
              .option("startingOffsets", "earliest")
              .load())
    query = (events.groupBy("partition").count()
             .writeStream.format("memory").queryName("probe_counts").outputMode("complete")
             .option("checkpointLocation", f"s3a://{info.bucket}/{prefix}/checkpoint")
             .trigger(availableNow=True)
             .start())
    query.awaitTermination(300)
    if query.isActive:
        query.stop()
        print(json.dumps({"error": "query did not finish within 300 s"}))
        return 1
    rows = spark.sql("SELECT COALESCE(SUM(`count`), 0) AS n FROM probe_counts").collect()[0]["n"]
    batches = len(query.recentProgress)
    print(json.dumps({"rows": int(rows), "batches": batches}), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
