"""What only the containers backend has: the engine check, the local images, container handles (pid, signals,
stop), and cleanup by label — of an interrupted run, of a killed run at the next start, never of a live run.

Runs when a Docker engine answers (always with CHAOS_REQUIRE_CONTAINERS=1, as in CI).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infra import artifacts, images
from infra.cds import OFF
from infra.components import LaunchSpec, Ports, toxiproxy
from infra.containers import (
    LABEL,
    LABEL_OWNER,
    ContainersBackend,
    containers_of,
    engine_status,
    owner_label,
    remove_leftovers,
)
from infra.ports import free_ports, listening
from tests.leftovers import pids_of

pytestmark = pytest.mark.integration

if os.environ.get("CHAOS_REQUIRE_CONTAINERS") != "1" and not engine_status(timeout=3)[0]:
    pytest.skip("no Docker engine answers (run: make setup-containers)", allow_module_level=True)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def client():
    client = images.docker_client()
    yield client
    client.close()


@pytest.fixture(scope="module")
def refs(client):
    return images.resolve(artifacts.verify(), client)


@pytest.fixture
def containers_backend(tmp_path):
    backend = ContainersBackend()
    backend.runtime_paths = backend.runtime(artifacts.verify(), OFF)
    yield backend
    backend.close()


def _toxiproxy_spec(backend: ContainersBackend) -> tuple[LaunchSpec, int]:
    """The stack's own Toxiproxy command (infra/components.py) with the in-image paths."""
    ports = Ports.allocate(free_ports(Ports.count()))
    return toxiproxy(backend.runtime_paths, ports), ports.toxiproxy_api


def test_engine_answers():
    ok, detail = engine_status()
    assert ok, detail
    assert "overlay2" in detail


def test_doctor_reports_the_engine_and_the_images():
    done = subprocess.run([sys.executable, "-m", "chaos.cli", "doctor", "--backend", "containers"],
                          capture_output=True, text=True, timeout=120)
    assert "docker engine" in done.stdout and "Docker " in done.stdout, done.stdout
    assert "chaos-suite/" in done.stdout or "public" in done.stdout, done.stdout


def test_local_images_are_tagged_by_their_inputs_and_not_rebuilt(client, refs):
    recipe = images.local_images(artifacts.verify())
    tags = images.local_tags(recipe)
    for component, ref in refs.items():
        if ref.startswith(f"{images.LOCAL_REPOSITORY}/"):
            assert ref == tags[component]
            name, inputs = ref.split("/", 1)[1].split(":")
            assert client.images.get(ref).labels["chaos-suite.inputs"] == inputs
            assert name == component
    # Everything is built: building again builds nothing.
    assert images.ensure_local(client, recipe, tags, list(images.COMPONENTS)) == {}


def test_handle_pid_signals_and_stop(containers_backend, tmp_path):
    spec, api_port = _toxiproxy_spec(containers_backend)
    handle = containers_backend.launch(spec, tmp_path / "logs" / "toxiproxy.log")
    try:
        deadline = time.monotonic() + 20
        while not listening("127.0.0.1", api_port):
            assert handle.alive() and time.monotonic() < deadline
            time.sleep(0.05)
        # pid: the container's init process as this host sees it, running the component's command
        assert Path(f"/proc/{handle.pid}/cmdline").read_bytes().split(b"\0")[0] == b"/toxiproxy"
        handle.signal(signal.SIGSTOP)
        assert _state(handle.pid, ("T",)) == "T"
        handle.signal(signal.SIGCONT)
        assert _state(handle.pid, ("S", "R")) in ("S", "R")
        assert listening("127.0.0.1", api_port)  # host networking: the port is the one in the command
    finally:
        handle.stop(grace=2)
    assert not handle.alive()
    assert containers_of(tmp_path) == []
    assert "Starting Toxiproxy HTTP server" in (tmp_path / "logs" / "toxiproxy.log").read_text()


def test_sigkill_is_seen_as_death(containers_backend, tmp_path):
    spec, _ = _toxiproxy_spec(containers_backend)
    handle = containers_backend.launch(spec, tmp_path / "logs" / "toxiproxy.log")
    handle.signal(signal.SIGKILL)
    deadline = time.monotonic() + 10
    while handle.alive():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    handle.stop()
    assert containers_of(tmp_path) == []


def _state(pid: int, expected: tuple[str, ...]) -> str:
    """The process's state once it is one of `expected` (a signal takes effect asynchronously), or its last state
    after 5 s, for the caller's assert."""
    deadline = time.monotonic() + 5
    while True:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state in expected or time.monotonic() > deadline:
            return state
        time.sleep(0.01)


def _sleeping_container(client, refs, owner: str, run_dir: Path):
    return client.containers.run(
        refs["toxiproxy"], entrypoint=["/toxiproxy"], command=["-host", "127.0.0.1", "-port", "0"],
        network="host", detach=True,
        labels={LABEL: "true", LABEL_OWNER: owner, "chaos-suite.run-dir": str(run_dir)})


def test_leftovers_of_dead_runs_are_removed_and_live_runs_kept(client, refs, tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_owner = owner_label(dead.pid)
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live_owner = owner_label(live.pid)
        _sleeping_container(client, refs, dead_owner, tmp_path / "dead")
        kept = _sleeping_container(client, refs, live_owner, tmp_path / "live")
        try:
            removed = remove_leftovers(client)
            # the orphan is gone: removed here, or by a stack another test started meanwhile (every stack start
            # removes dead runs' containers), which is the same code judging the same label
            assert kept.name not in removed
            assert containers_of(tmp_path / "dead") == []
            assert containers_of(tmp_path / "live") == [kept.name]
        finally:
            kept.remove(force=True)
    finally:
        live.kill()
        live.wait()


def _smoke(tmp_path: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "chaos.cli", "stack", "smoke", "--backend", "containers",
                             "--json", "--out", str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            # a test run started in the background has SIGINT ignored, and children inherit that
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_for_containers(tmp_path: Path, count: int, process: subprocess.Popen, timeout: float = 180) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = [p for p in tmp_path.glob("*-stack-smoke-*") if p.is_dir()]
        if runs and len(containers_of(runs[0])) >= count:
            return runs[0]
        assert process.poll() is None, process.communicate()[1][-2000:]
        time.sleep(0.2)
    raise AssertionError(f"the smoke did not start {count} containers within {timeout} s")


def test_sigint_during_a_run_removes_its_containers(tmp_path):
    process = _smoke(tmp_path)
    try:
        run_dir = _wait_for_containers(tmp_path, 5, process)
        time.sleep(1)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr[-2000:]
    assert containers_of(run_dir) == []
    assert pids_of(run_dir) == []


def test_a_killed_run_is_cleaned_up_by_the_next_start(tmp_path, client):
    process = _smoke(tmp_path)
    try:
        run_dir = _wait_for_containers(tmp_path, 3, process)
    finally:
        process.kill()  # SIGKILL: no teardown at all
        process.communicate(timeout=60)
    time.sleep(1)  # requests the engine had already accepted complete
    left = containers_of(run_dir)
    assert left, "a SIGKILLed run leaves its containers (until the next start)"
    backend = ContainersBackend()
    try:
        backend.runtime(artifacts.verify(), OFF)  # what every containers stack start does first
        assert containers_of(run_dir) == []
    finally:
        backend.close()
    assert pids_of(run_dir) == []
