"""Bulk retry, run now and regenerate in Chromium (SPEC §15.5): an operator whose Notion token expired for a
week logs in, previews the failed runs of a date range, confirms, and regenerates one report from its page.

Seven daily runs of a four-step workflow ended PARTIAL_SUCCESS (NOTION_UNAUTHORIZED at the optional last
step). Screenshots land in the test's tmp_path.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from engine.core.clock import ManualClock
from engine.core.models import RunStatus
from engine.execution.pool import WorkerPool
from engine.operations import actions
from engine.scheduling import definitions
from engine.web import server
from tests.acceptance.test_web_browser import TOKEN, browser_page  # noqa: F401 - the fixture
from tests.flows.testflows import FOUR_STEPS
from tests.support import make_runtime

pytestmark = pytest.mark.slow
T0 = datetime(2026, 9, 29, 10, 0, tzinfo=UTC)
SPEC = dict(name="daily", workflow="four_steps", project="p1", cron="0 9 * * *", timezone="UTC",
            freshness_target="95%")


@pytest.fixture
def week(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    rt = make_runtime(f"sqlite:///{tmp_path / 'rf.db'}", schedules=[SPEC], clock=ManualClock(T0),
                      registry={"four_steps": FOUR_STEPS},
                      extra={"worker": {"max_attempts": 1},
                             "testflow": {"log": str(tmp_path / "log"), "fail": {"FOUR": 1},
                                          "fail_code": "NOTION_UNAUTHORIZED"}})
    definitions.apply(rt)
    actions.backfill(rt, "daily", first=date(2026, 9, 22), last=date(2026, 9, 28))
    assert {o.status for o in WorkerPool(rt, "w", concurrency=1).work(until_idle=True)} == {RunStatus.PARTIAL_SUCCESS}
    monkeypatch.setenv("REPORTFLOW_UI_TOKEN", TOKEN)
    ui = server.Background(rt, "127.0.0.1", 0)
    port = ui.start()
    yield {"base": f"http://127.0.0.1:{port}", "rt": rt}
    ui.stop()
    rt.store.dispose()


def test_retry_a_range_and_regenerate_a_report_in_a_browser(browser_page: Any, week: dict[str, Any],  # noqa: F811
                                                             tmp_path: Path) -> None:
    page, base, rt = browser_page, week["base"], week["rt"]
    dialogs: list[str] = []

    def on_dialog(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.accept()

    page.on("dialog", on_dialog)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    page.goto(f"{base}/schedules/daily")
    assert "7 failed or partial run(s)" in page.locator("#operator-login").inner_text()
    page.click("#operator-login a")
    page.fill('input[name="login"]', "operator")
    page.fill('input[name="token"]', TOKEN)
    page.click('form.login button[type="submit"]')
    page.wait_for_url(f"{base}/schedules/daily")
    # Backfilled history alone: no period could have been on time, so freshness does not apply (it said 0%).
    assert page.locator("#freshness").inner_text() == ("n/a: every period due is from before the schedule existed "
                                                       "(target 95%)")
    actions_box = page.locator("#operator-actions")
    assert "7 failed or partial now" in actions_box.inner_text()
    page.screenshot(path=str(shots / "schedule-actions.png"), full_page=True)

    page.fill('#bulk-retry input[name="from"]', "2026-09-24")
    page.fill('#bulk-retry input[name="to"]', "2026-09-26")
    page.click("#bulk-retry button")
    page.wait_for_url(re.compile(r"/schedules/daily/retry\?"))
    rows = page.locator("#bulk-runs tbody tr")
    assert rows.count() == 3
    assert [r.split("\t")[1] for r in rows.all_inner_texts()] == [
        f"four_steps:p1:2026-09-{d}T09:00Z" for d in (24, 25, 26)]
    assert "Dry run" in page.locator("p.lead").inner_text()
    page.screenshot(path=str(shots / "retry-preview.png"), full_page=True)
    page.click("text=Retry 3 run(s)")
    page.wait_for_selector("#result")
    assert page.locator("#result").inner_text() == "retried 3 run(s) of daily"
    assert dialogs == ["Retry 3 run(s) of daily?"]
    page.screenshot(path=str(shots / "retried.png"))

    assert [o.status for o in WorkerPool(rt, "w", concurrency=1).work(until_idle=True)] == [RunStatus.SUCCESS] * 3
    page.goto(f"{base}/schedules/daily?span=13w")  # the 13-week strip holds the slot
    assert "4 failed or partial now" in page.locator("#operator-actions").inner_text()
    page.click('.cal a.cell[data-key="2026-09-25T09:00Z"]')
    page.wait_for_url(re.compile(r"/runs/\d+$"))
    assert page.locator("h1 .badge").inner_text() == "SUCCESS"
    page.screenshot(path=str(shots / "run.png"), full_page=True)
    page.click("button:text-is('Regenerate')")
    page.wait_for_selector("#result")
    assert "four_steps:p1:2026-09-25T09:00Z#2" in page.locator("#result").inner_text()
    assert dialogs[-1].startswith("Regenerate 2026-09-25T09:00Z?")
    page.click("#result-run")
    page.wait_for_url(re.compile(r"/runs/\d+$"))
    assert page.locator("h1 .badge").inner_text() == "QUEUED"
    page.screenshot(path=str(shots / "regenerated.png"), full_page=True)
    assert sorted(p.name for p in shots.iterdir()) == ["regenerated.png", "retried.png", "retry-preview.png",
                                                       "run.png", "schedule-actions.png"]
