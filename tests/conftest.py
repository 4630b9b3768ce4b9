"""Shared fixtures. Integration tests start a real stack (Kafka, MinIO, Toxiproxy, Spark) per module.

Backends: `--backend local,containers` (a comma list) runs the same tests against each. Without
`--backend`, tests run on `local`, and modules marked `all_backends` (the stack tests) also on
`containers` when a Docker engine answers — or always with CHAOS_REQUIRE_CONTAINERS=1 (CI), so a missing
engine fails there instead of being skipped.
"""
from __future__ import annotations

import os
import signal

# The chaos plugin (chaos/pytest_plugin.py: chaos_stack, run_experiment, --chaos-scale/--chaos-seed, one item per
# suite arm) from this clone, installed or not; where `pip install -e .` registered its entry point too, pytest sees
# the same name and loads it once.
pytest_plugins = ["chaos.pytest_plugin"]


_ENGINE: list[bool] = []
_USED = {"containers": False}


def pytest_addoption(parser):
    parser.addoption("--backend", default=None,
                     help="comma-separated stack backends the integration tests run against (local, containers); "
                          "default: local, plus containers for `all_backends` tests when a Docker engine answers")
    parser.addoption("--deselect-slow", action="store_true",
                     help="leave out the tests marked `slow` (`make test` does; `make test-all` runs them)")


def pytest_configure(config):
    config.addinivalue_line("markers", "all_backends: run on every available backend by default, not only local")
    config.addinivalue_line("markers", "slow: covers a path another test in `make test` covers too; only "
                                       "`make test-all` (or pytest without --deselect-slow) runs it")
    # A SIGTERM (a CI timeout, `kill`) takes the Ctrl-C path, so fixtures tear their stacks down.
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminate)


def _terminate(signum, frame):
    raise KeyboardInterrupt


def pytest_collection_modifyitems(config, items):
    if config.getoption("deselect_slow"):
        slow = [item for item in items if item.get_closest_marker("slow") is not None]
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [item for item in items if item.get_closest_marker("slow") is None]
    if hasattr(config, "workerinput"):  # an xdist worker: its collection's order is the order units are handed out
        from tests.module_order import longest_first

        items[:] = longest_first(items)


def _containers_available() -> bool:
    if not _ENGINE:
        if os.environ.get("CHAOS_REQUIRE_CONTAINERS") == "1":
            _ENGINE.append(True)
        else:
            from infra.containers import engine_status

            _ENGINE.append(engine_status(timeout=3)[0])
    return _ENGINE[0]


def pytest_generate_tests(metafunc):
    if "backend" in metafunc.fixturenames:
        chosen = metafunc.config.getoption("backend")
        if chosen:
            backends = [b.strip() for b in chosen.split(",") if b.strip()]
        else:
            backends = ["local"]
            if metafunc.definition.get_closest_marker("all_backends") and _containers_available():
                backends.append("containers")
        only = metafunc.definition.get_closest_marker("backends")  # a module whose stack runs on these alone
        if only:
            backends = [b for b in backends if b in only.args]
        _USED["containers"] |= "containers" in backends
        metafunc.parametrize("backend", backends, scope="module")


def pytest_sessionfinish(session, exitstatus):
    """No container may outlive the tests: remove any this session left (its own, or those of a run it
    started in a subprocess that died), fail the session if there were any; leftovers of other dead runs are
    removed and named."""
    if not _USED["containers"]:
        return
    try:
        from infra import images
        from infra.containers import LABEL, LABEL_OWNER, LABEL_RUN_DIR, _remove, owner_alive, owner_label

        client = images.docker_client(timeout=10)
    except Exception:
        return
    try:
        basetemp = str(session.config._tmp_path_factory.getbasetemp())
    except Exception:
        basetemp = None
    ours, others = [], []
    for container in client.containers.list(all=True, ignore_removed=True, filters={"label": LABEL}):
        owner, run_dir = container.labels.get(LABEL_OWNER, ""), container.labels.get(LABEL_RUN_DIR, "")
        if owner == owner_label() or (basetemp and run_dir.startswith(basetemp) and owner_alive(owner) is False):
            ours.append(container)
        elif owner_alive(owner) is False:
            others.append(container)
    for container in ours + others:
        _remove(container)
    writer = session.config.get_terminal_writer()
    if others:
        writer.line(f"removed containers of dead runs: {', '.join(sorted(c.name for c in others))}", yellow=True)
    if ours:
        writer.line(f"containers left behind by the tests (now removed): {', '.join(sorted(c.name for c in ours))}",
                    red=True)
        if session.exitstatus == 0:
            session.exitstatus = 1
