"""The web page through its ASGI app (Starlette TestClient): every route, the token,
CSRF, read-only mode and the escaping of untrusted text.

The data is made by the real engine: a daily_report schedule on a scratch git
repository (one commit message is an XSS attempt), one SUCCESS run and one run
that FAILED at SAVE_MARKDOWN because a directory sat where its file goes.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from engine.core.clock import ManualClock
from engine.core.models import RunStatus
from engine.execution.worker import Worker
from engine.operations import actions
from engine.read import run_queries
from engine.runtime import Runtime
from engine.scheduling import definitions
from engine.store import history_rows, run_rows, schedule_rows
from engine.web.app import create_app
from engine.web.pages import SESSION_COOKIE
from tests.fakes.gitrepo import make_repo
from tests.support import REPO_ROOT, ManualRuntime, make_runtime, run_cli, run_next, write_config

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

SEOUL = ZoneInfo("Asia/Seoul")
NOW = datetime(2026, 9, 30, 1, 0, tzinfo=UTC)
TOKEN = "s3cret-ui-token-long-enough"
EVIL = '<script>alert("x")</script> and <img src=x onerror=alert(1)>'


@dataclass
class Site:
    rt: ManualRuntime
    ok_id: int
    failed_id: int
    blocker: Path


def build_site(url: str, tmp_path: Path) -> Site:
    repo = make_repo(tmp_path)
    repo.commit("tidy the scheduler", at=datetime(2026, 9, 28, 10, 0, tzinfo=SEOUL))
    repo.commit(EVIL, at=datetime(2026, 9, 29, 11, 0, tzinfo=SEOUL))
    extra: dict[str, Any] = {
        "projects": [{"key": "platform", "repo": str(repo.path), "branches": ["main"]}],
        "reports": {"dir": str(tmp_path / "reports")}, "llm": {"provider": "builtin"},
    }
    spec = dict(name="platform-report", workflow="daily_report", project="platform", cron="0 3 * * *",
                timezone="Asia/Seoul")
    rt = make_runtime(url, schedules=[spec], clock=ManualClock(NOW - timedelta(days=1)), extra=extra)
    definitions.apply(rt)
    rt.clock.set(NOW)
    ok = actions.trigger(rt, "platform-report", day=date(2026, 9, 28))
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    blocker = tmp_path / "reports" / "platform" / "2026-09-29-platform-daily-summary.md"
    blocker.mkdir(parents=True)
    failed = actions.trigger(rt, "platform-report", day=date(2026, 9, 29))
    assert run_next(Worker(rt, "w")).status is RunStatus.FAILED
    return Site(rt, ok.run_id, failed.run_id, blocker)


@pytest.fixture
def site(sqlite_url: str, tmp_path: Path) -> Site:
    return build_site(sqlite_url, tmp_path)


def client(rt: Runtime, token: str | None = TOKEN) -> TestClient:
    return TestClient(create_app(rt, token=token), base_url="http://127.0.0.1:8321", follow_redirects=False)


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match, "every form carries a CSRF token"
    return match.group(1)


def logged_in(rt: Runtime, login: str = "alice") -> tuple[TestClient, str]:
    c = client(rt)
    csrf = csrf_of(c.get("/login").text)
    answer = c.post("/login", data={"token": TOKEN, "login": login, "csrf_token": csrf, "next": "/runs"})
    assert answer.status_code == 303 and answer.headers["location"] == "/runs"
    return c, csrf_of(c.get("/runs").text)


def status_of(rt: Runtime, run_id: int) -> RunStatus:
    with rt.store.read() as conn:
        return run_rows.get_run(conn, run_id, detail=False).status


def test_every_page_renders_with_the_engine_answers(site: Site) -> None:
    c = client(site.rt)
    listing = c.get("/schedules")
    assert listing.status_code == 200
    assert "every day at 03:00" in listing.text and "Asia/Seoul" in listing.text
    page = c.get("/schedules/platform-report")
    assert page.status_code == 200
    # The calendar: the failed period links to its run, the succeeded one too; earlier periods say why.
    assert re.search(rf'href="/runs/{site.failed_id}"[^>]*data-key="2026-09-29" data-state="FAILED"', page.text)
    assert re.search(rf'href="/runs/{site.ok_id}"[^>]*data-key="2026-09-28" data-state="SUCCESS"', page.text)
    assert 'data-key="2026-09-27" data-state="BEFORE_SCHEDULE"' in page.text
    assert 'data-key="2026-09-30" data-state="NOT_YET_DUE"' in page.text
    assert page.text.count("<svg") == 2 and "<polyline" in page.text  # delay and duration charts
    assert "backfill?from=" in page.text
    assert c.get("/projects/platform/calendar").status_code == 200
    runs = c.get("/runs")
    assert runs.status_code == 200 and f'href="/runs/{site.failed_id}"' in runs.text
    run = c.get(f"/runs/{site.failed_id}")
    assert run.status_code == 200
    assert "REPORT_WRITE_FAILED" in run.text and "prompt_sha256" in run.text and "head main" in run.text
    ok = c.get(f"/runs/{site.ok_id}")
    assert "<h1>" in ok.text and "Report" in ok.text  # the saved Markdown, rendered
    assert c.get("/runs/999999").status_code == 404
    assert c.get("/schedules/nope").status_code == 404
    assert c.get("/projects/nope/calendar").status_code == 404
    assert c.get("/runs?status=BOGUS").status_code == 400
    assert c.get("/runs?after=not-a-cursor").status_code == 400


def test_the_run_page_lists_each_pinned_input_once(site: Site) -> None:
    """provider, model and prompt_version are pinned and also in the generation's output, the branch
    head is pinned twice (heads, head_sha) and in COLLECT_GIT's output: each is shown once."""
    page = client(site.rt).get(f"/runs/{site.ok_id}").text
    pinned = page[page.index("<h2>Pinned inputs</h2>"):]
    pinned = pinned[:pinned.index("</dl>")]
    terms = re.findall(r"<dt>([^<]+)</dt>", pinned)
    assert {"provider", "model", "prompt_version", "head main"} <= set(terms), terms
    assert len(terms) == len(set(terms)), [t for t in terms if terms.count(t) > 1]
    head = run_queries.get_run(site.rt, site.ok_id).pinned["head_sha"]
    assert pinned.count(head) == 1, "the head commit is listed once"


def test_the_api_serves_the_cli_json_shapes(site: Site, tmp_path: Path) -> None:
    c = client(site.rt)
    runs = c.get("/api/runs").json()
    assert {r["id"] for r in runs} == {site.ok_id, site.failed_id}
    detail = c.get(f"/api/runs/{site.failed_id}").json()
    assert detail["status"] == "FAILED" and detail["error_code"] == "REPORT_WRITE_FAILED"
    assert {"steps", "attempts", "pinned", "artifacts"} <= set(detail)
    (schedule,) = c.get("/api/schedules").json()
    assert schedule["name"] == "platform-report" and schedule["last_run"]["id"] == site.failed_id
    assert c.get("/api/runs/424242").status_code == 404
    assert c.get("/api/runs?status=NOPE").json()["error"] == "INVALID_INPUT"
    # Same fields as `runs show --json` from the real CLI on the same database.
    config = write_config(tmp_path / "cli.toml", db_url=str(site.rt.store.engine.url), sections={
        "reports": {"dir": str(tmp_path / "reports")}, "llm": {"provider": "builtin"}},
        projects=[{"key": "platform", "repo": str(tmp_path / "repo")}])
    shown = run_cli("runs", "show", str(site.failed_id), "--json", config=config)
    assert shown.returncode == 0, shown.stderr
    import json

    assert set(json.loads(shown.stdout)) == set(detail)


def test_without_a_token_the_page_is_read_only(site: Site) -> None:
    c = client(site.rt, token=None)
    page = c.get(f"/runs/{site.failed_id}")
    assert "read-only" in page.text
    assert 'action="/runs/' not in page.text and "log in" not in page.text
    assert c.post(f"/runs/{site.failed_id}/retry", data={}).status_code == 403
    assert c.post("/login", data={"token": TOKEN}).status_code == 403
    assert c.get("/login").status_code == 403
    assert status_of(site.rt, site.failed_id) is RunStatus.FAILED


def test_with_a_token_actions_need_a_login(site: Site) -> None:
    c = client(site.rt)
    page = c.get(f"/runs/{site.failed_id}")
    assert 'action="/runs/' not in page.text and "log in to act" in page.text
    csrf = csrf_of(c.get("/login").text)
    assert c.post(f"/runs/{site.failed_id}/retry", data={"csrf_token": csrf}).status_code == 403
    wrong = c.post("/login", data={"token": "guess", "csrf_token": csrf})
    assert wrong.status_code == 403 and "not the one" in wrong.text
    assert c.post(f"/runs/{site.failed_id}/retry", data={"csrf_token": csrf}).status_code == 403
    assert status_of(site.rt, site.failed_id) is RunStatus.FAILED


def test_the_session_cookie_is_httponly_and_samesite_strict(site: Site) -> None:
    c = client(site.rt)
    csrf = csrf_of(c.get("/login").text)
    answer = c.post("/login", data={"token": TOKEN, "csrf_token": csrf, "next": "https://evil.example/"})
    assert answer.headers["location"] == "/schedules"  # no open redirect
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith(SESSION_COOKIE + "=") and "httponly" in cookie.lower()
    assert "samesite=strict" in cookie.lower()
    assert TOKEN not in cookie


def test_a_post_without_the_csrf_token_is_refused(site: Site) -> None:
    c, csrf = logged_in(site.rt)
    assert c.post(f"/runs/{site.failed_id}/retry", data={}).status_code == 403
    assert c.post(f"/runs/{site.failed_id}/retry", data={"csrf_token": csrf[::-1]}).status_code == 403
    assert c.post("/schedules/platform-report/disable", data={"reason": "x"}).status_code == 403
    assert status_of(site.rt, site.failed_id) is RunStatus.FAILED
    with site.rt.store.read() as conn:
        assert schedule_rows.get_schedule(conn, "platform-report").enabled


def test_retry_from_step_acts_like_the_cli_and_is_audited_as_ui(site: Site) -> None:
    c, csrf = logged_in(site.rt, "alice")
    page = c.get(f"/runs/{site.failed_id}").text
    assert 'action="/runs/%d/retry"' % site.failed_id in page and "<option selected>SAVE_MARKDOWN</option>" in page
    bad = c.post(f"/runs/{site.failed_id}/retry", data={"csrf_token": csrf, "from_step": "NOPE"})
    assert bad.status_code == 400 and "unknown step" in bad.text  # the CLI exits 2
    done = c.post(f"/runs/{site.failed_id}/retry", data={"csrf_token": csrf, "from_step": "SAVE_MARKDOWN"})
    assert done.status_code == 200 and "QUEUED" in done.text
    assert status_of(site.rt, site.failed_id) is RunStatus.QUEUED
    again = c.post(f"/runs/{site.failed_id}/approve", data={"csrf_token": csrf})
    assert again.status_code == 409  # the CLI exits 3: only MANUAL_REQUIRED runs are approved
    with site.rt.store.read() as conn:
        (event,) = [e for e in history_rows.run_audit(conn, site.failed_id) if e.action == "run_retried"]
    assert event.actor == "ui:alice" and event.after and event.after["from_step"] == "SAVE_MARKDOWN"
    site.blocker.rmdir()
    assert run_next(Worker(site.rt, "w")).status is RunStatus.SUCCESS
    assert "badge s-SUCCESS" in c.get(f"/runs/{site.failed_id}").text


def test_cancel_disable_enable_and_backfill_from_the_page(site: Site) -> None:
    c, csrf = logged_in(site.rt)
    assert c.post("/schedules/platform-report/disable", data={"csrf_token": csrf}).status_code == 400
    off = c.post("/schedules/platform-report/disable", data={"csrf_token": csrf, "reason": "repo move"})
    assert off.status_code == 200 and "disabled" in off.text
    assert "repo move" in c.get("/schedules").text
    assert c.post("/schedules/platform-report/enable", data={"csrf_token": csrf}).status_code == 200
    preview = c.get("/schedules/platform-report/backfill?from=2026-09-25&to=2026-09-27")
    assert preview.status_code == 200 and "2026-09-25, 2026-09-26, 2026-09-27" in preview.text
    with site.rt.store.read() as conn:
        assert len(run_rows.list_runs(conn)) == 2  # the dry run wrote nothing
    done = c.post("/schedules/platform-report/backfill",
                  data={"csrf_token": csrf, "from": "2026-09-25", "to": "2026-09-27"})
    assert done.status_code == 200 and "3 created" in done.text
    with site.rt.store.read() as conn:
        queued = [r for r in run_rows.list_runs(conn) if r.status is RunStatus.QUEUED]
    assert len(queued) == 3
    cancelled = c.post(f"/runs/{queued[0].id}/cancel", data={"csrf_token": csrf})
    assert cancelled.status_code == 200 and status_of(site.rt, queued[0].id) is RunStatus.CANCELLED
    assert c.post(f"/runs/{site.ok_id}/cancel", data={"csrf_token": csrf}).status_code == 409


def test_untrusted_commit_text_and_markdown_are_escaped(site: Site) -> None:
    c = client(site.rt)
    page = c.get(f"/runs/{site.failed_id}").text
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(" in page  # shown as text in the commits table and the report
    for url in ("/runs", "/schedules/platform-report", "/projects/platform/calendar"):
        answer = c.get(url)
        assert "<script>alert" not in answer.text
        assert "script-src 'self'" in answer.headers["content-security-policy"]  # and no inline script would run
    api = c.get(f"/api/runs/{site.failed_id}")  # JSON keeps the text as data, never served as HTML
    assert api.headers["content-type"] == "application/json" and api.headers["x-content-type-options"] == "nosniff"


def test_keyset_pages_cover_every_run_once_in_slot_order(store_url: str, tmp_path: Path) -> None:
    site = build_site(store_url, tmp_path)
    actions.backfill(site.rt, "platform-report", first=date(2026, 9, 20), last=date(2026, 9, 27))
    c = client(site.rt)
    seen: list[dict[str, Any]] = []
    url: str | None = "/api/runs?limit=3"
    while url:
        answer = c.get(url)
        seen += answer.json()
        link = answer.headers.get("link")
        url = re.match(r"<([^>]+)>", link).group(1) if link else None  # type: ignore[union-attr]
    assert len(seen) == 10 and len({r["id"] for r in seen}) == 10
    assert [r["scheduled_for"] for r in seen] == sorted((r["scheduled_for"] for r in seen), reverse=True)
    only = c.get("/api/runs?status=FAILED").json()
    assert [r["id"] for r in only] == [site.failed_id]
    dated = c.get("/api/runs?from=2026-09-21&to=2026-09-22&trigger=BACKFILL").json()
    assert sorted(r["business_key"] for r in dated) == ["2026-09-21", "2026-09-22"]
    html = c.get("/runs?schedule=platform-report&project=platform").text
    assert html.count('<tr>\n  <td><a href="/runs/') == 10


def test_binding_beyond_loopback_without_a_token_exits_2(tmp_path: Path) -> None:
    config = write_config(tmp_path / "rf.toml", db_url=f"sqlite:///{tmp_path / 'rf.db'}")
    result = run_cli("ui", "--host", "0.0.0.0", "--port", "0", config=config, env={"REPORTFLOW_UI_TOKEN": ""})
    assert result.returncode == 2
    assert "REPORTFLOW_UI_TOKEN" in result.stderr and "without a token" in result.stderr
    assert REPO_ROOT.exists()
