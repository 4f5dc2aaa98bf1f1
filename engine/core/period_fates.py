"""Whether an earlier business period of a schedule will ever have a report of its own.

A report reaches back over earlier periods only over those that never will (a slot the
misfire policy, the calendar, a pause or an overlap policy left unrun, or no slot at all),
so that a backfill, a retry or a late run of a period always holds that period's work. Pure:
the fate is a function of the period's latest run, if any, and of whether the cron has a slot
for it; ``engine.execution.period_walk`` reads those facts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from engine.core.models import UNRUN_STATUSES, RunStatus


class Fate(StrEnum):
    OWN = "own"  # has a run that reports, reported, or may still report on it (queued, failed: a retry can)
    NEVER = "never"  # will never have a report of its own: left unrun, or the cron has no slot for it
    OPEN = "open"  # no run yet, though the cron has a slot for it: a backfill may still make one


@dataclass(frozen=True)
class PeriodFate:
    """One earlier period: its key and bounds, its fate and why (``MISSED (too_old)``, ``no slot``), and where
    its report's window ends (None without a slot): where the window of a report after it starts."""

    key: str
    start_at: datetime
    end_at: datetime
    fate: Fate
    why: str
    window_end: datetime | None = None


def fate_of(status: RunStatus | None, reason: str | None = None, *, began: bool, has_slot: bool,
            too_old: bool = False) -> tuple[Fate, str]:
    """The fate of a period whose latest run has ``status`` (None: no run) and ``began`` (an attempt was made).

    A run left unrun (MISSED, SKIPPED, CANCELLED before any attempt) never reports, nor a slot the tick
    found too old to record (``too_old``: no row, an audited range); one that began may have pinned its
    range, and a FAILED one waits for its retry, so both keep their period.
    """
    if status is None:
        if not has_slot:
            return Fate.NEVER, "no slot"
        return (Fate.NEVER, "too_old") if too_old else (Fate.OPEN, "no run yet")
    why = f"{status.value} ({reason})" if reason else status.value
    if status in UNRUN_STATUSES and not began:
        return Fate.NEVER, why
    return Fate.OWN, why
