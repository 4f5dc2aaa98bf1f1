"""Process heartbeats: which workers are alive, on which host, serving which projects (SPEC §13)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from engine.store.tables import instances


def beat(conn: Connection, *, instance_id: str, role: str, host: str, pid: int, projects: Sequence[str] | None,
         now: datetime) -> None:
    """Record that ``instance_id`` is alive now (insert on first beat)."""
    served = None if projects is None else list(projects)
    result = conn.execute(update(instances).where(instances.c.id == instance_id).values(
        role=role, host=host, pid=pid, projects=served, last_seen_at=now))
    if result.rowcount == 0:
        conn.execute(instances.insert().values(id=instance_id, role=role, host=host, pid=pid, projects=served,
                                               started_at=now, last_seen_at=now))


#: The roles of the processes that tick (create due runs): their beats tell whether anything schedules.
SCHEDULER_ROLES = ("serve", "cycle", "tick")


def list_instances(conn: Connection) -> list[dict[str, object]]:
    """Every process that said it was alive (workers and schedulers), most recent first."""
    return [dict(row) for row in conn.execute(select(instances).order_by(instances.c.last_seen_at.desc())).mappings()]
