"""The healer (SPEC §15.5): probe the providers runs depend on, and queue again the runs they failed.

A workflow names its providers (``WorkflowDef.providers``: a model server, a page
store), the error codes that mean each one failed, and a cheap probe. The transaction
that ends a run records what it waits for (``record_wait``); ``heal`` then, in one pass:

1. probes, outside every transaction, the providers whose next check has come (all the
   providers in use for ``serve``; for ``cycle`` only those a waiting run needs, so an
   idle cron ``cycle`` asks nothing of anyone), and records each result, auditing a
   provider that turns healthy or unhealthy;
2. for each waiting run due for a look, loads it, decides (``healing.decide_heal``: the
   failure, the provider's health, the run's and the schedule's budgets, ``now``) and
   persists the decision in one short transaction: a re-queue from the failed (or
   degraded) step audited as ``SYSTEM_RECONCILER``, or when to look again.

A run that then ends SUCCESS raises ``recovered`` through the worker's one finish verb.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from sqlalchemy.engine import Connection

from engine.core import errors, healing, logs, redact
from engine.core.audit import SYSTEM_RECONCILER
from engine.core.healing import HealAction
from engine.core.models import AttemptTrigger, ProviderWait, Run, RunStatus
from engine.core.reports import HealReport
from engine.core.schedule_spec import ScheduleSpec
from engine.plugins.contract import ProbeResult, Provider
from engine.runtime import Runtime
from engine.store import audit_rows, database, health_rows, outbox, run_rows, schedule_rows

log = logging.getLogger(__name__)
DAY = timedelta(days=1)


def providers_in_use(rt: Runtime) -> dict[str, Provider]:
    """The providers of the workflows the configuration schedules, by name (each once)."""
    found: dict[str, Provider] = {}
    for name in sorted({spec.workflow for spec in rt.config.schedules}):
        workflow = rt.registry.get(name)
        if workflow is not None:
            for provider in workflow.providers(rt.settings(name)):
                found.setdefault(provider.name, provider)
    return found


def record_wait(rt: Runtime, conn: Connection, run: Run, status: RunStatus, error_code: str | None,
                failed_step: str | None, now: datetime) -> None:
    """In the transaction that ends ``run``: record the provider it waits for now, or that it waits for none.

    FAILED or PARTIAL_SUCCESS at a step with one of a provider's codes waits for that provider,
    from that step; SUCCESS with a step that worked around a provider's failure (a degraded
    step) waits for it to be written again from that step.
    """
    workflow = rt.registry.get(run.workflow)
    settings = rt.settings(run.workflow)
    wait: health_rows.WaitFor | None = None
    if workflow is not None and status in healing.FINISHED_WAITING and failed_step is not None:
        provider = workflow.provider_for(settings, error_code)
        if provider is not None and error_code is not None:
            wait = health_rows.WaitFor(provider.name, provider.label, error_code, failed_step, degraded=False)
    elif workflow is not None and status is RunStatus.SUCCESS:
        found = health_rows.degraded_step(conn, run.id)
        provider = workflow.provider_for(settings, found[1]) if found else None
        if found is not None and provider is not None:
            wait = health_rows.WaitFor(provider.name, provider.label, found[1], found[0], degraded=True)
            # The report went out by the fallback: said once while the provider stays down (a week of
            # fallback reports must not pass silently); closed by ``provider_up`` from a probe.
            outbox.record_provider(conn, provider.name, provider.label, up=False, now=now, run=run,
                                   detail=f"{found[1]} at {found[0]} of run {run.id}")
    health_rows.sync_wait(conn, run.id, wait, now)


def _probe(provider: Provider) -> ProbeResult:
    """The provider's probe; its detail may quote a URL with credentials (``[llm] host``): masked here,
    before it reaches the database, the audit trail or a log line."""
    try:
        result = provider.probe()
    except Exception as exc:  # noqa: BLE001 - a probe must not end the pass; its contract is never to raise
        logs.event(log, logging.ERROR, "probe_crashed", exc_info=True, provider=provider.name)
        return ProbeResult(False, f"the probe itself failed ({type(exc).__name__})")
    return ProbeResult(result.healthy, redact.mask_urls(result.detail)[:500])


def probe(rt: Runtime, names: Iterable[str] | None = None) -> list[tuple[str, bool]]:
    """Probe the providers in use (of ``names`` only, when given) whose next check has come; record each result.

    The probes run outside every transaction; their results are written in one, with an
    audit event for each provider that turned healthy or unhealthy. Returns (label, healthy).
    """
    providers = providers_in_use(rt)
    if names is not None:
        wanted = set(names)
        providers = {name: p for name, p in providers.items() if name in wanted}
    if not providers:
        return []
    now = rt.clock.now()
    with rt.store.read() as conn:
        known = health_rows.get_health(conn, providers)
    due = [p for name, p in providers.items() if healing.probe_due(known.get(name), now)]
    results = [(provider, _probe(provider)) for provider in due]
    if not results:
        return []
    checked_at = rt.clock.now()
    changed: list[tuple[Provider, ProbeResult]] = []
    with rt.store.write() as conn:
        for provider, result in results:
            before = health_rows.record_probe(conn, provider.name, provider.label, healthy=result.healthy,
                                              detail=result.detail, now=checked_at,
                                              every=rt.config.notify.health_every)
            if before is None or before.healthy != result.healthy:
                changed.append((provider, result))
                if result.healthy:
                    outbox.record_provider(conn, provider.name, provider.label, up=True, now=checked_at,
                                           detail=result.detail)
                audit_rows.record_audit(
                    conn, at=checked_at, actor=SYSTEM_RECONCILER,
                    action="provider_up" if result.healthy else "provider_down",
                    before=None if before is None else {"healthy": before.healthy},
                    after={"provider": provider.label, "healthy": result.healthy}, reason=result.detail)
    for provider, result in changed:
        logs.event(log, logging.INFO if result.healthy else logging.WARNING,
                   "provider_up" if result.healthy else "provider_down", provider=provider.label,
                   detail=result.detail)
    return [(provider.label, result.healthy) for provider, result in results]


def heal(rt: Runtime, *, probe_all: bool = False, wake: Callable[[], None] | None = None) -> HealReport:
    """One healer pass at ``rt.clock.now()``: probe, then decide each waiting run due for a look.

    ``probe_all`` (``serve``): probe every provider in use whose check has come, so their
    health is known before anything fails; otherwise (``cycle``) only those that waiting
    runs need. ``wake`` is called once runs were queued (``serve``'s idle worker threads).
    """
    report = HealReport()
    with rt.store.read() as conn:
        wanted = health_rows.providers_waited_for(conn, rt.clock.now())
    if probe_all or wanted:
        report.probed = probe(rt, None if probe_all else wanted)
    if not wanted:
        return report
    now = rt.clock.now()
    with rt.store.read() as conn:
        waits = health_rows.waits_due(conn, now)
        health = health_rows.get_health(conn, {w.provider for w in waits})
    today: dict[int, int] = {}  # automatic re-queues per schedule in the last 24 hours, counted once a pass
    logged: list[tuple[ProviderWait, healing.HealDecision, Run]] = []
    for wait in waits:
        try:
            with rt.store.write() as conn:
                found = _settle(rt, conn, wait, health.get(wait.provider), today, now)
        except (errors.NotFound, errors.InvalidTransition):
            continue  # the run went, or an operator acted between the read and the write: the next pass sees it
        if found is None:
            continue
        decision, run = found
        logged.append((wait, decision, run))
        if decision.action is HealAction.REQUEUE:
            report.requeued.append(run.id)
            if wait.degraded:
                report.regenerated.append(run.id)
        elif decision.action is HealAction.GIVE_UP:
            report.gave_up.append(run.id)
        elif decision.action in (HealAction.WAIT, HealAction.HOLD):
            report.waiting += 1
    for wait, decision, run in logged:
        if decision.action is HealAction.REQUEUE:
            logs.event(log, logging.INFO, healing_event(wait), run=run.id, key=run.idempotency_key,
                       provider=wait.label, from_step=wait.step, reason=decision.reason)
        elif decision.action is HealAction.GIVE_UP:
            logs.event(log, logging.WARNING, "run_not_requeued", run=run.id, key=run.idempotency_key,
                       provider=wait.label, reason=decision.reason)
    if report.requeued and wake is not None:
        wake()
    return report


def healing_event(wait: ProviderWait) -> str:
    """The log event of a re-queue: a run written again in place, or a failed run retried."""
    return "run_regenerating" if wait.degraded else "run_auto_requeued"


def _settle(rt: Runtime, conn: Connection, wait: ProviderWait, health: healing.ProviderHealth | None,
            today: dict[int, int], now: datetime) -> tuple[healing.HealDecision, Run] | None:
    """Load one waiting run, decide, persist the decision (the caller's transaction); None if the run is gone."""
    try:
        run = run_rows.get_run(conn, wait.run_id, detail=False)
    except errors.NotFound:
        health_rows.forget_wait(conn, wait.run_id)
        return None
    if run.workflow not in rt.registry:  # not installed on this node (another one may have it): look again later
        decision = healing.HealDecision(HealAction.HOLD, f"its workflow {run.workflow} is not installed here",
                                        now + rt.config.notify.health_every)
        health_rows.mark_wait(conn, run.id, check_after=decision.check_after)
        return decision, run
    spec: ScheduleSpec | None = None
    enabled = run.schedule_enabled is not False
    if run.schedule_id is not None:
        spec = schedule_rows.get_schedule_by_id(conn, run.schedule_id).spec
        if run.schedule_id not in today:
            today[run.schedule_id] = health_rows.auto_requeues_since(conn, run.schedule_id, now - DAY)
    budget = healing.HealBudget(
        per_run=spec.auto_recover if spec else ScheduleSpec.auto_recover, used=wait.recoveries,
        daily=spec.auto_recover_daily if spec else ScheduleSpec.auto_recover_daily,
        used_today=today.get(run.schedule_id, 0) if run.schedule_id is not None else 0)
    decision = healing.decide_heal(wait, status=run.status, error_code=run.error_code, health=health, budget=budget,
                                   schedule_enabled=enabled, now=now, every=rt.config.notify.health_every)
    if decision.action is HealAction.REQUEUE:
        _requeue(rt, conn, run, wait, decision, now)
        if run.schedule_id is not None:
            today[run.schedule_id] = today.get(run.schedule_id, 0) + 1
    elif decision.action is HealAction.FORGET:
        health_rows.forget_wait(conn, run.id)
    elif decision.action is HealAction.GIVE_UP:
        health_rows.mark_wait(conn, run.id, check_after=None, gave_up=decision.reason)
    else:  # WAIT, HOLD: look again then; IDLE: when the run ends again (its finish rewrites the row)
        health_rows.mark_wait(conn, run.id, check_after=decision.check_after)
    return decision, run


def _requeue(rt: Runtime, conn: Connection, run: Run, wait: ProviderWait, decision: healing.HealDecision,
             now: datetime) -> None:
    """Queue the run again from the step that waited, with a fresh run-level retry budget, audited."""
    step_names = rt.workflow(run.workflow).step_names()
    run_rows.requeue(conn, run, trigger=AttemptTrigger.RECOVERY, now=now, from_step=wait.step,
                     step_names=step_names, fresh_budget=rt.config.worker.max_attempts)
    health_rows.mark_wait(conn, run.id, check_after=None, requeued=True)
    audit_rows.record_audit(
        conn, at=now, actor=SYSTEM_RECONCILER, action=health_rows.AUTO_REQUEUED, run_id=run.id,
        schedule_id=run.schedule_id, reason=decision.reason,
        before={"status": run.status.value, "error_code": run.error_code if not wait.degraded else wait.error_code},
        after={"status": RunStatus.QUEUED.value, "from_step": wait.step, "provider": wait.label,
               "regenerate": wait.degraded, "recovery": wait.recoveries + 1})


def heal_until(rt: Runtime, stop: threading.Event, *, wake: Callable[[], None] | None = None) -> None:
    """``serve``'s healer loop: a pass every ``[notify] health_every`` until ``stop``; never raises.

    A database error or a bug is logged and the loop goes on: healing is a help, and must not end ``serve``.
    """
    every = rt.config.notify.health_every.total_seconds()
    while not stop.is_set():
        try:
            heal(rt, probe_all=True, wake=wake)
        except database.DATABASE_ERRORS:
            logs.event(log, logging.ERROR, "heal_failed", exc_info=True)
        except Exception:  # noqa: BLE001 - see the docstring
            logs.event(log, logging.ERROR, "heal_crashed", exc_info=True)
        rt.clock.wait(every, stop)

