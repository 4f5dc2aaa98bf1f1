"""``schedules apply`` and drift (SPEC §3, issue 21 item 4): an edit made in the database is never silently undone."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from engine.core import errors
from engine.core.clock import ManualClock
from engine.runtime import Runtime
from engine.scheduling import definitions, drift
from engine.store import audit_rows, schedule_rows
from tests.dbstate import fingerprint
from tests.support import make_runtime

NOW = datetime(2026, 10, 1, 12, tzinfo=UTC)
CD: dict[str, Any] = dict(name="cd", workflow="echo", project="p1", cron="30 19 * * *", timezone="UTC")
OTHER: dict[str, Any] = dict(name="other", workflow="echo", project="p2", cron="0 9 * * *", timezone="UTC")


def _with_file(rt: Runtime, url: str, *specs: dict[str, Any]) -> Runtime:
    """The same store and clock, with a config file that now says ``specs``."""
    fresh = make_runtime(url, schedules=specs, clock=rt.clock)
    return Runtime(store=rt.store, registry=rt.registry, config=fresh.config, clock=rt.clock, actor=rt.actor)


def _edited(store_url: str) -> Runtime:
    rt = make_runtime(store_url, schedules=[CD, OTHER], clock=ManualClock(NOW))
    definitions.apply(rt)
    definitions.set_schedule(rt, "cd", expect_version=1, changes={"cron": "0 20 * * *"}, reason="later build")
    return rt


def test_apply_refuses_drift_naming_the_field_and_both_values_and_writes_nothing(store_url: str) -> None:
    rt = _edited(store_url)
    # The file also changes another schedule: that change must not land either.
    changed = _with_file(rt, store_url, dict(CD, grace="20m"), dict(OTHER, cron="0 10 * * *"))
    before = fingerprint(store_url)
    with pytest.raises(errors.Conflict) as refused:
        definitions.apply(changed)
    assert refused.value.exit_code == 3
    assert "cd (cron: database '0 20 * * *', file '30 19 * * *')" in str(refused.value)
    assert fingerprint(store_url) == before
    with rt.store.read() as conn:
        assert schedule_rows.get_schedule(conn, "other").spec.cron == "0 9 * * *"


def test_dry_run_prints_the_plan_and_writes_nothing(store_url: str) -> None:
    rt = _edited(store_url)
    changed = _with_file(rt, store_url, CD, dict(OTHER, cron="0 10 * * *"),
                         dict(name="new", workflow="echo", project="p3", cron="0 8 * * *", timezone="UTC"))
    before = fingerprint(store_url)
    report = definitions.apply(changed, dry_run=True)
    assert fingerprint(store_url) == before
    plan = report.plan
    assert plan is not None and plan.created == ["new"] and plan.archived == [] and plan.unchanged == []
    assert plan.updated["other"] == [drift.FieldChange("cron", "0 9 * * *", "0 10 * * *")]
    assert plan.drifted == {"cd": [drift.FieldChange("cron", "0 20 * * *", "30 19 * * *")]}


def test_overwrite_lets_the_file_win_and_audits_the_drift(store_url: str) -> None:
    rt = _edited(store_url)
    report = definitions.apply(rt, overwrite=True)
    assert report.updated == ["cd"]
    with rt.store.read() as conn:
        schedule = schedule_rows.get_schedule(conn, "cd")
        events = audit_rows.list_audit(conn, schedule_id=schedule.id)
    assert schedule.spec.cron == "30 19 * * *"
    overwritten = [e for e in events if e.action == "drift_overwritten"]
    assert [(e.before, e.after, e.reason) for e in overwritten] == [
        ({"cron": "0 20 * * *"}, {"cron": "30 19 * * *"}, "schedules apply --overwrite")]
    assert definitions.apply(rt).unchanged == ["cd", "other"]  # no drift left


def test_a_file_that_caught_up_with_the_edit_is_not_drift(store_url: str) -> None:
    rt = _edited(store_url)
    caught_up = _with_file(rt, store_url, dict(CD, cron="0 20 * * *"), OTHER)
    assert definitions.apply(caught_up).unchanged == ["cd", "other"]
    later = _with_file(rt, store_url, dict(CD, cron="0 21 * * *"), OTHER)
    assert definitions.apply(later).updated == ["cd"]  # the file moves on: an ordinary update
