"""`chaos doctor` (what is installed, what is missing) and `chaos setup` (fetch and verify every artifact)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from infra import artifacts
from infra.errors import InfraError
from infra.paths import cache_dir

from .. import errors
from .common import progress as _progress


def _java_major() -> int | None:
    java = shutil.which("java")
    if not java:
        return None
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    try:
        version = out.split('"')[1]
        return int(version.split(".")[0])
    except (IndexError, ValueError):
        return None


def doctor(backend: str) -> int:
    rows: list[tuple[str, bool, str]] = []
    rows.append(("python", sys.version_info >= (3, 11), sys.version.split()[0]))
    for module in ("pyspark", "confluent_kafka", "minio", "toxiproxy", "testcontainers", "yaml", "pyarrow"):
        try:
            imported = __import__(module)
            rows.append((module, True, str(getattr(imported, "__version__", "installed"))))
        except ImportError as error:
            rows.append((module, False, f"not importable ({error}); run: make setup"))
    major = _java_major()
    rows.append(("java", major is not None and major >= 17, f"{major or 'missing'} (17 or newer needed)"))
    rows.append(("mvn (set-up only)", shutil.which("mvn") is not None, shutil.which("mvn") or "missing"))
    rows.append(("go (set-up only)", shutil.which("go") is not None, shutil.which("go") or "missing"))
    found = artifacts.problems(artifacts.load_lock())
    rows.append(("artifacts", not found, f"verified in {cache_dir()}" if not found
                 else f"{found[0]}; run: make setup"))
    if not found:
        rows.append(_class_archives_row())
    if backend == "containers":
        try:
            from infra.containers import engine_status

            ok, detail = engine_status()
        except ImportError:
            ok, detail = False, "the containers backend is not available in this version"
        rows.append(("docker engine", ok, detail))
        if ok and not found:
            rows.append(_images_row())
    width = max(len(name) for name, _, _ in rows)
    for name, ok, detail in rows:
        print(f"{'ok ' if ok else 'NO '} {name:<{width}}  {detail}")
    ready = all(ok for name, ok, _ in rows if "set-up only" not in name and "optional" not in name)
    print(f"backend {backend}: {'ready' if ready else 'not ready'}")
    return errors.PASSED if ready else errors.ENVIRONMENT


def doctor_target(path: Path) -> int:
    """`chaos doctor --target FILE`: the file validated first (exit 2, one line, nothing contacted), then one line per
    check of chaos/target/doctor.py; exit 0 when no check says NO, 3 otherwise."""
    from ..target import load_target
    from ..target.doctor import NO, rows

    target = load_target(path)
    failed = 0
    for row in rows(target):
        print(row.line(24), flush=True)
        failed += row.status == NO
    print(f"target {target.name}: {'ready' if not failed else f'not ready ({failed} check(s) NO)'}")
    return errors.PASSED if not failed else errors.ENVIRONMENT


def _images_row() -> tuple[str, bool, str]:
    """Which image each component runs; missing local builds are made by the first stack start (set-up)."""
    from infra import images

    try:
        refs = images.resolve(artifacts.verify(), build=False)
        return "images", True, ", ".join(sorted(set(refs.values())))
    except InfraError as error:
        return "images (set-up only)", False, f"{error} (the first containers stack start builds them, ≈ 70 s)"


def _class_archives_row() -> tuple[str, bool, str]:
    """The JVMs' class-data archives (infra/cds.py): without them every JVM starts slower, nothing fails."""
    from infra import cds
    from infra.stack import host_spark_home

    archive_set = cds.ArchiveSet.for_host(artifacts.verify(), host_spark_home())
    found = archive_set.problems()
    if found:
        return "class-data archives (optional)", False, f"{found[0]}: JVMs start ~7 s slower; run: make setup"
    return "class-data archives (optional)", True, f"{len(cds.ROLES)} roles in {archive_set.directory}"


def setup() -> int:
    from ..class_archives import ensure

    artifacts.fetch(progress=_progress)
    _progress(f"every pinned artifact is verified under {cache_dir()}")
    try:
        ensure(progress=_progress)
    except InfraError as error:  # an optimisation: without archives every JVM still starts, only slower
        _progress(f"warning: {error}; JVMs will start without class-data archives")
    from infra.state_files import compiled

    try:  # compiled on first use otherwise; here, so no arm's end waits for javac
        _progress(f"state file reader (RocksDB's and Spark's own readers, for lineage) compiled in {compiled()}")
    except InfraError as error:
        _progress(f"warning: {error}; every lineage check will be NODATA until it compiles")
    return errors.PASSED
