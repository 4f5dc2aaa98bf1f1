"""``reportflow runs ...``: list, show, retry, resend, approve, cancel (one run, or a schedule's runs in bulk).

No ``from __future__ import annotations``: Typer reads every command's signature at each start
(see ``cli.app``); engine types are quoted and engine modules imported inside the commands.
"""

from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from engine.cli import context, output
from engine.core import errors, limits
from engine.core.models import RunStatus

if TYPE_CHECKING:
    from engine.runtime import Runtime

app = typer.Typer(help="Run history and operator actions: list, show, retry, approve, cancel.",
                  no_args_is_help=True)

@app.command("list")
def runs_list(ctx: typer.Context,
              status: Annotated[Optional[list[str]], typer.Option("--status", help="Filter by status.")] = None,
              schedule: Annotated[Optional[str], typer.Option("--schedule")] = None,
              limit: Annotated[int, typer.Option("--limit", min=0, help="0 for all.")] = limits.RUNS_LIST,
              parent: Annotated[Optional[str], typer.Option("--parent", help="Only this run's child runs.")] = None,
              sort: Annotated[str, typer.Option("--sort", help="slot: newest period first; created: newest made "
                                                               "first (a fresh backfill on top).")] = "slot",
              as_json: context.JsonOpt = False) -> None:
    """Run history, newest first. Example: reportflow runs list --status FAILED --json"""
    from engine.cli import render
    from engine.read import run_queries

    statuses = [s.upper() for s in status or []]
    for value in statuses:
        if value not in RunStatus.__members__:
            raise errors.InvalidInput(f"unknown status '{value}' (one of {', '.join(RunStatus.__members__)})")
    if sort not in ("slot", "created"):
        raise errors.InvalidInput(f"--sort {sort!r}: one of slot, created")
    rt = context.cli_of(ctx).runtime()
    parent_id = context.parse_run_id(parent) if parent is not None else None
    render.runs(run_queries.list_runs(rt, statuses=statuses, schedule=schedule, limit=limit, parent=parent_id,
                                      by_created=sort == "created"), rt.clock.now(), as_json)


@app.command("show")
def runs_show(ctx: typer.Context, run: str, as_json: context.JsonOpt = False) -> None:
    """Steps, attempts, pinned inputs, artifacts, errors. Example: reportflow runs show 42"""
    from engine.cli import render
    from engine.read import run_queries

    rt = context.cli_of(ctx).runtime()
    render.run_detail(run_queries.get_run(rt, context.parse_run_id(run)), rt.clock.now(), as_json)


@app.command("retry")
def runs_retry(ctx: typer.Context,
               run: Annotated[Optional[str], typer.Argument(help="The run (or --schedule).")] = None,
               from_step: Annotated[Optional[str], typer.Option("--from-step", help="Re-run from this step.")] = None,
               schedule: Annotated[Optional[str], typer.Option(
                   "--schedule", help="Every run of this schedule in --status (FAILED,PARTIAL_SUCCESS).")] = None,
               status: Annotated[Optional[list[str]], typer.Option(
                   "--status", help="With --schedule: the statuses to retry, comma-separated.")] = None,
               from_: Annotated[Optional[str], typer.Option("--from", help="With --schedule: first business date.")]
               = None,
               to: Annotated[Optional[str], typer.Option("--to", help="With --schedule: last business date.")] = None,
               dry_run: Annotated[bool, typer.Option("--dry-run", help="List, change nothing.")] = False,
               yes: Annotated[bool, typer.Option("--yes", help="Do not ask (for scripts).")] = False,
               as_json: context.JsonOpt = False) -> None:
    """A new attempt of the same run, or of every failed run of a schedule (asks first).

    Example: reportflow runs retry 42 --from-step UPLOAD_NOTION; reportflow runs retry --schedule platform-daily --status FAILED,PARTIAL_SUCCESS --from 2026-09-01 --to 2026-09-30
    """
    from engine.core import bulk
    from engine.operations import actions, bulk_actions

    if schedule is None:
        if run is None:
            raise errors.InvalidInput("name a run, or --schedule S for its failed runs")
        if status or from_ or to or dry_run or yes:
            raise errors.InvalidInput("--status, --from, --to, --dry-run and --yes go with --schedule")
        output.action(actions.retry(context.cli_of(ctx).runtime(strict=True), context.parse_run_id(run), from_step=from_step), as_json)
        return
    if run is not None:
        raise errors.InvalidInput("name a run or --schedule, not both")
    if from_step is not None:
        raise errors.InvalidInput("--from-step takes one run: `reportflow runs retry RUN --from-step STEP`")
    statuses = bulk.parse_statuses(status or [], bulk.RETRYABLE)
    first, last = context.optional_range(from_, to)
    rt = context.cli_of(ctx).runtime(strict=True)
    _bulk(bulk_actions.plan_retry(rt, schedule, statuses=statuses, first=first, last=last), rt,
          dry_run=dry_run, yes=yes, as_json=as_json)


@app.command("resend")
def runs_resend(ctx: typer.Context, run: str,
                target: Annotated[Optional[list[str]], typer.Option(
                    "--target", help="Only this delivery target (its variable's name); repeatable.")] = None,
                as_json: context.JsonOpt = False) -> None:
    """Send a report again where its delivery is unconfirmed or failed, once you have looked and it is not there.

    Example: reportflow runs resend 42 --target SLACK_REPORTS_URL
    """
    from engine.operations import actions

    output.action(actions.resend(context.cli_of(ctx).runtime(strict=True), context.parse_run_id(run),
                                 targets=target or None), as_json)


@app.command("approve")
def runs_approve(ctx: typer.Context,
                 run: Annotated[Optional[str], typer.Argument(help="The run (or --schedule S --all).")] = None,
                 schedule: Annotated[Optional[str], typer.Option("--schedule", help="With --all: this schedule's.")]
                 = None,
                 all_: Annotated[bool, typer.Option("--all", help="Every MANUAL_REQUIRED run of --schedule.")] = False,
                 from_: Annotated[Optional[str], typer.Option("--from", help="With --all: first business date.")]
                 = None,
                 to: Annotated[Optional[str], typer.Option("--to", help="With --all: last business date.")] = None,
                 dry_run: Annotated[bool, typer.Option("--dry-run", help="List, change nothing.")] = False,
                 yes: Annotated[bool, typer.Option("--yes", help="Do not ask (for scripts).")] = False,
                 as_json: context.JsonOpt = False) -> None:
    """Queue a MANUAL_REQUIRED run, or all of a schedule's (asks first).

    Example: reportflow runs approve 42; reportflow runs approve --schedule platform-daily --all
    """
    from engine.operations import actions, bulk_actions

    if schedule is None and not all_:
        if run is None:
            raise errors.InvalidInput("name a run, or --schedule S --all")
        if from_ or to or dry_run or yes:
            raise errors.InvalidInput("--from, --to, --dry-run and --yes go with --schedule S --all")
        output.action(actions.approve(context.cli_of(ctx).runtime(strict=True), context.parse_run_id(run)), as_json)
        return
    if run is not None:
        raise errors.InvalidInput("name a run or --schedule S --all, not both")
    if schedule is None or not all_:
        raise errors.InvalidInput("approving in bulk takes both --schedule S and --all")
    first, last = context.optional_range(from_, to)
    rt = context.cli_of(ctx).runtime(strict=True)
    _bulk(bulk_actions.plan_approve(rt, schedule, first=first, last=last), rt, dry_run=dry_run, yes=yes,
          as_json=as_json)


def _bulk(plan: Any, rt: "Runtime", *, dry_run: bool, yes: bool, as_json: bool) -> None:
    """Show the plan (all of it with --dry-run), ask unless --yes, then act on the runs shown."""
    from engine.cli import bulk_render, render
    from engine.operations import bulk_actions

    if dry_run or not plan.targets:
        bulk_render.plan(plan, as_json)
        return
    if not yes:
        if not as_json:
            bulk_render.plan(plan, False, limit=bulk_render.SHOWN_BEFORE_ASKING)
        context.confirm(bulk_render.question(plan), f"nothing {bulk_render.VERB[plan.action][1]}")
    with render.progress(plan.action, quiet=as_json) as advance:
        done = bulk_actions.execute(rt, plan, progress=advance)
    bulk_render.outcomes(plan, done, as_json)


@app.command("cancel")
def runs_cancel(ctx: typer.Context, run: str, as_json: context.JsonOpt = False) -> None:
    """Cancel a run that has not finished (a RUNNING one stops at its next step). Example: reportflow runs cancel 42"""
    from engine.operations import actions

    output.action(actions.cancel(context.cli_of(ctx).runtime(strict=True), context.parse_run_id(run)), as_json)
