"""Pure deciders of scheduled backups (``[store] backup``): which slot is due, what a copy must match to
count as verified, which old copies go, and when the newest verified one is too old.

The shell is ``engine.operations.scheduled_backups``; the copy and its checks are ``engine.store.backup``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from engine.core.cron import timetable

#: The instants of a backup slot are in this zone unless ``[store] backup`` names another.
DEFAULT_TIMEZONE = "UTC"


@dataclass(frozen=True)
class DueSlot:
    """The slot to take now (None: nothing due) and the next one, when a pass should look again."""

    slot_at: datetime | None
    next_at: datetime


def decide_due(cron_expr: str, timezone: str, now: datetime, last_claimed: datetime | None) -> DueSlot:
    """The latest slot at or before ``now`` unless it was claimed already: slots missed while nothing ran
    are one backup, not a burst of them (a backup is the database as it is now, whichever slot asks)."""
    latest = timetable.latest_fire_at_or_before(cron_expr, timezone, now)
    following = timetable.next_fire_after(cron_expr, timezone, now).at
    if latest is None or (last_claimed is not None and latest.at <= last_claimed):
        return DueSlot(None, following)
    return DueSlot(latest.at, following)


def interval(cron_expr: str, timezone: str, now: datetime) -> timedelta:
    """The time between the two latest slots at or before ``now`` (the next one when there is only one)."""
    latest = timetable.latest_fire_at_or_before(cron_expr, timezone, now)
    if latest is None:
        first = timetable.next_fire_after(cron_expr, timezone, now).at
        return timetable.next_fire_after(cron_expr, timezone, first).at - first
    before = timetable.latest_fire_at_or_before(cron_expr, timezone, latest.at - timedelta(seconds=1))
    if before is None:
        return timetable.next_fire_after(cron_expr, timezone, latest.at).at - latest.at
    return latest.at - before.at


def mismatches(source: Mapping[str, int], copy: Mapping[str, int]) -> list[str]:
    """How the copy's row counts differ from the source's (read in the snapshot the copy was made from)."""
    problems = [f"table {name} is missing" for name in sorted(source) if name not in copy]
    problems += [f"table {name} is not in the source" for name in sorted(copy) if name not in source]
    problems += [f"table {name} has {copy[name]} rows, the source {source[name]}"
                 for name in sorted(source) if name in copy and copy[name] != source[name]]
    return problems


def decide_removals(verified_newest_first: Sequence[datetime], keep: int) -> list[datetime]:
    """The verified backups (by slot) past the newest ``keep``: these go. Failed copies never count as kept."""
    return list(verified_newest_first[max(keep, 1):])


@dataclass(frozen=True)
class Freshness:
    """The newest verified backup's age, and whether it is a problem."""

    age: timedelta | None  # None: no verified backup at all
    limit: timedelta
    problem: bool


def decide_freshness(newest_at: datetime | None, limit: timedelta, now: datetime) -> Freshness:
    """A problem when there is no verified backup, or the newest is older than ``limit``
    (two intervals of the cron on SQLite, ``max_age`` for the dumps of PostgreSQL)."""
    if newest_at is None:
        return Freshness(None, limit, True)
    age = max(now - newest_at, timedelta(0))
    return Freshness(age, limit, age > limit)
