"""The pages an operator lives in, through the ASGI app: the run page's newest report first, the schedule's
month grid, the alerts page, and the runs table's delay for backfills.

The team run is made by the real engine: one of its two repositories is missing, so the first report says
"Not collected: web"; the repository comes back, ``runs retry`` collects it and the report is saved again
beside the first (``reports.on_existing = version``).
"""

from __future__ import annotations

import re
import shutil
import warnings
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from engine.core.clock import ManualClock
from engine.core.models import RunStatus
from engine.execution.worker import Worker
from engine.operations import actions
from engine.plugins.workflow_registry import load_registry
from engine.runtime import Runtime
from engine.scheduling import definitions
from engine.web.app import create_app
from tests.fakes.gitrepo import make_repo
from tests.integration.test_web import Site, build_site
from tests.support import make_runtime
from workflows import team_report

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

SEOUL = ZoneInfo("Asia/Seoul")
NOW = datetime(2026, 9, 30, 1, 0, tzinfo=UTC)
DAY = datetime(2026, 9, 29, 11, 0, tzinfo=SEOUL)


def client(rt: Runtime) -> TestClient:
    return TestClient(create_app(rt, token=None), base_url="http://127.0.0.1:8321", follow_redirects=False)


def drain(rt: Runtime) -> list[RunStatus]:
    worker, done = Worker(rt, "w"), []
    while (outcome := worker.run_one()) is not None:
        done.append(outcome.status)
    return done


def team_site(url: str, tmp_path: Path) -> tuple[Runtime, int]:
    """A team run over ``api`` and ``web`` whose first report missed ``web`` and whose retry collected it."""
    projects = []
    for name, subject in (("api", "add the orders endpoint"), ("web", "new checkout page")):
        repo = make_repo(tmp_path, name)
        repo.commit(subject, at=DAY, files={f"{name}/a.txt": subject})
        projects.append({"key": name, "repo": str(repo.path), "branches": ["main"]})
    spec = dict(name="core-daily", workflow="team_daily_report", project="core", cron="0 3 * * *",
                timezone="Asia/Seoul", projects="*")
    registry = {**load_registry(), "team_daily_report": team_report.DAILY, "team_project": team_report.CHILD}
    rt = make_runtime(url, schedules=[spec], clock=ManualClock(NOW - timedelta(days=1)), registry=registry,
                      extra={"projects": projects, "reports": {"dir": str(tmp_path / "reports")},
                             "llm": {"provider": "builtin"}})
    definitions.apply(rt)
    rt.clock.set(NOW)  # type: ignore[attr-defined]
    shutil.move(tmp_path / "web", tmp_path / "web-away")
    run_id = actions.trigger(rt, "core-daily", day=date(2026, 9, 29)).run_id
    drain(rt)
    shutil.move(tmp_path / "web-away", tmp_path / "web")
    actions.retry(rt, run_id)
    assert drain(rt) == [RunStatus.SUCCESS, RunStatus.SUCCESS]  # the web child, then the report again
    return rt, run_id


@pytest.fixture
def team(sqlite_url: str, tmp_path: Path) -> tuple[Runtime, int]:
    return team_site(sqlite_url, tmp_path)


def test_the_run_page_shows_the_newest_report_first_after_a_retry(team: tuple[Runtime, int]) -> None:
    rt, run_id = team
    page = client(rt).get(f"/runs/{run_id}").text
    current = re.search(r'<article class="report"[^>]*>(.*?)</article>', page, re.S)  # the first on the page
    assert current is not None, "the report is on the page"
    assert "new checkout page" in current.group(1) and "Not collected" not in current.group(1)
    # Near the top: before the facts (steps, pinned inputs, audit trail).
    assert page.index('id="report"') < page.index("<h2>Steps</h2>") < page.index("<h2>Audit trail</h2>")
    assert page.index('id="report"') < page.index("<h2>Pinned inputs</h2>")
    # The first version is still there, marked superseded and collapsed.
    earlier = re.search(r'<details class="superseded">(.*?)</details>', page, re.S)
    assert earlier is not None and "superseded" in earlier.group(1)
    assert "Not collected: web" in earlier.group(1) and "new checkout page" not in earlier.group(1)


@pytest.fixture
def daily(sqlite_url: str, tmp_path: Path) -> Site:
    site = build_site(sqlite_url, tmp_path)  # 09-28 SUCCESS with a report, 09-29 FAILED; today is 09-30 in Seoul
    quiet = actions.trigger(site.rt, "platform-report", day=date(2026, 9, 26))  # no commits that day
    assert Worker(site.rt, "w").run_one().run_id == quiet.run_id  # type: ignore[union-attr]
    site.blocker.rmdir()
    return site


def day_cell(page: str, day: str) -> str:
    found = re.search(rf'<td class="day[^"]*" data-day="{day}"[^>]*>(.*?)</td>', page, re.S)
    assert found is not None, day
    return found.group(0)


def test_the_schedule_page_shows_the_month_as_a_grid_of_weeks(daily: Site) -> None:
    c = client(daily.rt)
    page = c.get("/schedules/platform-report").text
    assert '<h2 id="calendar">September 2026</h2>' in page
    header = re.search(r'<table class="month"[^>]*>\s*<thead><tr>(.*?)</tr>', page, re.S)
    assert header is not None
    assert re.findall(r"<th[^>]*>(\w+)</th>", header.group(1)) == ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    days = re.findall(r'data-day="([\d-]+)"', page)
    assert days[0] == "2026-08-31" and days[-1] == "2026-10-04" and len(days) == 5 * 7  # whole weeks, Monday first
    assert 'aria-current="date"' in day_cell(page, "2026-09-30") and "today" in day_cell(page, "2026-09-30")
    # Each cell shows its status and links to its run, and to its report when it saved one.
    ok = day_cell(page, "2026-09-28")
    assert f'href="/runs/{daily.ok_id}"' in ok and 'data-state="SUCCESS"' in ok
    assert f'href="/runs/{daily.ok_id}#report"' in ok and ">success</a>" in ok
    failed = day_cell(page, "2026-09-29")
    assert f'href="/runs/{daily.failed_id}"' in failed and ">failed</a>" in failed and "#report" not in failed
    quiet = day_cell(page, "2026-09-26")
    assert ">no commits</a>" in quiet and "#report" not in quiet  # a quiet day is not a missing report
    assert 'data-state="BEFORE_SCHEDULE"' in day_cell(page, "2026-09-25")
    assert 'data-state="NOT_YET_DUE"' in day_cell(page, "2026-09-30")
    assert 'href="/schedules/platform-report?month=2026-08#calendar" rel="prev"' in page
    assert 'rel="next"' not in page[page.index('id="calendar"'):page.index('class="month"')]  # no later month yet


def test_the_month_grid_navigates_and_the_year_view_stays(daily: Site) -> None:
    c = client(daily.rt)
    august = c.get("/schedules/platform-report?month=2026-08").text
    assert '<h2 id="calendar">August 2026</h2>' in august and "?month=2026-09#calendar\" rel=\"next\"" in august
    assert re.findall(r'data-day="([\d-]+)"', august)[0] == "2026-07-27"
    later = c.get("/schedules/platform-report?month=2031-01").text
    assert '<h2 id="calendar">September 2026</h2>' in later  # the future is this month
    for bad in ("2026-13", "2026-9x", "99-01", "1969-12", "２０２６-09"):
        assert c.get("/schedules/platform-report", params={"month": bad}).status_code == 400, bad
    year = c.get("/schedules/platform-report?span=year").text
    assert "A year up to 2026-09-30" in year and year.count('class="cell c-') >= 53 * 7
    assert c.get("/schedules/platform-report?span=decade").status_code == 400
