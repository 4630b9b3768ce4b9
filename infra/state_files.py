"""State files read as a restart of the job reads them: every SST with RocksDB's own reader (its footer and every
block's checksum), every changelog with Spark's own changelog reader (decompressed with Spark's configured codec, each
record to the end marker). A small Java program (state_files/StateFiles.java), compiled once against the jars of this
venv's pyspark, the jars the job runs with, and cached by its source's and the jars' hash (as infra/kafka_admin.py)."""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

from . import java_program
from .errors import InfraError

SOURCE = Path(__file__).with_name("state_files") / "StateFiles.java"
KINDS = ("sst", "changelog")


def _jars() -> Path:
    from .stack import host_spark_home

    return Path(host_spark_home()) / "jars"


def compiled(jars: Path | None = None) -> Path:
    """The compiled program's directory; compiled on first use (infra/java_program.py)."""
    jars = jars or _jars()
    # the jars by name: a class path of `dir/*` is the same string whatever the directory holds
    names = "\n".join(sorted(p.name for p in jars.glob("*.jar")))
    return java_program.compiled(SOURCE, f"{jars}/*", "state-files", "reading state files as Spark does",
                                 fingerprint=names)


def read_state_files(files: Iterable[tuple[str, str, bytes]], timeout: float = 300.0) -> dict[str, str | None]:
    """(kind, key, content) of SSTs and changelogs -> {key: None if its reader reads it whole, else what is wrong}.
    InfraError when the readers could not run (no JDK, the program did not answer for every file)."""
    files = list(files)
    wrong = next((kind for kind, _, _ in files if kind not in KINDS), None)
    if wrong is not None:
        raise ValueError(f"state file kind {wrong!r} is not valid; allowed: {', '.join(KINDS)}")
    if not files:
        return {}
    jars = _jars()
    program = compiled(jars)
    java = shutil.which("java") or "java"
    with tempfile.TemporaryDirectory(prefix="state-files.") as directory:
        paths: dict[str, str] = {}
        for number, (kind, key, content) in enumerate(files):
            path = Path(directory) / f"{number}.{kind}"  # the key's own name may be long; the reader needs no name
            path.write_bytes(content)
            paths[str(path)] = key
        argv = [java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m", "-cp", f"{program}:{jars}/*",
                "StateFiles"]
        request = "".join(f"{kind}\t{directory}/{number}.{kind}\n" for number, (kind, _, _) in enumerate(files))
        try:
            done = subprocess.run(argv, input=request, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise InfraError(f"reading {len(files)} state files took more than {timeout:.0f} s") from None
    answers = parse_answers(done.stdout, paths)
    if done.returncode != 0 or len(answers) != len(files):
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise InfraError(f"the state file reader answered for {len(answers)} of {len(files)} files: {last[:300]}")
    return answers


def parse_answers(stdout: str, paths: dict[str, str]) -> dict[str, str | None]:
    """The program's lines ("ok\\tpath\\trecords" or "bad\\tpath\\twhy") -> {key: None or why}."""
    answers: dict[str, str | None] = {}
    for line in stdout.splitlines():
        verdict, _, rest = line.partition("\t")
        path, _, detail = rest.partition("\t")
        if verdict in ("ok", "bad") and path in paths:
            answers[paths[path]] = None if verdict == "ok" else (detail or "unreadable")
    return answers
