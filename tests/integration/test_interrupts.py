"""Ctrl-C at any moment of `chaos run`: while the stack starts, in the steady phase, with a fault injected, in
recovery, and while the run is being judged and reported. Each time every fault is healed, every process and
container of the run is gone, no port of it listens, its results say INTERRUPTED and the exit code is 130.
tiny.yaml has no warm-up, so the steady, fault and recover moments come while its job is still starting.

Every moment on the local backend; on containers (when an engine answers) the interrupt with a fault in place. The
steady and recover moments are marked `slow`: `make test` leaves them out, `make test-all` runs them (below).
"""
from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from infra.ports import listening
from tests.integration.test_reliability import history_has, run_dir_of, start_run, wait_for
from tests.leftovers import pids_of, ports_of

pytestmark = [pytest.mark.integration, pytest.mark.all_backends]


def _moment_reached(run_dir: Path, moment: str) -> bool:
    if moment == "set-up":
        return (run_dir / "logs").is_dir()  # the stack is being started
    if moment == "steady":
        return history_has(run_dir, '"name":"steady","boundary":"start"')
    if moment == "fault":
        return history_has(run_dir, '"state":"injected"')
    if moment == "recover":
        return history_has(run_dir, '"name":"recover","boundary":"start"')
    if moment == "judging":  # the arm is done (its outputs stored): the run is judging and reporting
        return any(run_dir.glob("*/*/lineage.json"))
    raise AssertionError(moment)


# Steady and recover take the interrupt path of `fault`: in all three the Ctrl-C reaches the run in the phase
# clock's wait (chaos/arm/schedule.py PhaseClock), and the same `except KeyboardInterrupt` of ArmRun.run, clean_up
# and the stack's teardown follow. What differs is the fault's state, and Fault.run_heal does nothing for one not
# yet injected (steady) or already healed (recover), so `fault`, which heals one in place, covers their path. They
# run in `make test-all`.
SLOW_MOMENTS = {"steady", "recover"}
MOMENTS = [pytest.param(moment, marks=pytest.mark.slow) if moment in SLOW_MOMENTS else moment
           for moment in ("set-up", "steady", "fault", "recover", "judging")]
# On the containers backend the moment that matters most (a fault in place) is enough: the teardown path is the
# same code, and every extra run costs a stack start.
CONTAINERS_MOMENTS = {"fault"}


@pytest.mark.parametrize("moment", MOMENTS)
def test_sigint_at_any_moment_heals_stops_everything_and_marks_the_run_interrupted(backend, tmp_path, moment):
    if backend == "containers" and moment not in CONTAINERS_MOMENTS:
        pytest.skip(f"on containers only at {', '.join(sorted(CONTAINERS_MOMENTS))} (test time)")
    process = start_run(tmp_path, "--backend", backend)
    try:
        run_dir = run_dir_of(tmp_path)
        wait_for(lambda: _moment_reached(run_dir, moment) or process.poll() is not None, 600, moment)
        assert process.poll() is None, f"the run ended before {moment}: {process.stderr.read()[-3000:]}"
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    if moment == "judging" and process.returncode == 0:
        pytest.skip("the run finished judging before the interrupt arrived")  # a race the test cannot always win
    assert process.returncode == 130, err[-3000:]
    assert "interrupted; everything the run started has been stopped" in err
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"
    assert json.loads((run_dir / "results.json").read_text())["verdict"] == "INTERRUPTED"
    for history in run_dir.glob("*/*/history.jsonl"):
        records = [json.loads(line) for line in history.read_text().splitlines()]
        states = {}
        for record in records:
            if record["type"] == "fault":
                states[(record["name"], record["target"])] = record["state"]
        assert all(state == "healed" for state in states.values()), states
    assert pids_of(run_dir) == []
    stack_json = run_dir / "stack" / "stack.json"
    if stack_json.is_file():  # absent when the interrupt came before the stack was up
        info = json.loads(stack_json.read_text())
        assert [a for a in ports_of(info) if listening(*a, timeout=0.2)] == []
    if backend == "containers":
        from infra.containers import containers_of

        assert containers_of(run_dir) == []
