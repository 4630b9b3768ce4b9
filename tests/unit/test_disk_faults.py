"""Disk faults (chaos/faults/disk.py): their validation, the control file they switch the fsfault shim with, what a
worker preloads (infra/preloads.py), the arms a stack without the shim skips (chaos/target/gate.py), and the shim
itself (infra/shims/fsfault.c) under a Python process: ENOSPC and EIO under the prefix, nothing elsewhere."""
from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from chaos.errors import SpecError
from chaos.faults.base import FaultContext
from chaos.faults.disk import DiskFault, control_line
from chaos.spec import load_experiment
from chaos.target import parse_target
from chaos.target.gate import preload_missing, skip_reason
from infra import preloads

from .test_spec import base, write
from .test_targets import MINIMAL

ROOT = Path(__file__).resolve().parents[2]
SHIM = ROOT / "infra" / "shims" / "fsfault.c"


def _spec(tmp_path: Path, *faults: dict):
    doc = base()
    doc["faults"] = list(faults)
    return load_experiment(write(tmp_path, doc))


# -- validation ---------------------------------------------------------------------------------------------------
def test_disk_error_takes_which_calls_fail_and_defaults_to_all(tmp_path):
    spec = _spec(tmp_path, {"fault": "disk.error", "target": "executor", "at": "1s", "duration": "5s",
                            "params": {"calls": "read"}},
                 {"fault": "disk.error", "target": "executor", "at": "15s", "duration": "2s"})
    assert [f.params["calls"] for f in spec.faults] == ["read", "all"]


@pytest.mark.parametrize("fault, message", [
    ({"fault": "disk.error", "target": "executor", "at": "1s", "duration": "5s", "params": {"calls": "fsync"}},
     "faults.0.params.calls: 'fsync'"),
    ({"fault": "disk.full", "target": "executor", "at": "1s", "duration": "5s", "params": {"calls": "read"}},
     "faults.0.params.calls"),  # a full disk fails writes only: nothing to choose
    ({"fault": "disk.full", "target": "broker", "at": "1s", "duration": "5s"}, "faults.0.target: 'broker'"),
])
def test_disk_faults_refuse_what_they_cannot_do(tmp_path, fault, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(".", r"\.")):
        _spec(tmp_path, fault)


def test_the_control_line_is_what_the_shim_reads():
    assert control_line("disk.full", "write") == "ENOSPC write\n"
    assert control_line("disk.error", "read") == "EIO read\n"
    assert '"ENOSPC"' in SHIM.read_text() and '"EIO"' in SHIM.read_text()


# -- the preload and the gate ---------------------------------------------------------------------------------------
def test_a_worker_preloads_fsfault_on_its_own_local_directory_only(tmp_path):
    library = tmp_path / "fsfault-abc.so"
    env = preloads.worker_env({"fsfault": library}, tmp_path, "spark-worker-2")
    assert env["LD_PRELOAD"] == str(library)
    assert env["SPARK_LOCAL_DIRS"] == str(tmp_path / "spark-local" / "spark-worker-2")
    assert env["FSFAULT_PREFIX"] == env["SPARK_LOCAL_DIRS"] + "/" and env["FSFAULT_MATCH"] == "/StateStoreId("
    assert env["FSFAULT_CONTROL"] == str(tmp_path / "shims" / "fsfault-spark-worker-2.control")
    assert preloads.preloaded({"fsfault": library}, {"spark-worker-2": env, "spark-worker": {}}) == \
        {"fsfault": ["spark-worker-2"]}
    bare = preloads.worker_env({}, tmp_path, "spark-worker")  # not built: nothing preloaded
    assert "LD_PRELOAD" not in bare and preloads.preloaded({}, {"spark-worker": bare}) == {}


def test_a_stack_or_target_without_the_shim_skips_the_arm(tmp_path):
    spec = _spec(tmp_path, {"fault": "disk.full", "target": "executor", "at": "1s", "duration": "5s"},
                 {"fault": "network.down", "target": "kafka", "at": "15s", "duration": "2s"})
    reason = preload_missing({}, spec, [0, 1], "the containers backend's stack")
    assert reason is not None and reason.startswith("fault 1 (disk.full on executor): it acts through the shim "
                                                    "fsfault") and "the containers backend's stack" in reason
    assert preload_missing({"fsfault": ["spark-worker"]}, spec, [0, 1], "x") is None
    assert preload_missing({}, spec, [1], "x") is None  # an arm that runs only the network fault
    target = parse_target(MINIMAL, "t.yaml")
    assert "shim fsfault" in (skip_reason(target, ["kafka"], True, spec, [0]) or "")


def test_inject_switches_every_workers_control_file_and_heal_removes_it(tmp_path):
    spec = _spec(tmp_path, {"fault": "disk.error", "target": "executor", "at": "1s", "duration": "5s",
                            "params": {"calls": "write"}})
    controls = {w: str(tmp_path / "shims" / f"fsfault-{w}.control") for w in ("spark-worker-1", "spark-worker-2")}
    (tmp_path / "shims").mkdir()
    stack = SimpleNamespace(info=SimpleNamespace(disk_fault_controls=controls))
    history = SimpleNamespace(fault=lambda *args: None)
    fault = DiskFault(spec.faults[0], FaultContext(stack=stack, arm=None, history=history, say=lambda _: None))
    fault.run_inject()
    assert [Path(c).read_text() for c in controls.values()] == ["EIO write\n"] * 2
    assert sorted(p.name for p in (tmp_path / "shims").iterdir()) == sorted(Path(c).name for c in controls.values())
    fault.run_heal()
    assert not any(Path(c).exists() for c in controls.values())


# -- the shim itself --------------------------------------------------------------------------------------------------
# A child writes to a file under RocksDB's directory, one elsewhere under the prefix and one outside it, and reads
# the first back, opening them before the fault is switched on (RocksDB keeps its files open); the fault is switched
# between its steps through the control file.
_CHILD = r"""
import os, sys, time
root, step = sys.argv[1], sys.argv[2:]
paths = [root + "/local/spark-1/StateStoreId(opId=0,partId=0,name=default)-1/000001.sst",
         root + "/local/spark-1/blockmgr-1/shuffle_0", root + "/elsewhere"]
for p in paths:
    os.makedirs(os.path.dirname(p), exist_ok=True)
fds = [os.open(p, os.O_RDWR | os.O_CREAT, 0o644) for p in paths]
def outcome(call):
    try:
        call()
        return "ok"
    except OSError as e:
        return {28: "ENOSPC", 5: "EIO"}.get(e.errno, str(e.errno))
for word in step:
    if word == "wait":
        time.sleep(0.2)  # longer than the shim's 50 ms between looks at the control file
        continue
    results = [outcome(lambda fd=fd: os.pwrite(fd, b"x", 0)) + "/" + outcome(lambda fd=fd: os.pread(fd, 1, 0))
               for fd in fds]
    print(" ".join(results), flush=True)
"""


@pytest.fixture(scope="module")
def shim(tmp_path_factory) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler: the shim cannot be built")
    library = tmp_path_factory.mktemp("shim") / "fsfault.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", str(library), str(SHIM), "-ldl"],
                   check=True, timeout=60)
    return library


def _run(shim: Path, root: Path, control: str | None, env: dict[str, str] | None = None) -> list[str]:
    """The child's lines: one per `check`, with the control file's contents switched in between."""
    control_file = root / "control"
    script = root / "child.py"
    script.write_text(_CHILD)
    child_env = {"LD_PRELOAD": str(shim), "FSFAULT_CONTROL": str(control_file),
                 "FSFAULT_PREFIX": str(root / "local") + "/", "FSFAULT_MATCH": "/StateStoreId(", **(env or {})}
    control_file.unlink(missing_ok=True)
    # check (off), switch on, check, switch off, check: the child waits between steps
    process = subprocess.Popen([sys.executable, str(script), str(root), "check", "wait", "check", "wait", "check"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env)
    assert process.stdout is not None
    lines = [process.stdout.readline().strip()]
    if control is not None:
        control_file.write_text(control)
    time.sleep(0.1)
    lines.append(process.stdout.readline().strip())
    control_file.unlink(missing_ok=True)
    out, err = process.communicate(timeout=30)
    lines.append(out.strip())
    assert process.returncode == 0, err
    return lines


def test_the_shim_fails_only_rocksdbs_files_and_only_while_switched_on(shim, tmp_path):
    # each line: the RocksDB file, another file under the prefix (shuffle), a file outside; each "write/read"
    clean = "ok/ok ok/ok ok/ok"
    assert _run(shim, tmp_path, "ENOSPC write\n") == [clean, "ENOSPC/ok ok/ok ok/ok", clean]
    assert _run(shim, tmp_path, "EIO read\n") == [clean, "ok/EIO ok/ok ok/ok", clean]
    assert _run(shim, tmp_path, "EIO all\n") == [clean, "EIO/EIO ok/ok ok/ok", clean]
    assert _run(shim, tmp_path, "off\n") == [clean, clean, clean]


def test_the_shim_is_inert_without_its_environment(shim, tmp_path):
    assert _run(shim, tmp_path, "ENOSPC write\n", env={"FSFAULT_CONTROL": ""}) == ["ok/ok ok/ok ok/ok"] * 3


# -- the hardening: a local disk failure is an outage (job/supervisor.py, Settings.local_disk_outage) ----------------
# the query's failure as measured (disk-full, 2026-11-28): the errno after a local path longer than a cause line keeps
_ENOSPC = ("org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 18.0 failed 2 times\n"
           "Caused by: org.rocksdb.RocksDBException: While appending to file: /tmp/run/stack/spark-local/spark-worker/"
           "spark-2a86cb41-54e7-4d00-8737-afb09ba0e438/executor-57141952-3bb0-4a23-bbcd-ce46db426e61/"
           "spark-b98137a5-1d3a-4977-b7e9-fc7a296e28b8/StateStoreId(opId=0,partId=0,name=default)-3c64ca4e-d7d7-4be9-"
           "acc2-39b4873ed4cb/workingDir-4f079923-2358-4bb5-bbca-b59876015d72/000011.sst: No space left on device")


def test_a_local_disk_failure_repeating_is_an_outage_only_with_the_switch_on():
    from job.supervisor import BudgetExceeded, RestartPolicy, local_disk, root_cause

    cause = root_cause(_ENOSPC)
    assert "No space left on device" not in cause and local_disk(_ENOSPC)
    assert local_disk("java.io.IOException: Input/output error") and not local_disk(cause)
    policy = RestartPolicy(budget=5)
    for _ in range(3):
        policy.failed(cause, outage=True)
    assert not policy.repeating()  # restarted until the disk is back...
    with pytest.raises(BudgetExceeded):
        for _ in range(3):
            policy.failed(cause, outage=True)  # ...within the budget
    off = RestartPolicy(budget=5)
    for _ in range(3):
        off.failed(cause)
    assert off.repeating()  # the switch off: the repeat rule stops the job (exit 7), as measured


def test_a_run_on_a_stack_without_the_shim_skips_both_arms_and_starts_nothing(tmp_path):
    from chaos.checks.arm import skipped_reason
    from chaos.history import read_history
    from chaos.run import _run_arms

    spec = load_experiment(ROOT / "experiments" / "disk-full.yaml")
    stack = SimpleNamespace(info=SimpleNamespace(preloaded={}, backend="containers"),
                            reset=lambda: pytest.fail("an arm was started"))
    said: list[str] = []
    _run_arms(stack, tmp_path, "disk-full", spec, None, said.append, lambda: 0.0, None)
    for arm in ("hardened", "naive"):
        reason = skipped_reason(read_history(tmp_path / "disk-full" / arm / "history.jsonl"))
        assert reason is not None and "the containers backend's stack preloads none" in reason, reason
    assert [line.split(" arm SKIPPED")[0] for line in said] == ["== disk-full: hardened", "== disk-full: naive"]
