"""Kafka admin actions the Python client lacks (moving partition leadership), run by a small Java program compiled
once against the broker's own kafka-clients jar and cached by its source's hash."""
from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

from . import artifacts
from .errors import InfraError
from .paths import cache_dir

SOURCE = Path(__file__).with_name("kafka_admin") / "LeaderMove.java"


def _classes(classpath: str) -> Path:
    """The compiled program's directory; compiled on first use."""
    digest = hashlib.sha256(SOURCE.read_bytes() + classpath.encode()).hexdigest()[:16]
    out = cache_dir() / "kafka-admin" / digest
    if (out / "LeaderMove.class").exists():
        return out
    javac = shutil.which("javac")
    if javac is None:
        raise InfraError("javac was not found: the leader move needs a JDK (run: chaos doctor)")
    building = out.with_name(digest + ".tmp")
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True)
    done = subprocess.run([javac, "-nowarn", "-cp", classpath, "-d", str(building), str(SOURCE)],
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise InfraError(f"compiling {SOURCE.name} failed: {(done.stderr or done.stdout).strip().splitlines()[:1]}")
    shutil.rmtree(out, ignore_errors=True)
    building.rename(out)
    return out


def move_leaders(bootstrap: str, topic: str, timeout: float = 60.0) -> list[str]:
    """Move each partition's leadership of `topic` to its next in-sync replica; the program's lines
    ("moved P from A to B"). InfraError when nothing could move or the cluster did not answer."""
    classpath = ":".join(str(p) for p in artifacts.verify().kafka_jars)
    java = shutil.which("java") or "java"
    argv = [java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx128m", "-cp",
            f"{_classes(classpath)}:{classpath}", "LeaderMove", bootstrap, topic]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise InfraError(f"moving the leaders of {topic} took more than {timeout:.0f} s") from None
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0:
        error = next((line for line in lines if line.startswith("error:")), None)
        raise InfraError(f"moving the leaders of {topic} failed: {error or (done.stderr.strip()[:300] or 'exit ' + str(done.returncode))}")
    return lines
