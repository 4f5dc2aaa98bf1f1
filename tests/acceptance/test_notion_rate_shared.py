"""Notion's 3 requests/s is per integration: worker processes sharing a store share it."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import create_engine, func, select

from engine.store.tables import steps
from tests.acceptance import procs
from tests.fakes.fake_notion import FakeNotion
from tests.fakes.gitrepo import make_repo
from tests.support import write_config

pytestmark = pytest.mark.slow
SEOUL = ZoneInfo("Asia/Seoul")
TOKEN_ENV = "RF_TEST_NOTION_TOKEN"
DAYS = range(20, 25)  # five daily reports: every worker uploads one at least, side by side
WORKERS = 3
LIMIT_PER_S = 3  # Notion's average limit; the shared limiter spaces slots 350 ms apart, no burst
# A request reaches the server a little after its slot (the reservation's commit, a new
# connection); on a loaded machine one late request can bunch with the next one's slot.
JITTER_ALLOWANCE = 1


def busiest_second(arrivals: list[float]) -> int:
    """The most requests that arrived within any half-open window of one second."""
    ordered = sorted(arrivals)
    return max(sum(1 for t in ordered[i:] if t < start + 1.0) for i, start in enumerate(ordered))


def uploads(url: str) -> int:
    """How many runs uploaded their report (an UPLOAD_NOTION step that succeeded)."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(select(func.count()).where(steps.c.name == "UPLOAD_NOTION",
                                                               steps.c.status == "SUCCESS")).scalar_one())
    finally:
        engine.dispose()


def test_three_workers_uploading_at_once_stay_under_three_requests_per_second(store_url: str,
                                                                               tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    for day in DAYS:
        repo.commit(f"work on the {day}th", at=datetime(2026, 9, day, 12, 0, tzinfo=SEOUL))
    with FakeNotion() as notion:
        config = write_config(
            tmp_path / "reportflow.toml", db_url=store_url,
            sections={"reports": {"dir": str(tmp_path / "out")}, "worker": {"poll_interval": "0.1s"},
                      "notion": {"enabled": True, "token_env": TOKEN_ENV, "database_id": notion.database_id,
                                 "base_url": notion.url, "timeout": "10s"}},
            projects=[dict(key="platform", repo=str(repo.path), branches=["main"])],
            schedules=[dict(name="daily", workflow="daily_report", project="platform", cron="0 3 * * *",
                            timezone="Asia/Seoul")])
        now = procs.Shared(datetime(2026, 9, 30, 0, 0, tzinfo=ZoneInfo("UTC"))).at()
        assert procs.run(tmp_path, config, "schedules", "apply", now=now).returncode == 0
        for day in DAYS:
            result = procs.run(tmp_path, config, "trigger", "daily", "--date", f"2026-09-{day}", now=now)
            assert result.returncode == 0, result.stderr
        env = {TOKEN_ENV: notion.token}
        workers = [procs.spawn(tmp_path, config, "work", "--until-idle", now=now, env=env) for _ in range(WORKERS)]
        outputs = []
        for proc in workers:
            out, log = procs.finish(proc, timeout=300)
            assert proc.returncode == 0, log
            outputs.append(out)
        arrivals = [r.at for r in notion.requests]
        # One page per report. Workers running the days out of order may leave a day with no commits of its
        # own (the next day's report, run first, took them: each commit is in exactly one report).
        uploaded = uploads(store_url)
        shown = procs.run(tmp_path, config, "runs", "list", now=now, env=env).stdout
        assert len(notion.live_pages()) == uploaded >= WORKERS, f"{uploaded} uploads\n{shown}"
    # Every worker uploaded something, so the uploads really ran side by side.
    assert all("SUCCESS" in out for out in outputs), outputs
    assert len(arrivals) >= 5 * uploaded
    spread = sorted(round(t - min(arrivals), 3) for t in arrivals)
    assert (len(arrivals) - 1) / (max(arrivals) - min(arrivals)) <= LIMIT_PER_S, spread
    assert busiest_second(arrivals) <= LIMIT_PER_S + JITTER_ALLOWANCE, spread
