"""``reportflow schedules ...``: apply, list, show, history, preview, validate, enable, disable, pause, resume,
set, draft.

No ``from __future__ import annotations``: Typer reads every command's signature at each start
(see ``cli.app``); engine types are quoted and engine modules imported inside the commands.
"""

from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from engine.cli import context, output
from engine.core import errors
from engine.core.models import PeriodKind
from engine.core.schedule_spec import DstFold, DstGap, Misfire, Overlap, ReportOn, SchedulePriority

if TYPE_CHECKING:
    from engine.store.handle import Store

app = typer.Typer(help="Schedule definitions: apply, inspect, preview, edit.", no_args_is_help=True)

@app.command("apply")
def schedules_apply(ctx: typer.Context,
                    yes: Annotated[bool, typer.Option("--yes", help="Confirm a high-risk change.")] = False,
                    overwrite: Annotated[bool, typer.Option(
                        "--overwrite", help="Let the file win over edits made in the database (audited).")] = False,
                    dry_run: Annotated[bool, typer.Option(
                        "--dry-run", help="Print the plan (diffs and drift included); write nothing.")] = False) -> None:
    r"""Sync [\[schedules]] from the config into the database; refuses drift (exit 3). Example: reportflow schedules apply --dry-run"""
    from engine.cli import render
    from engine.scheduling import definitions

    report = definitions.apply(context.cli_of(ctx).runtime(strict=True), confirmed=yes, overwrite=overwrite, dry_run=dry_run)
    render.apply_report(report)


@app.command("list")
def schedules_list(ctx: typer.Context, as_json: context.JsonOpt = False,
                   archived: Annotated[bool, typer.Option(help="Include archived schedules.")] = False) -> None:
    """Definitions, next run (local and UTC) and last result. Example: reportflow schedules list --json"""
    from engine.cli import render
    from engine.read import schedule_queries

    render.schedules(schedule_queries.schedules_overview(context.cli_of(ctx).runtime(), include_archived=archived), as_json)


@app.command("show")
def schedules_show(ctx: typer.Context, name: str, as_json: context.JsonOpt = False) -> None:
    """One schedule in full. Example: reportflow schedules show platform-daily"""
    from engine.cli import render
    from engine.read import schedule_queries

    render.schedule_detail(schedule_queries.schedule_overview(context.cli_of(ctx).runtime(), name), as_json)


@app.command("history")
def schedules_history(ctx: typer.Context, name: str, as_json: context.JsonOpt = False) -> None:
    """The audit trail of a schedule. Example: reportflow schedules history platform-daily"""
    from engine.cli import render
    from engine.scheduling import definitions

    render.audit(definitions.history(context.cli_of(ctx).runtime(), name), as_json)


@app.command("preview")
def schedules_preview(ctx: typer.Context, name: str,
                      n: Annotated[int, typer.Option("-n", min=1, max=1000, help="How many fire times.")] = 5,
                      as_json: context.JsonOpt = False) -> None:
    """Next fire times from now, local and UTC; DST-moved ones are marked, and those a holiday, a maintenance
    window or a pause will skip.

    Example: reportflow schedules preview platform-daily -n 10
    """
    from engine.cli import render
    from engine.read import schedule_queries

    rt = context.cli_of(ctx).runtime()
    spec, fires, skipped = schedule_queries.preview(rt, name, n)
    render.fires(spec.timezone, fires, as_json, skipped)


@app.command("validate")
def schedules_validate(
    ctx: typer.Context,
    cron_expr: Annotated[str, typer.Option("--cron", help="Cron expression (5 fields).")],
    timezone: Annotated[str, typer.Option("--timezone", help="IANA timezone.")],
    workflow: Annotated[Optional[str], typer.Option("--workflow", help="Check one slot per period.")] = None,
    allow_frequent: Annotated[bool, typer.Option(help="Allow intervals under 5 minutes.")] = False,
    as_json: context.JsonOpt = False,
) -> None:
    """Validate a cron and timezone; exit 2 if invalid.

    Example: reportflow schedules validate --cron "30 19 * * *" --timezone Asia/Seoul --workflow daily_report
    """
    from engine.cli import render
    from engine.core import run_counts
    from engine.core.cron import validate

    period = PeriodKind.SLOT
    if workflow is not None:
        registry = context.cli_of(ctx).registry()
        if workflow not in registry:
            raise errors.InvalidInput(f"unknown workflow '{workflow}' (known: {', '.join(sorted(registry))})")
        period = registry[workflow].period
    now = context.cli_of(ctx).clock().now()
    result = validate.check(cron_expr, timezone, now=now, period=period, allow_frequent=allow_frequent)
    counts, policy = run_counts.check_cron(cron_expr, timezone, now)
    render.validation(cron_expr, timezone, result, as_json, counts, policy)
    if not result.ok:
        raise typer.Exit(2)


@app.command("enable")
def schedules_enable(ctx: typer.Context, name: str,
                     reason: Annotated[Optional[str], typer.Option(help="Why (audited).")] = None) -> None:
    """Re-enable a schedule; it starts from now. Example: reportflow schedules enable platform-daily"""
    from engine.scheduling import definitions

    schedule, changed = definitions.set_enabled(context.cli_of(ctx).runtime(strict=True), name, enabled=True, reason=reason)
    output.say(f"schedule {name} {'enabled' if changed else 'was already enabled'} (version {schedule.version})")


@app.command("disable")
def schedules_disable(ctx: typer.Context, name: Annotated[Optional[str], typer.Argument()] = None,
                      reason: Annotated[str, typer.Option(help="Why (audited, required).")] = "",
                      all_: Annotated[bool, typer.Option("--all", help="Every live schedule (the global switch).")]
                      = False,
                      cancel_queued: Annotated[bool, typer.Option(
                          "--cancel-queued", help="Cancel the runs not yet started instead of holding them.")]
                      = False) -> None:
    """Audited kill switch: runs not yet started are held. Example: reportflow schedules disable platform-daily --reason "repo migration" """
    from engine.scheduling import definitions

    if not reason.strip():
        raise errors.InvalidInput("--reason is required to disable a schedule")
    if all_ == (name is not None):
        raise errors.InvalidInput("name one schedule or give --all")
    rt = context.cli_of(ctx).runtime(strict=True)
    if name is None:
        changed = definitions.disable_all(rt, reason=reason, cancel_queued=cancel_queued)
        output.say(f"disabled {len(changed)} schedule(s)" + (f": {', '.join(s.name for s in changed)}" if changed else ""))
        return
    schedule, did = definitions.set_enabled(rt, name, enabled=False, reason=reason, cancel_queued=cancel_queued)
    output.say(f"schedule {name} {'disabled' if did else 'was already disabled'} (version {schedule.version})")


@app.command("pause")
def schedules_pause(ctx: typer.Context, name: str,
                    until: Annotated[str, typer.Option(help="When it ends: an instant with its offset.")],
                    reason: Annotated[str, typer.Option(help="Why (audited, required).")] = "") -> None:
    """A maintenance window for one schedule: its slots until then are not run, no late, silent or stuck
    alert is raised; a running run finishes. Example: reportflow schedules pause platform-daily --until 2026-10-10T09:00:00+09:00 --reason "repo migration" """
    from engine.core import inputs
    from engine.core.clock import format_instant
    from engine.scheduling import definitions

    if not reason.strip():
        raise errors.InvalidInput("--reason is required to pause a schedule")
    end = inputs.instant(until)
    schedule = definitions.pause(context.cli_of(ctx).runtime(strict=True), name, until=end, reason=reason)
    output.say(f"schedule {name} paused until {format_instant(schedule.paused_until)} "
               f"(version {schedule.version})")


@app.command("resume")
def schedules_resume(ctx: typer.Context, name: str,
                     reason: Annotated[Optional[str], typer.Option(help="Why (audited).")] = None) -> None:
    """End a pause early: slots from now on run. Example: reportflow schedules resume platform-daily"""
    from engine.scheduling import definitions

    schedule, changed = definitions.resume(context.cli_of(ctx).runtime(strict=True), name, reason=reason)
    output.say(f"schedule {name} {'resumed' if changed else 'was not paused'} (version {schedule.version})")


@app.command("set")
def schedules_set(
    ctx: typer.Context, name: str,
    expect_version: Annotated[int, typer.Option("--expect-version", help="The version you read (optimistic lock).")],
    cron_expr: Annotated[Optional[str], typer.Option("--cron")] = None,
    timezone: Annotated[Optional[str], typer.Option("--timezone")] = None,
    misfire: Annotated[Optional[Misfire], typer.Option("--misfire")] = None,
    overlap: Annotated[Optional[Overlap], typer.Option("--overlap")] = None,
    report_on: Annotated[Optional[ReportOn], typer.Option("--report-on")] = None,
    grace: Annotated[Optional[str], typer.Option("--grace")] = None,
    dst_gap: Annotated[Optional[DstGap], typer.Option("--dst-gap")] = None,
    dst_fold: Annotated[Optional[DstFold], typer.Option("--dst-fold")] = None,
    priority: Annotated[Optional[SchedulePriority], typer.Option(
        "--priority", help="Whose runs workers claim first; runs not started yet follow.")] = None,
    reason: Annotated[Optional[str], typer.Option(help="Why (audited).")] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Confirm a high-risk change.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the next fire times before and after; write "
                                                             "nothing.")] = False,
) -> None:
    """Audited edit with an optimistic lock; a stale --expect-version exits 3.

    Example: reportflow schedules set platform-daily --cron "0 20 * * *" --expect-version 3
    """
    from engine.config import durations
    from engine.scheduling import definitions

    changes: dict[str, Any] = {k: v for k, v in dict(cron=cron_expr, timezone=timezone, misfire=misfire,
                                                     overlap=overlap, report_on=report_on, dst_gap=dst_gap,
                                                     dst_fold=dst_fold, priority=priority).items() if v is not None}
    if grace is not None:
        try:
            changes["grace"] = durations.parse(grace)
        except ValueError as exc:
            raise errors.InvalidInput(f"--grace: {exc}") from None
    if not changes:
        raise errors.InvalidInput("nothing to change: pass --cron, --timezone, --misfire, --overlap, ...")
    rt = context.cli_of(ctx).runtime(strict=True)
    if dry_run:
        before, after, risk = definitions.plan_set(rt, name, expect_version=expect_version, changes=changes,
                                                   confirmed=True)
        if risk:
            output.warn(risk)
        output.say(f"dry run, nothing written: {name} next fire times "
                   f"{', '.join(definitions.next_fires(before, rt.clock.now()))} → "
                   f"{', '.join(definitions.next_fires(after, rt.clock.now()))}")
        return
    schedule, warning = definitions.set_schedule(rt, name, expect_version=expect_version,
                                               changes=changes, confirmed=yes, reason=reason)
    if warning:
        output.warn(warning)
    output.say(f"schedule {name} is now version {schedule.version}")


@app.command("draft")
def schedules_draft(
    ctx: typer.Context, text: str,
    project: Annotated[Optional[str], typer.Option("--project", help="The project it is for.")] = None,
    workflow: Annotated[Optional[str], typer.Option("--workflow", help="The workflow it runs.")] = None,
    name: Annotated[Optional[str], typer.Option("--name", help="The schedule's name.")] = None,
    write: Annotated[bool, typer.Option("--write", help="Append the block to the config file.")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Write without asking.")] = False,
    as_json: context.JsonOpt = False,
) -> None:
    """A schedule from a sentence, validated and previewed; never writes the database.

    The draft loses no commit: it reports from the previous slot to this one, placing each commit
    in the report after it landed. A sentence that names no timezone is read in the config's.

    Example: reportflow schedules draft "every weekday at 18:30 Seoul time, daily report for web"
    """
    from engine.cli import render
    from engine.operations import drafts
    from engine.plugins import workflow_registry
    from engine.scheduling import model_time

    cli = context.cli_of(ctx)
    config, registry = workflow_registry.load_with_config(cli.config_path, db_override=cli.db_url)
    store = _existing_store(config.store_url)
    try:
        asks = model_time.reader(store, registry, config.workflow_settings.get) if store is not None else None
        report = drafts.draft(config, registry, text, now=cli.clock().now(), project=project,
                              workflow=workflow, name=name, model_time=asks)
    finally:
        if store is not None:
            store.dispose()
    render.draft(report, as_json)
    if not report.valid:
        raise errors.InvalidInput(f"the draft is not valid: {report.errors[0]}")
    if not write:
        return
    if report.exists:
        raise errors.Conflict(f"a schedule named '{report.draft.get('name')}' is already in "
                              f"{cli.config_path}; edit it there or draft another name")
    if not yes and not typer.confirm(f"append this schedule to {cli.config_path}?", err=True):
        raise typer.Exit(1)
    drafts.append(cli.config_path, report)
    output.say(f"appended schedule {report.draft.get('name')} to {cli.config_path}; "
               "run `reportflow schedules apply` to schedule it")


def _existing_store(url: str) -> "Store | None":
    """The database, to read recorded generation times from, when it is there and current; a draft never
    creates or upgrades one (None then, and the draft says nothing of model time)."""
    from engine.store import database
    from engine.store.handle import Store

    path = database.sqlite_path(url)
    if path is not None and not path.exists():
        return None
    unreadable: tuple[type[Exception], ...] = (errors.ReportflowError, *database.DATABASE_ERRORS)
    try:
        return Store.open(url, auto_migrate=False)
    except unreadable:
        return None
