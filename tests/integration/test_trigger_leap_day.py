"""`trigger` without a date finds the latest slot of a cron that fires only on 29 February."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from engine.core.clock import ManualClock
from engine.operations import actions
from engine.scheduling import definitions
from engine.store import run_rows
from tests.flows.testflows import FOUR_STEPS
from tests.support import make_runtime


def test_trigger_without_a_date_reaches_the_last_29_february(store_url: str, tmp_path: Path) -> None:
    leap = dict(name="leap", workflow="four_steps", project="p1", cron="0 9 29 2 *", timezone="Europe/Berlin")
    # 2026-07-01: the last 29 February (2024) is 853 days back, past a 400-day look-back
    rt = make_runtime(store_url, schedules=[leap], clock=ManualClock(datetime(2026, 7, 1, 12, tzinfo=UTC)),
                      registry={"four_steps": FOUR_STEPS}, extra={"testflow": {"log": str(tmp_path / "log")}})
    definitions.apply(rt)
    result = actions.trigger(rt, "leap")
    assert result.action == "created"
    with rt.store.read() as conn:
        run = run_rows.get_run(conn, result.run_id)
    assert run.scheduled_for == datetime(2024, 2, 29, 8, tzinfo=UTC)  # 09:00 CET
