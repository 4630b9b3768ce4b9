"""Pinned third-party artifacts: fetched with the ordinary clients, verified, cached per user.

Two kinds, both pinned in infra/artifacts.lock.json:
- jar sets resolved by Maven from a pom under infra/maven/ (the Kafka broker; Spark's Kafka connector
  with hadoop-aws and the AWS SDK modules). Every kept jar is pinned by SHA-256 and size.
- servers built with `go install` from the Go module proxy (MinIO, Toxiproxy). The module is pinned by
  version and by its go.sum hash (h1:, a SHA-256 over the module's files), which the go tool checks
  against the checksum database; the built binary's SHA-256 is stamped next to it so later corruption is
  caught before use.

One more server is ours and built from this repository's source, so it has no pin: the S3 fault proxy
(infra/s3proxy/, standard library only). Its binary is named by a hash of its source files, so a changed
source means a new build and an unchanged one a no-op; it is stamped like the Go tools.

Everything lands under cache_dir() (CHAOS_CACHE_DIR overrides). `fetch` is idempotent: what verifies is
kept, what does not is fetched again. `verify` never fetches: it names the first broken artifact and the
command that fixes it.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ArtifactError
from .paths import INFRA_DIR, cache_dir

LOCK_PATH = INFRA_DIR / "artifacts.lock.json"
FIX_COMMAND = "make setup"
MAVEN_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

Progress = Callable[[str], None]


def _stderr(message: str) -> None:
    print(f"[setup] {message}", file=sys.stderr, flush=True)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class JarPin:
    sha256: str
    size: int


@dataclass(frozen=True)
class JarSet:
    """Jars Maven resolves from one pom; only the pinned ones are kept."""

    name: str
    pom: Path
    jars: dict[str, JarPin]

    def directory(self, cache: Path) -> Path:
        # Keyed by the pins, so changing a version never mixes old and new jars in one directory.
        key = hashlib.sha256(json.dumps(sorted((n, p.sha256) for n, p in self.jars.items())).encode())
        return cache / "jars" / f"{self.name}-{key.hexdigest()[:12]}"

    def problems(self, cache: Path) -> list[str]:
        directory = self.directory(cache)
        found = []
        for jar, pin in sorted(self.jars.items()):
            path = directory / jar
            if not path.is_file():
                found.append(f"{self.name}: {jar} is missing from {directory}")
            elif path.stat().st_size != pin.size or sha256_of(path) != pin.sha256:
                found.append(f"{self.name}: {jar} in {directory} is corrupt (SHA-256 does not match the pin)")
        return found

    def paths(self, cache: Path) -> list[Path]:
        return [self.directory(cache) / jar for jar in sorted(self.jars)]


class _Built:
    """An artifact built here, with the SHA-256 recorded at build time beside it (`<file>.sha256`)."""

    name: str

    def path(self, cache: Path) -> Path:
        raise NotImplementedError

    def _label(self) -> str:
        return self.name

    def _unbuilt(self) -> str:
        """What a missing file means, after "is missing"."""
        return ""

    def stamp(self, cache: Path) -> Path:
        path = self.path(cache)
        return path.with_name(path.name + ".sha256")

    def problems(self, cache: Path) -> list[str]:
        built, stamp = self.path(cache), self.stamp(cache)
        if not built.is_file() or not stamp.is_file():
            return [f"{self._label()}: {built} is missing{self._unbuilt()}"]
        if sha256_of(built) != stamp.read_text().strip():
            return [f"{self._label()}: {built} is corrupt (SHA-256 differs from the one recorded at build time)"]
        return []


@dataclass(frozen=True)
class GoTool(_Built):
    """A server built from a pinned Go module version."""

    name: str
    module: str
    version: str
    package: str
    module_sum: str
    binary: str

    def path(self, cache: Path) -> Path:
        return cache / "bin" / f"{self.binary}-{self.version}"


@dataclass(frozen=True)
class LocalGoTool(_Built):
    """A server built from Go source in this repository (standard library only: nothing to download or pin)."""

    name: str
    source: Path   # the module directory (go.mod)
    binary: str

    def source_files(self) -> list[Path]:
        """What the build reads: go.mod, go.sum if any, and every non-test .go file."""
        files = [p for p in self.source.rglob("*") if p.is_file() and (
            p.name in ("go.mod", "go.sum") or (p.suffix == ".go" and not p.name.endswith("_test.go")))]
        return sorted(files)

    def source_hash(self) -> str:
        files = self.source_files()
        if not any(p.name == "go.mod" for p in files):
            raise ArtifactError(f"{self.name}: no go.mod under {self.source}; restore it from git")
        digest = hashlib.sha256()
        for path in files:
            digest.update(path.relative_to(self.source).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        return digest.hexdigest()[:16]

    def path(self, cache: Path) -> Path:
        return cache / "bin" / f"{self.binary}-{self.source_hash()}"

    def _unbuilt(self) -> str:
        return f" (not built from the current source in {self.source})"


# Built from this repository, not pinned in the lock file: the source is the pin.
LOCAL_GO_TOOLS = {"s3proxy": ("s3proxy", "s3proxy")}  # name -> (directory under infra/, binary name)


def local_go_tools() -> dict[str, LocalGoTool]:
    return {name: LocalGoTool(name, INFRA_DIR / directory, binary)
            for name, (directory, binary) in LOCAL_GO_TOOLS.items()}


SHIMS_DIR = INFRA_DIR / "shims"


@dataclass(frozen=True)
class Shim(_Built):
    """A shared library preloaded (LD_PRELOAD) into a process to interpose on libc calls, built with the C compiler
    from one file in infra/shims/ (nothing downloaded: the source is the pin)."""

    name: str
    source: Path   # infra/shims/<name>.c

    def source_hash(self) -> str:
        try:
            return hashlib.sha256(self.source.read_bytes()).hexdigest()[:16]
        except OSError as error:
            raise ArtifactError(f"shim {self.name}: cannot read {self.source}: {error}; restore it from git") from error

    def path(self, cache: Path) -> Path:
        return cache / "lib" / f"{self.name}-{self.source_hash()}.so"

    def _label(self) -> str:
        return f"shim {self.name}"

    def _unbuilt(self) -> str:
        return f" (not built from the current {self.source.name})"


def shims() -> dict[str, Shim]:
    """Every infra/shims/*.c, by its file name."""
    return {path.stem: Shim(path.stem, path) for path in sorted(SHIMS_DIR.glob("*.c"))}


def shim_library(name: str, cache: Path | None = None) -> Path:
    """The built library of infra/shims/<name>.c, verified; one line naming the fix otherwise."""
    shim = shims().get(name)
    if shim is None:
        raise ArtifactError(f"no shim {name}: infra/shims/{name}.c is missing; restore it from git")
    cache = cache or cache_dir()
    found = shim.problems(cache)
    if found:
        raise ArtifactError(f"artifact {found[0]}; run: {FIX_COMMAND}")
    return shim.path(cache)


@dataclass(frozen=True)
class Lock:
    jar_sets: dict[str, JarSet]
    go_tools: dict[str, GoTool]
    local_tools: dict[str, LocalGoTool] = field(default_factory=dict)
    shims: dict[str, Shim] = field(default_factory=dict)


@dataclass(frozen=True)
class ArtifactPaths:
    """Verified locations the local backend runs from."""

    kafka_jars: list[Path]
    spark_jars: list[Path]
    minio: Path
    toxiproxy: Path
    s3proxy: Path
    shims: dict[str, Path] = field(default_factory=dict)   # name -> the built .so (infra/shims/<name>.c)


def load_lock(path: Path = LOCK_PATH) -> Lock:
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ArtifactError(f"cannot read the artifact lock {path}: {error}; restore it from git") from error
    jar_sets = {
        name: JarSet(name, INFRA_DIR / entry["pom"],
                     {jar: JarPin(pin["sha256"], pin["size"]) for jar, pin in entry["jars"].items()})
        for name, entry in raw["maven"].items()
    }
    go_tools = {name: GoTool(name=name, **entry) for name, entry in raw["go"].items()}
    return Lock(jar_sets, go_tools, local_go_tools(), shims())


def problems(lock: Lock, cache: Path | None = None) -> list[str]:
    cache = cache or cache_dir()
    found: list[str] = []
    for jar_set in lock.jar_sets.values():
        found += jar_set.problems(cache)
    for tool in lock.go_tools.values():
        found += tool.problems(cache)
    for local in lock.local_tools.values():
        found += local.problems(cache)
    for shim in lock.shims.values():
        found += shim.problems(cache)
    return found


def check(lock: Lock, cache: Path) -> None:
    """Raise one line naming the first broken artifact and the command that fixes it."""
    found = problems(lock, cache)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise ArtifactError(f"artifact {found[0]}{more}; run: {FIX_COMMAND}")


def verify(lock: Lock | None = None, cache: Path | None = None) -> ArtifactPaths:
    """Check every pinned artifact and say where the stack finds them."""
    lock = lock or load_lock()
    cache = cache or cache_dir()
    check(lock, cache)
    return _paths(lock, cache)


def _paths(lock: Lock, cache: Path) -> ArtifactPaths:
    return ArtifactPaths(
        kafka_jars=lock.jar_sets["kafka-broker"].paths(cache),
        spark_jars=lock.jar_sets["spark-connectors"].paths(cache),
        minio=lock.go_tools["minio"].path(cache),
        toxiproxy=lock.go_tools["toxiproxy"].path(cache),
        s3proxy=lock.local_tools["s3proxy"].path(cache),
        shims={name: shim.path(cache) for name, shim in lock.shims.items()},
    )


def _run(command: list[str], what: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    try:
        done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)
    except FileNotFoundError as error:
        raise ArtifactError(f"{what}: {command[0]} is not installed ({error.strerror})") from error
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise ArtifactError(f"{what} failed (exit {done.returncode}): {tail}")
    return done.stdout


def _maven_resolve(jar_set: JarSet, cache: Path, into: Path) -> None:
    _run(["mvn", "-B", "-q", "-f", str(jar_set.pom), f"-Dmaven.repo.local={cache / 'm2'}",
          f"{MAVEN_DEPENDENCY_PLUGIN}:copy-dependencies", "-DincludeScope=runtime",
          f"-DoutputDirectory={into}"], f"Maven resolution of {jar_set.name}")


def _forget_in_maven_repo(cache: Path, jar: str) -> None:
    """A corrupt jar in the local Maven repository would be copied again: drop it so Maven re-downloads."""
    for path in (cache / "m2").rglob(jar):
        shutil.rmtree(path.parent, ignore_errors=True)


def _fetch_jar_set(jar_set: JarSet, cache: Path, progress: Progress) -> None:
    if not jar_set.problems(cache):
        progress(f"{jar_set.name}: {len(jar_set.jars)} jars verified in {jar_set.directory(cache)}")
        return
    target = jar_set.directory(cache)
    target.mkdir(parents=True, exist_ok=True)
    for attempt in (1, 2):
        progress(f"{jar_set.name}: resolving with Maven ({len(jar_set.jars)} pinned jars)")
        with tempfile.TemporaryDirectory(dir=cache) as staging:
            _maven_resolve(jar_set, cache, Path(staging))
            bad = []
            for jar, pin in jar_set.jars.items():
                source = Path(staging) / jar
                if not source.is_file():
                    raise ArtifactError(f"{jar_set.name}: Maven did not resolve {jar}; the pom and the lock "
                                        f"disagree: run python -m infra.artifacts relock")
                if sha256_of(source) != pin.sha256:
                    bad.append(jar)
                    continue
                shutil.copy2(source, target / jar)
        if not bad:
            return
        if attempt == 2:
            raise ArtifactError(f"{jar_set.name}: {bad[0]} does not match its pinned SHA-256 even after a fresh "
                                f"download; the registry serves different bytes than were pinned")
        for jar in bad:
            _forget_in_maven_repo(cache, jar)


def _go() -> str:
    """The go tool: on PATH, or where the official tarball installs it (often missing from PATH)."""
    found = shutil.which("go") or next((p for p in ("/usr/local/go/bin/go",) if Path(p).is_file()), None)
    if found is None:
        raise ArtifactError("go is not installed (needed once to build MinIO, Toxiproxy and s3proxy); install Go "
                            "1.23 or newer and run: make setup")
    return found


def _go_env(cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "GOMODCACHE": str(cache / "go" / "mod"),
        "GOFLAGS": "-modcacherw",   # so the cache can be deleted without chmod
        "GOTOOLCHAIN": "local",     # never download another Go toolchain
        "CGO_ENABLED": "0",
    })
    return env


def _fetch_go_tool(tool: GoTool, cache: Path, progress: Progress) -> None:
    if not tool.problems(cache):
        progress(f"{tool.name}: {tool.path(cache)} verified")
        return
    env = _go_env(cache)
    progress(f"{tool.name}: downloading {tool.module}@{tool.version}")
    info = json.loads(_run([_go(), "mod", "download", "-json", f"{tool.module}@{tool.version}"],
                           f"download of {tool.module}", env))
    if info.get("Sum") != tool.module_sum:
        raise ArtifactError(f"{tool.name}: module {tool.module}@{tool.version} has sum {info.get('Sum')}, "
                            f"pinned {tool.module_sum}; refusing to build it")
    progress(f"{tool.name}: building {tool.package} (cold builds take minutes on 2 cores; MinIO the longest)")
    with tempfile.TemporaryDirectory(dir=cache) as gobin:
        env["GOBIN"] = gobin
        _run([_go(), "install", "-trimpath", f"{tool.package}@{tool.version}"], f"go install of {tool.name}", env)
        built = Path(gobin) / Path(tool.package).name
        destination = tool.path(cache)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(built), destination)
    tool.stamp(cache).write_text(sha256_of(destination) + "\n")


def _build_local_tool(tool: LocalGoTool, cache: Path, progress: Progress) -> None:
    """`go build -trimpath` of our own source into cache/bin/<binary>-<source hash> (nothing downloaded)."""
    if not tool.problems(cache):
        progress(f"{tool.name}: {tool.path(cache)} verified")
        return
    destination = tool.path(cache)
    destination.parent.mkdir(parents=True, exist_ok=True)
    progress(f"{tool.name}: building from {tool.source}")
    with tempfile.TemporaryDirectory(dir=cache) as staging:
        built = Path(staging) / tool.binary
        # -buildvcs=false: the source hash names the build; VCS stamping would also fail on a repository
        # owned by another user ("dubious ownership").
        env = {**_go_env(cache), "GOWORK": "off"}
        _run([_go(), "build", "-trimpath", "-buildvcs=false", "-o", str(built), "."], f"go build of {tool.name}",
             env, cwd=tool.source)
        shutil.move(str(built), destination)
    tool.stamp(cache).write_text(sha256_of(destination) + "\n")


def _build_shim(shim: Shim, cache: Path, progress: Progress) -> None:
    """`cc -shared` of one infra/shims/*.c into cache/lib/<name>-<source hash>.so."""
    if not shim.problems(cache):
        progress(f"shim {shim.name}: {shim.path(cache)} verified")
        return
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise ArtifactError(f"no C compiler (cc or gcc) on PATH, needed once to build the shim {shim.name}; "
                            "install gcc and run: make setup")
    destination = shim.path(cache)
    destination.parent.mkdir(parents=True, exist_ok=True)
    progress(f"shim {shim.name}: building from {shim.source}")
    with tempfile.TemporaryDirectory(dir=cache) as staging:
        built = Path(staging) / destination.name
        _run([compiler, "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", str(built), str(shim.source), "-ldl"],
             f"build of the shim {shim.name}")
        shutil.move(str(built), destination)
    shim.stamp(cache).write_text(sha256_of(destination) + "\n")


def fetch(lock: Lock | None = None, cache: Path | None = None, progress: Progress = _stderr) -> None:
    """Make every pinned artifact present and verified (idempotent)."""
    lock = lock or load_lock()
    cache = cache or cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    for jar_set in lock.jar_sets.values():
        _fetch_jar_set(jar_set, cache, progress)
    for tool in lock.go_tools.values():
        _fetch_go_tool(tool, cache, progress)
    for local in lock.local_tools.values():
        _build_local_tool(local, cache, progress)
    for shim in lock.shims.values():
        _build_shim(shim, cache, progress)
    check(lock, cache)


def relock(cache: Path | None = None) -> None:
    """Maintainer command: re-pin the jar sets from a fresh Maven resolution of the poms.

    Jars the pyspark wheel already bundles (by artifact name, any version) are left out, so one copy of
    each library is on Spark's classpath.
    """
    import pyspark  # only the maintainer's environment needs it here

    cache = cache or cache_dir()
    bundled = {_artifact_name(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    raw = json.loads(LOCK_PATH.read_text())
    for name, entry in raw["maven"].items():
        jar_set = JarSet(name, INFRA_DIR / entry["pom"], {})
        with tempfile.TemporaryDirectory() as staging:
            _maven_resolve(jar_set, cache, Path(staging))
            entry["jars"] = {
                jar.name: {"sha256": sha256_of(jar), "size": jar.stat().st_size}
                for jar in sorted(Path(staging).glob("*.jar"))
                if name == "kafka-broker" or _artifact_name(jar.name) not in bundled
            }
    LOCK_PATH.write_text(json.dumps(raw, indent=2) + "\n")


def _artifact_name(jar_file: str) -> str:
    """'netty-codec-4.1.126.Final.jar' -> 'netty-codec'."""
    parts = jar_file[:-4].split("-")
    for index, part in enumerate(parts):
        if index and re.match(r"\d+\.\d+", part):
            return "-".join(parts[:index])
    return jar_file[:-4]


if __name__ == "__main__":
    if sys.argv[1:] == ["relock"]:
        relock()
    else:
        print("usage: python -m infra.artifacts relock", file=sys.stderr)
        sys.exit(2)
