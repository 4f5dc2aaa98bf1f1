"""Schedule lifecycle: apply the config, edit with an optimistic lock, enable, disable.

Every change bumps ``version`` and writes an AuditEvent (actor, action, before,
after, reason, version). Schedules are never deleted: a schedule removed from
the config is archived and its runs stay. A new or re-enabled schedule starts
now: its ``next_run_at`` is the first slot strictly after the current clock.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.engine import Connection

from engine.core import errors, logs, run_counts
from engine.core.audit import AuditEvent
from engine.core.clock import format_instant
from engine.core.cron import timetable, validate
from engine.core.models import HELD_BY_DISABLED, AttemptOutcome, RunStatus
from engine.core.run_end import RunEnd
from engine.core.schedule_spec import Schedule, ScheduleSpec
from engine.runtime import Runtime
from engine.scheduling import drift, model_time
from engine.store import audit_rows, finish, locks, rows, run_rows, schedule_rows

log = logging.getLogger(__name__)
RISK_FACTOR = 10


@dataclass
class ApplyReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: Runs/day and runs/month of each created or changed schedule (the creation policy).
    counts: list[str] = field(default_factory=list)
    plan: drift.ApplyPlan | None = None  # the decision, field diffs and drift included
    dry_run: bool = False
    #: A dry run: the next fire times (local) of each updated schedule whose timing changes, before and after.
    fires: dict[str, tuple[list[str], list[str]]] = field(default_factory=dict)


#: How many fire times a dry run shows before and after an edit.
FIRES_SHOWN = 3


def next_fires(spec: ScheduleSpec, now: datetime) -> list[str]:
    """The next ``FIRES_SHOWN`` fire times of ``spec`` from ``now``, in its zone, as ``Mon 2026-10-05 19:30 KST``."""
    fires = timetable.preview(spec.cron, spec.timezone, now, FIRES_SHOWN, dst_gap=spec.dst_gap, dst_fold=spec.dst_fold)
    return [f"{f.local:%a %Y-%m-%d %H:%M %Z}" for f in fires]


def unserved(rt: Runtime, specs: Sequence[ScheduleSpec]) -> list[str]:
    """A warning per schedule whose project this node cannot serve (its repository is not here): applied all
    the same, since another node may have it (SPEC §13), but a single-node setup has a typo to fix."""
    found = []
    for spec in specs:
        workflow = rt.registry.get(spec.workflow)
        if workflow is not None and not workflow.can_serve(rt.settings(workflow.name), spec.project):
            found.append(f"schedule '{spec.name}': project '{spec.project}' cannot be served on this node (its "
                         "repository is not here); only a node that has it runs these reports (`reportflow doctor`)")
    return found


def runs_per_day(spec: ScheduleSpec, now: datetime) -> float:
    """How many runs a day ``spec`` makes, averaged over the coming week."""
    week = timetable.estimate_fire_count(spec.cron, spec.timezone, now, now + timedelta(days=7))
    return week / 7


def first_slot_after(spec: ScheduleSpec, now: datetime) -> datetime:
    """The schedule's first slot after ``now`` (its DST rules applied)."""
    return timetable.next_fire_after(spec.cron, spec.timezone, now, dst_gap=spec.dst_gap, dst_fold=spec.dst_fold).at


def check_risk(old: ScheduleSpec | None, new: ScheduleSpec, now: datetime, confirmed: bool) -> str | None:
    """A change raising runs/day more than 10x needs ``--yes``; returns the warning if confirmed."""
    if old is None:
        return None
    before, after = runs_per_day(old, now), runs_per_day(new, now)
    if after <= RISK_FACTOR * max(before, 1 / 7):
        return None
    message = (f"high risk: schedule '{new.name}' goes from {before:.1f} to {after:.1f} runs/day "
               f"({new.cron!r}); confirm with --yes")
    if not confirmed:
        raise errors.NeedsConfirmation(message)
    return message


def _timing_changed(old: ScheduleSpec, new: ScheduleSpec) -> bool:
    return (old.cron, old.timezone, old.dst_gap, old.dst_fold) != (new.cron, new.timezone, new.dst_gap, new.dst_fold)


def _disabled_range(conn: Connection, schedule: Schedule, now: datetime, actor: str) -> None:
    """Slots that passed while a schedule was disabled are accounted for with reason ``disabled``."""
    start = schedule.disabled_at or schedule.next_run_at
    if start is None or start >= now:
        return
    spec = schedule.spec
    audit_rows.record_audit(
        conn, at=now, actor=actor, action="slots_disabled", schedule_id=schedule.id, reason="disabled",
        after={"from": format_instant(start), "to": format_instant(now),
               "estimated_slots": timetable.estimate_fire_count(spec.cron, spec.timezone, start, now)},
        version=schedule.version)


def apply(rt: Runtime, *, confirmed: bool = False, overwrite: bool = False, dry_run: bool = False) -> ApplyReport:
    """Sync ``[[schedules]]`` into the database in one transaction (idempotent from any node).

    An unchanged definition changes nothing (no version bump), and a schedule
    disabled from the command line stays disabled. Drift (a field edited in the
    database since the last apply that the file would change) is refused with
    Conflict, nothing written for any schedule, unless ``overwrite``: then the
    file wins and the drift is audited. ``dry_run`` plans and writes nothing.
    """
    now = rt.clock.now()
    wanted = {spec.name: spec for spec in rt.config.schedules}
    with (rt.store.read() if dry_run else rt.store.write()) as conn:
        existing = {s.name: s for s in schedule_rows.list_schedules(conn, include_archived=True)}
        plan = drift.plan_apply(existing, wanted)
        report = ApplyReport(plan=plan, dry_run=dry_run)
        limits = rt.config.limits
        counted, report.counts, report.warnings = run_counts.describe(
            [wanted[name] for name in (*plan.created, *plan.updated)], now,
            warn_per_day=limits.warn_runs_per_day, max_per_day=limits.max_runs_per_day)
        report.warnings += unserved(rt, [wanted[name] for name in (*plan.created, *plan.updated)])
        for name, counts in counted.items():  # what the month asks of a model server, from recorded generations
            spec, current = wanted[name], existing.get(name)
            report.counts += model_time.estimate(conn, rt.registry.get(spec.workflow), rt.settings(spec.workflow),
                                                 spec, counts.per_month, current.id if current else None)
        if dry_run:
            report.created, report.archived, report.unchanged = plan.created, plan.archived, plan.unchanged
            report.updated = list(plan.updated)
            for name in plan.updated:
                warning = check_risk(existing[name].spec, wanted[name], now, True)
                if warning:
                    report.warnings.append(warning)
                before, after = next_fires(existing[name].spec, now), next_fires(wanted[name], now)
                if before != after:
                    report.fires[name] = (before, after)
            return report
        if plan.drifted and not overwrite:
            raise errors.Conflict("drift: schedules edited in the database since the last apply; nothing applied. "
                                  + "; ".join(f"{name} ({', '.join(c.describe() for c in changes)})"
                                              for name, changes in plan.drifted.items())
                                  + ". Put the values in the file, or `schedules apply --overwrite` to let the file win")
        for name in plan.archived:
            current = existing[name]
            schedule_rows.update_schedule(conn, current, now=now, archived=True)
            _audit(conn, rt.actor, "archive", current, now, reason="removed from the config",
                   before=rows.definition_of(current.spec))
            report.archived.append(name)
        for name, spec in wanted.items():
            known = existing.get(name)
            if known is None:
                next_run_at = first_slot_after(spec, now) if spec.enabled else None
                schedule_id = schedule_rows.insert_schedule(conn, spec, next_run_at=next_run_at, now=now)
                created = schedule_rows.get_schedule_by_id(conn, schedule_id)
                _audit(conn, rt.actor, "create", created, now, after=rows.definition_of(spec), version=1)
                report.created.append(name)
                continue
            drifted = plan.drifted.get(name, [])
            if drifted:
                _audit(conn, rt.actor, "drift_overwritten", known, now, reason="schedules apply --overwrite",
                       before={c.field: c.database for c in drifted}, after={c.field: c.file for c in drifted})
            _apply_one(conn, rt, known, spec, now, confirmed, report)
    return report


def _apply_one(conn: Connection, rt: Runtime, current: Schedule, spec: ScheduleSpec, now: datetime,
               confirmed: bool, report: ApplyReport) -> None:
    enabled = drift.enabled_after_apply(current, spec)
    definition = rows.definition_of(spec)
    same = definition == rows.definition_of(current.spec)
    if same and enabled == current.enabled and not current.archived:
        if current.applied_definition != definition:  # the file caught up with a database edit: no new version
            schedule_rows.record_applied(conn, current.id, definition)
        report.unchanged.append(spec.name)
        return
    warning = check_risk(current.spec, spec, now, confirmed)
    if warning:
        report.warnings.append(warning)
    state: dict[str, Any] = {"enabled": enabled, "archived": False}
    becomes_live = enabled and (not current.enabled or current.archived)
    if becomes_live:
        _disabled_range(conn, current, now, rt.actor)
    if enabled and (becomes_live or _timing_changed(current.spec, spec) or current.next_run_at is None):
        state["next_run_at"] = first_slot_after(spec, now)
    if not enabled and current.enabled:
        state.update(disabled_at=now, disabled_reason="disabled in the config")
    if becomes_live:
        state.update(disabled_at=None, disabled_reason=None)
    updated = schedule_rows.update_schedule(conn, current, now=now, spec=replace(spec, enabled=enabled),
                                            applied_definition=definition, **state)
    _audit(conn, rt.actor, "update", updated, now, before=_state_of(current), after=_state_of(updated))
    report.updated.append(spec.name)


def set_schedule(rt: Runtime, name: str, *, expect_version: int, changes: dict[str, Any],
                 confirmed: bool = False, reason: str | None = None) -> tuple[Schedule, str | None]:
    """Edit a schedule if it is still at ``expect_version`` (else StaleVersion, exit 3)."""
    now = rt.clock.now()
    with rt.store.write() as conn:
        current, spec, warning = _planned_edit(conn, rt, name, expect_version, changes, now, confirmed)
        state: dict[str, Any] = {}
        if current.enabled and _timing_changed(current.spec, spec):
            state["next_run_at"] = first_slot_after(spec, now)
        updated = schedule_rows.update_schedule(conn, current, now=now, spec=spec, **state)
        _audit(conn, rt.actor, "set", updated, now, before=_state_of(current), after=_state_of(updated),
               reason=reason)
    return updated, warning


def plan_set(rt: Runtime, name: str, *, expect_version: int, changes: dict[str, Any],
             confirmed: bool = False) -> tuple[ScheduleSpec, ScheduleSpec, str | None]:
    """``set_schedule`` without writing (``schedules set --dry-run``): the definition before and after, and the
    risk warning; the same refusals (a stale version, an invalid result)."""
    with rt.store.read() as conn:
        current, spec, warning = _planned_edit(conn, rt, name, expect_version, changes, rt.clock.now(), confirmed)
    return current.spec, spec, warning


def _planned_edit(conn: Connection, rt: Runtime, name: str, expect_version: int, changes: dict[str, Any],
                  now: datetime, confirmed: bool) -> tuple[Schedule, ScheduleSpec, str | None]:
    """The schedule, its definition with ``changes``, validated, and the risk warning (raises as ``set`` does)."""
    current = schedule_rows.get_schedule(conn, name)
    if current.version != expect_version:
        raise errors.StaleVersion(f"schedule '{name}' is at version {current.version}, not {expect_version}; "
                                  "reload (`reportflow schedules show`) and retry")
    spec = replace(current.spec, **changes)
    validate.check_schedule(spec, rt.workflow(spec.workflow).period, now=now)
    return current, spec, check_risk(current.spec, spec, now, confirmed)


def set_enabled(rt: Runtime, name: str, *, enabled: bool, reason: str | None,
                cancel_queued: bool = False) -> tuple[Schedule, bool]:
    """The audited kill switch (SPEC §15.3). Returns (schedule, changed); no change means no version bump.

    Disabling holds the schedule's runs that have not started (no worker claims
    them) or, with ``cancel_queued``, cancels them, each audited with the reason;
    a RUNNING run goes on. Enabling releases held runs in their old order.
    """
    now = rt.clock.now()
    with rt.store.write() as conn:
        locks.serialise_with_claims(conn)
        current = schedule_rows.get_schedule(conn, name)
        if current.archived:
            raise errors.Conflict(f"schedule '{name}' is archived (it is no longer in the config)")
        return _switch(conn, rt, current, enabled=enabled, reason=reason, cancel_queued=cancel_queued, now=now)


def disable_all(rt: Runtime, *, reason: str, cancel_queued: bool = False) -> list[Schedule]:
    """The global switch: disable every live schedule in one transaction; returns those it disabled."""
    now = rt.clock.now()
    changed: list[Schedule] = []
    with rt.store.write() as conn:
        locks.serialise_with_claims(conn)
        for current in schedule_rows.list_schedules(conn):
            schedule, did = _switch(conn, rt, current, enabled=False, reason=reason, cancel_queued=cancel_queued,
                                    now=now)
            if did:
                changed.append(schedule)
    return changed


def pause(rt: Runtime, name: str, *, until: datetime, reason: str) -> Schedule:
    """``schedules pause``: slots from now until ``until`` are recorded ``maintenance``, and no late, silent or
    stuck alert is raised for the schedule meanwhile; a running run finishes. Audited, like a disable."""
    now = rt.clock.now()
    if until <= now:
        raise errors.InvalidInput(f"--until {format_instant(until)} is not in the future")
    with rt.store.write() as conn:
        current = schedule_rows.get_schedule(conn, name)
        if current.archived:
            raise errors.Conflict(f"schedule '{name}' is archived (it is no longer in the config)")
        still = current.paused_until is not None and current.paused_until > now and current.paused_from is not None
        start = current.paused_from if still else now
        updated = schedule_rows.update_schedule(conn, current, now=now, paused_from=start, paused_until=until,
                                                pause_reason=reason)
        _audit(conn, rt.actor, "pause", updated, now, before=_pause_of(current), after=_pause_of(updated),
               reason=reason)
    return updated


def resume(rt: Runtime, name: str, *, reason: str | None) -> tuple[Schedule, bool]:
    """``schedules resume``: end a pause now (its past slots stay ``maintenance``). Returns (schedule, changed)."""
    now = rt.clock.now()
    with rt.store.write() as conn:
        current = schedule_rows.get_schedule(conn, name)
        if current.paused_until is None or current.paused_until <= now:
            return current, False
        updated = schedule_rows.update_schedule(conn, current, now=now, paused_until=now)
        _audit(conn, rt.actor, "resume", updated, now, before=_pause_of(current), after=_pause_of(updated),
               reason=reason)
    return updated, True


def _pause_of(schedule: Schedule) -> dict[str, Any]:
    return {"paused_from": format_instant(schedule.paused_from), "paused_until": format_instant(schedule.paused_until),
            "pause_reason": schedule.pause_reason}


def _switch(conn: Connection, rt: Runtime, current: Schedule, *, enabled: bool, reason: str | None,
            cancel_queued: bool, now: datetime) -> tuple[Schedule, bool]:
    if not enabled and cancel_queued:
        _cancel_unstarted(conn, rt.actor, current, now, reason)
    if current.enabled == enabled:
        return current, False
    if enabled:
        _disabled_range(conn, current, now, rt.actor)
        state: dict[str, Any] = dict(enabled=True, disabled_by_cli=False, disabled_reason=None,
                                     disabled_at=None, next_run_at=first_slot_after(current.spec, now))
    else:
        state = dict(enabled=False, disabled_by_cli=True, disabled_reason=reason, disabled_at=now)
    updated = schedule_rows.update_schedule(conn, current, now=now, spec=replace(current.spec, enabled=enabled),
                                            **state)
    _audit(conn, rt.actor, "enable" if enabled else "disable", updated, now,
           before=_state_of(current), after=_state_of(updated), reason=reason)
    return updated, True


def _cancel_unstarted(conn: Connection, actor: str, schedule: Schedule, now: datetime, reason: str | None) -> None:
    """``disable --cancel-queued``: the runs a disable would hold are cancelled instead, each audited."""
    for run in run_rows.unstarted_runs(conn, schedule.id):
        finish.finish_run(conn, run, RunEnd(RunStatus.CANCELLED, AttemptOutcome.CANCELLED, reason=HELD_BY_DISABLED,
                                            note="cancelled with its schedule's disable before any worker took it"),
                          now, holder=None)
        audit_rows.record_audit(conn, at=now, actor=actor, action="run_cancelled", schedule_id=schedule.id,
                                run_id=run.id, before={"status": run.status.value},
                                after={"status": RunStatus.CANCELLED.value, "by": "schedules disable --cancel-queued"},
                                reason=reason)
        logs.event(log, logging.INFO, "run_cancelled", run=run.id, key=run.idempotency_key, schedule=schedule.name)


def history(rt: Runtime, name: str) -> list[AuditEvent]:
    """The audit events of the schedule named ``name``, oldest first."""
    with rt.store.read() as conn:
        schedule = schedule_rows.get_schedule(conn, name)
        return audit_rows.list_audit(conn, schedule_id=schedule.id)


def _state_of(schedule: Schedule) -> dict[str, Any]:
    return {**rows.definition_of(schedule.spec), "enabled": schedule.enabled, "archived": schedule.archived,
            "next_run_at": format_instant(schedule.next_run_at)}


def _audit(conn: Connection, actor: str, action: str, schedule: Schedule, now: datetime, *,
           before: dict[str, Any] | None = None, after: dict[str, Any] | None = None,
           reason: str | None = None, version: int | None = None) -> None:
    audit_rows.record_audit(conn, at=now, actor=actor, action=action, schedule_id=schedule.id,
                               before=before, after=after, reason=reason, version=version or schedule.version)
    logs.event(log, logging.INFO, f"schedule_{action}", schedule=schedule.name, version=version or schedule.version)
