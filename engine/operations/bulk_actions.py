"""Bulk operator actions (SPEC §15.5): ``runs retry --schedule S`` and ``runs approve --schedule S --all``.

``plan_*`` reads what an action would act on (``core.bulk.choose`` over the store's
candidates) and writes nothing: it is the dry run, and what the confirmation shows.
``execute`` acts on the planned runs only, each through the single-run action
(``actions.retry`` / ``actions.approve``) in a transaction of its own, so each run
gets its own audit event with the actor, and a run that changed meanwhile (another
operator retried it, a newer revision appeared) is skipped and said so, never acted
on unseen.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Sequence
from datetime import date

from engine.core import bulk, errors
from engine.core.models import RunStatus
from engine.operations import actions
from engine.runtime import Runtime
from engine.store import bulk_rows, schedule_rows


def _plan(rt: Runtime, action: str, schedule_name: str, statuses: Sequence[RunStatus], first: date | None,
          last: date | None, *, refuse: bool = True) -> bulk.BulkPlan:
    bulk.check_range(first, last)
    with rt.store.read() as conn:
        schedule = schedule_rows.get_schedule(conn, schedule_name)
        if action == "retry" and refuse:
            actions.refuse_disabled(schedule, "runs retry")
        candidates = bulk_rows.list_candidates(conn, schedule.id, statuses)
    chosen = bulk.choose(candidates, statuses=statuses, timezone=schedule.spec.timezone, first=first, last=last,
                         sprint=schedule.spec.sprint)
    return bulk.BulkPlan(action, schedule.name, tuple(s.value for s in statuses), first, last,
                         tuple(bulk.target_of(run) for run in chosen))


def plan_retry(rt: Runtime, schedule_name: str, *, statuses: Sequence[RunStatus] = bulk.DEFAULT_RETRY,
               first: date | None = None, last: date | None = None) -> bulk.BulkPlan:
    """The runs ``runs retry --schedule`` would retry: latest revisions in ``statuses`` (FAILED and
    PARTIAL_SUCCESS by default) whose period meets [first, last]. A disabled schedule exits 3."""
    return _plan(rt, "retry", schedule_name, statuses or bulk.DEFAULT_RETRY, first, last)


def plan_approve(rt: Runtime, schedule_name: str, *, first: date | None = None,
                 last: date | None = None) -> bulk.BulkPlan:
    """The MANUAL_REQUIRED runs ``runs approve --schedule S --all`` would queue (those in [first, last])."""
    return _plan(rt, "approve", schedule_name, bulk.APPROVABLE, first, last)


def waiting_counts(rt: Runtime, schedule_name: str) -> dict[str, int]:
    """How many runs ``plan_retry`` (default statuses) and ``plan_approve`` would take now, for a page's buttons."""
    return {"retry": len(_plan(rt, "retry", schedule_name, bulk.DEFAULT_RETRY, None, None, refuse=False).targets),
            "approve": len(_plan(rt, "approve", schedule_name, bulk.APPROVABLE, None, None).targets)}


def execute(rt: Runtime, plan: bulk.BulkPlan, progress: Callable[[int, int], None] | None = None, *,
            listed: Collection[int] | None = None) -> list[bulk.BulkOutcome]:
    """Act on the runs of ``plan`` that still qualify, one transaction and one audit event (``rt.actor``) each.

    The selection is read again first: a planned run that is no longer the latest
    revision of its period in one of the plan's statuses is skipped with the reason.
    ``listed``: only the runs an operator was shown (a page's confirmation); a listed
    run the plan no longer holds is skipped, a run the plan holds but nobody was shown
    is left alone.
    """
    outcomes: list[bulk.BulkOutcome] = []
    if listed is not None:
        planned = {t.run_id for t in plan.targets}
        outcomes += [bulk.BulkOutcome(run_id, "", "skipped", f"run {run_id} changed since it was listed; "
                                      "left as it is") for run_id in sorted(set(listed) - planned)]
        plan = dataclasses.replace(plan, targets=tuple(t for t in plan.targets if t.run_id in listed))
    statuses = tuple(RunStatus(s) for s in plan.statuses)
    fresh = _plan(rt, plan.action, plan.schedule, statuses, plan.first, plan.last)
    still = {t.run_id for t in fresh.targets}
    single = actions.retry if plan.action == "retry" else actions.approve
    for done, target in enumerate(plan.targets, start=1):
        if target.run_id not in still:
            outcomes.append(bulk.BulkOutcome(target.run_id, target.key, "skipped",
                                             f"run {target.run_id} ({target.key}) changed since it was listed; "
                                             "left as it is"))
        else:
            try:
                result = single(rt, target.run_id)
            except (errors.Conflict, errors.NotFound) as exc:  # changed between the read and its transaction
                outcomes.append(bulk.BulkOutcome(target.run_id, target.key, "skipped", exc.message))
            else:
                outcomes.append(bulk.BulkOutcome(target.run_id, target.key, result.action, result.message))
        if progress is not None:
            progress(done, len(plan.targets))
    return outcomes
