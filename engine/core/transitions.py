"""The one table of legal run-status transitions, and the function that applies it.

The operator's and the reconciler's status changes (``store.runs``) repeat the guard in
SQL, ``sources(target)`` in their WHERE clause, so the table here and the database agree
by construction; the worker's writes (``store.claims``) are guarded by the claim's
fencing token and the RUNNING status instead.
"""

from __future__ import annotations

from engine.core import errors
from engine.core.models import RunStatus as S

ALLOWED_TRANSITIONS: dict[S, frozenset[S]] = {
    # PENDING/QUEUED -> MISSED: a scheduled run not started by its schedule's ``start_by``.
    S.PENDING: frozenset({S.QUEUED, S.CANCELLED, S.MISSED}),
    # QUEUED -> WAITING: a dependent run promoted from PENDING waits for its upstream (SPEC §18).
    S.QUEUED: frozenset({S.RUNNING, S.CANCELLED, S.MISSED, S.WAITING}),
    # RUNNING -> QUEUED: a worker shutting down (SIGTERM) hands the run back at a step boundary.
    # RUNNING -> WAITING: a fan-out step started child runs; WAITING -> QUEUED when the last one finishes.
    S.RUNNING: frozenset({S.SUCCESS, S.PARTIAL_SUCCESS, S.RETRY_PENDING, S.FAILED, S.CANCELLED, S.QUEUED,
                          S.WAITING}),
    # WAITING -> MANUAL_REQUIRED / SKIPPED: a dependent run's upstream not SUCCESS within its window.
    S.WAITING: frozenset({S.QUEUED, S.CANCELLED, S.MANUAL_REQUIRED, S.SKIPPED}),
    S.RETRY_PENDING: frozenset({S.RUNNING, S.QUEUED, S.FAILED, S.CANCELLED}),
    S.SUCCESS: frozenset({S.QUEUED}),  # only by an operator's retry --from-step
    # -> WAITING: ``runs retry PARENT`` re-queues the children that did not succeed, then the fan-in.
    S.PARTIAL_SUCCESS: frozenset({S.QUEUED, S.WAITING}),
    S.FAILED: frozenset({S.QUEUED, S.WAITING}),
    S.MISSED: frozenset({S.QUEUED}),
    S.SKIPPED: frozenset({S.QUEUED}),
    S.CANCELLED: frozenset({S.QUEUED, S.WAITING}),
    S.MANUAL_REQUIRED: frozenset({S.QUEUED, S.CANCELLED}),
}


def is_allowed(current: S, target: S) -> bool:
    """Whether the transition table allows ``current`` -> ``target``."""
    return target in ALLOWED_TRANSITIONS[current]


def transition(current: S, target: S, *, entity: str = "run") -> S:
    """Return ``target`` if ``current -> target`` is legal, else raise InvalidTransition."""
    if not is_allowed(current, target):
        raise errors.InvalidTransition(entity, current.value, target.value)
    return target


def sources(target: S) -> frozenset[S]:
    """Every status from which ``target`` may be reached (the SQL guard)."""
    return frozenset(src for src, targets in ALLOWED_TRANSITIONS.items() if target in targets)
