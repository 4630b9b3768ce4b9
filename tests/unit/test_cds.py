"""Class-data archives (infra/cds.py): which JVM options each mode gives, what the fingerprint notices, and how an
archive set is sealed, checked and pruned. No JVM runs here; tests/integration/test_stack.py checks that the
stack's JVMs really map their archives."""
import os

import pytest

from infra import cds
from infra.cds import ArchiveSet, ClassArchives


def test_use_maps_the_roles_archive_or_its_fallback_and_nothing_without_one():
    archives = ClassArchives("use", {"driver-hardened": "/a/driver-hardened.jsa", "kafka": "/a/kafka.jsa"})
    assert archives.jvm_options("kafka") == ["-XX:SharedArchiveFile=/a/kafka.jsa"]
    assert archives.jvm_options("driver-naive", fallback="driver-hardened") == [
        "-XX:SharedArchiveFile=/a/driver-hardened.jsa"]
    assert archives.jvm_options("spark-master") == []
    assert cds.OFF.jvm_options("kafka") == []


def test_record_dumps_running_jvms_on_request_and_short_lived_ones_at_exit():
    record = ClassArchives("record", {"kafka": "/s/kafka.jsa", "kafka-format": "/s/kafka-format.jsa"})
    assert record.jvm_options("kafka") == ["-XX:+RecordDynamicDumpInfo"]
    assert record.jvm_options("kafka-format") == ["-XX:ArchiveClassesAtExit=/s/kafka-format.jsa"]
    assert record.jvm_options("spark-worker") == []  # not a role being recorded


def test_only_and_merged_split_the_roles_between_host_and_backend():
    host = ClassArchives("use", {"driver-hardened": "d", "executor-hardened": "e", "kafka": "k"})
    assert host.only(("driver-",)).paths == {"driver-hardened": "d"}
    # a containers backend maps none of the host's archives: drivers keep theirs, executors get none
    assert host.only(("driver-",)).merged(cds.OFF.only(("executor-",))).paths == {"driver-hardened": "d"}
    assert host.only(("driver-",)).merged(host.only(("executor-",))).paths == {"driver-hardened": "d",
                                                                                "executor-hardened": "e"}
    with pytest.raises(ValueError):
        host.merged(ClassArchives("record", {"kafka": "x"}))
    assert ClassArchives.from_dict(host.to_dict()) == host
    assert ClassArchives.from_dict({}) == cds.OFF


def _jars(tmp_path):
    spark = tmp_path / "spark"
    (spark / "jars").mkdir(parents=True)
    (spark / "jars" / "core.jar").write_bytes(b"core")
    kafka = tmp_path / "kafka.jar"
    kafka.write_bytes(b"kafka")
    connector = tmp_path / "connector.jar"
    connector.write_bytes(b"connector")
    return spark, [kafka], [connector]


def test_the_fingerprint_changes_with_any_jar_on_the_classpaths(tmp_path):
    spark, kafka, connectors = _jars(tmp_path)
    first = cds.fingerprint(spark, kafka, connectors)
    assert cds.fingerprint(spark, kafka, connectors) == first
    (spark / "jars" / "core.jar").write_bytes(b"core, rebuilt")
    second = cds.fingerprint(spark, kafka, connectors)
    assert second != first
    os.utime(connectors[0], ns=(1, 1))  # same size, other modification time: the JVM would refuse the archive
    assert cds.fingerprint(spark, kafka, connectors) != second
    (spark / "jars" / "extra.jar").write_bytes(b"x")
    assert cds.fingerprint(spark, kafka, connectors) not in (first, second)


def _staged(tmp_path, roles=cds.ROLES):
    staging = tmp_path / "cds" / "k.training-1"
    staging.mkdir(parents=True)
    for role in roles:
        (staging / f"{role}.jsa").write_bytes(role.encode() * 10)
    return staging


def test_a_sealed_set_is_used_and_a_damaged_or_partial_one_is_not(tmp_path):
    spark_home = tmp_path / "venv-spark"
    spark_home.mkdir()
    target = ArchiveSet(tmp_path / "cds" / "k")
    assert target.archives() == cds.OFF and target.problems()
    cds.seal(_staged(tmp_path), target, str(spark_home))
    assert target.problems(full=True) == []
    archives = target.archives()
    assert archives.mode == "use" and set(archives.paths) == set(cds.ROLES)
    # same size, other bytes: only the full check (set-up) sees it
    target.path("kafka").write_bytes(b"K" * len(b"kafka" * 10))
    assert target.problems() == [] and "damaged" in target.problems(full=True)[0]
    target.path("kafka").write_bytes(b"short")
    assert "damaged" in target.problems()[0] and target.archives() == cds.OFF
    target.path("kafka").unlink()
    assert "missing" in target.problems()[0]


def test_sealing_needs_every_role(tmp_path):
    with pytest.raises(FileNotFoundError, match="kafka-format"):
        cds.seal(_staged(tmp_path, roles=cds.DUMPED_ROLES), ArchiveSet(tmp_path / "cds" / "k"), str(tmp_path))


def test_prune_removes_sets_of_deleted_venvs_and_dead_trainings_only(tmp_path):
    live_home, gone_home = tmp_path / "live", tmp_path / "gone"
    live_home.mkdir()
    kept, stale = ArchiveSet(tmp_path / "cds" / "live"), ArchiveSet(tmp_path / "cds" / "gone")
    cds.seal(_staged(tmp_path), kept, str(live_home))
    cds.seal(_staged(tmp_path), stale, str(gone_home))
    dead = tmp_path / "cds" / "x.training-999999999"
    running = tmp_path / "cds" / f"y.training-{os.getpid()}"
    dead.mkdir()
    running.mkdir()
    removed = cds.prune(cache=tmp_path)
    assert sorted(removed) == sorted([stale.directory, dead])
    assert kept.directory.is_dir() and running.is_dir()


def test_prune_removes_a_set_the_current_one_supersedes_for_the_same_venv(tmp_path):
    home = tmp_path / "venv"
    home.mkdir()
    old, current = ArchiveSet(tmp_path / "cds" / "old"), ArchiveSet(tmp_path / "cds" / "new")
    cds.seal(_staged(tmp_path), old, str(home))  # e.g. recorded before the jars or the JDK changed
    cds.seal(_staged(tmp_path), current, str(home))
    assert cds.prune(cache=tmp_path, keep=current.directory) == []  # without spark_home: both venvs exist
    assert cds.prune(cache=tmp_path, keep=current.directory, spark_home=str(home)) == [old.directory]
    assert current.directory.is_dir()


def test_one_training_at_a_time(tmp_path):
    import threading

    entered = []

    def second_setup() -> None:
        with cds.training_lock(cache=tmp_path):
            entered.append(1)

    with cds.training_lock(cache=tmp_path):
        other = threading.Thread(target=second_setup)
        other.start()
        other.join(0.5)
        assert entered == []  # the second waits while the first holds the lock
    other.join(5)
    assert entered == [1]


def test_a_path_with_white_space_is_left_out_rather_than_breaking_the_jvm_options():
    spaced = cds.ClassArchives("use", {"driver-hardened": "/cache dir/driver-hardened.jsa"})
    assert spaced.jvm_options("driver-hardened") == []
    plain = cds.ClassArchives("use", {"driver-hardened": "/cache/driver-hardened.jsa"})
    assert plain.jvm_options("driver-hardened") == ["-XX:SharedArchiveFile=/cache/driver-hardened.jsa"]
