"""The alert and SLO surfaces through the real CLI: notifications list, schedules list/show, metrics (their
listing on SQLite: what it reads is tested on both databases in tests/integration/test_alerts.py)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.acceptance import procs
from tests.support import write_config

pytestmark = pytest.mark.slow
T0 = datetime(2026, 9, 29, 9, 0, tzinfo=UTC)


def test_notifications_list_and_the_success_rate_in_schedules_and_metrics(sqlite_url: str, tmp_path: Path) -> None:
    schedules = [dict(name="four", workflow="four_steps", project="p1", cron="0 * * * *", timezone="UTC",
                      misfire="SKIP", overlap="ALLOW", criticality="high", deadline="30m")]
    config = write_config(tmp_path / "reportflow.toml", db_url=sqlite_url, schedules=schedules, sections={
        "worker": {"max_attempts": 1}, "notify": {"slo_window": "1d"},
        "testflow": {"log": str(tmp_path / "steps.log"), "fail_code": "NOTION_UNAUTHORIZED"},
        "testflow.fail": {"FOUR": 9}})
    procs.ok(procs.run(tmp_path, config, "schedules", "apply", now="2026-09-29T09:00:00Z"))
    procs.ok(procs.run(tmp_path, config, "tick", now="2026-09-29T12:05:00Z"))  # 10:00, 11:00 MISSED; 12:00 queued
    procs.ok(procs.run(tmp_path, config, "work", "--until-idle", now="2026-09-29T12:06:00Z"))  # PARTIAL_SUCCESS
    listed = json.loads(procs.ok(procs.run(tmp_path, config, "notifications", "list", "--json",
                                     now="2026-09-29T12:07:00Z")))
    assert [(n["event"], n["severity"], n["status"]) for n in listed] == [
        ("run_partial", "critical", "PENDING"),  # high: critical from the third unsuccessful period in a row
        ("slots_not_run", "warning", "PENDING")]
    assert listed[0]["step"] == "FOUR" and listed[0]["error_code"] == "NOTION_UNAUTHORIZED"
    pending = procs.ok(procs.run(tmp_path, config, "notifications", "list", "--pending", now="2026-09-29T12:07:00Z"))
    assert "run_partial" in pending and "slots_not_run" in pending  # no webhook: recorded, waiting for one
    shown = json.loads(procs.ok(procs.run(tmp_path, config, "schedules", "show", "four", "--json",
                                    now="2026-09-29T13:00:00Z")))
    assert (shown["success_rate"], shown["freshness"], shown["periods_due"], shown["window"]) == (0.0, 0.0, 3, "1d")
    assert shown["criticality"] == "high" and shown["deadline_s"] == 1800
    table = procs.ok(procs.run(tmp_path, config, "schedules", "list", now="2026-09-29T13:00:00Z"))
    assert "0% of 3" in table
    metrics = procs.ok(procs.run(tmp_path, config, "metrics", now="2026-09-29T13:00:00Z"))
    assert 'reportflow_schedule_success_ratio{schedule="four"} 0.0' in metrics
    assert 'reportflow_schedule_freshness_ratio{schedule="four"} 0.0' in metrics


def test_a_cron_tick_with_nothing_due_still_sends_an_alert_due_again(store_url: str, tmp_path: Path) -> None:
    """Cron's ticks retry a refused alert though nothing is due (the fast path hands over to the full one)."""
    from tests.fakes import webhook

    schedules = [dict(name="hourly", workflow="echo", project="p1", cron="0 * * * *", timezone="UTC",
                      misfire="SKIP", overlap="ALLOW")]
    config = write_config(tmp_path / "reportflow.toml", db_url=store_url, schedules=schedules,
                          sections={"notify": {"webhook_env": "RF_HOOK"}})
    stamp = config.stat().st_mtime - 60  # written well before the ticks read it, so the fast path may trust it
    os.utime(config, (stamp, stamp))
    with webhook.serve() as hook:
        env = {"RF_HOOK": hook.url}
        procs.ok(procs.run(tmp_path, config, "schedules", "apply", now="2026-09-29T09:00:00Z", env=env))
        hook.fail_next(503)
        procs.ok(procs.run(tmp_path, config, "tick", now="2026-09-29T12:05:00Z", env=env))  # 10:00, 11:00 MISSED
        assert [(r.status, r.body["event"]) for r in hook.received] == [(503, "slots_not_run")]
        # Cron's next ticks: nothing is due before 13:00, but the refused alert is due again after 30 s.
        procs.ok(procs.run(tmp_path, config, "tick", now="2026-09-29T12:05:10Z", env=env))
        assert [r.status for r in hook.received] == [503]
        procs.ok(procs.run(tmp_path, config, "tick", now="2026-09-29T12:06:00Z", env=env))
        assert [r.status for r in hook.received] == [503, 200]
        procs.ok(procs.run(tmp_path, config, "tick", now="2026-09-29T12:07:00Z", env=env))
        assert [r.status for r in hook.received] == [503, 200]  # delivered once: never again


def _dump(url: str) -> dict[str, list[tuple[object, ...]]]:
    from sqlalchemy import create_engine, select

    from engine.store.tables import metadata

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return {name: [tuple(r) for r in conn.execute(select(t).order_by(*t.primary_key.columns))]
                    for name, t in metadata.tables.items()}
    finally:
        engine.dispose()


def test_a_refused_command_writes_nothing(sqlite_url: str, tmp_path: Path) -> None:
    """A webhook that is not http(s) is refused at load (exit 2) by every writer; the database does not change
    (byte for byte: on SQLite, as the refusal comes before any database is opened)."""
    schedules = [dict(name="hourly", workflow="echo", project="p1", cron="0 * * * *", timezone="UTC",
                      misfire="SKIP")]
    config = write_config(tmp_path / "reportflow.toml", db_url=sqlite_url, schedules=schedules,
                          sections={"notify": {"webhook_env": "RF_HOOK"}})
    good = {"RF_HOOK": "http://127.0.0.1:9/hook"}
    procs.ok(procs.run(tmp_path, config, "schedules", "apply", now="2026-09-29T09:00:00Z", env=good))
    procs.ok(procs.run(tmp_path, config, "tick", now="2026-09-29T10:05:00Z", env=good))
    before = _dump(sqlite_url)
    raw = Path(sqlite_url.removeprefix("sqlite:///")).read_bytes()
    for args in (("tick",), ("work", "--until-idle"), ("reconcile",), ("runs", "retry", "1")):
        refused = procs.run(tmp_path, config, *args, now="2026-09-29T12:05:00Z", env={"RF_HOOK": "file:///etc/passwd"})
        assert refused.returncode == 2, refused.stderr
        assert "RF_HOOK must hold an http:// or https:// URL" in refused.stderr
        assert "/etc/passwd" not in refused.stderr + refused.stdout
    assert _dump(sqlite_url) == before
    assert Path(sqlite_url.removeprefix("sqlite:///")).read_bytes() == raw  # byte-identical
