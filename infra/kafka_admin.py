"""Kafka admin actions the Python client lacks (moving partition leadership), run by a small Java program compiled
once against the broker's own kafka-clients jar and cached by its source's hash."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from . import artifacts, java_program
from .errors import InfraError

SOURCE = Path(__file__).with_name("kafka_admin") / "LeaderMove.java"


def _classpath() -> str:
    return ":".join(str(p) for p in artifacts.verify().kafka_jars)


def compiled(classpath: str | None = None) -> Path:
    """The compiled program's directory; compiled on first use (infra/java_program.py)."""
    return java_program.compiled(SOURCE, classpath or _classpath(), "kafka-admin", "moving partition leaders",
                                 timeout=120)


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
        raise InfraError(f"moving the leaders of {topic} failed: "
                         f"{error or (done.stderr.strip()[:300] or 'exit ' + str(done.returncode))}")
    return lines
