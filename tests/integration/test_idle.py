"""``work`` names what it waits for (issue 33 item 8): backfills behind ``backfill_concurrency``, retries due
later, runs behind their schedule's run, held runs; the fast path of an idle ``work`` says the same."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from engine.core.clock import ManualClock
from engine.execution.pool import WorkerPool
from engine.operations import actions
from engine.read import idle
from engine.scheduling import definitions
from engine.store import claims
from tests.flows.install import pythonpath
from tests.support import make_runtime, run_cli, run_cli_modules, write_config

T0 = datetime(2026, 9, 29, 10, 0, tzinfo=UTC)
HOURLY = dict(name="hourly", workflow="echo", project="p1", cron="0 * * * *", timezone="UTC")


def test_backfills_behind_the_concurrency_limit_are_named(store_url: str) -> None:
    rt = make_runtime(store_url, schedules=[HOURLY], clock=ManualClock(T0))
    definitions.apply(rt)
    made = actions.backfill(rt, "hourly", first=date(2026, 9, 20), last=date(2026, 9, 26))
    assert len(made.created) == 7 * 24
    assert idle.what_waits(rt) == "168 claimable now (by another worker, or of a project or workflow this one " \
                                  "does not serve, or behind another revision of their period)"
    with rt.store.write() as conn:  # another worker runs one backfill: the limit (1) is reached
        taken = claims.acquire_run(conn, worker_id="elsewhere", now=T0, lease_until=T0 + timedelta(hours=1),
                                   steps_by_workflow={"echo": ["ECHO"]}, projects=None, backfill_limit=1)
    assert taken is not None
    assert WorkerPool(rt, "here", concurrency=1).work(until_idle=True) == []
    assert idle.what_waits(rt) == "167 backfill run(s) wait behind backfill_concurrency = 1 (1 running); " \
                                  "0 claimable now"
    definitions.set_enabled(rt, "hourly", enabled=False, reason="migration")
    assert idle.what_waits(rt) == "167 run(s) held (schedule disabled); 0 claimable now"
    rt.store.dispose()


def test_work_says_what_waits_on_its_full_and_its_fast_path(store_url: str, tmp_path: Path) -> None:
    """A run failed with a retryable error waits for its retry time: ``work`` says so, not "nothing to do"."""
    config = write_config(tmp_path / "reportflow.toml", db_url=store_url, schedules=[
        dict(name="four", workflow="four_steps", project="p1", cron="0 9 * * *", timezone="UTC")],
        sections={"testflow": {"log": str(tmp_path / "steps.log"), "fail_code": "MODEL_UNAVAILABLE"},
                  "testflow.fail": {"TWO": 1}})
    env = {"PYTHONPATH": pythonpath(tmp_path)}
    now = "2026-09-29T10:00:00Z"
    for args in (("schedules", "apply"), ("trigger", "four", "--date", "2026-09-28"), ("work", "--until-idle")):
        done = run_cli(*args, config=config, now=now, env=env)
        assert done.returncode == 0, done.stderr
    assert "RETRY_PENDING" in done.stdout  # TWO failed once, retryable: back in a minute
    expected = ("nothing claimable now: 1 run(s) wait for their retry time (the next at 2026-09-29T10:01:00Z); "
                "0 claimable now\n")
    full = run_cli("work", "--until-idle", config=config, now=now, env=env)
    assert full.stdout == expected, full.stderr
    recorded, _ = run_cli_modules("--config", str(config), "--now", now, "tick", cwd=tmp_path, env=env)
    assert recorded.returncode == 0, recorded.stderr  # a full tick records the config: the fast path may trust it
    proc, modules = run_cli_modules("--config", str(config), "--now", now, "work", "--until-idle", cwd=tmp_path,
                                    env=env)
    assert "engine.cli.fast_tick" in modules and "engine.cli.app" not in modules, proc.stderr
    assert proc.stdout == expected
    later = run_cli("work", "--until-idle", config=config, now="2026-09-29T10:01:30Z", env=env)
    assert later.stdout == "run 1 four_steps:p1:2026-09-28T09:00Z: SUCCESS\n", later.stderr
    assert run_cli("work", "--until-idle", config=config, now="2026-09-29T10:01:30Z", env=env).stdout == \
        "nothing to do\n"
