"""What ``reportflow doctor`` reads besides the heartbeats and the waits: recent failures by code,
the database server's clock, and the artifacts of successful runs. Read-only."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select, text
from sqlalchemy.engine import Connection

from engine.core.models import SUCCESSFUL_STATUSES, ArtifactRecord, RunStatus
from engine.store.tables import artifacts, runs


def failures_since(conn: Connection, since: datetime) -> list[tuple[str | None, int, int]]:
    """Runs FAILED since ``since``: (error code, how many, the latest run's id) per code, ordered by code."""
    query = (select(runs.c.error_code, func.count(), func.max(runs.c.id))
             .where(runs.c.status == RunStatus.FAILED.value, runs.c.completed_at >= since)
             .group_by(runs.c.error_code).order_by(runs.c.error_code))
    return [(code, int(count), int(latest)) for code, count, latest in conn.execute(query)]


def server_now(conn: Connection) -> datetime:
    """PostgreSQL's ``now()``: the database server's clock (the caller compares it with this host's)."""
    at: datetime = conn.execute(text("SELECT now()")).scalar_one()
    return at


def successful_artifacts(conn: Connection) -> list[tuple[ArtifactRecord, str]]:
    """Every artifact of a SUCCESS/PARTIAL_SUCCESS run with its run's workflow, in the order recorded."""
    query = (select(artifacts.c.id, artifacts.c.run_id, artifacts.c.kind, artifacts.c.step, artifacts.c.location,
                    artifacts.c.sha256, artifacts.c.external_id, artifacts.c.created_at, runs.c.workflow)
             .select_from(artifacts.join(runs, artifacts.c.run_id == runs.c.id))
             .where(runs.c.status.in_(sorted(s.value for s in SUCCESSFUL_STATUSES))).order_by(artifacts.c.id))
    return [(ArtifactRecord(run_id=row.run_id, kind=row.kind, step=row.step, location=row.location, sha256=row.sha256,
                            external_id=row.external_id, created_at=row.created_at), row.workflow)
            for row in conn.execute(query)]
