"""Class-data sharing (CDS) archives for the suite's JVMs: the same classes, parsed and verified once.

Every arm starts a Spark driver and an executor, and every driver kill, corruption or second deployment starts
more; on two cores a fresh JVM spends seconds parsing and verifying the same ~15,000 classes each time. A dynamic
CDS archive (JDK 13+) holds them pre-parsed: measured on the job, a start from launch to the first finished batch
took ~7 s less with archives (docs/lab-notes.md, `chaos bench startup`). Nothing about the job changes: a JVM
maps the archive and loads anything it does not hold from the jars as before.

One archive per JVM role (ROLES). They are recorded once by `chaos setup` on a training stack
(chaos/class_archives.py) and kept under <cache>/cds/<fingerprint>/. The fingerprint covers the JDK and every jar
on the roles' classpaths (name, size, modification time): a JVM refuses an archive whose classpath changed, so a
new venv, JDK or jar set gets archives of its own instead of silently running without. A JVM given an archive it
cannot use (another JDK build, a damaged file) runs without it (-Xshare:auto, the JDK default): archives can
make a start faster, never make it fail.

Which JVMs use them: on the local backend all of them; on the containers backend only the drivers, which always
run on this host (the containers' JVMs run another JDK build and classpath, where host archives do not apply).
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .artifacts import sha256_of
from .paths import cache_dir

# Bump when the training changes what it exercises, so archives are recorded again.
TRAINING_VERSION = 1
DRIVER_PROFILES = ("hardened", "naive")
# Roles dumped from a running JVM (jcmd VM.cds dynamic_dump, which needs -XX:+RecordDynamicDumpInfo at start).
DUMPED_ROLES = tuple(f"{kind}-{profile}" for kind in ("driver", "executor") for profile in DRIVER_PROFILES) + (
    "kafka", "spark-master", "spark-worker")
# Roles of short-lived JVMs, dumped when they exit (-XX:ArchiveClassesAtExit).
AT_EXIT_ROLES = ("kafka-format",)
ROLES = DUMPED_ROLES + AT_EXIT_ROLES
METADATA = "archives.json"


@dataclass(frozen=True)
class ClassArchives:
    """What the JVMs of one runtime do with archives: `use` the ones in `paths`, `record` into `paths`, or nothing.

    Kept as plain data (it travels in stack.json to the drivers)."""

    mode: str = "off"  # off | use | record
    paths: dict[str, str] = field(default_factory=dict)  # role -> archive file

    def jvm_options(self, role: str, fallback: str | None = None) -> list[str]:
        """JVM options for a JVM of `role` (`fallback`: a role whose archive serves if `role` has none: any archive
        recorded on the same classpath is valid, it only holds fewer of this JVM's classes)."""
        if any(character.isspace() for path in self.paths.values() for character in path):
            return []  # Spark splits extraJavaOptions at white space: such a path would stop the JVM, not speed it
        if self.mode == "use":
            path = self.paths.get(role) or (self.paths.get(fallback) if fallback else None)
            return [f"-XX:SharedArchiveFile={path}"] if path else []
        if self.mode == "record" and role in self.paths:
            if role in AT_EXIT_ROLES:
                return [f"-XX:ArchiveClassesAtExit={self.paths[role]}"]
            return ["-XX:+RecordDynamicDumpInfo"]
        return []

    def only(self, prefixes: tuple[str, ...]) -> ClassArchives:
        return ClassArchives(self.mode, {r: p for r, p in self.paths.items() if r.startswith(prefixes)})

    def merged(self, other: ClassArchives) -> ClassArchives:
        if self.mode == "off":
            return other
        if other.mode == "off":
            return self
        if other.mode != self.mode:
            raise ValueError(f"cannot merge {self.mode} and {other.mode} archives")
        return ClassArchives(self.mode, {**self.paths, **other.paths})

    def to_dict(self) -> dict:
        return {"mode": self.mode, "paths": dict(self.paths)}

    @classmethod
    def from_dict(cls, raw: dict | None) -> ClassArchives:
        return cls(**raw) if raw else cls()


OFF = ClassArchives()


def _java_home() -> Path | None:
    java = shutil.which("java")
    return Path(os.path.realpath(java)).parent.parent if java else None


def _jars(directory_or_files) -> list[Path]:
    paths = []
    for entry in directory_or_files:
        entry = Path(entry)
        paths += sorted(entry.glob("*.jar")) if entry.is_dir() else [entry]
    return paths


def fingerprint(spark_home: str | Path, kafka_jars: list[Path], connector_jars: list[Path]) -> str:
    """A key that changes whenever an archive could stop matching: the JDK (its libjvm and base archive) and every
    jar on the roles' classpaths, by path, size and modification time (what the JVM itself checks)."""
    digest = hashlib.sha256(f"training {TRAINING_VERSION}\n".encode())
    home = _java_home()
    jdk_files = [home / "lib" / "server" / "libjvm.so", home / "lib" / "server" / "classes.jsa"] if home else []
    for path in [*jdk_files, *_jars([Path(spark_home) / "jars"]), *_jars(kafka_jars), *_jars(connector_jars)]:
        try:
            stat = path.stat()
        except OSError:
            digest.update(f"{path} missing\n".encode())
            continue
        digest.update(f"{path} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class ArchiveSet:
    """The archives of one fingerprint, in <cache>/cds/<key>/."""

    directory: Path

    @classmethod
    def for_host(cls, host_artifacts, spark_home: str | Path, cache: Path | None = None) -> ArchiveSet:
        key = fingerprint(spark_home, list(host_artifacts.kafka_jars), list(host_artifacts.spark_jars))
        return cls((cache or cache_dir()) / "cds" / key)

    def path(self, role: str) -> Path:
        return self.directory / f"{role}.jsa"

    def metadata(self) -> dict | None:
        try:
            return json.loads((self.directory / METADATA).read_text())
        except (OSError, ValueError):
            return None

    def problems(self, full: bool = False) -> list[str]:
        """What is missing or damaged (size always; SHA-256 too when `full`); empty when every role is usable."""
        meta = self.metadata()
        if meta is None:
            return [f"no class-data archives in {self.directory}"]
        found = []
        for role in ROLES:
            pin = meta.get("roles", {}).get(role)
            path = self.path(role)
            if pin is None or not path.is_file():
                found.append(f"class-data archive {role} is missing from {self.directory}")
            elif path.stat().st_size != pin["size"] or (full and sha256_of(path) != pin["sha256"]):
                found.append(f"class-data archive {path} is damaged (does not match its record)")
        return found

    def archives(self) -> ClassArchives:
        """`use` for the complete set, else OFF (a half-recorded set is not trusted)."""
        if self.problems():
            return OFF
        return ClassArchives("use", {role: str(self.path(role)) for role in ROLES})


def seal(staging: Path, final: ArchiveSet, spark_home: str) -> None:
    """Record sizes and SHA-256 of the archives recorded in `staging`, then move them into place at once."""
    roles = {}
    for role in ROLES:
        path = staging / f"{role}.jsa"
        if not path.is_file():
            raise FileNotFoundError(f"the training recorded no {role} archive")
        roles[role] = {"size": path.stat().st_size, "sha256": sha256_of(path)}
    (staging / METADATA).write_text(json.dumps({"training_version": TRAINING_VERSION, "spark_home": spark_home,
                                                "roles": roles}, indent=1) + "\n")
    if final.directory.exists():
        shutil.rmtree(final.directory)
    final.directory.parent.mkdir(parents=True, exist_ok=True)
    staging.rename(final.directory)


@contextmanager
def training_lock(cache: Path | None = None) -> Iterator[None]:
    """One training (and pruning) at a time on this machine; a second set-up waits for the first."""
    root = (cache or cache_dir()) / "cds"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".training.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def prune(cache: Path | None = None, keep: Path | None = None, spark_home: str | None = None) -> list[Path]:
    """Remove archive sets whose venv is gone (their Spark home no longer exists), sets that `keep` supersedes (the
    same `spark_home` with other jars, another JDK or an older training) and abandoned staging directories of
    trainings that were killed; returns what was removed."""
    root = (cache or cache_dir()) / "cds"
    removed: list[Path] = []
    if not root.is_dir():
        return removed
    for entry in root.iterdir():
        if entry == keep or not entry.is_dir():
            continue
        if ".training-" in entry.name:
            pid = entry.name.rsplit("-", 1)[-1]
            if pid.isdigit() and Path(f"/proc/{pid}").exists():
                continue  # another setup is training right now
        else:
            meta = ArchiveSet(entry).metadata()
            home = (meta or {}).get("spark_home", "")
            if meta is not None and Path(home).is_dir() and home != spark_home:
                continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


def mapped_archives(pid: int) -> set[str]:
    """The CDS archive files a running JVM has mapped (the JDK's base archive among them): how a test or a
    benchmark knows an archive was used, since a JVM that cannot use one says nothing and runs without."""
    try:
        lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    except OSError:
        return set()
    return {line.split(maxsplit=5)[5] for line in lines if line.endswith(".jsa") and len(line.split(maxsplit=5)) == 6}
