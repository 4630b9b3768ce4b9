"""Pure arithmetic over Spark progress records: benchmark throughput and the drain's proofs."""
from __future__ import annotations

from chaos.arm.job import _covers, _watermark_ms, drain_status
from chaos.bench.job import _measure


def batch(rows, ms, state_rows=0, sst=0, memory=0, batch_id=0):
    return {"batchId": batch_id, "numInputRows": rows, "durationMs": {"triggerExecution": ms},
            "stateOperators": [{"numRowsTotal": state_rows, "memoryUsedBytes": memory,
                                "customMetrics": {"rocksdbSstFileSize": sst}}]}


def test_throughput_skips_the_start_up_batch_and_empty_batches():
    batches = [batch(20_000, 19_000), batch(0, 100), batch(20_000, 2_000), batch(10_000, 2_000, 1000, 50_000, 9_000)]
    measured = _measure(batches)
    assert measured["eps"] == 7500.0  # 30,000 rows over 4 s; the 19 s first batch is start-up
    assert measured["batches_measured"] == 2
    assert measured["state_rows_per_key"] == 1.0
    assert measured["state_sst_bytes_per_key"] == 50.0 and measured["state_memory_bytes_per_key"] == 9.0


def test_no_measured_batch_gives_zero_not_an_error():
    assert _measure([batch(20_000, 40_000)])["eps"] == 0.0
    assert _measure([])["batches_measured"] == 0


def test_a_batch_covers_offsets_when_its_exclusive_end_is_past_them():
    progress = {"sources": [{"endOffset": {"t": {"0": 10, "1": 5}}}]}
    assert _covers(progress, "t", {"0": 9, "1": 4})
    assert not _covers(progress, "t", {"0": 10, "1": 4})  # offset 10 not read yet: end is exclusive
    assert not _covers(progress, "other", {"0": 1})
    as_text = {"sources": [{"endOffset": '{"t": {"0": 10}}'}]}
    assert _covers(as_text, "t", {"0": 9})


def test_watermark_is_read_in_milliseconds():
    assert _watermark_ms({"eventTime": {"watermark": "1970-01-01T00:00:01.500Z"}}) == 1500
    assert _watermark_ms({}) == 0



def test_startup_variants_differ_only_in_archives_and_jit_and_archives_is_what_the_suite_runs():
    from types import SimpleNamespace

    from chaos.bench.job import startup_variants
    from infra.cds import ClassArchives
    from infra.driver import DRIVER_JAVA_OPTIONS, EXECUTOR_JAVA_OPTIONS, QUICK_START_JIT, spark_conf

    archives = ClassArchives("use", {"driver-hardened": "/c/driver-hardened.jsa",
                                     "executor-hardened": "/c/executor-hardened.jsa"})
    info = SimpleNamespace(class_archives=archives.to_dict(), s3_truststore="")
    variants = startup_variants(info)
    assert set(variants) == {"archives", "c1", "tiered", "serial-gc", "in-driver"}
    assert variants["in-driver"] == {**variants["archives"], "spark.master": "local[2]"}
    assert variants["serial-gc"] == {side: f"{options} -XX:+UseSerialGC"
                                     for side, options in variants["archives"].items()}
    driver, executor = "spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"
    assert variants["c1"] == {driver: DRIVER_JAVA_OPTIONS, executor: EXECUTOR_JAVA_OPTIONS}
    assert variants["archives"] == {driver: f"{DRIVER_JAVA_OPTIONS} -XX:SharedArchiveFile=/c/driver-hardened.jsa",
                                    executor: f"{EXECUTOR_JAVA_OPTIONS} -XX:SharedArchiveFile=/c/executor-hardened.jsa"}
    for side in (driver, executor):
        assert QUICK_START_JIT in variants["c1"][side] and QUICK_START_JIT not in variants["tiered"][side]
    assert "-Xss16m" in variants["tiered"][driver]  # only the JIT differs
    # what the suite's drivers run is the archives variant
    real = SimpleNamespace(class_archives=archives.to_dict(), s3_truststore="", spark_master="spark://x",
                           spark_jars=[], s3_endpoint="e",
                           driver=SimpleNamespace(bind_host="127.0.0.1", advertised_host="127.0.0.2", rpc_port=1,
                                                  block_manager_port=2))
    conf = spark_conf(real, "app")
    assert {k: conf[k] for k in (driver, executor)} == variants["archives"]


def test_startup_order_is_abba_after_one_uncounted_start():
    from chaos.bench.job import startup_order

    assert startup_order(["archives", "c1"], 3) == ["warm-up", "archives", "c1", "c1", "archives", "archives", "c1"]
    assert startup_order(["a"], 2) == ["warm-up", "a", "a"]


def test_a_processing_time_drain_is_behind_until_a_batch_reads_the_last_event_then_waits_a_gap():
    def at(second, end):
        return {"timestamp": f"2026-11-29T12:00:{second:02d}.000Z", "sources": [{"endOffset": {"t": {"0": end}}}]}

    assert drain_status([at(0, 5)], "t", {"0": 9}, gap_ms=3_000) == "behind"  # the job has not read offset 9
    assert drain_status([at(0, 5), at(10, 10)], "t", {"0": 9}, gap_ms=3_000) == "waiting"
    assert drain_status([at(0, 5), at(10, 10), at(13, 10)], "t", {"0": 9}, gap_ms=3_000) == "waiting"  # gap + 1 s
    assert drain_status([at(0, 5), at(10, 10), at(14, 10)], "t", {"0": 9}, gap_ms=3_000) == "drained"
