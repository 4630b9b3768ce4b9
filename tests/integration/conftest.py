"""The integration tests' stack: the chaos plugin's `chaos_stack` (chaos/pytest_plugin.py), one per module and
backend, under the name the tests use. A module whose stack runs on one backend only says so with
`pytest.mark.backends("local")`."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def stack(chaos_stack):
    return chaos_stack
