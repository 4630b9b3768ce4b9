"""The run store: the one owner of a run directory's layout and of every write of its files that are written whole
(docs/run-store.md is the format; it is kept exactly, so old runs still load).

```
<runs>/<UTC yyyymmddThhmmss>-<name>-<pid>/     new_run_dir; <runs>/latest points at the newest
  run.json  results.json                         RunRecord, write_run / write_results
  mutation.json                                  write_mutation (chaos mutate's plan, chaos/mutate.py)
  logs/[lane-N/]  stack/[lane-N/]                logs_dir / stack_dir (infra/stack.py writes there: it cannot
                                                 import chaos/, so it keeps the same two names itself)
  <experiment>/spec.json                         write_spec
  <experiment>/<arm>/result.json                 write_result (chaos/checks/judge.py)
  <experiment>/<arm>/arm.json                    write_arm_summary (chaos/arm/job.py)
  <experiment>/<arm>/sessions.jsonl  oracle.json  lineage.json
                                                 write_sessions, write_oracle, write_lineage (chaos/arm/steps.py)
```

Every one of these writes is atomic (a temporary file renamed over the old one): a reader (the report, a concurrent
`chaos check`) never sees half a file. The files appended as an arm runs are written by their own writers, line by
line: history.jsonl (chaos/history.py), ledger.jsonl (chaos/workload.py), progress*.jsonl (the job) and the logs.
"""
from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RUN_FILE = "run.json"
RESULTS_FILE = "results.json"
SPEC_FILE = "spec.json"
RESULT_FILE = "result.json"
ARM_FILE = "arm.json"
SESSIONS_FILE = "sessions.jsonl"
ORACLE_FILE = "oracle.json"
LINEAGE_FILE = "lineage.json"
MUTATION_FILE = "mutation.json"
JUDGE_LATER_FILE = "judge-later.json"  # an interrupted arm's outputs, stored unjudged (chaos/rejudge.py judge_left)
LOGS_DIR = "logs"
STACK_DIR = "stack"
LATEST = "latest"


def runs_root(out: Path | None = None) -> Path:
    """Where run directories go: --out, else reports/runs. (infra/ is imported here only: the checks and the report
    write through this module and never reach infra/.)"""
    from infra.paths import REPORTS_DIR

    return (out or REPORTS_DIR / "runs").resolve()


def new_run_dir(name: str, out: Path | None = None) -> Path:
    """<runs>/<timestamp>-<name>-<pid>/, with <runs>/latest pointing at it."""
    runs = runs_root(out)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    run_dir = runs / f"{stamp}-{name}-{os.getpid()}"
    run_dir.mkdir(parents=True, exist_ok=False)
    latest = runs / LATEST
    temporary = runs / f".latest-{os.getpid()}"
    temporary.unlink(missing_ok=True)
    temporary.symlink_to(run_dir.name)
    temporary.replace(latest)  # atomic, so a concurrent run never sees a missing link
    return run_dir


def now() -> str:
    """A run.json time: UTC, ISO 8601, whole seconds."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def write_text(path: Path, text: str) -> None:
    """`text` into `path`, atomically."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def write_json(path: Path, value: object, indent: int = 2) -> None:
    """`value` as indented JSON, atomically (indent 1: the files that always were, oracle.json, lineage.json and
    mutation.json, kept byte for byte)."""
    write_text(path, json.dumps(value, indent=indent) + "\n")


def is_run_dir(path: Path) -> bool:
    """A run directory of any age: it has run.json, which a run of experiments (chaos run, rerun, mutate, reproduce)
    writes before anything else, judged or not (results.json). A measurement (chaos stack smoke, chaos bench) writes
    results.json alone: no run to judge. A name the file system refuses (too long) is none."""
    try:
        return (Path(path) / RUN_FILE).is_file()
    except OSError:
        return False


@dataclasses.dataclass
class RunRecord:
    """run.json of a `chaos run` (and rerun, mutate, reproduce): what was run. Key order on disk is field order."""

    suite: str
    backend: str
    scale: float
    argv: list[str]
    commit: str | None
    pid: int
    started: str
    ended: str | None
    status: str  # running | completed | interrupted | error
    lanes: int
    repeat: int
    experiments: list[str]  # experiment directories, in run order

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class RunStore:
    """One run directory: where its files are and how they are written."""

    def __init__(self, run_dir: Path):
        self.dir = Path(run_dir)

    # -- layout --
    @property
    def run_file(self) -> Path:
        return self.dir / RUN_FILE

    @property
    def results_file(self) -> Path:
        return self.dir / RESULTS_FILE

    @property
    def mutation_file(self) -> Path:
        return self.dir / MUTATION_FILE

    def experiment_dir(self, directory: str) -> Path:
        return self.dir / directory

    def arm_dir(self, directory: str, profile: str) -> Path:
        return self.dir / directory / profile

    def logs_dir(self, lane: str | None = None) -> Path:
        return self.dir / LOGS_DIR / lane if lane else self.dir / LOGS_DIR

    def stack_dir(self, lane: str | None = None) -> Path:
        return self.dir / STACK_DIR / lane if lane else self.dir / STACK_DIR

    # -- reads --
    def read_run(self) -> dict[str, Any] | None:
        """run.json as stored (any age: keys are not required), or None if missing or not a JSON object."""
        try:
            value = json.loads(self.run_file.read_text())
        except (OSError, ValueError):
            return None
        return value if isinstance(value, dict) else None

    # -- writes --
    def write_run(self, record: RunRecord | Mapping[str, Any]) -> None:
        write_json(self.run_file, record.to_dict() if isinstance(record, RunRecord) else dict(record))

    def write_results(self, results: Mapping[str, Any]) -> None:
        write_json(self.results_file, results)

    def write_mutation(self, rows: list[dict[str, Any]]) -> None:
        write_json(self.mutation_file, rows, indent=1)

    def write_spec(self, directory: str, spec: Mapping[str, Any]) -> None:
        self.experiment_dir(directory).mkdir(parents=True, exist_ok=True)
        write_json(self.experiment_dir(directory) / SPEC_FILE, spec)

    def close_killed(self, line: str) -> bool:
        """A run whose harness was killed (SIGKILL) while running: run.json says interrupted, killed, when and what
        cleaned up after it (every other key as stored). False if it was not a running run; OSError or ValueError
        if run.json cannot be read."""
        meta = json.loads(self.run_file.read_text())
        if meta.get("status") != "running":
            return False
        meta.update(status="interrupted", killed=True, ended=now(), cleaned_up=line)
        self.write_run(meta)
        return True


def write_result(arm_dir: Path, arm: Mapping[str, Any]) -> None:
    """<experiment>/<arm>/result.json: this arm's verdict and checks (chaos/checks/judge.py)."""
    write_json(Path(arm_dir) / RESULT_FILE, arm)


def write_arm_summary(arm_dir: Path, summary: Mapping[str, Any]) -> None:
    """<experiment>/<arm>/arm.json: what the arm's job did (chaos/arm/job.py)."""
    write_json(Path(arm_dir) / ARM_FILE, summary)


def write_sessions(arm_dir: Path, sessions: Iterable[Mapping[str, Any]]) -> None:
    """<experiment>/<arm>/sessions.jsonl: the sessions the job wrote, one JSON object a line, written as they are
    read (millions of them need not fit in memory); atomically, as write_text."""
    path = Path(arm_dir) / SESSIONS_FILE
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w") as f:
            for row in sessions:
                f.write(json.dumps(row) + "\n")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(path)


def write_oracle(arm_dir: Path, oracle: Mapping[str, Any]) -> None:
    """<experiment>/<arm>/oracle.json: the oracle's comparison of the ledger with the sessions."""
    write_json(Path(arm_dir) / ORACLE_FILE, oracle, indent=1)


def write_lineage(arm_dir: Path, lineage: Mapping[str, Any]) -> None:
    """<experiment>/<arm>/lineage.json: the checkpoint as a restart would read it."""
    write_json(Path(arm_dir) / LINEAGE_FILE, lineage, indent=1)
