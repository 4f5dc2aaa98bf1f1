"""Dependencies between schedules (SPEC §18) with real processes on SQLite and PostgreSQL: racing ticks
and workers release a dependent run exactly once after its upstream's retry succeeds; past its window
it follows ``on_upstream``; ``runs show`` says what it waits for; an ``after`` that
names no schedule, or makes a cycle, is refused with exit 2 and nothing written."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from engine.store.tables import audit_events, runs, schedules
from tests.acceptance import procs
from tests.support import connected, write_config

pytestmark = pytest.mark.slow
T0 = datetime(2026, 12, 2, 9, 59, tzinfo=UTC)  # the slots are at 10:00


def config(tmp: Path, url: str, **down: Any) -> Path:
    up = dict(name="up", workflow="four_steps", project="p1", cron="0 10 * * *", timezone="UTC", misfire="RUN_ONCE")
    dependent = dict(name="down", workflow="four_steps", project="p2", cron="0 10 * * *", timezone="UTC",
                     misfire="RUN_ONCE", after=["up"], **down)
    sections: dict[str, dict[str, Any]] = {
        "worker": {"lease": "60s", "retry_backoff": "1s", "poll_interval": "0.2s", "max_attempts": 3},
        "testflow": {"log": str(tmp / "steps.log")}, "testflow.fail": {"TWO": 1}}
    return write_config(tmp / "reportflow.toml", db_url=url, sections=sections, schedules=[up, dependent])


def statuses(url: str) -> dict[str, str]:
    with connected(url) as conn:
        return {r.project: r.status for r in conn.execute(select(runs.c.project, runs.c.status))}


def audits(url: str, action: str) -> int:
    with connected(url) as conn:
        return int(conn.execute(select(func.count()).where(audit_events.c.action == action)).scalar_one())


def race(tmp: Path, cfg: Path, *args: str, now: str, n: int = 2) -> None:
    """``n`` processes of the same command at once, each ending well."""
    started = [procs.spawn(tmp, cfg, *args, now=now) for _ in range(n)]
    for proc in started:
        procs.finish(proc)
        assert proc.returncode == 0, Path(proc.log_path).read_text()  # type: ignore[attr-defined]


def test_racing_ticks_and_workers_release_the_dependent_once_after_its_upstreams_retry(store_url: str,
                                                                                      tmp_path: Path) -> None:
    cfg = config(tmp_path, store_url)
    clock = procs.Shared(T0)
    procs.ok(procs.run(tmp_path, cfg, "schedules", "apply", now=clock.at()))
    race(tmp_path, cfg, "tick", now=clock.at(65))
    assert statuses(store_url) == {"p1": "QUEUED", "p2": "WAITING"}
    shown = procs.ok(procs.run(tmp_path, cfg, "runs", "list", "--json", now=clock.at(66)))
    down_id = next(r["id"] for r in json.loads(shown) if r["schedule"] == "down")
    text = procs.ok(procs.run(tmp_path, cfg, "runs", "show", str(down_id), now=clock.at(66)))
    assert "waits for up 2026-12-02T10:00Z" in " ".join(text.split())
    for offset in (70, 90, 110, 130):  # each round: two ticks and two workers at once, past the 1 s backoff
        race(tmp_path, cfg, "tick", now=clock.at(offset))
        race(tmp_path, cfg, "work", "--until-idle", now=clock.at(offset + 1))
        if statuses(store_url) == {"p1": "SUCCESS", "p2": "SUCCESS"}:
            break
    assert statuses(store_url) == {"p1": "SUCCESS", "p2": "SUCCESS"}
    assert audits(store_url, "upstream_released") == 1
    lines = (tmp_path / "steps.log").read_text().splitlines()
    with connected(store_url) as conn:
        up_id = conn.execute(select(runs.c.id).where(runs.c.project == "p1")).scalar_one()
    upstream_done = max(n for n, line in enumerate(lines) if line.startswith(f"end {up_id} FOUR"))
    assert min(n for n, line in enumerate(lines) if line.startswith(f"start {down_id} ")) > upstream_done


# "manual" and "skip" differ from "run" only in the pure decision (each tested in-process on both databases,
# tests/integration/test_dependencies.py): with --long, here too.
@pytest.mark.parametrize(("on_upstream", "status"), [("run", "SUCCESS"),
                                                     pytest.param("manual", "MANUAL_REQUIRED", marks=pytest.mark.long),
                                                     pytest.param("skip", "SKIPPED", marks=pytest.mark.long)])
def test_an_upstream_past_the_window_makes_the_dependent_follow_on_upstream(store_url: str, tmp_path: Path,
                                                                           on_upstream: str, status: str) -> None:
    cfg = config(tmp_path, store_url, after_window="30m", on_upstream=on_upstream)
    clock = procs.Shared(T0)
    procs.ok(procs.run(tmp_path, cfg, "schedules", "apply", now=clock.at()))
    race(tmp_path, cfg, "tick", now=clock.at(65))
    procs.ok(procs.run(tmp_path, cfg, "schedules", "disable", "up", "--reason", "upstream broken", now=clock.at(66)))
    race(tmp_path, cfg, "reconcile", now=clock.at(600))  # inside the window: it waits
    assert statuses(store_url) == {"p1": "QUEUED", "p2": "WAITING"}
    race(tmp_path, cfg, "reconcile", now=clock.at(60 + 1801))
    race(tmp_path, cfg, "work", "--until-idle", now=clock.at(60 + 1802))
    race(tmp_path, cfg, "work", "--until-idle", now=clock.at(60 + 1810))  # its step failed once, as set
    assert statuses(store_url) == {"p1": "QUEUED", "p2": status}  # the disabled upstream never ran
    assert audits(store_url, "upstream_window_passed") == 1
    alerts = procs.ok(procs.run(tmp_path, cfg, "notifications", "list", "--json", now=clock.at(1900)))
    assert [a["event"] for a in json.loads(alerts)].count("upstream_late") == 1


@pytest.mark.parametrize(("after", "words"), [(["nowhere"], "after names 'nowhere'"),
                                              (["down"], "after makes a cycle: down -> down"),
                                              (["up"], "after makes a cycle")])
def test_an_unknown_upstream_or_a_cycle_is_refused_and_nothing_is_written(tmp_path: Path, after: list[str],
                                                                        words: str) -> None:
    url = f"sqlite:///{tmp_path / 'rf.db'}"
    up = dict(name="up", workflow="four_steps", project="p1", cron="0 10 * * *", timezone="UTC",
              after=["down"] if after == ["up"] else [])
    down = dict(name="down", workflow="four_steps", project="p2", cron="0 10 * * *", timezone="UTC", after=after)
    cfg = write_config(tmp_path / "reportflow.toml", db_url=url, schedules=[up, down])
    for command in (("schedules", "apply", "--dry-run"), ("schedules", "apply")):
        refused = procs.run(tmp_path, cfg, *command, now="2026-12-02T09:59:00Z")
        assert refused.returncode == 2, refused.stderr
        assert words in refused.stderr + refused.stdout
    if (tmp_path / "rf.db").exists():
        with connected(url) as conn:
            assert conn.execute(select(func.count()).select_from(schedules)).scalar_one() == 0
