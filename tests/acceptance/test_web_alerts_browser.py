"""The schedule page for operators in Chromium (SPEC §14, §15): success rate, freshness, recent alerts,
a calendar that reaches any range, a readable start-delay axis, a grouped audit trail, held runs, and
pinned inputs listed once on the run page.

A year of backfilled periods (365 runs) and one scheduled run that ends PARTIAL_SUCCESS.
Screenshots land in the test's tmp_path.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.core.clock import ManualClock
from engine.execution.pool import WorkerPool
from engine.operations import actions
from engine.scheduling import definitions, tick
from engine.web import server
from tests.acceptance.test_web_browser import browser_page  # noqa: F401 - the fixture
from tests.flows.testflows import FOUR_STEPS
from tests.support import make_runtime

pytestmark = pytest.mark.slow
T0 = datetime(2026, 9, 29, 0, 5, tzinfo=UTC)
SPEC = dict(name="daily", workflow="four_steps", project="p1", cron="0 0 * * *", timezone="UTC",
            misfire="CATCH_UP_ALL", overlap="ALLOW", max_runtime="10m")


@pytest.fixture
def year(tmp_path: Path) -> Iterator[dict[str, Any]]:
    url = f"sqlite:///{tmp_path / 'rf.db'}"
    clock = ManualClock(T0)
    rt = make_runtime(url, schedules=[SPEC], clock=clock, registry={"four_steps": FOUR_STEPS},
                      extra={"worker": {"max_attempts": 1}, "testflow": {"log": str(tmp_path / "log")}})
    definitions.apply(rt)
    first = date(2025, 9, 28)
    actions.backfill(rt, "daily", first=first, last=date(2026, 9, 27))
    assert len(WorkerPool(rt, "w", concurrency=1).work(until_idle=True)) == 365
    failing = make_runtime(url, schedules=[SPEC], clock=clock, registry={"four_steps": FOUR_STEPS},
                           extra={"worker": {"max_attempts": 1},
                                  "testflow": {"log": str(tmp_path / "log"), "fail": {"FOUR": 9},
                                               "fail_code": "NOTION_UNAUTHORIZED"}})
    clock.set(T0 + timedelta(days=1))
    tick.tick(failing)  # 2026-09-30 00:00, on time
    [partial] = WorkerPool(failing, "w", concurrency=1).work(until_idle=True)
    assert partial.status.value == "PARTIAL_SUCCESS"
    clock.set(T0 + timedelta(days=1, hours=1))  # past its deadline (grace + max_runtime): a due period
    ui = server.Background(failing, "127.0.0.1", 0)
    port = ui.start()
    yield {"base": f"http://127.0.0.1:{port}", "partial": partial.run_id, "rt": failing}
    ui.stop()
    rt.store.dispose()
    failing.store.dispose()


def test_the_schedule_page_for_operators(browser_page: Any, year: dict[str, Any], tmp_path: Path) -> None:  # noqa: F811
    page, base = browser_page, year["base"]
    shots = tmp_path / "screenshots"
    shots.mkdir()
    page.goto(f"{base}/schedules/daily")
    page.screenshot(path=str(shots / "schedule.png"), full_page=True)
    # Over the last 30 days: 27 backfilled periods succeeded late (not fresh), 2026-09-30 is partial; the
    # schedule was created on 2026-09-29 00:05, so the 09-28 and 09-29 slots (no run) are not its periods.
    assert page.locator("#success-rate").inner_text() == "96% of 28 periods"
    assert page.locator("#freshness").inner_text() == "0% on time"
    alerts = page.locator("#alerts").inner_text()
    assert "run_partial" in alerts and "NOTION_UNAUTHORIZED" in alerts and "FOUR" in alerts
    # The start-delay axis: backfills are left out, so its labels are the scheduled run's seconds, not 2819.4 h.
    ticks = page.locator("svg.chart").first.locator("text.tick").all_text_contents()
    assert not [t for t in ticks if re.search(r"\d{3,}\.\d h", t)], ticks
    # The audit trail: one line for the backfill's 365 runs, expandable.
    group = page.locator("details.audit-group", has_text="run_backfill")
    assert group.count() == 1 and "×365" in group.locator("summary").inner_text()
    assert not group.locator("tbody tr").first.is_visible()
    group.locator("summary").click()
    assert group.locator("tbody tr").count() == 365 and group.locator("tbody tr").first.is_visible()

    # 13 weeks up to today; earlier reaches the backfilled past; a year at a glance shows every period.
    page.click("text=13 weeks")
    page.wait_for_url(re.compile(r"span=13w"))
    assert page.locator(".cal .cell").count() == 92  # 13 weeks of days, plus the next one due
    page.click("text=← earlier")
    page.wait_for_url(re.compile(r"until=2026-07-01"))
    assert page.locator('.cal .cell[data-state="SUCCESS"]').count() == 91
    page.screenshot(path=str(shots / "earlier.png"), full_page=True)
    page.click("text=the whole year")
    page.wait_for_url(re.compile(r"span=year"))
    cells = page.locator(".cal .cell")
    assert cells.count() == 53 * 7
    page.goto(f"{base}/schedules/daily?span=year")
    assert page.locator('.cal .cell[data-state="SUCCESS"]').count() == 365
    assert page.locator('.cal .cell[data-state="PARTIAL_SUCCESS"]').count() == 1
    page.screenshot(path=str(shots / "year.png"), full_page=True)
    page.goto(f"{base}/schedules/daily?span=decade")
    assert "span 'decade' is not month, 13w or year" in page.content()

    # The run page lists each pinned input once (provider, model, prompt_version were listed twice).
    page.goto(f"{base}/runs/{year['partial']}")
    terms = page.locator("h2:text-is('Pinned inputs') + dl dt").all_text_contents()
    assert "workflow" in terms and len(terms) == len(set(terms)), terms

    # The kill switch on the page: a queued run of a disabled schedule is listed as held, in claim order.
    rt = year["rt"]
    queued = actions.trigger(rt, "daily", day=date(2026, 9, 27), force_new=True)
    definitions.set_enabled(rt, "daily", enabled=False, reason="repo migration")
    page.goto(f"{base}/schedules/daily")
    held = page.locator("#held-runs tbody tr")
    assert held.count() == 1 and "schedule disabled" in held.first.inner_text()
    assert held.first.locator("a").inner_text() == str(queued.run_id)
    assert "None while the schedule is disabled" in page.locator("#fires-paused").inner_text()
    page.screenshot(path=str(shots / "held.png"), full_page=True)
