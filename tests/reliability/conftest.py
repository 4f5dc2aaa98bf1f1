"""Fixtures of the reliability suite: iteration budgets and the seed.

``--long`` (declared in ``tests/conftest.py``: pytest only reads option hooks
from the root conftest) raises every budget; ``REPORTFLOW_RELIABILITY_SEED``
replays a failing run (each failure message prints the seed it used).
"""

from __future__ import annotations

import os

import pytest

DEFAULT_SEED = 20260929


@pytest.fixture
def long_run(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--long", default=False))


@pytest.fixture
def seed() -> int:
    return int(os.environ.get("REPORTFLOW_RELIABILITY_SEED", DEFAULT_SEED))
