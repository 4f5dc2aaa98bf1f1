"""The page's bulk actions, "run now" and "regenerate" (SPEC §15.5), behind the token, the login and CSRF, each run
audited under the operator's name; the dry run is readable without the token."""

from __future__ import annotations

import re
from datetime import date, timedelta
from pathlib import Path

from engine.core.models import RunStatus
from engine.core.schedule_spec import Misfire
from engine.execution.worker import Worker
from engine.operations import actions
from engine.scheduling import definitions, tick
from engine.store import audit_rows, run_rows, schedule_rows
from tests.integration.test_web import Site, build_site, client, logged_in, status_of
from tests.support import run_next

NAME = "platform-report"


def cancelled_days(site: Site, *days: int) -> dict[int, int]:
    """Runs for 2026-09-DD backfilled, then cancelled before any worker took them: {day: run id}."""
    made = {}
    for day in days:
        made[day] = actions.trigger(site.rt, NAME, day=date(2026, 9, day)).run_id
        actions.cancel(site.rt, made[day])
    return made


def audited(site: Site, action: str) -> list[tuple[int | None, str]]:
    with site.rt.store.read() as conn:
        return [(e.run_id, e.actor) for e in audit_rows.list_audit(conn, action=action)]


def listed_ids(html: str) -> list[int]:
    """The runs a confirmation form submits (one field holding the selection, ``bulk.encode_selection``)."""
    from engine.core import bulk

    found = re.findall(r'<input type="hidden" name="runs" value="([0-9,-]*)">', html)
    return sorted(bulk.decode_selection(found[0])) if found else []


def test_bulk_retry_from_the_schedule_page_acts_on_the_runs_shown(store_url: str, tmp_path: Path) -> None:
    site = build_site(store_url, tmp_path)
    made = cancelled_days(site, 25, 26)
    anonymous = client(site.rt, token=None)
    page = anonymous.get("/schedules/platform-report").text
    assert "Operator actions" not in page  # read-only: no buttons
    preview = anonymous.get("/schedules/platform-report/retry?status=CANCELLED,FAILED")
    assert preview.status_code == 200 and "Dry run" in preview.text and "Read-only page" in preview.text
    assert "reportflow runs retry --schedule platform-report --status CANCELLED,FAILED" in preview.text
    assert f'href="/runs/{made[25]}"' in preview.text and 'name="runs"' not in preview.text
    assert anonymous.post("/schedules/platform-report/retry", data={"run": str(made[25])}).status_code == 403

    c, csrf = logged_in(site.rt)
    page = c.get("/schedules/platform-report").text
    assert 'id="operator-actions"' in page and "1 failed or partial now" in page
    ranged = c.get("/schedules/platform-report/retry?status=FAILED&status=CANCELLED&from=2026-09-26&to=2026-09-29")
    assert ranged.status_code == 200
    assert listed_ids(ranged.text) == sorted([made[26], site.failed_id])
    form = {"status": ["FAILED", "CANCELLED"], "from": "2026-09-26", "to": "2026-09-29",
            "runs": ",".join(str(i) for i in sorted([made[26], site.failed_id]))}
    assert c.post("/schedules/platform-report/retry", data=form).status_code == 403  # no CSRF token
    assert status_of(site.rt, made[26]) is RunStatus.CANCELLED
    done = c.post("/schedules/platform-report/retry", data={**form, "csrf_token": csrf})
    assert done.status_code == 200 and "retried 2 run(s) of platform-report" in done.text
    assert audited(site, "run_retried") == [(made[26], "ui:alice"), (site.failed_id, "ui:alice")]
    assert status_of(site.rt, made[25]) is RunStatus.CANCELLED  # outside the range: not shown, not touched
    again = c.post("/schedules/platform-report/retry", data={**form, "csrf_token": csrf})
    assert "retried 0 run(s)" in again.text and "skipped 2" in again.text  # queued now: nothing acted on twice
    assert len(audited(site, "run_retried")) == 2
    assert c.get("/schedules/platform-report/retry?from=2026-13-01").status_code == 400
    assert c.get("/schedules/platform-report/retry?status=SUCCESS").status_code == 400
    site.rt.store.dispose()


def test_approve_every_waiting_slot_from_the_page(store_url: str, tmp_path: Path) -> None:
    site = build_site(store_url, tmp_path)
    with site.rt.store.read() as conn:
        version = schedule_rows.get_schedule(conn, NAME).version
    definitions.set_schedule(site.rt, NAME, expect_version=version, changes={"misfire": Misfire.MANUAL})
    site.rt.clock.advance(timedelta(days=3))
    tick.tick(site.rt)  # three slots passed unticked: they wait for a person
    c, csrf = logged_in(site.rt)
    assert "Approve 3 waiting" in c.get("/schedules/platform-report").text
    preview = c.get("/schedules/platform-report/approve")
    waiting = listed_ids(preview.text)
    assert len(waiting) == 3 and "MANUAL_REQUIRED runs of platform-report" in preview.text
    done = c.post("/schedules/platform-report/approve",
                  data={"csrf_token": csrf, "runs": ",".join(str(i) for i in waiting)})
    assert done.status_code == 200 and "approved 3 run(s)" in done.text
    assert [status_of(site.rt, i) for i in waiting] == [RunStatus.QUEUED] * 3
    assert audited(site, "run_approved") == [(i, "ui:alice") for i in waiting]
    assert "Approve" not in c.get("/schedules/platform-report").text.split("Operator actions")[1].split("</div>")[0]
    site.rt.store.dispose()


def test_run_now_and_regenerate_on_the_schedule_and_on_a_run(store_url: str, tmp_path: Path) -> None:
    site = build_site(store_url, tmp_path)
    c, csrf = logged_in(site.rt)
    done_page, failed_page = c.get(f"/runs/{site.ok_id}").text, c.get(f"/runs/{site.failed_id}").text
    assert f"/runs/{site.ok_id}/regenerate" in done_page and "/run-now" not in done_page  # SUCCESS: nothing to run
    assert f"/runs/{site.failed_id}/run-now" in failed_page
    # The latest slot (2026-09-30 03:00 Seoul) reports on 2026-09-29, whose run failed: run now queues it again.
    site.blocker.rmdir()
    now = c.post("/schedules/platform-report/run-now", data={"csrf_token": csrf})
    assert now.status_code == 200 and f"run {site.failed_id}" in now.text and "requeued" in now.text
    assert run_next(Worker(site.rt, "w")).status is RunStatus.SUCCESS
    latest = c.post("/schedules/platform-report/regenerate", data={"csrf_token": csrf})
    assert latest.status_code == 200 and "daily_report:platform:2026-09-29#2" in latest.text
    regenerated = c.post(f"/runs/{site.ok_id}/regenerate", data={"csrf_token": csrf})
    assert regenerated.status_code == 200
    new_id = int(re.findall(r'href="/runs/(\d+)" id="result-run"', regenerated.text)[0])
    with site.rt.store.read() as conn:
        new = run_rows.get_run(conn, new_id, detail=False)
    assert (new.business_key, new.revision, new.status) == ("2026-09-28", 2, RunStatus.QUEUED)
    assert [actor for _, actor in audited(site, "run_manual")][-2:] == ["ui:alice", "ui:alice"]
    assert c.post(f"/runs/{site.ok_id}/run-now", data={"csrf_token": csrf}).status_code == 200  # unchanged: r2 queued
    assert client(site.rt, token=None).post(f"/runs/{site.ok_id}/regenerate").status_code == 403
    assert c.post("/runs/999999/regenerate", data={"csrf_token": csrf}).status_code == 400
    definitions.set_enabled(site.rt, NAME, enabled=False, reason="migration")
    assert c.post("/schedules/platform-report/run-now", data={"csrf_token": csrf}).status_code == 409
    site.rt.store.dispose()


def test_regenerate_keeps_one_pending_revision_and_limits_a_session(store_url: str, tmp_path: Path) -> None:
    """Security round 3, item 9: 555 POSTs in 10 s queued 555 revisions of one period."""
    from engine.web import sessions

    site = build_site(store_url, tmp_path)
    c, csrf = logged_in(site.rt)
    answers = [c.post(f"/runs/{site.ok_id}/regenerate", data={"csrf_token": csrf})
               for _ in range(sessions.TRIGGERS_PER_WINDOW + 5)]
    assert [a.status_code for a in answers] == [200] * sessions.TRIGGERS_PER_WINDOW + [429] * 5
    assert int(answers[-1].headers["Retry-After"]) >= 1 and "too many runs asked for" in answers[-1].text
    assert "one pending revision per period" in answers[1].text
    with site.rt.store.read() as conn:
        revisions = [r.revision for r in run_rows.list_runs(conn, limit=None) if r.business_key == "2026-09-28"]
    assert sorted(revisions) == [1, 2]  # the first asked for a revision; the others found it pending
    site.rt.clock.advance(timedelta(minutes=1, seconds=1))
    assert c.post(f"/runs/{site.ok_id}/regenerate", data={"csrf_token": csrf}).status_code == 200
    site.rt.store.dispose()
