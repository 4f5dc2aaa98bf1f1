"""At most one generation at a time per Ollama host, across worker processes."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import create_engine, select

from engine.store.tables import attempts
from tests.acceptance import procs
from tests.fakes.fake_ollama import FakeOllama
from tests.fakes.gitrepo import make_repo
from tests.support import write_config

pytestmark = pytest.mark.slow
SEOUL = ZoneInfo("Asia/Seoul")


def test_two_workers_share_one_ollama_host_one_generation_at_a_time(store_url: str, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    for day in (25, 26, 27, 28):
        repo.commit(f"work on the {day}th", at=datetime(2026, 9, day, 12, 0, tzinfo=SEOUL))
    fake = FakeOllama().start()
    fake.generation_delay_s = 1.0  # long enough that both workers are up while generations queue
    try:
        config = write_config(
            tmp_path / "reportflow.toml", db_url=store_url,
            sections={"llm": {"provider": "ollama", "host": fake.url}, "reports": {"dir": str(tmp_path / "out")},
                      "worker": {"poll_interval": "0.1s"}},
            projects=[dict(key="platform", repo=str(repo.path), branches=["main"])],
            schedules=[dict(name="daily", workflow="daily_report", project="platform", cron="0 3 * * *",
                            timezone="Asia/Seoul")])
        clock = procs.Shared(datetime(2026, 9, 30, tzinfo=UTC))  # one timeline for every process
        now = clock.at(0)
        assert procs.run(tmp_path, config, "schedules", "apply", now=now).returncode == 0
        for day in (25, 26, 27, 28):
            result = procs.run(tmp_path, config, "trigger", "daily", "--date", f"2026-09-{day}", now=now)
            assert result.returncode == 0, result.stderr
        workers = [procs.spawn(tmp_path, config, "work", "--until-idle", now=now) for _ in range(2)]
        for proc in workers:
            _, err = procs.finish(proc, timeout=300)
            assert proc.returncode == 0, err
        assert fake.generations == 4
        assert fake.max_active == 1
        pids = {proc.pid for proc in workers}
        windows = sorted(fake.windows, key=lambda g: g.start)
        # Both workers generated, and never two at once.
        assert {g.pid for g in windows} == pids
        assert all(a.end <= b.start for a, b in zip(windows, windows[1:], strict=False))
        # ...while both held claimed runs at the same time: the lock, not luck, kept them apart.
        engine = create_engine(store_url)
        with engine.connect() as conn:
            held = conn.execute(select(attempts.c.worker_id, attempts.c.started_at, attempts.c.finished_at)).all()
        engine.dispose()
        to_real = clock.anchor - clock.start.timestamp()
        intervals = [(int(worker.rsplit(":", 1)[1]), start.timestamp() + to_real, end.timestamp() + to_real)
                     for worker, start, end in held]
        assert any(pid != g.pid and start < g.start and g.end < end
                   for g in windows for pid, start, end in intervals), (windows, intervals)
    finally:
        fake.stop()
    assert len(list((tmp_path / "out" / "platform").glob("*.md"))) == 4
