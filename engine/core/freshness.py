"""Freshness against a schedule's ``freshness_target`` (SPEC §15.8): when to raise ``freshness_low``. Pure.

Freshness is ``slo.compute_slo``'s: the share of the periods due in the window that
reached SUCCESS within their deadline. Each period is judged once, at the moment it
becomes due (``slot + deadline``): the freshness over the window ending then. When the
freshness now is below the target, the latest period due is the one that found it low,
and ``freshness_low`` is raised once for it (the caller keys it by that period); a
schedule that stays below is told once per period, with the number of judgements in
a row that found it low (what its severity grows with, like ``run_failed``'s).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from engine.core import slo
from engine.core.models import RunStatus


@dataclass(frozen=True)
class FreshnessLow:
    """A period whose judgement found freshness below the target."""

    slot_at: datetime  # the latest period due: the one this judgement belongs to
    freshness: float  # over the window ending now
    target: float
    periods_due: int
    consecutive: int  # judgements in a row below the target, this one included


def _fresh(slot: datetime, facts: Mapping[datetime, slo.PeriodFact], deadline: timedelta) -> bool:
    fact = facts.get(slot)
    return (fact is not None and fact.status is RunStatus.SUCCESS and fact.completed_at is not None
            and fact.completed_at <= slot + deadline)


def decide_freshness_low(slots: Sequence[datetime], facts: Mapping[datetime, slo.PeriodFact], *, now: datetime,
                         deadline: timedelta, window: timedelta, target: float,
                         max_slots: int | None = None) -> FreshnessLow | None:
    """The judgement to raise at ``now``, or None when freshness is at or above ``target`` (or nothing is due).

    ``slots``: the schedule's slots, ascending, from a window or more before ``now`` up to
    ``now`` (earlier judgements need the slots before their own window); ``facts``: the
    latest revision of each of those periods; ``max_slots``: a window holds at most its
    newest that many (``periods.measure`` cuts a minutely schedule's window the same way).
    """
    in_window = [s for s in slots if s >= now - window]
    if max_slots is not None:
        in_window = in_window[-max_slots:]
    current = slo.compute_slo(in_window, facts, now=now, deadline=deadline, window=window)
    if current.freshness is None or current.freshness >= target:
        return None
    due = [s for s in slots if s + deadline <= now]
    fresh_before = [0]
    for slot in due:
        fresh_before.append(fresh_before[-1] + (1 if _fresh(slot, facts, deadline) else 0))
    consecutive = 0
    for k in range(len(due) - 1, -1, -1):  # back from the latest judgement while each found it low
        judged_at = due[k] + deadline
        if due[k] < now - window:
            break
        first = bisect_left(due, judged_at - window)
        if max_slots is not None:
            first = max(first, k + 1 - max_slots)
        share = (fresh_before[k + 1] - fresh_before[first]) / (k + 1 - first)
        if share >= target:
            break
        consecutive += 1
    return FreshnessLow(slot_at=due[-1], freshness=current.freshness, target=target,
                        periods_due=current.periods_due, consecutive=max(1, consecutive))
