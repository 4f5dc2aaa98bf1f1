"""The SQL of bulk operator actions (SPEC §15.5): the candidates ``core.bulk.choose`` decides among."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.engine import Connection

from engine.core.models import Run, RunStatus
from engine.store import rows
from engine.store.run_rows import family_schedule_enabled
from engine.store.tables import runs, schedules


def list_candidates(conn: Connection, schedule_id: int, statuses: Sequence[RunStatus]) -> list[Run]:
    """Every revision of each period of the schedule that has a run in one of ``statuses``, oldest slot first.

    Every revision, so that the decision can tell the latest one (an older revision in the
    status is history, not a candidate). Child runs have no schedule of their own and are
    never listed: a parent acts for them.
    """
    periods = (select(runs.c.base_key)
               .where(runs.c.schedule_id == schedule_id, runs.c.status.in_([s.value for s in statuses])))
    query = (select(runs, schedules.c.name.label("schedule_name"),
                    family_schedule_enabled().label("schedule_enabled"))
             .select_from(runs.outerjoin(schedules, runs.c.schedule_id == schedules.c.id))
             .where(runs.c.schedule_id == schedule_id, runs.c.base_key.in_(periods))
             .order_by(runs.c.scheduled_for, runs.c.revision, runs.c.id))
    return [rows.run_from_row(r) for r in conn.execute(query).mappings()]
