"""Process heartbeats: which workers are alive, on which host, serving which projects (SPEC §13)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.engine import Connection

from engine.store.run_rows import dialect_insert
from engine.store.tables import instances


def beat(conn: Connection, *, instance_id: str, role: str, host: str, pid: int, projects: Sequence[str] | None,
         now: datetime) -> None:
    """Record that ``instance_id`` is alive now (insert on first beat).

    One upsert: processes that share an id (the ticks of one host beat ``scheduler@host``) may beat at
    the same instant, and an update-then-insert let two of them insert the same row.
    """
    served = None if projects is None else list(projects)
    stmt = dialect_insert(conn)(instances).values(id=instance_id, role=role, host=host, pid=pid, projects=served,
                                                  started_at=now, last_seen_at=now)
    conn.execute(stmt.on_conflict_do_update(index_elements=["id"], set_={
        "role": role, "host": host, "pid": pid, "projects": served, "last_seen_at": now}))


#: The roles of the processes that tick (create due runs): their beats tell whether anything schedules.
SCHEDULER_ROLES = ("serve", "cycle", "tick")


def list_instances(conn: Connection) -> list[dict[str, object]]:
    """Every process that said it was alive (workers and schedulers), most recent first."""
    return [dict(row) for row in conn.execute(select(instances).order_by(instances.c.last_seen_at.desc())).mappings()]
