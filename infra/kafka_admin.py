"""Kafka admin actions the Python client lacks (moving partition leadership), run by a small Java program compiled
once against the broker's own kafka-clients jar and cached by its source's hash."""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from . import artifacts
from .errors import InfraError
from .paths import cache_dir

SOURCE = Path(__file__).with_name("kafka_admin") / "LeaderMove.java"


def _classpath() -> str:
    return ":".join(str(p) for p in artifacts.verify().kafka_jars)


def compiled(classpath: str | None = None) -> Path:
    """The compiled program's directory; compiled on first use (two lanes at once: each in a directory of its
    own, the first to finish is kept)."""
    classpath = classpath or _classpath()
    digest = hashlib.sha256(SOURCE.read_bytes() + classpath.encode()).hexdigest()[:16]
    out = cache_dir() / "kafka-admin" / digest
    if (out / "LeaderMove.class").exists():
        return out
    javac = shutil.which("javac")
    if javac is None:
        raise InfraError("javac was not found: moving partition leaders needs a JDK (OpenJDK 17); install one")
    out.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=digest + ".", dir=out.parent))
    try:
        done = subprocess.run([javac, "-nowarn", "-cp", classpath, "-d", str(building), str(SOURCE)],
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            first = (done.stderr or done.stdout).strip().splitlines()[:1]
            raise InfraError(f"compiling {SOURCE.name} failed: {first[0] if first else 'exit ' + str(done.returncode)}")
        try:
            building.rename(out)
        except OSError:
            if not (out / "LeaderMove.class").exists():  # another process's copy is there: keep it
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return out


def move_leaders(bootstrap: str, topic: str, timeout: float = 60.0) -> list[str]:
    """Move each partition's leadership of `topic` to its next in-sync replica; the program's lines
    ("moved P from A to B"). InfraError when nothing could move or the cluster did not answer."""
    classpath = _classpath()
    java = shutil.which("java") or "java"
    argv = [java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx128m", "-cp",
            f"{compiled(classpath)}:{classpath}", "LeaderMove", bootstrap, topic]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise InfraError(f"moving the leaders of {topic} took more than {timeout:.0f} s") from None
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0:
        error = next((line for line in lines if line.startswith("error:")), None)
        raise InfraError(f"moving the leaders of {topic} failed: {error or (done.stderr.strip()[:300] or 'exit ' + str(done.returncode))}")
    return lines
