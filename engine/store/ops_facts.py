"""The engine's own record of a period, for the ops report (SPEC §16.3): read, not decided.

``read(conn, start, end, now)`` returns plain JSON-ready facts about the runs
whose slot (``scheduled_for``) lies in ``[start, end)``: per schedule, the runs
by status, success rate and freshness over the period (``periods.measure``, the
definition every other view uses); failed and partial runs grouped by
error code (count, first and last business key); unrun slots (MISSED, SKIPPED,
CANCELLED) with their reasons, and ranges the scheduler found too old to record;
stuck runs (SPEC §15.1, ``waiting.find_stuck``) and stalled runs (RUNNING past
their ``max_runtime``); runs that waited on an upstream schedule, and how long (SPEC §18); schedule
changes made in the period (who, runs/day before → after, the 10× risk); backfills; each schedule's
holidays and the maintenance windows and pauses that overlap the period. ``summarise`` is the pure part, tested
without a database. The ops workflow persists these facts in its first step,
so a retry reproduces the report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import select
from sqlalchemy.engine import Connection

from engine.core import calendars, concurrency_caps
from engine.core.clock import format_instant
from engine.core.cron import timetable
from engine.core.models import UNRUN_STATUSES, PeriodKind
from engine.core.schedule_spec import Schedule
from engine.store import periods, schedule_rows, waiting
from engine.store.tables import audit_events, runs, schedules

_COLUMNS = (runs.c.id, runs.c.schedule_id, runs.c.workflow, runs.c.project, runs.c.business_key,
            runs.c.status, runs.c.trigger_type, runs.c.error_code, runs.c.scheduled_for,
            runs.c.claimed_at, runs.c.completed_at, runs.c.max_runtime_s, runs.c.reason, runs.c.upstream_until)
UNRUN = frozenset(s.value for s in UNRUN_STATUSES)
#: A change raising runs/day more than this factor is high risk (as ``schedules set`` says).
RISK_FACTOR = 10


def read(conn: Connection, start: datetime, end: datetime, now: datetime, stuck_after: timedelta,
         kinds: Mapping[str, PeriodKind] | None = None,
         maintenance: Sequence[calendars.MaintenanceWindow] = (),
         caps: concurrency_caps.Caps = concurrency_caps.Caps()) -> dict[str, Any]:
    """The facts of ``[start, end)`` as of ``now``; a run is stuck after waiting ``stuck_after`` unclaimed.

    ``kinds``: the installed workflows' periods (periods are judged by business key, ``periods.period_facts``).
    ``maintenance``: the configured windows (a schedule's pause is read from its row).
    ``caps``: ``[limits]``, so a run that waits for a full cap says so, as ``run_stuck`` does.
    """
    rows = conn.execute(select(*_COLUMNS).where(runs.c.scheduled_for >= start,
                                                runs.c.scheduled_for < end)
                        .order_by(runs.c.scheduled_for, runs.c.id)).mappings().all()
    names = dict(conn.execute(select(schedules.c.id, schedules.c.name)).all())
    audits = conn.execute(select(audit_events.c.at, audit_events.c.actor, audit_events.c.schedule_id,
                                 audit_events.c.action,
                                 audit_events.c.before, audit_events.c.after)
                          .where(audit_events.c.at >= start, audit_events.c.at < end,
                                 audit_events.c.action.in_(("update", "set", "slots_too_old")))
                          .order_by(audit_events.c.at, audit_events.c.id)).mappings().all()
    changes = [change(names.get(a["schedule_id"], "?"), a["actor"], a["at"], a["before"] or {},
                      a["after"] or {}, now) for a in audits if a["action"] != "slots_too_old"]
    facts = summarise([dict(r) for r in rows], names, start=start, end=end, now=now)
    facts["changes"] = [c for c in changes if c is not None]
    facts["too_old"] = [{"schedule": names.get(a["schedule_id"], "?"), "from": a["after"]["from"],
                         "to": a["after"]["to"], "estimated_slots": a["after"]["estimated_slots"]}
                        for a in audits if a["action"] == "slots_too_old" and a["after"]]
    in_period = {r["id"] for r in rows}
    facts["stuck"] = [{"run": s.run_id, "schedule": s.schedule or "(manual)", "status": s.status,
                       "since": format_instant(s.waiting_since), "reason": s.reason}
                      for s in waiting.find_stuck(conn, now, stuck_after, caps) if s.run_id in in_period]
    live = schedule_rows.list_schedules(conn)
    facts["holidays"] = holidays_in(live, start, end)
    facts["maintenance"] = windows_in(live, maintenance, start, end)
    facts["upstream_waits"] = upstream_waits(conn, [dict(r) for r in rows], names, now)
    ids = {name: schedule_id for schedule_id, name in names.items()}
    as_of = min(end, now)
    for entry in facts["schedules"]:  # SPEC §15.2 over the report's period, by its one definition
        schedule_id = ids.get(entry["schedule"])
        schedule = None if schedule_id is None else schedule_rows.get_schedule_by_id(conn, schedule_id)
        measured = None if schedule is None or as_of <= start else periods.measure(
            conn, schedule, as_of, as_of - start, (kinds or {}).get(schedule.spec.workflow))
        entry.update(success_rate=None if measured is None else measured.success_rate,
                     freshness=None if measured is None else measured.freshness,
                     periods_due=None if measured is None else measured.periods_due)
    return facts


def holidays_in(schedules: Sequence[Schedule], start: datetime, end: datetime) -> list[dict[str, str]]:
    """Each schedule's holidays whose local date meets ``[start, end)``, by schedule then date."""
    out = []
    for schedule in schedules:
        spec = schedule.spec
        if spec.calendar is None and not spec.holidays:
            continue
        zone = ZoneInfo(spec.timezone)
        last = (end - timedelta(microseconds=1)).astimezone(zone).date()
        out += [{"schedule": spec.name, "date": day.isoformat(), "name": name}
                for day, name in calendars.holidays_between(spec, start.astimezone(zone).date(), last)]
    return out


def windows_in(schedules: Sequence[Schedule], configured: Sequence[calendars.MaintenanceWindow],
               start: datetime, end: datetime) -> list[dict[str, Any]]:
    """The configured windows and the schedules' pauses that overlap ``[start, end)``, by start."""
    pauses = [w for w in (calendars.pause_window(s) for s in schedules) if w is not None]
    found = [w for w in (*configured, *pauses) if w.start < end and w.end > start]
    return [{"start": format_instant(w.start), "end": format_instant(w.end), "reason": w.reason,
             "schedules": list(w.schedules) or "all", "paused": w.paused}
            for w in sorted(found, key=lambda w: (w.start, w.schedules))]


def upstream_waits(conn: Connection, rows: Sequence[Mapping[str, Any]], names: Mapping[int, str],
                   now: datetime) -> list[dict[str, Any]]:
    """The period's runs that waited on an upstream schedule (SPEC §18): how long, what for, how it ended
    (``released``; ``run``, ``manual`` or ``skip`` past the window; ``waiting`` still)."""
    by_id = {r["id"]: r for r in rows}
    ended = conn.execute(select(audit_events.c.run_id, audit_events.c.action, audit_events.c.reason,
                                audit_events.c.after)
                         .where(audit_events.c.run_id.in_(sorted(by_id)),
                                audit_events.c.action.in_(("upstream_released", "upstream_window_passed")))
                         .order_by(audit_events.c.id)).all() if by_id else []
    waits = {}
    for run_id, action, reason, after in ended:
        how = "released" if action == "upstream_released" else str(reason or "").removeprefix("on_upstream = ")
        waits[run_id] = (how, int((after or {}).get("waited_s", 0)))
    for row in rows:
        if row["status"] == "WAITING" and row.get("upstream_until") is not None:
            waits[row["id"]] = ("waiting", max(0, int((now - row["scheduled_for"]).total_seconds())))
    return [{"run": run_id, "schedule": names.get(by_id[run_id]["schedule_id"], "(manual)"),
             "business_key": by_id[run_id]["business_key"], "waited_s": waited, "outcome": how}
            for run_id, (how, waited) in sorted(waits.items())]


def _per_day(definition: Mapping[str, Any], now: datetime) -> float:
    week = timetable.estimate_fire_count(str(definition["cron"]), str(definition["timezone"]), now,
                                    now + timedelta(days=7))
    return round(week / 7, 2)


def change(name: str, actor: str, at: datetime, before: Mapping[str, Any],
           after: Mapping[str, Any], now: datetime) -> dict[str, Any] | None:
    """One schedule change with runs/day before → after and its risk; None if timing is unchanged."""
    keys = ("cron", "timezone")
    if not all(k in before and k in after for k in keys) or \
            all(before[k] == after[k] for k in keys):
        return None
    old, new = _per_day(before, now), _per_day(after, now)
    return {"schedule": name, "actor": actor, "at": format_instant(at),
            "cron": [before["cron"], after["cron"]], "runs_per_day": [old, new],
            "risk": "high" if new > RISK_FACTOR * max(old, 1 / 7) else "normal"}


def summarise(rows: Sequence[Mapping[str, Any]], names: Mapping[int, str], *, start: datetime,
              end: datetime, now: datetime) -> dict[str, Any]:
    """The facts from run rows (pure): see the module contract."""
    per: dict[str, dict[str, Any]] = {}
    failures: dict[tuple[str, str], dict[str, Any]] = {}
    stalled: list[dict[str, Any]] = []
    unrun: dict[tuple[str, str, str], dict[str, Any]] = {}
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
        if row["status"] in UNRUN:
            reason = row.get("reason") or "(none)"
            slot = unrun.setdefault((name, row["status"], reason), {
                "schedule": name, "status": row["status"], "reason": reason, "count": 0, "keys": []})
            slot["count"] += 1
            slot["keys"].append(row["business_key"])
        claimed = row["claimed_at"]
        if row["status"] == "RUNNING" and claimed is not None and \
                now - claimed > timedelta(seconds=row["max_runtime_s"]):
            stalled.append({"run": row["id"], "schedule": name, "since": format_instant(claimed)})
        if row["trigger_type"] == "BACKFILL":
            backfills.append(row["id"])
    for entry in per.values():
        entry["by_status"] = dict(sorted(entry["by_status"].items()))
    return {"start": format_instant(start), "end": format_instant(end), "as_of": format_instant(now),
            "schedules": [per[k] for k in sorted(per)],
            "failures": sorted(failures.values(), key=lambda g: (g["schedule"], g["error_code"])),
            "unrun": [unrun[k] for k in sorted(unrun)], "stalled": stalled, "backfills": backfills,
            "changes": []}
