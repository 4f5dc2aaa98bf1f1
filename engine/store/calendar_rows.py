"""The facts the calendar shows about a period's run beyond its status: why its later steps were
skipped (a quiet period: no commits) and whether it saved a report, for many runs in two statements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.engine import Connection

from engine.core.models import StepStatus
from engine.store.tables import artifacts, steps

REPORT_KIND = "markdown"  # the artifact a report workflow's save step records


@dataclass(frozen=True)
class RunFacts:
    """``skipped_for``: the reason the run's later steps were skipped (``no_activity``), or None."""

    skipped_for: str | None = None
    has_report: bool = False


def run_facts(conn: Connection, run_ids: Sequence[int]) -> dict[int, RunFacts]:
    """The facts of each of ``run_ids`` (a run with neither fact is left out)."""
    if not run_ids:
        return {}
    ids = sorted(set(run_ids))
    skipped: dict[int, str] = {}
    query = (select(steps.c.run_id, steps.c.error_message)
             .where(steps.c.run_id.in_(ids), steps.c.status == StepStatus.SKIPPED.value)
             .order_by(steps.c.run_id, steps.c.position))
    for run_id, reason in conn.execute(query):
        if reason:
            skipped.setdefault(int(run_id), str(reason))  # the first skipped step says why the rest were
    reported = {int(r) for r in conn.execute(select(artifacts.c.run_id).distinct().where(
        artifacts.c.run_id.in_(ids), artifacts.c.kind == REPORT_KIND)).scalars()}
    return {run_id: RunFacts(skipped.get(run_id), run_id in reported) for run_id in skipped.keys() | reported}
