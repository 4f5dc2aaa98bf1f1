"""The facts the stuck-run decision (``engine.core.stuck``) reads: waiting runs, heartbeats, the latest claims;
and ``find_stuck``, the decision applied to them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import func, or_, select
from sqlalchemy.engine import Connection

from engine.core import concurrency_caps, stuck
from engine.core.models import BUSY_STATUSES, RunStatus, RunTrigger
from engine.store.run_rows import family_schedule_enabled
from engine.store.tables import instances, runs, schedules

# What a PENDING run waits behind: the statuses that hold its schedule's slot (a WAITING parent too, SPEC §17).
IN_FLIGHT = tuple(s.value for s in BUSY_STATUSES)


def list_waiting(conn: Connection, *, waited_since: datetime, now: datetime, limit: int = 500) -> list[stuck.Waiting]:
    """Runs waiting (PENDING, QUEUED, claimable RETRY_PENDING) since before ``waited_since``, oldest first."""
    blocker = runs.alias("blocker")
    first_blocker = (select(func.min(blocker.c.id)).where(
        blocker.c.schedule_id == runs.c.schedule_id, blocker.c.trigger_type == RunTrigger.SCHEDULED.value,
        blocker.c.status.in_(IN_FLIGHT)).scalar_subquery())
    query = (select(runs.c.id, runs.c.idempotency_key, runs.c.status, runs.c.project, runs.c.workflow,
                    runs.c.created_at,
                    runs.c.not_before, runs.c.claimed_at, schedules.c.name,
                    family_schedule_enabled().label("enabled"),
                    first_blocker.label("blocker"))
             .select_from(runs.outerjoin(schedules, schedules.c.id == runs.c.schedule_id))
             .where(runs.c.status.in_(stuck.WAITING), runs.c.created_at <= waited_since,
                    or_(runs.c.not_before.is_(None), runs.c.not_before <= waited_since),
                    or_(runs.c.claimed_at.is_(None), runs.c.claimed_at <= waited_since))
             .order_by(runs.c.scheduled_for, runs.c.id).limit(limit))
    return [stuck.Waiting(run_id=r.id, key=r.idempotency_key, status=r.status, project=r.project, workflow=r.workflow,
                          schedule=r.name,
                          schedule_enabled=r.enabled is None or bool(r.enabled), created_at=r.created_at,
                          not_before=r.not_before, claimed_at=r.claimed_at,
                          blocker=r.blocker if r.status == RunStatus.PENDING.value else None)
            for r in conn.execute(query)]


def worker_beats(conn: Connection) -> list[tuple[datetime, Sequence[str] | None]]:
    """Every worker's last heartbeat and the projects it serves (None: all)."""
    rows = conn.execute(select(instances.c.last_seen_at, instances.c.projects).where(instances.c.role == "worker"))
    return [(r.last_seen_at, r.projects) for r in rows]


def last_claims(conn: Connection, projects: Sequence[str]) -> dict[str, datetime]:
    """The latest claim of a run of each of ``projects``."""
    if not projects:
        return {}
    rows = conn.execute(select(runs.c.project, func.max(runs.c.claimed_at))
                        .where(runs.c.project.in_(sorted(set(projects)))).group_by(runs.c.project))
    return {project: at for project, at in rows if at is not None}


def running_by_workflow(conn: Connection) -> dict[str, int]:
    """The RUNNING runs of each workflow (what the concurrency caps count)."""
    rows = conn.execute(select(runs.c.workflow, func.count()).where(runs.c.status == RunStatus.RUNNING.value)
                        .group_by(runs.c.workflow))
    return {workflow: int(count) for workflow, count in rows}


def find_stuck(conn: Connection, now: datetime, stuck_after: timedelta,
               caps: concurrency_caps.Caps = concurrency_caps.Caps()) -> list[stuck.StuckRun]:
    """Runs waiting longer than ``stuck_after`` with no moving queue, each with its reason when known.

    What ``reconcile`` alerts as ``run_stuck``, ``doctor`` lists and the ops report counts: one function for all.
    ``caps`` (``[limits]``) lets a run that waits for a full cap say so.
    """
    waiting = list_waiting(conn, waited_since=now - stuck_after, now=now)
    if not waiting:
        return []
    served = stuck.live_projects(worker_beats(conn), now)
    claimed = last_claims(conn, [w.project for w in waiting])
    running_of = running_by_workflow(conn) if caps else {}
    running = sum(running_of.values())
    found = (stuck.decide_stuck(w, now=now, stuck_after=stuck_after, served=served,
                                last_claim_in_project=claimed.get(w.project),
                                cap=caps.full(w.workflow, running=running, running_of=running_of))
             for w in waiting)
    return [s for s in found if s is not None]
