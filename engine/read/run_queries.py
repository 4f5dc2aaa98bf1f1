"""Read side of runs: lists and detail for the CLI, the keyset-paged list and charts for the web page."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.core import errors, inputs, limits, policies
from engine.core.audit import AuditEvent
from engine.core.clock import format_instant
from engine.core.models import Run, RunStatus
from engine.read import calendar_view
from engine.runtime import Runtime
from engine.store import calendar_rows, delivery_rows, families, health_rows, history_rows, run_rows, schedule_rows
from engine.store.history_rows import RunFilter


def list_runs(rt: Runtime, *, statuses: Sequence[str] = (), schedule: str | None = None,
              limit: int | None = limits.RUNS_LIST, parent: int | None = None, by_created: bool = False) -> list[Run]:
    """``runs list``: newest slot first (``by_created``: newest made first), filtered by status, schedule, or
    parent run (its children)."""
    with rt.store.read() as conn:
        schedule_id = schedule_rows.get_schedule(conn, schedule).id if schedule else None
        if parent is not None:
            run_rows.get_run(conn, parent, detail=False)  # NotFound for a run that does not exist
        summaries = run_rows.list_runs(conn, statuses=statuses, schedule_id=schedule_id, limit=limit or None,
                                       parent_id=parent, by_created=by_created)
        # Steps are needed for the "failed step" column; fetch detail only for the failed ones.
        found = [run_rows.get_run(conn, r.id) if r.error_code else r for r in summaries]
        return with_quiet(conn, with_waits(conn, found))


def with_quiet(conn: Any, found: list[Run]) -> list[Run]:
    """``found`` with each successful run that skipped its later steps for a quiet period marked, in the
    calendar's words (``no commits``): a quiet period is not a missing report."""
    done = [r.id for r in found if r.status is RunStatus.SUCCESS]
    facts = calendar_rows.run_facts(conn, done) if done else {}
    words = {r: calendar_view.QUIET_REASONS.get(f.skipped_for or "") for r, f in facts.items()}
    return [dataclasses.replace(r, quiet=words[r.id]) if words.get(r.id) else r for r in found]


def with_waits(conn: Any, found: list[Run]) -> list[Run]:
    """``found`` with what each run waits for (a provider that failed it, SPEC §15.5) filled in."""
    waits = health_rows.waits_of(conn, [r.id for r in found]) if found else {}
    return [dataclasses.replace(r, waits_for=waits[r.id]) if r.id in waits else r for r in found]


def get_run(rt: Runtime, run_id: int) -> Run:
    """One run in detail: steps, attempts, artifacts, and its child runs (SPEC §17)."""
    with rt.store.read() as conn:
        run = run_rows.get_run(conn, run_id)
        run = dataclasses.replace(run, children=tuple(families.children_of(conn, run_id)),
                                  deliveries=tuple(delivery_rows.for_keys(conn, [run_key(run)])))
        return with_waits(conn, [run])[0]


def run_key(run: Run) -> str:
    """The report key a run's deliveries are kept under: its base key (its revisions share it)."""
    return policies.base_key(run.workflow, run.project, run.business_key)


@dataclass(frozen=True)
class RunPage:
    runs: list[Run]
    next_cursor: str | None


def encode_cursor(run: Run) -> str:
    """The page cursor that resumes a listing after ``run``."""
    return f"{format_instant(run.scheduled_for)}_{run.id}"


def decode_cursor(text: str) -> tuple[datetime, int]:
    """``2026-09-29T10:30:00Z_42`` -> (instant, id); InvalidInput for anything else."""
    at, _, run_id = text.partition("_")
    try:
        return inputs.instant(at), inputs.run_id(run_id)
    except (ValueError, errors.ReportflowError):
        raise errors.InvalidInput(f"'{text[:60]}' is not a page cursor") from None


def page_runs(rt: Runtime, filt: RunFilter, *, after: str | None = None, limit: int = limits.WEB_PAGE) -> RunPage:
    """One page of runs, newest slot first; ``next_cursor`` is None on the last page."""
    position = decode_cursor(after) if after else None
    with rt.store.read() as conn:
        found = history_rows.page_runs(conn, filt, after=position, limit=limit + 1)
        children = history_rows.children_of(conn, [r.id for r in found[:limit]])
    more = len(found) > limit
    page = [dataclasses.replace(r, children=tuple(children.get(r.id, ()))) for r in found[:limit]]
    return RunPage(page, encode_cursor(page[-1]) if more and page else None)


def schedule_id(rt: Runtime, name: str) -> int:
    """The id of the schedule named ``name``; raises NotFound."""
    with rt.store.read() as conn:
        return schedule_rows.get_schedule(conn, name).id


def schedule_names(rt: Runtime) -> list[str]:
    """Names of the live schedules (for filters), without touching the runs table."""
    with rt.store.read() as conn:
        return [s.name for s in schedule_rows.list_schedules(conn)]


def run_audit(rt: Runtime, run_id: int) -> list[AuditEvent]:
    """The audit events of one run, oldest first."""
    with rt.store.read() as conn:
        return history_rows.run_audit(conn, run_id)


def chart_runs(rt: Runtime, schedule_name: str, *, limit: int = limits.CHART_RUNS) -> list[Run]:
    """The latest ``limit`` runs of a schedule that started, oldest first (start delay and duration over time)."""
    with rt.store.read() as conn:
        schedule = schedule_rows.get_schedule(conn, schedule_name)
        found = run_rows.list_runs(conn, schedule_id=schedule.id, limit=limit)
    return [r for r in reversed(found) if r.started_at is not None]


def held_runs(rt: Runtime, schedule_name: str) -> list[Run]:
    """The runs a disabled schedule holds (none while it is enabled), in the order enabling releases them."""
    with rt.store.read() as conn:
        schedule = schedule_rows.get_schedule(conn, schedule_name)
        return [] if schedule.enabled else run_rows.unstarted_runs(conn, schedule.id)
