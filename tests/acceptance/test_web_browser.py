"""The page in a real browser: headless Chromium (Debian's package) driven by Playwright.

The database is made by the real CLI: a daily_report schedule on a scratch git
repository whose latest commit message is an XSS attempt; yesterday's run FAILED
at SAVE_MARKDOWN (a directory sits where its file goes). The operator opens the
calendar, clicks the failed day, logs in, retries from the step, confirms, sees
QUEUED; a worker pass later the page shows SUCCESS. No dialog but our confirm
ever opens. Screenshots of every page land in the test's tmp_path.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.cli.context import Cli
from engine.web import server
from tests.fakes.gitrepo import make_repo
from tests.support import run_cli, write_config

CHROMIUM = "/usr/bin/chromium"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
TOKEN = "browser-test-token-16+"
EVIL = '<script>alert("xss")</script> <img src=x onerror=alert(2)>'
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def _need_browser() -> Any:
    problem = None
    if not Path(CHROMIUM).exists():
        problem = f"{CHROMIUM} is missing (apt-get install -y chromium)"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        problem = "playwright is not installed (pip install -e '.[test]')"
    if problem:
        if IN_CI:
            pytest.fail(problem + " (CI=true: browser tests must run)")
        pytest.skip(problem)
    return sync_playwright


@pytest.fixture
def browser_page(tmp_path: Path) -> Iterator[Any]:
    sync_playwright = _need_browser()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        yield page
        browser.close()


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    today = datetime.now(UTC).date()
    yesterday = today - timedelta(days=1)
    repo = make_repo(tmp_path)
    repo.commit("prepare the release", at=datetime.combine(yesterday, datetime.min.time(), UTC) + timedelta(hours=9))
    repo.commit(EVIL, at=datetime.combine(yesterday, datetime.min.time(), UTC) + timedelta(hours=10))
    config = write_config(
        tmp_path / "rf.toml", db_url=f"sqlite:///{tmp_path / 'rf.db'}",
        sections={"reports": {"dir": str(tmp_path / "reports")}, "llm": {"provider": "builtin"},
                  "notion": {"enabled": False}},
        projects=[{"key": "demo", "repo": str(repo.path), "branches": ["main"]}],
        schedules=[{"name": "demo-daily", "workflow": "daily_report", "project": "demo", "cron": "0 0 * * *",
                    "timezone": "UTC", "report_on": "previous"}])
    blocker = tmp_path / "reports" / "demo" / f"{yesterday}-demo-daily-summary.md"
    blocker.mkdir(parents=True)
    for args in (("schedules", "apply"),
                 ("backfill", "demo-daily", "--from", str(yesterday - timedelta(days=3)), "--to", str(yesterday)),
                 ("work", "--until-idle")):
        result = run_cli(*args, config=config)
        assert result.returncode == 0, result.stderr
    monkeypatch.setenv("REPORTFLOW_UI_TOKEN", TOKEN)
    rt = Cli(config, None, None).runtime()
    ui = server.Background(rt, "127.0.0.1", 0)
    port = ui.start()
    yield {"base": f"http://127.0.0.1:{port}", "config": config, "day": str(yesterday), "blocker": blocker}
    ui.stop()
    rt.store.dispose()


def test_calendar_to_retry_to_success_in_a_browser(browser_page: Any, demo: dict[str, Any], tmp_path: Path) -> None:
    page, base = browser_page, demo["base"]
    dialogs: list[tuple[str, str]] = []

    def on_dialog(dialog: Any) -> None:
        dialogs.append((dialog.type, dialog.message))
        dialog.accept()

    page.on("dialog", on_dialog)
    shots = tmp_path / "screenshots"
    shots.mkdir()

    page.goto(f"{base}/schedules")
    page.screenshot(path=str(shots / "schedules.png"), full_page=True)
    assert page.locator("text=every day at 00:00").count() == 1

    page.goto(f"{base}/schedules/demo-daily?month={demo['day'][:7]}")  # yesterday's month (today may be the 1st)
    page.screenshot(path=str(shots / "calendar.png"), full_page=True)
    failed = page.locator(f'a.cell[data-key="{demo["day"]}"][data-state="FAILED"]')
    assert failed.count() == 1
    failed.click()
    page.wait_for_url(re.compile(r"/runs/\d+$"))
    run_url = page.url
    page.screenshot(path=str(shots / "run-failed.png"), full_page=True)
    assert page.locator(".badge.s-FAILED").first.is_visible()
    # The malicious commit message is on this page, as text; it fired nothing.
    assert page.locator("table.commits").inner_text().count('<script>alert("xss")</script>') == 1
    assert dialogs == []

    page.click("text=log in to act")
    page.fill('input[name="login"]', "operator")
    page.fill('input[name="token"]', TOKEN)
    page.screenshot(path=str(shots / "login.png"))
    page.click('form.login button[type="submit"]')
    page.wait_for_url(run_url)

    demo["blocker"].rmdir()  # the operator fixed what broke the step
    assert page.locator('select[name="from_step"]').input_value() == "SAVE_MARKDOWN"
    page.click("text=Retry from step")
    page.wait_for_selector("#result")
    assert "QUEUED" in page.locator("#result").inner_text()
    assert [kind for kind, _ in dialogs] == ["confirm"] and "Re-run run" in dialogs[0][1]
    page.screenshot(path=str(shots / "retried.png"))

    result = run_cli("work", "--until-idle", config=demo["config"])
    assert result.returncode == 0, result.stderr
    page.goto(run_url)
    assert page.locator("h1 .badge").inner_text() == "SUCCESS"
    assert page.locator("article.report").count() == 1  # the saved Markdown, rendered
    page.screenshot(path=str(shots / "run-success.png"), full_page=True)

    page.goto(f"{base}/runs")
    page.screenshot(path=str(shots / "runs.png"), full_page=True)
    page.goto(f"{base}/projects/demo/calendar")
    page.screenshot(path=str(shots / "project.png"), full_page=True)
    assert [kind for kind, _ in dialogs] == ["confirm"]  # nothing from the untrusted text, anywhere
    assert sorted(p.name for p in shots.iterdir()) == ["calendar.png", "login.png", "project.png", "retried.png",
                                                       "run-failed.png", "run-success.png", "runs.png", "schedules.png"]
