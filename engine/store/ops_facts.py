"""The engine's own record of a period, for the ops report (SPEC §16.3): read, not decided.

``read(conn, start, end, now)`` returns plain JSON-ready facts about the runs
whose slot (``scheduled_for``) lies in ``[start, end)``: per schedule, the runs
by status, success rate and freshness; failed and partial runs grouped by
error code (count, first and last business key); stalled runs (RUNNING past
their ``max_runtime``); backfills. ``summarise`` is the pure part, tested
without a database. The ops workflow persists these facts in its first step,
so a retry reproduces the report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from engine.core.clock import format_instant
from engine.store.tables import runs, schedules

_COLUMNS = (runs.c.id, runs.c.schedule_id, runs.c.workflow, runs.c.project, runs.c.business_key,
            runs.c.status, runs.c.trigger_type, runs.c.error_code, runs.c.scheduled_for,
            runs.c.claimed_at, runs.c.completed_at, runs.c.max_runtime_s)
FINISHED = ("SUCCESS", "PARTIAL_SUCCESS", "FAILED")


def read(conn: Connection, start: datetime, end: datetime, now: datetime) -> dict[str, Any]:
    """The facts of ``[start, end)`` as of ``now`` (one query for the runs, one for names)."""
    rows = conn.execute(select(*_COLUMNS).where(runs.c.scheduled_for >= start,
                                                runs.c.scheduled_for < end)
                        .order_by(runs.c.scheduled_for, runs.c.id)).mappings().all()
    names = dict(conn.execute(select(schedules.c.id, schedules.c.name)).all())
    return summarise([dict(r) for r in rows], names, start=start, end=end, now=now)


def summarise(rows: Sequence[Mapping[str, Any]], names: Mapping[int, str], *, start: datetime,
              end: datetime, now: datetime) -> dict[str, Any]:
    """The facts from run rows (pure): see the module contract."""
    per: dict[str, dict[str, Any]] = {}
    failures: dict[tuple[str, str], dict[str, Any]] = {}
    stalled: list[dict[str, Any]] = []
    backfills: list[int] = []
    for row in rows:
        name = names.get(row["schedule_id"], "(manual)") if row["schedule_id"] else "(manual)"
        entry = per.setdefault(name, {"schedule": name, "workflow": row["workflow"],
                                      "project": row["project"], "runs": 0, "by_status": {},
                                      "last_success": None})
        entry["runs"] += 1
        entry["by_status"][row["status"]] = entry["by_status"].get(row["status"], 0) + 1
        if row["status"] == "SUCCESS" and row["completed_at"] is not None:
            done = format_instant(row["completed_at"])
            entry["last_success"] = max(filter(None, [entry["last_success"], done]))
        if row["status"] in ("FAILED", "PARTIAL_SUCCESS"):
            code = row["error_code"] or "(none)"
            group = failures.setdefault((name, code), {"schedule": name, "error_code": code,
                                                       "count": 0, "first": row["business_key"],
                                                       "last": row["business_key"], "runs": []})
            group["count"] += 1
            group["first"] = min(group["first"], row["business_key"])
            group["last"] = max(group["last"], row["business_key"])
            group["runs"].append(row["id"])
        claimed = row["claimed_at"]
        if row["status"] == "RUNNING" and claimed is not None and \
                now - claimed > timedelta(seconds=row["max_runtime_s"]):
            stalled.append({"run": row["id"], "schedule": name, "since": format_instant(claimed)})
        if row["trigger_type"] == "BACKFILL":
            backfills.append(row["id"])
    for entry in per.values():
        counts = entry["by_status"]
        finished = sum(counts.get(s, 0) for s in FINISHED)
        entry["success_rate"] = round(counts.get("SUCCESS", 0) / finished, 4) if finished else None
        entry["by_status"] = dict(sorted(counts.items()))
    return {"start": format_instant(start), "end": format_instant(end), "as_of": format_instant(now),
            "schedules": [per[k] for k in sorted(per)],
            "failures": sorted(failures.values(), key=lambda g: (g["schedule"], g["error_code"])),
            "stalled": stalled, "backfills": backfills}
