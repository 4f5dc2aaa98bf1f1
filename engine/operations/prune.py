"""Shells of pruning: ``reportflow prune`` and ``[store] retain`` in ``serve`` (the backup is ``store.backup``).

A prune reads candidates without the write lock, decides with
``retention.decide_prune``, and deletes each batch in its own short write
transaction together with the batch's summary audit events, so a prune
killed half way leaves every removed run accounted for.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from engine.core import alerts, errors, logs, retention
from engine.core.schedule_spec import Criticality
from engine.runtime import Runtime
from engine.store import audit_rows, outbox, pruning

log = logging.getLogger(__name__)
BATCH = 500
RETAIN_EVERY = timedelta(days=1)


@dataclass
class PruneReport:
    before: date
    dry_run: bool
    removed: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    ranges: list[retention.PrunedRange] = field(default_factory=list)


def prune(rt: Runtime, before: date, *, dry_run: bool = False, reason: str | None = None,
          batch: int = BATCH) -> PruneReport:
    """Remove finished runs whose period ended before ``before`` (SPEC §8 ``prune``).

    ``before`` may not be later than today (UTC): a period not yet over is never pruned.
    """
    now = rt.clock.now()
    if before > now.date():
        raise errors.InvalidInput(f"--before {before} is in the future (today is {now.date()} UTC)")
    report = PruneReport(before=before, dry_run=dry_run)
    bound = retention.candidate_bound(before)
    with rt.store.read() as conn:
        timezones, upcoming = pruning.schedule_clock(conn)
        last_id = pruning.max_run_id(conn)  # runs created during the prune are not its business
    after_id = 0
    while after_id < last_id:
        with rt.store.read() as conn:
            candidates = pruning.list_candidates(conn, bound=bound, after_id=after_id, limit=batch)
        candidates = [c for c in candidates if c.id <= last_id]
        if not candidates:
            break
        after_id = candidates[-1].id
        chosen = retention.decide_prune(candidates, before, timezones=timezones, next_run_at=upcoming)
        if not chosen:
            continue
        if dry_run:
            _account(report, chosen, timezones)
            continue
        with rt.store.write() as conn:
            removed = pruning.delete_runs(conn, [c.id for c in chosen])
            gone = [c for c in chosen if c.id in removed]
            ranges = retention.summarize(gone, timezones)
            audit_rows.record_audits(conn, [_audit_event(r, now, rt.actor, before, reason) for r in ranges])
        _account(report, gone, timezones)
    logs.event(log, logging.INFO, "runs_pruned", before=before, removed=report.removed, dry_run=dry_run)
    return report


def _account(report: PruneReport, runs: list[retention.PruneCandidate], timezones: dict[int, str]) -> None:
    report.removed += len(runs)
    for r in runs:
        report.counts[r.status.value] = report.counts.get(r.status.value, 0) + 1
    report.ranges.extend(retention.summarize(runs, timezones))


def _audit_event(r: retention.PrunedRange, now: datetime, actor: str, before: date,
                 reason: str | None) -> dict[str, object]:
    return {"at": now, "actor": actor, "action": retention.PRUNE_ACTION, "schedule_id": r.schedule_id,
            "run_id": None, "before": None, "version": None,
            "after": {"first": r.first.isoformat(), "last": r.last.isoformat(), "counts": dict(r.counts),
                      "triggers": dict(r.triggers), "cutoff": before.isoformat()},
            "reason": reason or f"prune --before {before}"}


def hold_prune(rt: Runtime, planned: PruneReport, limit: int) -> None:
    """Record ``prune_held`` (SPEC §15.4): the daily prune would delete ``planned.removed`` > ``limit`` runs."""
    oldest = min((r.first for r in planned.ranges), default=None)
    summary = (f"the daily prune would delete {planned.removed} runs (more than [store] retain_max = {limit}), "
               f"oldest period {oldest}: it deleted none; run `reportflow prune --before {planned.before}`")
    with rt.store.write() as conn:
        outbox.record_event(conn, event=alerts.AlertEvent.PRUNE_HELD,
                            dedupe_key=f"prune_held/{planned.before.isoformat()}",
                            at=rt.clock.now(), summary=summary,
                            decision=alerts.decide_severity(alerts.AlertEvent.PRUNE_HELD, Criticality.NORMAL, 1),
                            details={"count": planned.removed, "retain_max": limit,
                                     "oldest_period": None if oldest is None else oldest.isoformat(),
                                     "before": planned.before.isoformat()})
    logs.event(log, logging.WARNING, "prune_held", eligible=planned.removed, retain_max=limit, oldest=oldest)


class RetentionTimer:
    """``serve``'s ``[store] retain``: prunes at start and then once a day (no-op when retain is unset).

    At most ``retain_max`` runs: when more are eligible it deletes none and raises ``prune_held``.
    """

    def __init__(self, retain: timedelta | None, retain_max: int | None = None) -> None:
        self.retain = retain
        self.retain_max = retain_max
        self._last: float | None = None

    def maybe_prune(self, rt: Runtime) -> PruneReport | None:
        """Prune by ``[store] retain`` if a day has passed since the last time; the report, or None."""
        if self.retain is None:
            return None
        mono = rt.clock.monotonic()
        if self._last is not None and mono - self._last < RETAIN_EVERY.total_seconds():
            return None
        self._last = mono
        before = retention.cutoff_for_retain(rt.clock.now(), self.retain)
        if self.retain_max is not None:
            planned = prune(rt, before, dry_run=True)  # counts without the write lock
            if planned.removed > self.retain_max:
                hold_prune(rt, planned, self.retain_max)
                return planned
        return prune(rt, before, reason=f"retain {self.retain.days}d")

