"""Damage to each kind of the query's checkpoint files (metadata, sources, the offsets and commits logs), on the real
stack: the hardened job finds it before Spark reads it, repairs it, commits again, and loses and duplicates nothing.
The steps and why each is stopped as it is: tests/integration/checkpoint_damage_steps.py. Local backend only.
"""
from __future__ import annotations

import pytest

from tests.integration import checkpoint_damage_steps as steps

pytestmark = [pytest.mark.integration, pytest.mark.backends("local")]

# (kind, how the job is stopped before the damage), in the order they run. The offsets and commits logs only after a
# graceful stop: after a SIGKILL their newest entries are rolled back unread (checkpoint_damage_steps.py says why).
STEPS = [("metadata", "sigkill"), ("sources", "sigkill"), ("offsets", "graceful"), ("commits", "graceful")]


@pytest.fixture(scope="module")
def run(stack, tmp_path_factory):
    yield from steps.running_job(stack, tmp_path_factory)


@pytest.mark.parametrize("kind,stop", STEPS, ids=[steps.step_id(kind, stop) for kind, stop in STEPS])
def test_the_job_repairs_damage_to_each_kind_of_checkpoint_file_and_commits_again(run, kind, stop):
    steps.damage_and_restart(run, kind, stop)


def test_nothing_lost_or_duplicated_and_one_repair_line_per_damage(run):
    steps.judge_whole_run(run)
