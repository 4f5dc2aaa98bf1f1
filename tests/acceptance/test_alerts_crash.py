"""An alert survives a SIGKILL between its commit and its POST (SPEC §15.1), on SQLite and PostgreSQL.

Real ``reportflow`` processes; the loopback webhook holds a POST so the test can
kill the sender while the request is in flight, after the event's commit. The
receiver's record, not the engine's, is the witness of what was delivered.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select

from engine.store.tables import events
from tests.acceptance import procs
from tests.fakes import webhook
from tests.support import write_config

pytestmark = pytest.mark.slow
T0 = datetime(2026, 9, 29, 9, 0, tzinfo=UTC)
KILLS = 4  # docs/RELIABILITY.md quotes this run: kills, events, duplicates, lost


def _outbox(url: str) -> list[tuple[str, str, int]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [(r.dedupe_key, r.status, r.attempts)
                    for r in conn.execute(select(events).order_by(events.c.id))]
    finally:
        engine.dispose()


def test_an_alert_survives_a_sigkill_between_the_commit_and_the_post(store_url: str, tmp_path: Path) -> None:
    schedules = [dict(name="four", workflow="four_steps", project="p1", cron="0 * * * *", timezone="UTC",
                      misfire="CATCH_UP_ALL", overlap="ALLOW")]
    config = write_config(tmp_path / "reportflow.toml", db_url=store_url, schedules=schedules, sections={
        "worker": {"max_attempts": 1, "poll_interval": "0.2s"}, "notify": {"webhook_env": "RF_HOOK"},
        "testflow": {"log": str(tmp_path / "steps.log"), "fail_code": "NOTION_UNAUTHORIZED"},
        "testflow.fail": {"ONE": 99}})
    clock = procs.Shared(T0)
    assert procs.run(tmp_path, config, "schedules", "apply", now=clock.at()).returncode == 0
    with webhook.serve() as hook:
        env = {"RF_HOOK": hook.url}
        tick = procs.run(tmp_path, config, "tick", now=clock.at(4 * 3600 + 60), env=env)  # 4 runs
        assert tick.returncode == 0, tick.stderr
        kills = 0
        for _ in range(KILLS):  # each time: the runs fail and commit their alerts, the sender is killed mid-POST
            hook.hold_next()
            worker = procs.spawn(tmp_path, config, "work", "--until-idle", now=clock.at(4 * 3600 + 90), env=env)
            assert hook.arrived.wait(120), procs.finish(worker, timeout=5)
            procs.kill9(worker)
            kills += 1
            hook.release()
            assert {status for _, status, _ in _outbox(store_url)} == {"PENDING"}  # none lost, none marked
        # After the restart the sender delivers everything (a later ``reconcile`` is enough).
        done = procs.run(tmp_path, config, "reconcile", now=clock.at(4 * 3600 + 120), env=env)
        assert done.returncode == 0, done.stderr
    recorded = _outbox(store_url)
    assert [status for _, status, _ in recorded] == ["DELIVERED"] * 4
    ids = Counter(r.body["id"] for r in hook.received)
    assert set(ids) == {key for key, _, _ in recorded}  # every event reached the receiver: none lost
    duplicates = sum(ids.values()) - len(ids)
    assert duplicates == kills  # the POST each kill cut short was sent again, and nothing else twice
    assert {r.body["event"] for r in hook.received} == {"run_failed"}
