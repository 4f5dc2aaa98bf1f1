"""Rendering for the CLI: rich tables for people, JSON for machines.

No decisions here: what a value means (a run being stalled, a period having
no slot) is decided by the engine and arrives through ``engine.read.views`` or the
report objects; instants are printed with ``clock.format_instant`` (UTC, whole
seconds, ``Z``). Every value is printed as data (``output.shown``): a project,
a key, a commit's or a server's text or a user name is never read as rich markup
or an emoji code, and carries no control or bidi character to the terminal.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from rich.table import Table

# re-exported: the light path, shared with app's loop commands
from engine.cli import output
from engine.cli.output import console, json_out, say, shown, status, warn
from engine.core import dependencies, healing
from engine.core.audit import AuditEvent
from engine.core.clock import format_instant
from engine.core.models import Run, RunTrigger
from engine.plugins.contract import WorkflowDef
from engine.read import views

out = console()
err = console(stderr=True)
_json = json_out
_status = status


def _compact_secs(value: float | None) -> str:
    return views.human_seconds(value, compact=True)


def apply_report(report: Any) -> None:
    """Print a ``schedules apply`` plan or result: warnings, then each change."""
    for warning in report.warnings:
        warn(warning)
    for line in report.counts:
        say(line)
    plan = report.plan
    if report.dry_run and plan is not None:
        say("plan (dry run, nothing written):")
        for label in ("created", "archived", "unchanged"):
            say(f"  {label}: {', '.join(getattr(plan, label)) or '-'}")
        for label, groups in (("updated", plan.updated), ("drifted", plan.drifted)):
            say(f"  {label}: {', '.join(groups) or '-'}")
            for name, changes in groups.items():
                for change in changes:
                    say(f"    {name} {change.describe()}")
        for name, (before, after) in report.fires.items():
            say(f"  {name} next fire times: {', '.join(before)} → {', '.join(after)}")
        return
    if plan is not None:
        for name, changes in plan.drifted.items():
            warn(f"drift overwritten on {name}: {', '.join(c.describe() for c in changes)}")
    for label in ("created", "updated", "archived", "unchanged"):
        names = getattr(report, label)
        if names:
            say(f"{label}: {', '.join(names)}")
    if not any(getattr(report, label) for label in ("created", "updated", "archived", "unchanged")):
        say("no schedules in the config")


def schedules(overviews: Sequence[Any], as_json: bool) -> None:
    """Print ``schedules list``: a compact table that fits 100 columns, or JSON (every field).

    Each cell wraps rather than cuts; the policies, the version and the next run in UTC are in
    ``schedules show`` and ``--json``."""
    data = [views.schedule_view(o.schedule, o.last_run, o.slo, o.maintenance) for o in overviews]
    if as_json:
        _json(data)
        return
    table = _compact("schedules")
    # Values are not wrapped (each cell is already two short lines); folded only when nothing else gives way.
    for column in ("name\nworkflow · project", "cron\ntimezone", "next run\n(local)", "last\nresult", "success\nfresh"):
        table.add_column(column, overflow="fold", no_wrap=True)
    for item in data:
        last = item["last_run"]
        name = (f"{shown(item['name'])}\n[dim]{shown(item['workflow'])} · {shown(item['project'])}[/]" +
                ("" if item["enabled"] else f"\n[red]disabled[/] {shown(item['disabled_reason'] or '')}".rstrip())
                + _windows(item))
        table.add_row(
            name, f"{shown(item['cron'])}\n{shown(item['timezone'])}", _local(item["next_run_local"]),
            f"{shown(last['business_key'])}\n{_status(last['status'])}" if last else "-",
            f"{_ratio(item.get('success_rate'), item.get('periods_due'))}\n{_freshness(item)}",
        )
    out.print(table)


def _compact(title: str) -> Table:
    """A table without vertical rules: list commands fit 100 columns."""
    from rich import box

    return Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1),
                 collapse_padding=True)


def _local(iso: str | None) -> str:
    """``2026-12-04T19:30:00+09:00`` as ``2026-12-04``, then ``19:30 +0900`` below (seconds only when set)."""
    if not iso:
        return "-"
    at = datetime.fromisoformat(iso)
    clock = f"{at:%H:%M:%S}" if at.second else f"{at:%H:%M}"
    return f"{at:%Y-%m-%d}\n{clock} {at:%z}"


def _windows(item: dict[str, Any]) -> str:
    """A line for its next maintenance window or pause, if any (the rest are in ``show`` and ``--json``)."""
    if not item["maintenance"]:
        return ""
    first = item["maintenance"][0]
    if first["paused"]:
        return f"\n[yellow]paused until {first['end']}[/] {shown(first['reason'])}"
    return f"\n[yellow]maintenance {first['start']} → {first['end']}[/] {shown(first['reason'])}"


def _ratio(value: float | None, due: int | None) -> str:
    """``97% of 30``; a dash when no period is due yet."""
    if value is None:
        return "-"
    return f"{value:.0%}" + (f" of {due}" if due is not None else "")


def _freshness(item: dict[str, Any]) -> str:
    """The freshness; ``n/a`` when every period due is from before the schedule existed (backfilled history)."""
    if item.get("freshness") is None and item.get("periods_due"):
        return "n/a"
    return _ratio(item.get("freshness"), None)


def schedule_detail(overview: Any, as_json: bool) -> None:
    """Print ``schedules show NAME``, or JSON."""
    data = views.schedule_view(overview.schedule, overview.last_run, overview.slo, overview.maintenance)
    if as_json:
        _json(data)
        return
    table = Table(show_header=False, title=f"schedule {shown(data['name'])}")
    for key, value in data.items():
        table.add_row(key, shown(json.dumps(value) if isinstance(value, dict) else str(value)))
    out.print(table)


def audit(events: Sequence[AuditEvent], as_json: bool) -> None:
    """Print audit events (``schedules history``), or JSON (every event).

    The table groups consecutive events of one action by one actor as the web page does
    (``audit_groups``): an edit is not lost under 65 ``run_backfill`` rows."""
    from engine.read import audit_groups

    if as_json:
        _json([asdict(e) for e in events])
        return
    table = _compact("audit trail")
    for column in ("at", "actor", "action", "version", "reason", "change"):
        table.add_column(column, overflow="fold")
    for group in audit_groups.group_audit(events):
        e = group.events[-1]
        when = format_instant(group.first_at) or ""
        if group.count > 1:
            when += f"\n… {format_instant(group.last_at)}"
        action = shown(group.action) + (f" ×{group.count}" if group.count > 1 else "")
        versions = sorted({str(x.version) for x in group.events if x.version})
        # The actor is whatever $USER held: data, never markup (``USER='x[/]'`` broke every later history).
        table.add_row(when, shown(group.actor), action, ", ".join(versions),
                      shown("; ".join(group.reasons)), shown(_change(e) if group.count == 1 else ""))
    out.print(table)


def _change(e: AuditEvent) -> str:
    if e.before and e.after:
        diff = {k: (e.before.get(k), v) for k, v in e.after.items() if e.before.get(k) != v}
        return ", ".join(f"{k}: {a} -> {b}" for k, (a, b) in diff.items())
    return json.dumps(e.after) if e.after else ""


def fires(timezone: str, items: Sequence[Any], as_json: bool, skipped: Sequence[str | None] = ()) -> None:
    """Print upcoming fire times in UTC and local time (``schedules preview``), or JSON; ``skipped``: for each,
    why it will not run (a holiday, a maintenance window or a pause), when known."""
    reasons = list(skipped) + [None] * (len(items) - len(skipped))
    data = [{"utc": format_instant(f.at), "local": f.local.isoformat(), "moved": f.moved, "note": f.note,
             "skipped": reason} for f, reason in zip(items, reasons, strict=True)]
    if as_json:
        _json(data)
        return
    table = Table(title=f"next fire times ({timezone})")
    for column in ("local", "UTC", "DST", "runs?"):
        table.add_column(column)
    for item in data:
        table.add_row(item["local"], item["utc"] or "", f"[yellow]{shown(item['note'] or 'moved')}[/]"
                      if item["moved"] else "", f"[yellow]skipped: {item['skipped']}[/]" if item["skipped"] else "yes")
    out.print(table)


def draft(report: Any, as_json: bool) -> None:
    """A drafted schedule (SPEC §16.2): the entry, the verdict, the next fires, the TOML block."""
    data = report.as_json()
    if as_json:
        _json(data)
        return
    out.print(f"[bold]draft[/] by {shown(data['drafter'])}: {shown(data['rationale'])}")
    if not data["valid"]:
        for problem in data["errors"]:
            out.print(f"[red]invalid:[/] {shown(problem)}")
    else:
        out.print(f"[green]valid[/]: {data['runs_per_day']} runs/day, {data['runs_per_month']:,} runs this month")
        fires(str(data["draft"].get("timezone", "UTC")), report.preview, False, report.skipped_each())
    for warning in (data["risk"], data["policy"]):
        if warning:
            warn(warning)
    for line in data["model_time"]:
        say(line)
    if data["exists"]:
        warn(f"a schedule named '{data['draft'].get('name')}' is already in the config file")
    out.print(output.inert(data["toml"]), highlight=False, markup=False)


def validation(expr: str, timezone: str, result: Any, as_json: bool, counts: Any = None,
               policy: str | None = None) -> None:
    """Print a cron check (``schedules validate``): valid or its problems, runs per day and month, or JSON."""
    data = {
        "cron": expr, "timezone": timezone, "valid": result.ok, "runs_per_day": round(result.runs_per_day, 2),
        "busiest_day_runs": counts.per_day if counts else None, "runs_per_month": counts.per_month if counts else None,
        "policy": policy,
        "min_interval_s": result.min_interval.total_seconds() if result.min_interval else None,
        "problems": [{"field": f, "problem": p} for f, p in result.problems],
        "next_fires": [{"utc": format_instant(f.at), "local": f.local.isoformat(), "moved": f.moved}
                       for f in result.next_fires],
    }
    if as_json:
        _json(data)
        return
    verdict = "[green]valid[/]" if result.ok else "[bold red]invalid[/]"
    out.print(f"{shown(expr)} in {shown(timezone)}: {verdict}; about {data['runs_per_day']} runs/day")
    if counts is not None:
        out.print(f"  {counts.describe()}")
    if policy and result.ok:  # a refused expression says why in one line; how often it would fire is moot
        warn(policy)
    for field_name, problem in result.problems:
        err.print(f"[red]{shown(field_name)}:[/] {shown(problem)}")
    for fire in data["next_fires"]:
        out.print(f"  {fire['local']}  ({fire['utc']}){'  DST-moved' if fire['moved'] else ''}")


@contextmanager
def progress(label: str, *, quiet: bool = False) -> Iterator[Callable[[int, int], None]]:
    """A progress callback ``(done, total)`` shown on a terminal (nothing when quiet or piped)."""
    if quiet or not err.is_terminal:
        yield lambda done, total: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # its own 70 ms

    bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                   transient=True)
    with bar:
        task = bar.add_task(label, total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield advance


def backfill_report(report: Any, dry_run: bool, as_json: bool) -> None:
    """Print what a backfill created, requeued and left alone, or JSON."""
    data = {"dry_run": dry_run, "created": report.created, "requeued": report.requeued,
            "left": [{"business_key": k, "status": s} for k, s in report.left], "present": report.present,
            "future": report.future, "pruned": report.pruned, "no_slot": report.no_slot}
    if as_json:
        _json(data)
        return
    verb = "would create" if dry_run else "created"
    say(f"{verb} {len(report.created)}, {'would re-queue' if dry_run else 're-queued'} {len(report.requeued)}, "
        f"already present {len(report.present)}, left alone {len(report.left)}, future {len(report.future)}, "
        f"no slot {len(report.no_slot)}")
    for key, left_status in report.left:
        say(f"  {key}: {left_status} (left as is; use `reportflow runs retry` or `trigger`)")
    if report.future:
        say(f"  not yet due: {', '.join(report.future)}")
    if report.pruned:
        say(f"  pruned earlier, left out (use --include-pruned to run them again): {len(report.pruned)} "
            f"({report.pruned[0]} .. {report.pruned[-1]})")
    if report.no_slot:
        say(f"  no slot (the cron never fires for these periods): {', '.join(report.no_slot)}")


def prune_report(report: Any, as_json: bool) -> None:
    """Print what a prune removed (or would remove, ``--dry-run``), or JSON."""
    data = {"before": report.before.isoformat(), "dry_run": report.dry_run, "removed": report.removed,
            "counts": report.counts,
            "ranges": [{"schedule_id": r.schedule_id, "first": r.first.isoformat(), "last": r.last.isoformat(),
                        "counts": dict(r.counts)} for r in report.ranges]}
    if as_json:
        _json(data)
        return
    verb = "would remove" if report.dry_run else "removed"
    detail = ", ".join(f"{status} {n}" for status, n in sorted(report.counts.items()))
    say(f"{verb} {report.removed} finished runs whose period ended before {report.before.isoformat()}"
        + (f" ({detail})" if detail else ""))


def runs(items: Sequence[Run], now: datetime, as_json: bool) -> None:
    """Print ``runs list``: a compact table that fits 100 columns, or JSON (every field).

    A run is its schedule and period (its key and slot are in ``runs show`` and ``--json``); a backfilled
    run's delay says ``backfill``, since its slot was in the past when it was created; a run
    that succeeded on a quiet period says why it wrote nothing (``no commits``)."""
    if as_json:
        _json([views.run_summary(r, now) for r in items])
        return
    table = _compact("runs")
    for column in ("id", "schedule", "period", "trigger", "status", "att", "delay", "took", "error"):
        table.add_column(column, overflow="fold", justify="right" if column in ("id", "att") else "left",
                         no_wrap=column in ("id", "schedule", "period", "trigger", "status", "att", "delay", "took"))
    for run in items:
        failure = ""
        if run.error_code:
            step = views.failed_step(run)
            failure = f"{step + ': ' if step else ''}{run.error_code}"
        if run.waits_for is not None:  # what it waits for, and what will happen (SPEC §15.5)
            failure = f"{failure + '; ' if failure else ''}{healing.describe_wait(run.waits_for)}"
        stalled = views.run_summary(run, now)["stalled"]
        notes = [*([f"[dim]{shown(run.reason)}[/]"] if run.reason else []),
                 *([f"[dim]{shown(run.quiet)}[/]"] if run.quiet else []),
                 *([f"[yellow]held: {shown(run.held)}[/]"] if run.held else [])]
        # The schedule names the workflow and project; a child run has none, its project says which it is.
        who = shown(run.schedule_name) if run.schedule_name else f"↳ {shown(run.project or '')}"
        table.add_row(
            str(run.id), who, shown(run.business_key) + (f" r{run.revision}" if run.revision > 1 else ""),
            run.trigger.value.lower(),
            "\n".join([_status(run.status.value) + (" [red](stalled)[/]" if stalled else ""), *notes]),
            f"{run.attempt_count}/{run.max_attempts}",
            # A run asked for starts when asked, not at its slot: its trigger, not a delay.
            run.trigger.value.lower() if run.trigger is not RunTrigger.SCHEDULED
            else _compact_secs(views._seconds(run.start_delay)),
            _compact_secs(views._seconds(run.duration)), shown(failure))
    out.print(table)


def run_detail(run: Run, now: datetime, as_json: bool) -> None:
    """Print ``runs show RUN``: steps, attempts, pins, artifacts, errors, or JSON."""
    data = views.run_detail(run, now)
    if as_json:
        _json(data)
        return
    zone = ZoneInfo(str(run.pinned.get("timezone", "UTC")))
    out.print(f"[bold]run {run.id}[/] {shown(run.idempotency_key)}  {_status(run.status.value)}  "
              f"trigger {run.trigger.value}  attempts {run.attempt_count}/{run.max_attempts}")
    out.print(f"slot {format_instant(run.scheduled_for)} ({run.scheduled_for.astimezone(zone).isoformat()}), "
              f"start delay {_compact_secs(data['start_delay_s']) or '-'}, duration {_compact_secs(data['duration_s']) or '-'}")
    if run.held:
        out.print(f"[yellow]held: {shown(run.held)}[/] (no worker claims it until the schedule is enabled)")
    if run.error_code:
        out.print(f"[red]error {shown(run.error_code)}:[/] {shown(run.error_message or '')}")
        if data["runbook"]:
            out.print(f"what to do: {shown(data['runbook'])}")
    if run.waits_for is not None:
        out.print(f"[yellow]{shown(healing.describe_wait(run.waits_for))}[/]")
    if data["upstream"] is not None:
        upstream = data["upstream"]["message"] or f"waited for {dependencies.describe(run.upstream) or 'no upstream period'}"
        out.print(f"[cyan]{shown(upstream)}[/]")
    if run.parent_id is not None:
        out.print(f"parent run {run.parent_id} (reportflow runs show {run.parent_id})")
    if data["grounding"]:
        grounding = data["grounding"]
        out.print(f"grounding [bold]{shown(grounding['verdict'])}[/]"
                  + "".join(f"\n  - {shown(v)}" for v in grounding.get("violations", [])))
    steps = Table(title="steps")
    for column in ("#", "step", "status", "tries", "started", "finished", "error"):
        steps.add_column(column)
    for s in data["steps"]:
        steps.add_row(str(s["position"]), shown(s["name"]), _status(s["status"]), str(s["attempts"]),
                      s["started_at"] or "", s["finished_at"] or "",
                      shown(f"{s['error_code'] or ''} {s['error_message'] or ''}".strip()))
    out.print(steps)
    attempts = Table(title="attempts")
    for column in ("#", "trigger", "from step", "outcome", "worker", "started", "finished", "error"):
        attempts.add_column(column)
    for a in data["attempts"]:
        attempts.add_row(str(a["number"]), a["trigger"], shown(a["from_step"] or ""), a["outcome"],
                         shown(a["worker_id"] or ""), a["started_at"] or "", a["finished_at"] or "",
                         shown(a["error_code"] or ""))
    out.print(attempts)
    pinned = Table(title="pinned inputs", show_header=False)
    for key, value in data["pinned"].items():
        pinned.add_row(shown(key), shown(json.dumps(value) if not isinstance(value, str) else value))
    out.print(pinned)
    if data["artifacts"]:
        artifacts = Table(title="artifacts")
        for column in ("kind", "location", "sha256"):
            artifacts.add_column(column)
        for a in data["artifacts"]:
            artifacts.add_row(shown(a["kind"]), shown(a["location"]), (a["sha256"] or "")[:16])
        out.print(artifacts)
    if data["deliveries"]:
        sent = Table(title="deliveries")
        for column in ("target", "state", "kind", "tries", "sent", "note"):
            sent.add_column(column)
        for d in data["deliveries"]:
            note = " ".join(part for part in (d["error"], f"(resend: {d['resend']})" if d["resend"] else None) if part)
            sent.add_row(shown(d["target"]), _status(d["state"]), d["kind"], str(d["attempts"]), d["sent_at"] or "",
                         shown(note))
        out.print(sent)
    if data["children"]:
        children = Table(title="child runs")
        for column in ("id", "key", "project", "status"):
            children.add_column(column)
        for c in data["children"]:
            children.add_row(str(c["id"]), shown(c["key"]), shown(c["project"]), _status(c["status"]))
        out.print(children)


def findings(items: Sequence[Any], as_json: bool) -> None:
    """Print ``doctor``'s findings, problems marked, or JSON."""
    if as_json:
        _json([asdict(f) for f in items])
        return
    for f in items:
        mark = "[bold red]PROBLEM[/]" if f.problem else "[yellow]warning[/]" if f.warning else "[green]ok[/]"
        out.print(f"{mark} {shown(f.check)}: {shown(f.message)}")


def workflows(items: Sequence[WorkflowDef], as_json: bool) -> None:
    """Print ``workflows list``, or JSON."""
    data = [views.workflow_view(w) for w in items]
    if as_json:
        _json(data)
        return
    table = Table(title="workflows")
    for column in ("name", "period", "payload", "steps", "origin"):
        table.add_column(column)
    for item in data:
        table.add_row(shown(item["name"]), item["period"], f"v{item['payload_version']}",
                      shown(" > ".join(s["name"] for s in item["steps"])), shown(item["origin"]))
    out.print(table)


def workflow(item: WorkflowDef, as_json: bool) -> None:
    """Print ``workflows show NAME``, or JSON."""
    data = views.workflow_view(item)
    if as_json:
        _json(data)
        return
    say(f"workflow {data['name']}: period {data['period']}, payload version {data['payload_version']}")
    say(f"origin: {data['origin']}")
    if data["sections"]:
        say(f"config sections: {', '.join(data['sections'])}")
    table = Table(title="steps")
    for column in ("#", "step", "timeout", "optional", "output", "retryable codes", "retry budget"):
        table.add_column(column)
    for index, step in enumerate(data["steps"], 1):
        table.add_row(str(index), shown(step["name"]), _compact_secs(step["timeout_s"]), "yes" if step["optional"] else "",
                      shown(step["output_model"] or ""), shown(", ".join(step["retry_on"])),
                      _compact_secs(step["retry_budget_s"]) if step["retry_budget_s"] else "")
    out.print(table)


def notifications(items: Sequence[Any], as_json: bool, *, targets: bool = True) -> None:
    """Recorded alerts (``notifications list``) in a table that fits 100 columns: when, what, how loud, and
    whether they were delivered; ``targets``: whether a webhook or Apprise target is configured (without one,
    alerts are only recorded, and the list says so rather than leave them pending)."""
    from engine.read import alert_log

    data = [alert_log.notification_view(a) for a in items]
    if as_json:
        _json(data)
        return
    if not targets:
        say("no webhook or Apprise target is configured (webhook_env, apprise_env of the notify section): alerts "
            "are recorded here and on the page, and sent nowhere")
    if not data:
        out.print("no notifications recorded")
        return
    table = _compact("notifications")
    for column in ("at", "event", "sev", "schedule", "summary", "delivery"):
        table.add_column(column, overflow="fold", no_wrap=column in ("at", "event", "sev", "schedule"))
    for item in data:
        delivery = item["status"].lower() if targets or item["status"] != "PENDING" else "not sent (no target)"
        if targets and item["status"] == "PENDING" and item["attempts"]:
            delivery = f"pending: {item['attempts']} tries, next {item['next_try_at']} ({item['last_error']})"
        table.add_row(_local(item["at"]), shown(item["event"]), shown(item["severity"]),
                      shown(item.get("schedule") or ""), shown(item["summary"]), shown(delivery))
    out.print(table)
