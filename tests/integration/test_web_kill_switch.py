"""The web page's disable action is the kill switch, and the schedule page shows the held runs (SPEC §15.3)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from engine.core.models import RunStatus
from engine.execution.pool import WorkerPool
from engine.operations import actions
from engine.store import audit_rows, run_rows
from tests.integration.test_web import build_site, client, logged_in, status_of


def test_disable_from_the_page_holds_the_queued_runs_and_lists_them(store_url: str, tmp_path: Path) -> None:
    site = build_site(store_url, tmp_path)
    queued = actions.backfill(site.rt, "platform-report", first=date(2026, 9, 25), last=date(2026, 9, 26))
    assert queued.created == ["2026-09-25", "2026-09-26"]
    c, csrf = logged_in(site.rt)
    off = c.post("/schedules/platform-report/disable", data={"csrf_token": csrf, "reason": "repo move"})
    assert off.status_code == 200 and "held" in off.text
    assert WorkerPool(site.rt, "w", concurrency=1).work(until_idle=True) == []
    page = client(site.rt, token=None).get("/schedules/platform-report").text
    assert "Held runs" in page and page.count("schedule disabled") == 2
    with site.rt.store.read() as conn:
        held = [r for r in run_rows.list_runs(conn) if r.status is RunStatus.QUEUED]
    assert "Held: schedule disabled" in client(site.rt, token=None).get(f"/runs/{held[0].id}").text
    assert c.post(f"/runs/{site.failed_id}/retry", data={"csrf_token": csrf}).status_code == 409
    assert c.post("/schedules/platform-report/enable", data={"csrf_token": csrf}).status_code == 200
    assert "Held runs" not in client(site.rt, token=None).get("/schedules/platform-report").text


def test_disable_from_the_page_can_cancel_the_queued_runs(store_url: str, tmp_path: Path) -> None:
    site = build_site(store_url, tmp_path)
    actions.backfill(site.rt, "platform-report", first=date(2026, 9, 25), last=date(2026, 9, 26))
    with site.rt.store.read() as conn:
        queued = [r.id for r in run_rows.list_runs(conn) if r.status is RunStatus.QUEUED]
    c, csrf = logged_in(site.rt)
    off = c.post("/schedules/platform-report/disable",
                 data={"csrf_token": csrf, "reason": "wrong repo", "cancel_queued": "1"})
    assert off.status_code == 200 and "cancelled" in off.text
    assert [status_of(site.rt, r) for r in queued] == [RunStatus.CANCELLED] * 2
    with site.rt.store.read() as conn:
        events = [e for e in audit_rows.list_audit(conn) if e.action == "run_cancelled"]
    assert {(e.actor, e.reason) for e in events} == {("ui:alice", "wrong repo")}
