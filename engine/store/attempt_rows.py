"""An attempt's close: with its outcome, given back to the budget, or closed while still pending.

A claim opens an attempt (``claims.acquire_run``); these close it. A recovery's pending
attempt (written by ``engine.store.recovery``) may be closed before any worker took it,
when an operator acted first.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import bindparam, update
from sqlalchemy.engine import Connection

from engine.core.models import AttemptOutcome
from engine.store.fastsql import execute as fast
from engine.store.tables import attempts, runs
from engine.store.types import UTCDateTime

P = bindparam
_FINISH_ATTEMPT = update(attempts).where(attempts.c.run_id == P("b_run"), attempts.c.number == P("b_number")).values(
    outcome=P("b_outcome"), finished_at=P("b_now", type_=UTCDateTime), error_code=P("b_code"),
    error_message=P("b_message"))


def finish_attempt(conn: Connection, run_id: int, number: int, outcome: AttemptOutcome, now: datetime,
                   error_code: str | None = None, error_message: str | None = None) -> None:
    """End an attempt with its outcome and error."""
    fast(conn, _FINISH_ATTEMPT, {"b_run": run_id, "b_number": number, "b_outcome": outcome.value, "b_now": now,
                                 "b_code": error_code, "b_message": error_message})


def add_attempt_budget(conn: Connection, run_id: int, extra: int) -> None:
    """Raise a run's ``max_attempts`` by ``extra`` (an attempt given back does not count)."""
    conn.execute(update(runs).where(runs.c.id == run_id).values(max_attempts=runs.c.max_attempts + extra))


def close_pending_attempt(conn: Connection, run_id: int, outcome: AttemptOutcome, now: datetime,
                          message: str) -> bool:
    """Close the run's pending attempt (if any) with ``outcome``: an operator acted before any worker took it.

    The closed attempt keeps its number, so the run's ``attempt_count`` moves
    past it and the next claim opens a new attempt. Returns whether one was closed.
    """
    closed = conn.execute(update(attempts).where(attempts.c.run_id == run_id,
                                                 attempts.c.outcome == AttemptOutcome.PENDING.value)
                          .values(outcome=outcome.value, finished_at=now, error_message=message)).rowcount
    if closed:
        conn.execute(update(runs).where(runs.c.id == run_id).values(attempt_count=runs.c.attempt_count + closed))
    return bool(closed)
