"""chaos/bench/cpu_profile.py: which kind a process is, and the figures of a recorded profile (no process is started,
except the last test's one short command)."""
from __future__ import annotations

import sys

import pytest

from chaos.bench.cpu_profile import STARTUP_S, Profile, kind_of, profile_command, summarize

JAVA = "/usr/lib/jvm/java-17-openjdk-amd64/bin/java"
KAFKA_JARS = "-cp /cache/jars/kafka-broker-1/kafka-clients-4.1.1.jar:/cache/jars/spark-connectors/kafka-clients.jar"


@pytest.mark.parametrize("argv, kind", [
    ([JAVA, *KAFKA_JARS.split(), "org.apache.spark.deploy.SparkSubmit", "--conf", "a=b", "pyspark-shell"],
     "spark driver"),
    ([JAVA, "-Xmx128m", "-cp", "/spark/jars/*", "org.apache.spark.launcher.Main", "org.apache.spark.deploy.SparkSubmit",
      "--conf", "a=b", "pyspark-shell"], "spark launcher"),
    ([JAVA, "-cp", "x", "org.apache.spark.executor.CoarseGrainedExecutorBackend", "--driver-url", "spark://d"],
     "spark executor"),
    ([JAVA, "-cp", "x", "org.apache.spark.deploy.worker.Worker", "spark://m"], "spark master/worker"),
    ([JAVA, *KAFKA_JARS.split(), "-Xmx512m", "kafka.Kafka", "/run/kafka.properties"], "kafka broker"),
    (["/venv/bin/python3", "-m", "job", "--profile", "hardened"], "job (python)"),
    (["/venv/bin/python3", "-m", "pyspark.daemon", "pyspark.worker"], "naive job's pandas workers"),
    (["/cache/bin/minio-v0.0.0-2026", "server", "--quiet"], "minio"),
    (["/cache/bin/toxiproxy-server-v2.12.0", "-host", "127.0.0.1"], "toxiproxy"),
    (["/cache/bin/s3proxy-4da6945c", "-listen", "127.0.0.1:1"], "s3 proxy"),
    (["/venv/bin/python3", ".venv/bin/chaos", "run", "--suite", "smoke"], "harness (python)"),
    (["/venv/bin/python3", "-m", "chaos.cli", "lane", "/runs/r", "--lane", "lane-1"], "harness (python)"),
    (["/venv/bin/python3", "-m", "pytest", "tests"], "harness (python)"),
    (["bash", "-c", "sleep 1"], "other"),
    ([], "other"),
])
def test_a_process_is_told_by_its_main_class_or_module_not_by_a_word_in_its_classpath(argv, kind):
    assert kind_of(argv) == kind


def _driver(profile: Profile, pid: int, born: float, cpu_by_age: dict[float, float]) -> None:
    for age, cpu in sorted(cpu_by_age.items()):
        argv = [JAVA, "org.apache.spark.deploy.SparkSubmit"] if age == 0 else None
        profile.record(born + age, pid, argv, cpu)


def test_the_command_and_its_descendants_count_and_nothing_else_ever_does():
    profile = Profile(root=100)
    # pid order does not matter: a grandchild with a lower pid than its parent (pids wrap) is still the command's
    assert profile.members({1: 0, 100: 1, 7: 300, 300: 100, 50: 1, 51: 50}) == {100, 300, 7}
    for pid in (100, 300, 7):
        profile.record(0.0, pid, [], 0.0)
    # the command's child ended: its child, reparented to init, stays counted; an unrelated new process does not
    assert profile.members({1: 0, 100: 1, 7: 1, 60: 1}) == {100, 7}
    assert profile.members({60: 100}) == set()  # decided once: a process seen as another's is never counted


def test_start_up_cpu_is_split_from_what_a_jvm_uses_after():
    profile = Profile(root=10)
    # started with 1 CPU-s already used (seen late); 9 more in its start-up; then 4 in 40 s
    _driver(profile, 10, born=5.0, cpu_by_age={0: 1.0, 10: 6.0, STARTUP_S: 10.0, STARTUP_S + 40: 14.0})
    # killed at 8 s: all it used was start-up
    _driver(profile, 11, born=50.0, cpu_by_age={0: 0.0, 8: 5.0})
    profile.record(1.0, 12, ["/cache/bin/minio-v1", "server"], 2.0)
    profile.record(61.0, 12, None, 8.0)

    figures = summarize(profile, wall_s=100.0, busy_fraction=0.5, cores=2)

    assert figures["cpu_s_by_kind"] == {"spark driver": 18, "minio": 6}
    assert figures["processes_by_kind"] == {"spark driver": 2, "minio": 1}
    assert figures["startup"]["spark driver"] == {
        "starts": 2, "startup_cpu_s": 14, "after_cpu_s": 4, "after_alive_s": 40, "startup_cpu_s_each": 7.0,
        "after_cores": 0.1}
    assert (figures["machine_cpu_s"], figures["floor_s"], figures["counted_cpu_s"]) == (100, 50.0, 24)


def test_the_command_runs_its_exit_code_comes_back_and_its_cpu_is_counted():
    """The busy loop runs in a grandchild (a shell's child), as a suite's jobs do. It waits first, so a sample sees
    it before it works (CPU used before a process is first seen is not counted: a CI run under load lost it all)."""
    program = ("import time\ntime.sleep(1.5)\nend = time.process_time() + 1.0\nwhile time.process_time() < end: pass\n"
               "time.sleep(1.1)")
    code, figures = profile_command(["bash", "-c", f"{sys.executable} -c '{program}'; exit 4"], say=lambda line: None)
    assert code == 4
    assert figures["cpu_s_by_kind"].get("other", 0) >= 1  # the 1.0 CPU-s busy loop (rounded)
    assert 0 < figures["machine_busy"] <= 1 and figures["wall_s"] >= 3.5


def test_a_command_ended_by_a_signal_exits_as_a_shell_says():
    code, _figures = profile_command(["bash", "-c", "kill -TERM $$"], say=lambda line: None)
    assert code == 128 + 15
