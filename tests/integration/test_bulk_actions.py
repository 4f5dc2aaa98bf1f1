"""Bulk actions (SPEC §15.5) on SQLite and PostgreSQL: a week of partial reports retried in one action, every
MANUAL_REQUIRED slot approved at once, a range triggered; each run audited with the actor, nothing acted on unseen."""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from engine.core import errors
from engine.core.clock import ManualClock
from engine.core.models import RunStatus
from engine.execution.pool import WorkerPool
from engine.operations import actions, bulk_actions
from engine.runtime import Runtime
from engine.scheduling import definitions, tick
from engine.store import audit_rows, run_rows
from tests.flows.testflows import FOUR_STEPS
from tests.support import make_runtime

T0 = datetime(2026, 9, 29, 10, 0, tzinfo=UTC)
NOTION_DOWN = dict(name="four", workflow="four_steps", project="p1", cron="0 9 * * *", timezone="UTC")


def week_of_partial_reports(url: str, tmp_path: Path) -> Runtime:
    """Notion refused every upload for a week: seven PARTIAL_SUCCESS runs (2026-09-20 .. 2026-09-26)."""
    rt = make_runtime(url, schedules=[NOTION_DOWN], clock=ManualClock(T0), registry={"four_steps": FOUR_STEPS},
                      extra={"worker": {"max_attempts": 1},
                             "testflow": {"log": str(tmp_path / "log"), "fail": {"FOUR": 1},
                                          "fail_code": "NOTION_UNAUTHORIZED"}})
    definitions.apply(rt)
    actions.backfill(rt, "four", first=date(2026, 9, 20), last=date(2026, 9, 26))
    pool = WorkerPool(rt, "w", concurrency=1)
    assert {o.status for o in pool.work(until_idle=True)} == {RunStatus.PARTIAL_SUCCESS}
    pool.close()
    return rt


def statuses(rt: Runtime) -> dict[str, str]:
    with rt.store.read() as conn:
        return {r.business_key[:10]: r.status.value for r in run_rows.list_runs(conn, limit=None)
                if r.revision == 1}


def audit(rt: Runtime, action: str) -> list[tuple[int | None, str]]:
    with rt.store.read() as conn:
        return [(e.run_id, e.actor) for e in audit_rows.list_audit(conn, action=action)]


def test_a_week_of_partial_runs_is_retried_in_one_action_each_run_audited_with_its_actor(
        store_url: str, tmp_path: Path) -> None:
    rt = week_of_partial_reports(store_url, tmp_path)
    everything = bulk_actions.plan_retry(rt, "four")
    assert [t.business_key[:10] for t in everything.targets] == [f"2026-09-{d}" for d in range(20, 27)]
    assert {(t.status, t.error_code) for t in everything.targets} == {("PARTIAL_SUCCESS", "NOTION_UNAUTHORIZED")}
    assert audit(rt, "run_retried") == []  # a plan is the dry run: it writes nothing

    middle = bulk_actions.plan_retry(rt, "four", first=date(2026, 9, 22), last=date(2026, 9, 24))
    assert middle.describe() == "FAILED, PARTIAL_SUCCESS runs of four from 2026-09-22 to 2026-09-24"
    alice = dataclasses.replace(rt, actor="ops:alice")
    done = bulk_actions.execute(alice, middle)
    assert [o.action for o in done] == ["retried"] * 3
    assert audit(rt, "run_retried") == [(t.run_id, "ops:alice") for t in middle.targets]
    WorkerPool(rt, "w", concurrency=1).work(until_idle=True)
    assert statuses(rt) == {**{f"2026-09-{d}": "PARTIAL_SUCCESS" for d in range(20, 27)},
                            **{f"2026-09-{d}": "SUCCESS" for d in (22, 23, 24)}}

    rest = bulk_actions.plan_retry(rt, "four", statuses=(RunStatus.PARTIAL_SUCCESS,))
    assert len(rest.targets) == 4
    assert [o.action for o in bulk_actions.execute(rt, rest)] == ["retried"] * 4
    WorkerPool(rt, "w", concurrency=1).work(until_idle=True)
    assert set(statuses(rt).values()) == {"SUCCESS"}
    assert bulk_actions.plan_retry(rt, "four").targets == ()
    rt.store.dispose()


def test_runs_that_changed_after_the_plan_are_skipped_and_said_so(store_url: str, tmp_path: Path) -> None:
    rt = week_of_partial_reports(store_url, tmp_path)
    plan = bulk_actions.plan_retry(rt, "four", first=date(2026, 9, 20), last=date(2026, 9, 22))
    first, second, third = plan.targets
    actions.retry(rt, first.run_id)  # another operator got there first: it is QUEUED now
    actions.trigger(rt, "four", day=date(2026, 9, 21), force_new=True)  # a new revision: r1 is history
    done = bulk_actions.execute(rt, plan)
    assert [(o.run_id, o.action) for o in done] == [(first.run_id, "skipped"), (second.run_id, "skipped"),
                                                     (third.run_id, "retried")]
    assert "changed since it was listed" in done[0].message
    assert [run_id for run_id, _ in audit(rt, "run_retried")] == [first.run_id, third.run_id]  # one each
    rt.store.dispose()


def test_a_disabled_schedule_refuses_a_bulk_retry_and_nothing_is_written(store_url: str, tmp_path: Path) -> None:
    rt = week_of_partial_reports(store_url, tmp_path)
    definitions.set_enabled(rt, "four", enabled=False, reason="notion migration")
    before = statuses(rt)
    with pytest.raises(errors.Conflict, match="schedule 'four' is disabled"):
        bulk_actions.plan_retry(rt, "four")
    with pytest.raises(errors.NotFound):
        bulk_actions.plan_retry(rt, "nope")
    assert statuses(rt) == before and audit(rt, "run_retried") == []
    rt.store.dispose()


def manual_days_down(url: str) -> Runtime:
    """``misfire = "MANUAL"``, and the machine off four days: four slots wait as MANUAL_REQUIRED."""
    rt = make_runtime(url, clock=ManualClock(T0), schedules=[
        dict(name="m", workflow="echo", project="p", cron="0 9 * * *", timezone="UTC", misfire="MANUAL")])
    definitions.apply(rt)  # next slot 2026-09-30T09:00
    rt.clock.set(T0 + timedelta(days=4, hours=2))  # 2026-10-03T12:00: 09-30 .. 10-03 passed unticked
    tick.tick(rt)
    return rt


def test_every_manual_required_slot_is_approved_at_once(store_url: str) -> None:
    rt = manual_days_down(store_url)
    assert set(statuses(rt).values()) == {"MANUAL_REQUIRED"} and len(statuses(rt)) == 4
    plan = bulk_actions.plan_approve(rt, "m")
    assert plan.describe() == "MANUAL_REQUIRED runs of m" and len(plan.targets) == 4
    done = bulk_actions.execute(dataclasses.replace(rt, actor="ui:bob"), plan)
    assert [o.action for o in done] == ["approved"] * 4
    assert audit(rt, "run_approved") == [(t.run_id, "ui:bob") for t in plan.targets]
    assert [o.status for o in WorkerPool(rt, "w", concurrency=1).work(until_idle=True)] == [RunStatus.SUCCESS] * 4
    assert bulk_actions.plan_approve(rt, "m").targets == ()
    rt.store.dispose()


def test_trigger_over_a_range_follows_the_section_12_table_for_each_period(store_url: str) -> None:
    rt = manual_days_down(store_url)
    plan = bulk_actions.plan_approve(rt, "m", first=date(2026, 10, 1), last=date(2026, 10, 1))
    bulk_actions.execute(rt, plan)
    WorkerPool(rt, "w", concurrency=1).work(until_idle=True)  # 10-01 SUCCESS; 09-30, 10-02, 10-03 still MANUAL_REQUIRED
    dry = actions.trigger_range(rt, "m", first=date(2026, 9, 28), last=date(2026, 10, 4), dry_run=True)
    assert [(r.business_key[:10], r.action) for r in dry.results] == [
        ("2026-09-28", "created"), ("2026-09-29", "created"), ("2026-09-30", "approved"),
        ("2026-10-01", "unchanged"), ("2026-10-02", "approved"), ("2026-10-03", "approved")]
    assert [k[:10] for k in dry.future] == ["2026-10-04"]
    assert len(statuses(rt)) == 4  # the dry run wrote nothing
    done = actions.trigger_range(rt, "m", first=date(2026, 9, 28), last=date(2026, 10, 4))
    assert done.counts() == {"created": 2, "approved": 3, "unchanged": 1}
    assert [o.status for o in WorkerPool(rt, "w", concurrency=1).work(until_idle=True)] == [RunStatus.SUCCESS] * 5
    assert len(audit(rt, "run_manual")) == 2 and len(audit(rt, "run_approved")) == 4
    rt.store.dispose()


def test_run_now_and_regenerate_on_a_run(store_url: str) -> None:
    rt = manual_days_down(store_url)
    [first] = bulk_actions.plan_approve(rt, "m", first=date(2026, 9, 30), last=date(2026, 9, 30)).targets
    assert actions.trigger_period(rt, first.run_id).action == "approved"  # run now: the §12 table
    WorkerPool(rt, "w", concurrency=1).work(until_idle=True)
    assert actions.trigger_period(rt, first.run_id).action == "unchanged"
    again = actions.trigger_period(rt, first.run_id, force_new=True)  # regenerate: a new revision
    assert again.action == "revision" and again.run_id != first.run_id
    with rt.store.read() as conn:
        assert run_rows.get_run(conn, again.run_id).revision == 2
    rt.store.dispose()
