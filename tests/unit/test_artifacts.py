"""Artifact verification: what is pinned is what runs; a corrupted or missing download is rejected."""
from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from infra import artifacts
from infra.artifacts import GoTool, JarPin, JarSet, LocalGoTool, Lock, Shim
from infra.errors import ArtifactError


def _pin(data: bytes) -> JarPin:
    return JarPin(hashlib.sha256(data).hexdigest(), len(data))


def _jar_set(tmp_path: Path, contents: dict[str, bytes]) -> JarSet:
    return JarSet("demo", tmp_path / "demo.pom.xml", {name: _pin(data) for name, data in contents.items()})


def _go_tool() -> GoTool:
    return GoTool("demo-server", "example.org/demo", "v1.0.0", "example.org/demo/cmd/server", "h1:x", "demo")


def _install(jar_set: JarSet, cache: Path, contents: dict[str, bytes]) -> None:
    directory = jar_set.directory(cache)
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in contents.items():
        (directory / name).write_bytes(data)


def _install_tool(tool: GoTool, cache: Path, data: bytes) -> None:
    tool.path(cache).parent.mkdir(parents=True, exist_ok=True)
    tool.path(cache).write_bytes(data)
    tool.stamp(cache).write_text(hashlib.sha256(data).hexdigest() + "\n")


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def test_intact_artifacts_verify(tmp_path, cache):
    contents = {"a-1.0.jar": b"alpha", "b-2.0.jar": b"beta"}
    jar_set, tool = _jar_set(tmp_path, contents), _go_tool()
    _install(jar_set, cache, contents)
    _install_tool(tool, cache, b"\x7fELF demo")
    lock = Lock({"demo": jar_set}, {"demo-server": tool})
    assert artifacts.problems(lock, cache) == []


def test_corrupted_jar_is_named_with_the_fix(tmp_path, cache):
    contents = {"a-1.0.jar": b"alpha", "b-2.0.jar": b"beta"}
    jar_set = _jar_set(tmp_path, contents)
    _install(jar_set, cache, {"a-1.0.jar": b"alpha", "b-2.0.jar": b"bet4"})  # same size, one byte differs
    lock = Lock({"demo": jar_set}, {})
    with pytest.raises(ArtifactError) as raised:
        artifacts.verify(lock, cache)
    message = str(raised.value)
    assert "b-2.0.jar" in message and "corrupt" in message and "make setup" in message
    assert "\n" not in message


def test_missing_jar_is_named(tmp_path, cache):
    contents = {"a-1.0.jar": b"alpha", "b-2.0.jar": b"beta"}
    jar_set = _jar_set(tmp_path, contents)
    _install(jar_set, cache, {"a-1.0.jar": b"alpha"})
    found = artifacts.problems(Lock({"demo": jar_set}, {}), cache)
    assert len(found) == 1 and "b-2.0.jar is missing" in found[0]


def test_corrupted_binary_is_detected(cache):
    tool = _go_tool()
    _install_tool(tool, cache, b"\x7fELF demo")
    tool.path(cache).write_bytes(b"\x7fELF dem0")
    found = artifacts.problems(Lock({}, {"demo-server": tool}), cache)
    assert len(found) == 1 and "corrupt" in found[0] and "demo-server" in found[0]


def test_corrupted_download_is_rejected_and_never_installed(tmp_path, cache, monkeypatch):
    """The registry serving bytes other than the pinned ones must not reach the cache."""
    contents = {"a-1.0.jar": b"alpha"}
    jar_set = _jar_set(tmp_path, contents)
    calls = []

    def serve_tampered(jar_set_, cache_, into: Path) -> None:
        calls.append(into)
        (into / "a-1.0.jar").write_bytes(b"ALPHA")  # what a tampered or broken download looks like

    monkeypatch.setattr(artifacts, "_maven_resolve", serve_tampered)
    with pytest.raises(ArtifactError, match="does not match its pinned SHA-256"):
        artifacts.fetch(Lock({"demo": jar_set}, {}), cache, progress=lambda m: None)
    assert len(calls) == 2  # retried once after dropping the local copy
    assert not (jar_set.directory(cache) / "a-1.0.jar").exists()


def test_good_download_is_installed_and_second_fetch_reuses_it(tmp_path, cache, monkeypatch):
    contents = {"a-1.0.jar": b"alpha", "extra-bundled-1.0.jar": b"ignored"}
    jar_set = _jar_set(tmp_path, {"a-1.0.jar": b"alpha"})
    calls = []

    def serve(jar_set_, cache_, into: Path) -> None:
        calls.append(into)
        for name, data in contents.items():
            (into / name).write_bytes(data)

    monkeypatch.setattr(artifacts, "_maven_resolve", serve)
    lock = Lock({"demo": jar_set}, {})
    artifacts.fetch(lock, cache, progress=lambda m: None)
    artifacts.fetch(lock, cache, progress=lambda m: None)
    assert len(calls) == 1
    assert sorted(p.name for p in jar_set.directory(cache).iterdir()) == ["a-1.0.jar"]


def test_the_real_lock_pins_everything_the_stack_needs():
    lock = artifacts.load_lock()
    assert set(lock.jar_sets) == {"kafka-broker", "spark-connectors"}
    assert set(lock.go_tools) == {"minio", "toxiproxy"}
    kafka = lock.jar_sets["kafka-broker"].jars
    spark = lock.jar_sets["spark-connectors"].jars
    assert any(name.startswith("kafka_2.13-") for name in kafka)
    assert any(name.startswith("spark-sql-kafka-0-10_2.13-") for name in spark)
    assert any(name.startswith("hadoop-aws-3.5.0") for name in spark)
    assert not any(name.startswith("bundle-") for name in spark), "the AWS SDK bundle must not be pulled in"
    for pin in [*kafka.values(), *spark.values()]:
        assert len(pin.sha256) == 64 and pin.size > 0
    for tool in lock.go_tools.values():
        assert tool.module_sum.startswith("h1:") and tool.version.startswith("v")
    # Our own S3 fault proxy: built from the repository's source, not pinned in the lock file.
    assert set(lock.local_tools) == {"s3proxy"}
    assert (lock.local_tools["s3proxy"].source / "go.mod").is_file()


def _local_tool(tmp_path: Path) -> LocalGoTool:
    source = tmp_path / "src"
    source.mkdir()
    (source / "go.mod").write_text("module example.org/demo\n\ngo 1.22\n")
    (source / "main.go").write_text("package main\n\nfunc main() {}\n")
    return LocalGoTool("demo-proxy", source, "demo-proxy")


def test_a_local_tool_is_named_by_its_source_and_ignores_its_tests(tmp_path, cache):
    tool = _local_tool(tmp_path)
    first = tool.path(cache)
    assert first.name.startswith("demo-proxy-") and first.parent == cache / "bin"
    (tool.source / "main_test.go").write_text("package main\n")
    assert tool.path(cache) == first  # tests do not change the binary
    (tool.source / "main.go").write_text("package main\n\nfunc main() { println() }\n")
    assert tool.path(cache) != first


def test_a_local_tool_missing_or_corrupt_is_named_with_the_fix(tmp_path, cache):
    tool = _local_tool(tmp_path)
    lock = Lock({}, {}, {"demo-proxy": tool})
    with pytest.raises(ArtifactError) as raised:
        artifacts.verify(lock, cache)
    assert "demo-proxy" in str(raised.value) and "missing" in str(raised.value) and "make setup" in str(raised.value)
    tool.path(cache).parent.mkdir(parents=True)
    tool.path(cache).write_bytes(b"\x7fELF demo")
    tool.stamp(cache).write_text(hashlib.sha256(b"\x7fELF demo").hexdigest() + "\n")
    assert artifacts.problems(lock, cache) == []
    tool.path(cache).write_bytes(b"\x7fELF dem0")
    found = artifacts.problems(lock, cache)
    assert len(found) == 1 and "corrupt" in found[0]
    (tool.source / "main.go").write_text("package main\n\n// changed\nfunc main() {}\n")
    found = artifacts.problems(lock, cache)  # a changed source wants a new build
    assert len(found) == 1 and "missing" in found[0] and "current source" in found[0]


def test_a_local_tool_is_built_once_per_source(tmp_path, cache, monkeypatch):
    tool = _local_tool(tmp_path)
    builds = []

    def go_build(command, what, env=None, cwd=None):
        builds.append((command, cwd, env))
        Path(command[command.index("-o") + 1]).write_bytes(b"\x7fELF built")
        return ""

    monkeypatch.setattr(artifacts, "_run", go_build)
    monkeypatch.setattr(artifacts, "_go", lambda: "go")
    lock = Lock({}, {}, {"demo-proxy": tool})
    artifacts.fetch(lock, cache, progress=lambda m: None)
    artifacts.fetch(lock, cache, progress=lambda m: None)
    assert len(builds) == 1
    command, cwd, env = builds[0]
    assert command[:3] == ["go", "build", "-trimpath"] and cwd == tool.source
    assert env["GOTOOLCHAIN"] == "local" and env["CGO_ENABLED"] == "0" and env["GOFLAGS"] == "-modcacherw"
    assert tool.path(cache).read_bytes() == b"\x7fELF built"


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler")
def test_a_shim_is_compiled_once_per_source_and_rebuilt_when_it_changes(tmp_path, cache):
    source = tmp_path / "demo.c"
    source.write_text("int chaos_demo(void) { return 1; }\n")
    shim = Shim("demo", source)
    lock = Lock({}, {}, {}, {"demo": shim})
    assert "missing" in artifacts.problems(lock, cache)[0]
    artifacts.fetch(lock, cache, progress=lambda m: None)
    first = shim.path(cache)
    assert first.read_bytes()[:4] == b"\x7fELF" and artifacts.problems(lock, cache) == []
    source.write_text("int chaos_demo(void) { return 2; }\n")
    assert "current demo.c" in artifacts.problems(lock, cache)[0]
    artifacts.fetch(lock, cache, progress=lambda m: None)
    assert shim.path(cache) != first and artifacts.problems(lock, cache) == []


def test_a_shim_that_does_not_compile_is_named(tmp_path, cache):
    source = tmp_path / "broken.c"
    source.write_text("int chaos_demo(void) { return }\n")
    lock = Lock({}, {}, {}, {"broken": Shim("broken", source)})
    with pytest.raises(ArtifactError, match="shim broken"):
        artifacts.fetch(lock, cache, progress=lambda m: None)


def test_artifact_name_strips_versions():
    assert artifacts._artifact_name("netty-codec-4.1.126.Final.jar") == "netty-codec"
    assert artifacts._artifact_name("scala-library-2.13.15.jar") == "scala-library"
    assert artifacts._artifact_name("zstd-jni-1.5.6-10.jar") == "zstd-jni"
    assert artifacts._artifact_name("spark-sql-kafka-0-10_2.13-4.2.0.jar") == "spark-sql-kafka-0-10_2.13"
