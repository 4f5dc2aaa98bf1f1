"""Pure deciders of the data lifecycle: which runs a prune removes, and what it remembers.

A prune removes finished runs whose business period ended before a cutoff date
(business dates, the schedule's own calendar), and leaves one summary audit
event per schedule and batch: the period range [first, last] it covered and
the counts by status. A later backfill consults those ranges, so a pruned
period is never generated twice unless the operator asks for it.

Business keys have fixed shapes (``core.period_keys``: ``2026-09-29`` a day, ``2026-W40`` an ISO
week, ``2026-09-29T19:30Z`` a slot in UTC), so a run's period is read from its
key and the schedule's timezone alone, without the workflow's code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from engine.core import period_keys
from engine.core.models import TERMINAL_STATUSES, RunStatus
from engine.core.schedule_spec import Sprint

PRUNE_ACTION = "runs_pruned"
# A slot reports on a period that ends at most this long before the slot (a weekly
# `previous` run fires up to a week after its week), plus a day of timezone offsets.
MAX_SLOT_AFTER_PERIOD = timedelta(days=9)


@dataclass(frozen=True)
class PruneCandidate:
    id: int
    schedule_id: int | None
    business_key: str
    status: RunStatus
    scheduled_for: datetime
    trigger: str = ""  # the run's trigger (SCHEDULED, MANUAL, BACKFILL): the runs-created counter keeps it


@dataclass(frozen=True)
class PrunedRange:
    """One schedule's pruned periods: every business date in [first, last] is settled history."""

    schedule_id: int | None
    first: date
    last: date
    counts: Mapping[str, int] = field(default_factory=dict)
    triggers: Mapping[str, int] = field(default_factory=dict)  # the pruned runs by trigger (none before v5)

    def covers(self, first: date, last: date) -> bool:
        """Whether this pruned range holds every business date from ``first`` to ``last``."""
        return self.first <= first and last <= self.last


def period_dates(business_key: str, tz: str, sprint: Sprint | None = None) -> tuple[date, date]:
    """The local business dates [first, last] of a run's period, read from its key (a sprint's with its
    schedule's ``sprint``).

    A revision suffix (``#2``) never appears in a business key; an unknown shape raises ValueError, and so does a
    sprint's key without its ``sprint``: a prune keeps such runs.
    """
    key = period_keys.parse(business_key, sprint)
    if key.slot_at is not None:
        local = key.slot_at.astimezone(ZoneInfo(tz)).date()
        return local, local
    return key.day, period_keys.span(key.kind, key.day, sprint)[1] - timedelta(days=1)


def cutoff_for_retain(now: datetime, retain: timedelta) -> date:
    """``[store] retain``: periods that ended more than ``retain`` before today (UTC) are prunable."""
    return (now.astimezone(UTC) - retain).date()


def candidate_bound(before: date) -> datetime:
    """An instant no prunable run's slot reaches: the SQL pre-filter (``scheduled_for < bound``)."""
    return datetime.combine(before, datetime.min.time(), tzinfo=UTC) + MAX_SLOT_AFTER_PERIOD


def decide_prune(candidates: Iterable[PruneCandidate], before: date, *, timezones: Mapping[int, str],
                 next_run_at: Mapping[int, datetime | None]) -> list[PruneCandidate]:
    """The candidates a prune removes.

    A run qualifies when it is finished (a terminal status: never PENDING,
    QUEUED, RUNNING, RETRY_PENDING or MANUAL_REQUIRED), its period's last
    business date is before ``before``, and its slot lies behind its
    schedule's ``next_run_at`` (the scheduler has passed it for good, so no
    tick can create it again). A key of unknown shape is kept.
    """
    chosen = []
    for run in candidates:
        if run.status not in TERMINAL_STATUSES:
            continue
        tz = timezones.get(run.schedule_id, "UTC") if run.schedule_id is not None else "UTC"
        try:
            _, last = period_dates(run.business_key, tz)
        except ValueError:
            continue
        if last >= before:
            continue
        upcoming = next_run_at.get(run.schedule_id) if run.schedule_id is not None else None
        if upcoming is not None and run.scheduled_for >= upcoming:
            continue
        chosen.append(run)
    return chosen


def summarize(pruned: Sequence[PruneCandidate], timezones: Mapping[int, str]) -> list[PrunedRange]:
    """One range per schedule over the pruned runs: the first and last business date, counts by status."""
    by_schedule: dict[int | None, list[PruneCandidate]] = {}
    for run in pruned:
        by_schedule.setdefault(run.schedule_id, []).append(run)
    ranges = []
    for schedule_id, group in sorted(by_schedule.items(), key=lambda item: (item[0] is None, item[0] or 0)):
        tz = timezones.get(schedule_id, "UTC") if schedule_id is not None else "UTC"
        spans = [period_dates(r.business_key, tz) for r in group]
        counts: dict[str, int] = {}
        triggers: dict[str, int] = {}
        for run in group:
            counts[run.status.value] = counts.get(run.status.value, 0) + 1
            if run.trigger:
                triggers[run.trigger] = triggers.get(run.trigger, 0) + 1
        ranges.append(PrunedRange(schedule_id, min(s[0] for s in spans), max(s[1] for s in spans),
                                  dict(sorted(counts.items())), dict(sorted(triggers.items()))))
    return ranges


def range_from_audit(schedule_id: int | None, after: Mapping[str, object] | None) -> PrunedRange | None:
    """The range a ``runs_pruned`` audit event recorded (None for a malformed one)."""
    if not after:
        return None
    try:
        first = date.fromisoformat(str(after["first"]))
        last = date.fromisoformat(str(after["last"]))
    except (KeyError, ValueError):
        return None
    counts = after.get("counts")
    triggers = after.get("triggers")
    return PrunedRange(schedule_id, first, last, dict(counts) if isinstance(counts, dict) else {},
                       dict(triggers) if isinstance(triggers, dict) else {})


def is_pruned(ranges: Iterable[PrunedRange], first: date, last: date) -> bool:
    """Whether a period [first, last] lies inside a range a prune settled."""
    return any(r.covers(first, last) for r in ranges)
