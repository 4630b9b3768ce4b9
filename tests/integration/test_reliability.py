"""The suite's own reliability, through the real CLI on the real stack: a run killed with SIGKILL is cleaned up by
`chaos clean`; two runs at once share nothing and both judge correctly; MinIO's per-run credentials appear in no
file a run writes; a port taken under the stack's feet and a full disk are one clear line each.

The runs use tests/fixtures/experiments/tiny.yaml (about a minute each). Interrupts at several moments of a run
are in test_experiments.py (SIGINT during a fault) and test_interrupts.py.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infra.ports import listening
from infra.registry import REGISTRY_ENV
from tests.leftovers import pids_of, ports_of

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "fixtures" / "experiments" / "tiny.yaml"


def start_run(out: Path, *args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "chaos.cli", "run", str(TINY), "--out", str(out), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, **(env or {})})


def run_dir_of(out: Path, timeout: float = 60) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # The run's own directory, not the `latest` link to it: processes name the real path.
        found = [p for p in out.iterdir() if p.is_dir() and not p.is_symlink() and (p / "run.json").is_file()] \
            if out.exists() else []
        if found:
            return found[0]
        time.sleep(0.2)
    raise AssertionError(f"no run directory appeared under {out}")


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def history_has(run_dir: Path, text: str) -> bool:
    histories = list(run_dir.glob("*/*/history.jsonl"))
    return bool(histories) and text in histories[0].read_text()


def minio_credentials(run_dir: Path) -> tuple[str, str] | None:
    """MinIO's root credentials of this run, read from its process (they are never written anywhere)."""
    for pid in pids_of(run_dir):
        try:
            if b"minio" not in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]:
                continue
            environ = dict(item.split(b"=", 1) for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                           if b"=" in item)
        except OSError:
            continue
        if b"MINIO_ROOT_USER" in environ:
            return environ[b"MINIO_ROOT_USER"].decode(), environ[b"MINIO_ROOT_PASSWORD"].decode()
    return None


# What a clean teardown deletes (infra/stack.py): a run keeps every other file it wrote.
DATA_DIRS = ("kafka-data", "minio-data", "spark-work")


def files_holding(run_dir: Path, credentials: tuple[str, str]) -> list[str]:
    """The files a run keeps (logs, histories, results, the report) that hold its MinIO access or secret key."""
    needles = [value.encode() for value in credentials]
    return [str(path) for path in run_dir.rglob("*") if path.is_file()
            and not any(part in DATA_DIRS for part in path.relative_to(run_dir).parts)
            and any(needle in path.read_bytes() for needle in needles)]


def assert_nothing_left(run_dir: Path) -> None:
    assert pids_of(run_dir) == []
    info = json.loads((run_dir / "stack" / "stack.json").read_text())
    assert [a for a in ports_of(info) if listening(*a, timeout=0.2)] == []


def test_a_run_killed_with_sigkill_is_cleaned_up_by_chaos_clean(tmp_path):
    # a registry of its own: a stack another test starts meanwhile cleans up dead runs too, and would find this one
    registry = {REGISTRY_ENV: str(tmp_path / "active-runs")}
    process = start_run(tmp_path, env=registry)
    try:
        run_dir = run_dir_of(tmp_path)
        wait_for(lambda: history_has(run_dir, '"state":"injected"'), 300, "the fault to be injected")
        process.kill()  # SIGKILL: no finally block runs, nothing is torn down
        process.wait(30)
    finally:
        if process.poll() is None:
            process.kill()
    assert pids_of(run_dir), "a SIGKILLed harness leaves its servers and driver running"
    credentials = minio_credentials(run_dir)  # its MinIO still runs, with them in its environment
    assert credentials, "the killed run's MinIO was not found"
    cleaned = subprocess.run([sys.executable, "-m", "chaos.cli", "clean"], capture_output=True, text=True,
                             timeout=120, cwd=ROOT, env={**os.environ, **registry})
    assert cleaned.returncode == 0, cleaned.stderr
    assert f"run {run_dir} (pid {process.pid}) had died: stopped " in cleaned.stderr
    assert_nothing_left(run_dir)
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "interrupted" and meta["killed"] is True
    assert json.loads((run_dir / "results.json").read_text())["verdict"] == "INTERRUPTED"
    # No file of the run holds its credentials: logs, history, run.json, and what `chaos clean` judged and wrote
    # (results, junit.xml, index.html: chaos/rejudge.py).
    assert (run_dir / "index.html").is_file()
    leaks = files_holding(run_dir, credentials)
    assert leaks == [], f"credentials written to {leaks}"
    again = subprocess.run([sys.executable, "-m", "chaos.cli", "clean"], capture_output=True, text=True, timeout=60,
                           cwd=ROOT, env={**os.environ, **registry})
    assert "nothing to clean" in again.stdout


# Slow (`make test-all` only): two stacks at once, each on its own ports with its own MinIO credentials, both judged
# PASSED and leaving nothing behind, is what the smoke's two lanes do in `make test` (test_experiments.py: every arm
# PASSED, test_the_run_leaves_its_report_and_nothing_behind), and the shared session itself runs stacks and `chaos
# run`s of several workers side by side. The scan of a run's files for its credentials is in the SIGKILL test above.
@pytest.mark.slow
def test_two_runs_at_once_share_nothing_and_both_judge_correctly(tmp_path):
    outs = [tmp_path / "a", tmp_path / "b"]
    processes = [start_run(out) for out in outs]
    credentials = {}
    try:
        run_dirs = [run_dir_of(out) for out in outs]
        deadline = time.monotonic() + 300
        while len(credentials) < 2 and time.monotonic() < deadline:
            for run_dir in run_dirs:
                credentials.setdefault(run_dir, minio_credentials(run_dir)) or credentials.pop(run_dir)
            time.sleep(0.5)
        results = [p.communicate(timeout=900) for p in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
                process.wait(120)
    for process, (_out, err) in zip(processes, results):
        assert process.returncode == 0, err[-3000:]
    infos = [json.loads((d / "stack" / "stack.json").read_text()) for d in run_dirs]
    assert not set(ports_of(infos[0])) & set(ports_of(infos[1])), "two runs shared a port"
    arms = [json.loads((d / "tiny" / "hardened" / "arm.json").read_text()) for d in run_dirs]
    assert arms[0]["topic"] != arms[1]["topic"] and arms[0]["deployment"] != arms[1]["deployment"]
    assert len(set(credentials.values())) == 2, "each run has its own MinIO credentials"
    for run_dir in run_dirs:
        assert json.loads((run_dir / "results.json").read_text())["verdict"] == "PASSED"
        assert_nothing_left(run_dir)
        # No file of the run holds its credentials: logs, histories, results, the report.
        leaks = files_holding(run_dir, credentials[run_dir])
        assert leaks == [], f"credentials written to {leaks}"


def test_a_port_taken_under_the_stack_is_one_line_naming_the_component(tmp_path, monkeypatch):
    import socket

    import infra.stack
    from infra.errors import ComponentError
    from infra.ports import free_ports
    from infra.stack import Stack

    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    real = free_ports

    def with_minio_port_taken(count, hosts):
        ports = real(count, hosts=hosts)
        ports[2] = taken  # Ports.allocate: number 2 is MinIO's
        return ports

    monkeypatch.setattr(infra.stack, "free_ports", with_minio_port_taken)
    try:
        with pytest.raises(ComponentError) as error, Stack(tmp_path / "run"):
            pass
    finally:
        squatter.close()
    message = str(error.value)
    assert "\n" not in message and message.startswith("minio ")
    assert str(tmp_path / "run" / "logs" / "minio.log") in message
    assert pids_of(tmp_path / "run") == []


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None, reason="mounting a small tmpfs needs root")
def test_a_full_disk_for_the_run_directory_is_an_environment_error(tmp_path):
    mount_point = tmp_path / "full"
    mount_point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount_point)], check=True)
    try:
        done = subprocess.run([sys.executable, "-m", "chaos.cli", "run", str(TINY), "--out", str(mount_point)],
                              capture_output=True, text=True, timeout=600, cwd=ROOT)
        errors = [line for line in done.stderr.splitlines() if line.startswith("chaos:")]
        assert done.returncode == 3, done.stderr[-3000:]
        assert len(errors) == 1 and "free" in errors[0] and str(mount_point) in errors[0], errors
        assert "Traceback" not in done.stderr
        run_dirs = [p for p in mount_point.iterdir() if p.is_dir()]
        for run_dir in run_dirs:
            assert pids_of(run_dir) == []
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)
