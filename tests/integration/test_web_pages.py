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
from zoneinfo import ZoneInfo

import pytest

from engine.core import alerts, limits
from engine.core.clock import ManualClock
from engine.core.models import RunStatus
from engine.execution.worker import Worker
from engine.operations import actions
from engine.plugins.workflow_registry import load_registry
from engine.runtime import Runtime
from engine.scheduling import definitions
from engine.store import outbox
from engine.web.app import create_app
from tests.fakes.gitrepo import make_repo
from tests.integration.test_web import Site, build_site
from tests.support import drain, make_runtime
from workflows import team_report

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

SEOUL = ZoneInfo("Asia/Seoul")
NOW = datetime(2026, 9, 30, 1, 0, tzinfo=UTC)
DAY = datetime(2026, 9, 29, 11, 0, tzinfo=SEOUL)


def client(rt: Runtime) -> TestClient:
    return TestClient(create_app(rt, token=None), base_url="http://127.0.0.1:8321", follow_redirects=False)


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
    drain(Worker(rt, "w"))
    shutil.move(tmp_path / "web-away", tmp_path / "web")
    actions.retry(rt, run_id)
    assert drain(Worker(rt, "w")) == [RunStatus.SUCCESS, RunStatus.SUCCESS]  # the web child, then the report again
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


@pytest.fixture
def site_with_alerts(sqlite_url: str, tmp_path: Path) -> Site:
    site = build_site(sqlite_url, tmp_path)
    alerts_site(site.rt, site.failed_id)
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


def alerts_site(rt: Runtime, failed_id: int) -> None:
    """Next to the failed run's own run_failed: one alert sent, one whose webhook failed twice, one quiet, and
    another schedule's critical run_stuck (with an untrusted summary)."""
    now = rt.clock.now()
    made = [("sent-1", "run_late", alerts.Severity.WARNING, True, "platform-report"),
            ("failing-1", "run_partial", alerts.Severity.WARNING, True, "platform-report"),
            ("quiet-1", "run_failed", alerts.Severity.INFO, False, "platform-report"),
            ("stuck-1", "run_stuck", alerts.Severity.CRITICAL, True, "other <b>sched</b>")]
    with rt.store.write() as conn:
        for key, event, severity, notify, schedule in made:
            outbox.record_event(conn, event=event, dedupe_key=key, at=now, summary=f"{event} <script>x</script>",
                                decision=alerts.SeverityDecision(severity, notify), schedule=schedule, run_id=failed_id)
        rows = {a.id: row for row, a in outbox.list_due(conn, now)}
        outbox.mark_delivered(conn, rows["sent-1"], now)
        outbox.mark_failed(conn, rows["failing-1"], attempts=2, next_try_at=now + timedelta(minutes=1),
                           error="webhook answered 503")


def test_the_alerts_page_lists_every_alert_filtered_and_linked_to_its_run(site_with_alerts: Site) -> None:
    c = client(site_with_alerts.rt)
    assert '<a href="/alerts">Alerts</a>' in c.get("/runs").text  # in the navigation
    page = c.get("/alerts").text
    rows = re.findall(r'<tr class="d-(\w+)" data-event="(\w+)"', page)
    assert sorted(rows) == sorted([("pending", "run_failed"), ("sent", "run_late"), ("failed", "run_partial"),
                                   ("quiet", "run_failed"), ("pending", "run_stuck")])
    assert page.count(f'<a href="/runs/{site_with_alerts.failed_id}">') == 5
    assert "2 tries: webhook answered 503" in page  # a failed delivery says why and when it is tried again
    assert "1 failed, being retried" in page and "2 waiting to be sent" in page
    assert "<script>x</script>" not in page and "<b>sched</b>" not in page  # escaped like every value
    by = {q: re.findall(r'data-event="(\w+)" data-delivery="(\w+)"', c.get(f"/alerts?{q}").text)
          for q in ("severity=critical", "delivery=failed", "delivery=pending&delivery=failed",
                    "schedule=platform-report&severity=warning&severity=info")}
    assert by["severity=critical"] == [("run_stuck", "pending")]
    assert by["delivery=failed"] == [("run_partial", "failed")]
    assert sorted(by["delivery=pending&delivery=failed"]) == [("run_failed", "pending"), ("run_partial", "failed"),
                                                              ("run_stuck", "pending")]
    assert sorted(by["schedule=platform-report&severity=warning&severity=info"]) == [
        ("run_failed", "pending"), ("run_failed", "quiet"), ("run_late", "sent"), ("run_partial", "failed")]
    for bad in ("severity=loud", "delivery=lost", "before=abc", "before=0"):
        assert c.get(f"/alerts?{bad}").status_code == 400, bad


def test_the_alerts_page_pages_by_older_alerts(site_with_alerts: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "WEB_PAGE", 2)
    c = client(site_with_alerts.rt)
    pages: list[list[str]] = []
    url: str | None = "/alerts?delivery=pending&delivery=failed&delivery=sent&delivery=quiet"
    while url is not None:
        page = c.get(url.replace("&amp;", "&")).text
        pages.append(re.findall(r'data-event="(\w+)" data-delivery="\w+"', page))
        found = re.search(r'href="(/alerts\?[^"]+)" rel="next"', page)
        url = found.group(1) if found else None
    assert [len(p) for p in pages] == [2, 2, 1]  # newest first; each alert once, filters kept across pages
    assert sorted(sum(pages, [])) == ["run_failed", "run_failed", "run_late", "run_partial", "run_stuck"]


def test_the_runs_table_shows_backfills_apart_from_late_runs(daily: Site) -> None:
    rt = daily.rt
    assert actions.backfill(rt, "platform-report", first=date(2026, 9, 20), last=date(2026, 9, 20)).created
    backfilled = Worker(rt, "w").run_one()
    assert backfilled is not None
    page = client(rt).get("/runs").text
    rows = {int(m.group(1)): m.group(0) for m in re.finditer(r'<tr>\s*<td><a href="/runs/(\d+)">.*?</tr>', page, re.S)}
    delay = r'<td class="num[^"]*"[^>]*>([^<]*)</td>\s*<td class="num">'
    assert re.search(delay, rows[backfilled.run_id]).group(1) == "backfill"  # type: ignore[union-attr]
    # A run started by hand started when asked for too: no delay, its trigger.
    assert re.search(delay, rows[daily.ok_id]).group(1) == "manual"  # type: ignore[union-attr]
    detail = client(rt).get(f"/runs/{backfilled.run_id}").text
    assert "backfill (started when asked for" in detail


def test_a_monthly_and_a_sprint_schedule_show_their_periods(sqlite_url: str, tmp_path: Path) -> None:
    """A month's and a sprint's run are cells of the calendar on the period's first day, linked to their run and
    report; the runs table names their keys."""
    repo = make_repo(tmp_path)
    repo.commit("feat: orders", at=datetime(2026, 10, 6, 12, tzinfo=UTC), files={"a.py": "a\n"})
    repo.commit("fix: totals", at=datetime(2026, 10, 14, 12, tzinfo=UTC), files={"b.py": "b\n"})
    extra = {"projects": [{"key": "shop", "repo": str(repo.path), "branches": ["main"]}],
             "reports": {"dir": str(tmp_path / "reports")}, "llm": {"provider": "builtin"}}
    schedules = [dict(name="shop-monthly", workflow="monthly_report", project="shop", cron="0 3 1 * *",
                      timezone="UTC"),
                 dict(name="shop-sprint", workflow="sprint_report", project="shop", cron="0 3 * * 1", timezone="UTC",
                      sprint={"length": "14d", "anchor": "2026-10-05"})]
    rt = make_runtime(sqlite_url, schedules=schedules, clock=ManualClock(datetime(2026, 10, 1, tzinfo=UTC)),
                      extra=extra)
    definitions.apply(rt)
    rt.clock.set(datetime(2026, 11, 3, tzinfo=UTC))
    monthly = actions.trigger(rt, "shop-monthly", day=date(2026, 10, 15)).run_id
    sprint = actions.trigger(rt, "shop-sprint", day=date(2026, 10, 15)).run_id
    assert drain(Worker(rt, "w")) == [RunStatus.SUCCESS, RunStatus.SUCCESS]
    c = client(rt)
    month_page = c.get("/schedules/shop-monthly?month=2026-10").text
    cell = day_cell(month_page, "2026-10-01")
    assert f'href="/runs/{monthly}"' in cell and f'href="/runs/{monthly}#report"' in cell
    sprint_page = c.get("/schedules/shop-sprint?month=2026-10").text
    cell = day_cell(sprint_page, "2026-10-05")  # the sprint of 5 to 18 October: the 20th starting in 2026
    assert f'href="/runs/{sprint}"' in cell and 'data-state="SUCCESS"' in cell
    runs = c.get("/runs").text
    assert "2026-10" in runs and "2026-S20" in runs
    report = c.get(f"/runs/{sprint}").text
    assert "Sprint report: shop, 2026-S20" in report
