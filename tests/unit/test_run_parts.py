"""make test's two pytest sessions (tests/run_parts.py): which tests each part selects, and the exit code of both."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from tests import conftest
from tests.module_order import COSTS_S, DEFAULT_INTEGRATION_S, longest_first
from tests.run_parts import NOTHING_SELECTED, PARTS, SHARED_WORKERS, combined

ROOT = Path(__file__).resolve().parents[2]


def collected(*args: str) -> list[str]:
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, NOTHING_SELECTED), done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_the_alone_part_is_the_timing_bound_tests_and_the_shared_part_the_rest():
    files = ["tests/integration/test_experiments.py", "tests/integration/test_hardening.py",
             "tests/integration/test_targets.py"]
    alone, shared, every = (collected("--chaos-part", part, *files) for part in ("alone", "shared", "all"))
    assert alone and all(item.startswith("tests/integration/test_experiments.py::") for item in alone)
    assert any("checkpoint-commit-failures/hardened" in item for item in alone)  # the smoke's arms
    assert shared and not any(item.startswith("tests/integration/test_experiments.py::") for item in shared)
    assert any(item.startswith("tests/integration/test_targets.py::") for item in shared)  # plumbing: no timing
    assert sorted(alone + shared) == sorted(every)


# The tests `make test` leaves to `make test-all`; beside each mark: the test of `make test` that covers its path.
SLOW = [
    "tests/integration/test_checkpoint_damage_state.py::"
    "test_the_job_repairs_damage_to_each_kind_of_checkpoint_file_and_commits_again[local-changelog]",
    "tests/integration/test_interrupts.py::"
    "test_sigint_at_any_moment_heals_stops_everything_and_marks_the_run_interrupted[local-recover]",
    "tests/integration/test_interrupts.py::"
    "test_sigint_at_any_moment_heals_stops_everything_and_marks_the_run_interrupted[local-steady]",
    "tests/integration/test_job.py::test_clean_run_is_exactly_once[local-naive]",
    "tests/integration/test_reliability.py::test_two_runs_at_once_share_nothing_and_both_judge_correctly",
]


def test_make_test_leaves_out_the_slow_tests_and_make_test_all_runs_them():
    files = ["--backend", "local", *sorted({item.split("::")[0] for item in SLOW})]
    every, kept = collected(*files), collected("--deselect-slow", *files)
    assert sorted(set(every) - set(kept)) == SLOW
    assert set(kept) <= set(every)
    for neighbour in ("[local-fault]", "[local-hardened]", "[local-zip]", "[local-sst]", "[local-state_metadata]",
                      "test_a_run_killed_with_sigkill_is_cleaned_up_by_chaos_clean"):
        assert any(item.endswith(neighbour) for item in kept), neighbour
    makefile = (ROOT / "Makefile").read_text()
    test, test_all = (re.search(rf"^{target}:.*\n(\t.*\n)+", makefile, re.M).group(0)
                      for target in ("test", "test-all"))
    assert "tests.run_parts --deselect-slow" in test and "tests.run_parts" in test_all and "slow" not in test_all


def test_a_part_that_selects_nothing_is_no_failure_unless_neither_selects_a_test():
    assert combined([0, 0]) == 0
    assert combined([NOTHING_SELECTED, 0]) == 0 and combined([0, NOTHING_SELECTED]) == 0
    assert combined([NOTHING_SELECTED, NOTHING_SELECTED]) == NOTHING_SELECTED
    assert combined([1, 0]) == 1 and combined([0, 1]) == 1 and combined([NOTHING_SELECTED, 1]) == 1
    assert combined([3, 1]) == 3


def test_the_shared_part_hands_out_modules_longest_first_each_module_whole_and_in_order():
    nodeids = ["tests/unit/test_spec.py::a", "tests/unit/test_spec.py::b", "tests/integration/test_new.py::a",
               "tests/integration/test_lifecycle.py::a", "tests/integration/test_interrupts.py::fault",
               "tests/integration/test_interrupts.py::judging", "tests/unit/test_oracle.py::a"]
    expected = ["tests/integration/test_lifecycle.py::a", "tests/integration/test_interrupts.py::fault",
                "tests/integration/test_interrupts.py::judging", "tests/integration/test_new.py::a",
                "tests/unit/test_spec.py::a", "tests/unit/test_spec.py::b", "tests/unit/test_oracle.py::a"]
    assert [item.nodeid for item in longest_first([SimpleNamespace(nodeid=n) for n in nodeids])] == expected
    # tests/conftest.py orders an xdist worker's collection so (the order the scheduler hands units out in), and
    # leaves a session without workers as collected
    for config, wanted in ((SimpleNamespace(getoption=lambda name: False, workerinput={}), expected),
                           (SimpleNamespace(getoption=lambda name: False), nodeids)):
        items = [SimpleNamespace(nodeid=n, get_closest_marker=lambda name: None) for n in nodeids]
        conftest.pytest_collection_modifyitems(config, items)
        assert [item.nodeid for item in items] == wanted
    # the order above needs it
    assert COSTS_S["tests/integration/test_lifecycle.py"] > COSTS_S["tests/integration/test_interrupts.py"] \
        > DEFAULT_INTEGRATION_S
    assert [path for path in COSTS_S if not (ROOT / path).is_file()] == [], "costs of modules that are gone"


class _Worker:
    """What xdist's scheduler sees of a worker: it is sent test indices (the units it is handed) and shut down."""
    shutting_down = False

    def __init__(self, name: str, handed: list[int]):
        self.gateway = SimpleNamespace(id=name)
        self.sent: list[int] = []
        self.handed = handed

    def send_runtest_some(self, indices):
        self.sent += indices
        self.handed += indices

    def shutdown(self):
        self.shutting_down = True


def _handed_out(reorder: bool, collection: list[str]) -> list[str]:
    """The modules pytest-xdist's loadfile scheduler hands the shared part's workers, in the order it hands them out,
    each worker finishing a test at a time in turn."""
    from xdist.scheduler.loadfile import LoadFileScheduling

    config = SimpleNamespace(getvalue=lambda name: [f"{SHARED_WORKERS}*popen"],
                             option=SimpleNamespace(loadscopereorder=reorder))
    scheduler = LoadFileScheduling(config)  # type: ignore[arg-type]
    handed: list[int] = []
    workers = [_Worker(f"gw{n}", handed) for n in range(SHARED_WORKERS)]
    for worker in workers:
        scheduler.add_node(worker)  # type: ignore[arg-type]
        scheduler.add_node_collection(worker, collection)  # type: ignore[arg-type]
    scheduler.schedule()
    done = [0] * len(workers)
    while any(done[n] < len(worker.sent) for n, worker in enumerate(workers)):
        for n, worker in enumerate(workers):
            if done[n] < len(worker.sent):
                scheduler.mark_test_complete(worker, worker.sent[done[n]])  # type: ignore[arg-type]
                done[n] += 1
    assert sorted(handed) == list(range(len(collection)))  # every test handed out once
    return list(dict.fromkeys(collection[i].split("::")[0] for i in handed))


def test_the_shared_part_runs_its_workers_files_at_a_time():
    shared = dict(PARTS)["shared"]
    assert shared[shared.index("-n") + 1] == str(SHARED_WORKERS) and SHARED_WORKERS >= 2
    assert shared[shared.index("--dist") + 1] == "loadfile"
    assert "-n" not in dict(PARTS)["alone"]


def test_xdist_hands_out_modules_in_the_collections_order_only_without_its_reorder():
    assert "--no-loadscope-reorder" in dict(PARTS)["shared"]
    # a long module of one test, then short ones of many tests
    collection = ["long.py::a"] + [f"m{m}.py::t{t}" for m in range(4) for t in range(5)]
    assert _handed_out(False, collection) == ["long.py", "m0.py", "m1.py", "m2.py", "m3.py"]
    assert _handed_out(True, collection)[-1] == "long.py"  # xdist's default: the most tests first
