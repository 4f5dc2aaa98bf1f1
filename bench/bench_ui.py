"""The web page with 100,000 runs in SQLite: first page of the runs list and the calendars.

Setup (not timed): a SQLite database (WAL, synchronous=FULL, the engine's own
migrations) with one ``daily_report`` schedule and nine hourly ``echo``
schedules, and 100,000 run rows bulk-inserted directly (10,000 daily periods,
10,000 hourly slots per echo schedule; statuses mixed: mostly SUCCESS, some
FAILED, MISSED, SKIPPED, CANCELLED).

Timed: ``--reps`` requests per page through the ASGI app (Starlette's
TestClient: routing, session middleware, the read model, SQL and Jinja2
rendering; no network). Reported: p50 and p95 per page.
Target (SPEC §11): runs page and calendar, first page p50 < 100 ms.

Run: .venv/bin/python bench/bench_ui.py [--reps 50] [--runs 100000]
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.config import config_file
from engine.core.clock import ManualClock
from engine.plugins.workflow_registry import load_registry
from engine.runtime import Runtime
from engine.scheduling import definitions
from engine.store.handle import Store
from engine.store.tables import runs as runs_table
from engine.web.app import create_app

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

NOW = datetime(2026, 9, 29, 12, 0, tzinfo=UTC)
REPO_ROOT = Path(__file__).resolve().parent.parent
STATUSES = ["SUCCESS"] * 90 + ["FAILED"] * 4 + ["MISSED"] * 3 + ["SKIPPED", "CANCELLED", "PARTIAL_SUCCESS"]


def build(tmp: Path, total: int) -> Runtime:
    raw: dict[str, Any] = {
        "projects": [{"key": "p0", "repo": str(REPO_ROOT)}],
        "reports": {"dir": str(tmp / "reports")},
        "schedules": [{"name": "daily", "workflow": "daily_report", "project": "p0", "cron": "0 3 * * *",
                       "timezone": "Asia/Seoul"}]
        + [{"name": f"echo-{i}", "workflow": "echo", "project": f"e{i}", "cron": f"{i} * * * *",
            "timezone": "UTC"} for i in range(1, 10)],
    }
    cfg = config_file.build_config(raw, path=tmp / "reportflow.toml", registry=load_registry(),
                                  db_override=f"sqlite:///{tmp / 'ui.db'}")
    rt = Runtime(store=Store.open(cfg.store_url, auto_migrate=True), registry=load_registry(), config=cfg,
                 clock=ManualClock(NOW - timedelta(days=3000)), actor="bench")
    definitions.apply(rt)
    rt.clock.set(NOW)  # type: ignore[attr-defined]
    with rt.store.read() as conn:
        ids = dict(conn.exec_driver_sql("SELECT name, id FROM schedules").all())
    rng = random.Random(7)
    per = total // 10
    rows: list[dict[str, Any]] = []

    def add(schedule: str, workflow: str, project: str, slot: datetime, key: str) -> None:
        status = rng.choice(STATUSES)
        ran = status in ("SUCCESS", "FAILED", "PARTIAL_SUCCESS")
        started = slot + timedelta(milliseconds=rng.randint(20, 900)) if ran else None
        rows.append(dict(
            schedule_id=ids[schedule], workflow=workflow, project=project, trigger_type="SCHEDULED",
            scheduled_for=slot, business_key=key, base_key=f"{workflow}:{project}:{key}",
            idempotency_key=f"{workflow}:{project}:{key}", revision=1, status=status,
            reason="misfire" if status == "MISSED" else None, priority=20, pinned={"business_key": key},
            attempt_count=1 if ran else 0, max_attempts=3, max_runtime_s=1800, created_at=slot,
            claimed_at=started, started_at=started,
            completed_at=started + timedelta(seconds=rng.uniform(0.5, 30)) if started else None,
            error_code="MODEL_UNAVAILABLE" if status == "FAILED" else None))

    for n in range(per):
        day = (NOW - timedelta(days=n + 1)).date()
        add("daily", "daily_report", "p0", datetime.combine(day + timedelta(days=1), datetime.min.time(), UTC)
            - timedelta(hours=6), day.isoformat())
    for i in range(1, 10):
        for n in range(per):
            slot = (NOW - timedelta(hours=n + 1)).replace(minute=i, second=0, microsecond=0)
            add(f"echo-{i}", "echo", f"e{i}", slot, slot.strftime("%Y-%m-%dT%H:%MZ"))
    with rt.store.write() as conn:
        for start in range(0, len(rows), 5000):
            conn.execute(runs_table.insert(), rows[start:start + 5000])
        conn.exec_driver_sql("ANALYZE")
    return rt


def measure(client: TestClient, url: str, reps: int) -> dict[str, float]:
    assert client.get(url).status_code == 200, url  # warm-up (templates compiled, statements cached)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        answer = client.get(url)
        times.append(time.perf_counter() - start)
        assert answer.status_code == 200
    times.sort()
    return {"p50": statistics.median(times), "p95": times[min(len(times) - 1, int(len(times) * 0.95))]}


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--runs", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        rt = build(Path(tmp), args.runs)
        print(f"setup: {args.runs:,} runs in {time.perf_counter() - started:.1f} s")
        client = TestClient(create_app(rt, token=None))
        pages = [
            ("runs page, first page", "/runs"),
            ("runs page, status=FAILED", "/runs?status=FAILED"),
            ("runs page, schedule=daily", "/runs?schedule=daily"),
            ("runs page, business dates", "/runs?from=2026-01-01&to=2026-01-31"),
            ("runs page, page 2 (keyset)", None),
            ("calendar, daily schedule page", "/schedules/daily"),
            ("calendar, hourly echo schedule page", "/schedules/echo-3"),
            ("calendar, project p0", "/projects/p0/calendar"),
            ("/api/runs (200 rows)", "/api/runs"),
        ]
        print("| page | p50 | p95 |\n| --- | --- | --- |")
        for label, url in pages:
            if url is None:
                html = client.get("/runs").text
                url = html.split('rel="next"')[0].rsplit('href="', 1)[1].split('"')[0].replace("&amp;", "&")
            result = measure(client, url, args.reps)
            print(f"| {label} | {result['p50'] * 1000:.1f} ms | {result['p95'] * 1000:.1f} ms |")
        rt.store.dispose()


if __name__ == "__main__":
    main()
