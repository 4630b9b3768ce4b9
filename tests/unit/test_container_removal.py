"""A container another teardown is already removing counts as removed only once it is gone."""

import docker
import pytest

from infra import containers
from infra.errors import InfraError


class _BeingRemoved:
    """A container whose removal another client started: remove() is refused, reload() finds it `polls` times."""

    name = "chaos-1-abc-s3proxy-1"

    def __init__(self, polls: int):
        self.polls = polls

    def remove(self, force: bool, v: bool) -> None:
        raise docker.errors.APIError("removal of container chaos-1-abc-s3proxy-1 is already in progress")

    def reload(self) -> None:
        if self.polls == 0:
            raise docker.errors.NotFound("gone")
        self.polls -= 1


def test_a_removal_in_progress_elsewhere_is_waited_for():
    container = _BeingRemoved(polls=3)
    containers._remove(container)
    assert container.polls == 0


def test_a_removal_that_never_ends_is_one_line_naming_the_container():
    with pytest.raises(InfraError, match=r"still being removed.*docker rm -f chaos-1-abc-s3proxy-1"):
        containers._wait_gone(_BeingRemoved(polls=10**6), timeout=0.5)
