"""A copy of the stored run 20261123T085731-smoke-464 (run B) that passes, for the tests of what a passed run shows.

Since issue 36 run B is FAILED (tests/fixtures/runs/README.md): process-crash/hardened's restarted drivers completed
no batch before the next kill, and in kafka-broker-disconnect and driver-latency a heal was followed by the next
fault 1.2 s and 2.0 s later, in specs that did not declare their recovery `grouped`. The copy declares it there,
as experiments/*.yaml now do, and leaves process-crash out; judged again, every arm passes."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from chaos.checks.judge import judge_run
from chaos.store import RunStore

RUN_B = "20261123T085731-smoke-464"
GROUPED = ("kafka-broker-disconnect", "driver-latency")  # their faults come faster than a recovery can be judged
UNRECOVERED = "process-crash"  # its restarted drivers did not recover: no honest way to a pass


def declare_grouped(spec_path: Path) -> None:
    """Every arm's recovery target in a stored spec.json, `grouped`."""
    spec = json.loads(spec_path.read_text())
    for arm in spec["arms"]:
        recovery = arm["targets"].get("recovery")
        if recovery is not None:
            recovery["grouped"] = True
    spec_path.write_text(json.dumps(spec, indent=2))


def passed_copy(run_dir: Path, keep: tuple[str, ...] = ()) -> Path:
    """Run B at `run_dir` (a copy), made to pass as the module says and judged again (results.json, result.json);
    `keep` keeps process-crash in (for a test that then skips its arm)."""
    for name in GROUPED:
        declare_grouped(run_dir / name / "spec.json")
    if UNRECOVERED not in keep:
        shutil.rmtree(run_dir / UNRECOVERED)
        record = json.loads((run_dir / "run.json").read_text())
        record["experiments"] = [e for e in record["experiments"] if e != UNRECOVERED]
        (run_dir / "run.json").write_text(json.dumps(record, indent=2))
    RunStore(run_dir).write_results(judge_run(run_dir))
    return run_dir
