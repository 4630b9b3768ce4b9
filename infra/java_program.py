"""A small Java program of the suite's own (infra/kafka_admin/, infra/state_files/), compiled once against the jars it
uses and cached by a hash of its source and class path: the first use compiles it, later ones find it."""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from .errors import InfraError
from .paths import cache_dir


def compiled(source: Path, classpath: str, cache_key: str, purpose: str, timeout: float = 300.0,
             fingerprint: str = "") -> Path:
    """The directory holding `source` compiled against `classpath`, under the cache's `cache_key/<hash>/` (the hash of
    the source, the class path and `fingerprint`: what else the build depends on, e.g. the jars a `dir/*` class path
    names). Two lanes at once: each compiles in a directory of its own, and the first to finish is kept. `purpose`
    says what needs the JDK in the one-line error when there is none."""
    digest = hashlib.sha256(source.read_bytes() + (classpath + fingerprint).encode()).hexdigest()[:16]
    out = cache_dir() / cache_key / digest
    built = out / (source.stem + ".class")
    if built.exists():
        return out
    javac = shutil.which("javac")
    if javac is None:
        raise InfraError(f"javac was not found: {purpose} needs a JDK (OpenJDK 17); install one")
    out.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=digest + ".", dir=out.parent))
    try:
        done = subprocess.run([javac, "-nowarn", "-cp", classpath, "-d", str(building), str(source)],
                              capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            first = (done.stderr or done.stdout).strip().splitlines()[:1]
            raise InfraError(f"compiling {source.name} failed: {first[0] if first else 'exit ' + str(done.returncode)}")
        try:
            building.rename(out)
        except OSError:
            if not built.exists():  # another process's copy is there: keep it
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return out
