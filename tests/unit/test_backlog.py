"""What ``work`` says when it finds nothing to claim (``core.backlog.describe``): what the waiting runs wait for."""

from __future__ import annotations

from datetime import UTC, datetime

from engine.core.backlog import Backlog, describe
from engine.core.concurrency_caps import Caps


def test_backfills_held_back_by_the_concurrency_limit_are_named_with_the_limit() -> None:
    assert describe(Backlog(backfill=1900, running_backfills=1), backfill_limit=1) == (
        "1,900 backfill run(s) wait behind backfill_concurrency = 1 (1 running); 0 claimable now")


def test_backfills_under_the_limit_are_claimable_and_said_so() -> None:
    line = describe(Backlog(backfill=3, running_backfills=1), backfill_limit=2)
    assert line is not None and line.startswith("3 claimable now (by another worker, or of a project")


def test_each_reason_in_one_line_and_nothing_when_nothing_waits() -> None:
    at = datetime(2026, 9, 29, 10, 5, tzinfo=UTC)
    assert describe(Backlog(held=2, pending=1, later=3, next_at=at), backfill_limit=1) == (
        "3 run(s) wait for their retry time (the next at 2026-09-29T10:05:00Z); "
        "1 PENDING run(s) wait behind their schedule's run in flight; 2 run(s) held (schedule disabled); "
        "0 claimable now")
    assert describe(Backlog(), backfill_limit=1) is None


def test_runs_behind_a_full_concurrency_cap_name_the_cap() -> None:
    caps = Caps(max_running=None, workflows=(("report", 2),))
    waiting = Backlog(other=5, running=3, running_of={"report": 2, "echo": 1}, due_of={"report": (3, 0), "echo": (2, 0)})
    assert describe(waiting, backfill_limit=1, caps=caps) == (
        "3 report run(s) wait for [limits.workflows] report = 2 (2 running); 2 claimable now (by another worker, "
        "or of a project or workflow this one does not serve, or behind another revision of their period)")
    assert describe(waiting, backfill_limit=1, caps=Caps(max_running=3)) == (
        "2 echo run(s) wait for max_running = 3 (3 running); 3 report run(s) wait for max_running = 3 (3 running); "
        "0 claimable now")
    assert describe(waiting, backfill_limit=1, caps=Caps(max_running=4)).startswith("5 claimable now")  # type: ignore[union-attr]
