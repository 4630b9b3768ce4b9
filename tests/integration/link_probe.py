"""A Spark driver that keeps the cluster's executors busy and says, job after job, which executors it has: one JSON
line per job, {"job": N, "end": unix seconds, "seconds": its duration, "executors": [ids]}. Each job is 40 tasks of
200 ms in the executors' JVMs (no Python worker), so a job runs on whichever executors are there.

    python -m tests.integration.link_probe SECONDS
"""
from __future__ import annotations

import json
import sys
import time

from infra.driver import load_stack_info, spark_session


def main(seconds: str) -> int:
    spark = spark_session(load_stack_info(), "link-probe")
    spark.sparkContext.setLogLevel("WARN")
    context = spark.sparkContext._jsc.sc()  # type: ignore[attr-defined]
    deadline = time.time() + float(seconds)
    job = 0
    while time.time() < deadline:
        started = time.time()
        spark.range(0, 40, 1, 40).selectExpr("reflect('java.lang.Thread', 'sleep', cast(200 as bigint))").count()
        executors = sorted(context.getExecutorIds().mkString(",").split(","), key=lambda e: (len(e), e))
        print(json.dumps({"job": job, "end": round(time.time(), 2), "seconds": round(time.time() - started, 2),
                          "executors": [e for e in executors if e]}), flush=True)
        job += 1
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
