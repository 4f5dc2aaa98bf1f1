"""The run page, the month grid and the alerts page in Chromium, with screenshots in the test's tmp_path.

A team run whose first report missed a repository and whose retry collected it (its newest report must be
the first thing on its page), a daily schedule with a succeeded, a failed and a quiet day, and alerts in
every delivery state.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.web import server
from tests.acceptance.test_web_browser import browser_page  # noqa: F401 - the fixture
from tests.integration.test_web import build_site
from tests.integration.test_web_pages import alerts_site, team_site
from tests.support import RuntimeFactory

pytestmark = pytest.mark.slow


@pytest.fixture
def served(tmp_path: Path, runtime: RuntimeFactory) -> Iterator[dict[str, Any]]:
    team_rt, team_run = team_site(runtime, f"sqlite:///{tmp_path / 'team.db'}", tmp_path / "team")
    site = build_site(f"sqlite:///{tmp_path / 'daily.db'}", tmp_path / "daily")
    alerts_site(site.rt, site.failed_id)
    uis = [server.Background(team_rt, "127.0.0.1", 0), server.Background(site.rt, "127.0.0.1", 0)]
    team_port, daily_port = (ui.start() for ui in uis)
    yield {"team": f"http://127.0.0.1:{team_port}", "team_run": team_run, "daily": f"http://127.0.0.1:{daily_port}",
           "ok": site.ok_id}
    for ui in uis:
        ui.stop()
    site.rt.store.dispose()


def test_the_run_page_the_month_grid_and_the_alerts_page(browser_page: Any, served: dict[str, Any],  # noqa: F811
                                                         tmp_path: Path) -> None:
    page = browser_page
    shots = tmp_path / "screenshots"
    shots.mkdir()

    page.goto(f"{served['team']}/runs/{served['team_run']}")
    page.screenshot(path=str(shots / "run.png"), full_page=True)
    report = page.locator("article#report")
    assert "new checkout page" in report.inner_text() and "Not collected" not in report.inner_text()
    assert report.bounding_box()["y"] < 600  # on the first screen, not 1,800 px down
    earlier = page.locator("details.superseded")
    assert earlier.count() == 1 and not earlier.locator("article").is_visible()
    earlier.locator("summary").click()
    assert "Not collected: web" in earlier.locator("article").inner_text()

    page.goto(f"{served['daily']}/schedules/platform-report")
    grid = page.locator("table.month")
    grid.scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "month.png"), full_page=True)
    assert page.locator("h2#calendar").inner_text() == "September 2026"
    assert grid.locator("thead th").all_text_contents() == ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    assert "today" in grid.locator("td.today").inner_text()
    grid.locator('td[data-day="2026-09-28"] a.rep').click()
    page.wait_for_url(re.compile(rf"/runs/{served['ok']}#report$"))
    assert page.locator("article#report").is_visible()
    page.goto(f"{served['daily']}/schedules/platform-report")
    page.click("text=← August 2026")
    page.wait_for_url(re.compile(r"month=2026-08"))
    assert page.locator("h2#calendar").inner_text() == "August 2026"

    page.click("header >> text=Alerts")
    page.wait_for_url(re.compile(r"/alerts$"))
    page.screenshot(path=str(shots / "alerts.png"), full_page=True)
    assert page.locator("#alerts tbody tr").count() == 5
    assert page.locator("#alerts tr.d-failed").inner_text().count("webhook answered 503") == 1
    page.check('input[name="delivery"][value="failed"]')
    page.click("form.filters button[type=submit]")
    page.wait_for_url(re.compile(r"delivery=failed"))
    assert page.locator("#alerts tbody tr").count() == 1
    page.screenshot(path=str(shots / "alerts-failed.png"), full_page=True)
    assert sorted(p.name for p in shots.iterdir()) == ["alerts-failed.png", "alerts.png", "month.png", "run.png"]
