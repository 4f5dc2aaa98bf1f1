"""The replay of a real history (tests/reliability/replay.py): every commit in exactly one report of each schedule.

Daily, weekly and team schedules over two months of this repository's own history (its dates
stretched), with late pushes, a force-push and back, outages of three and eleven days (longer
than the catch-up window) and a cron edit, on SQLite and PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability import replay
from tests.support import RuntimeFactory

pytestmark = pytest.mark.slow


def test_every_commit_is_in_exactly_one_report_of_each_schedule(store_url: str, tmp_path: Path, seed: int,
                                                                runtime: RuntimeFactory) -> None:
    result = replay.replay(runtime, store_url, tmp_path, seed=seed)
    table = "\n".join(" | ".join(c.row()) for c in result.counts)
    assert {(c.schedule, c.project) for c in result.counts} == {
        ("history-daily", "history"), ("history-weekly", "history"),
        ("team-daily", "history"), ("team-daily", "built")}, table
    for count in result.counts:
        assert count.commits > 0, table
        assert (count.in_none, count.in_two_or_more) == (0, 0), f"seed {seed}\n{table}"
        assert count.in_one == count.commits, table
