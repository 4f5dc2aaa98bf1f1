"""A ``NewRun`` is what the store inserts: every field it carries reads back from the row, on both backends."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from engine.core.models import NewRun, RunStatus, RunTrigger, SlotReason
from engine.store import run_rows
from engine.store.handle import Store

T0 = datetime(2026, 9, 29, 9, 0, tzinfo=UTC)


def test_every_field_of_a_new_run_is_what_the_row_holds(store_url: str) -> None:
    store = Store.open(store_url)
    parent = NewRun(workflow="wf", project="p1", trigger=RunTrigger.BACKFILL, scheduled_for=T0,
                    business_key="2026-09-29", base_key="wf:p1:2026-09-29", idempotency_key="wf:p1:2026-09-29#2",
                    status=RunStatus.SKIPPED, priority=10, pinned={"payload_version": 3, "cron": "0 9 * * *"},
                    max_attempts=4, max_runtime_s=900, created_at=T0 - timedelta(minutes=1), revision=2,
                    reason=SlotReason.OVERLAP, not_before=T0 + timedelta(minutes=5))
    with store.write() as conn:
        parent_id = run_rows.insert_run(conn, parent)
        assert parent_id is not None
        child = dataclasses.replace(parent, idempotency_key="wf:p1:2026-09-29#2/a", base_key="wf:p1:2026-09-29#2/a",
                                    parent_id=parent_id, status=RunStatus.QUEUED, reason=None, not_before=None)
        inserted = run_rows.insert_runs(conn, [child])
        assert run_rows.insert_run(conn, parent) is None  # its key is taken: nothing happens
    with store.read() as conn:
        for new, run_id in ((parent, parent_id), (child, inserted[child.idempotency_key])):
            run = run_rows.get_run(conn, run_id)
            assert (run.workflow, run.project, run.trigger, run.scheduled_for, run.business_key, run.idempotency_key,
                    run.status, run.priority, run.pinned, run.max_attempts, run.max_runtime_s, run.created_at,
                    run.schedule_id, run.parent_id, run.revision, run.reason, run.not_before) == (
                new.workflow, new.project, new.trigger, new.scheduled_for, new.business_key, new.idempotency_key,
                new.status, new.priority, new.pinned, new.max_attempts, new.max_runtime_s, new.created_at,
                new.schedule_id, new.parent_id, new.revision, None if new.reason is None else new.reason.value,
                new.not_before)
            assert (run.attempt_count, run.fence, run.cancel_requested, run.lease_owner) == (0, 0, False, None)
    store.engine.dispose()
