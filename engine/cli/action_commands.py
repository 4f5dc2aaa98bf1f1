"""What an operator asks for over a range of periods: ``trigger``, ``backfill``, ``prune`` (``cli.app`` registers them).

No ``from __future__ import annotations``: Typer reads every command's signature at each start
(see ``cli.app``); engine types are quoted and engine modules imported inside the commands.
"""

from typing import Annotated, Optional

import typer

from engine.cli import context, output
from engine.core import errors


def trigger(ctx: typer.Context, schedule: str,
            date_: Annotated[Optional[str], typer.Option("--date", help="Business date (YYYY-MM-DD).")] = None,
            from_: Annotated[Optional[str], typer.Option("--from", help="First business date of a range.")] = None,
            to: Annotated[Optional[str], typer.Option("--to", help="Last business date of a range.")] = None,
            force_new: Annotated[bool, typer.Option("--force-new", help="Make a new revision.")] = False,
            dry_run: Annotated[bool, typer.Option("--dry-run", help="A range: list, change nothing.")] = False,
            yes: Annotated[bool, typer.Option("--yes", help="A range: do not ask (for scripts).")] = False,
            as_json: context.JsonOpt = False) -> None:
    """A manual run for a business date (default: the latest slot), or for each period of a range (asks first).

    Example: reportflow trigger platform-daily --date 2026-09-29; reportflow trigger platform-daily --from 2026-09-01 --to 2026-09-07
    """
    from engine.operations import actions

    if from_ is None and to is None:
        if dry_run or yes:
            raise errors.InvalidInput("--dry-run and --yes go with a range (--from D --to D)")
        day = context.parse_date(date_, "--date") if date_ else None
        output.action(actions.trigger(context.cli_of(ctx).runtime(strict=True), schedule, day=day, force_new=force_new), as_json)
        return
    from engine.cli import bulk_render, render

    if date_ is not None or from_ is None or to is None:
        raise errors.InvalidInput("give --date D, or a range: --from D --to D (both)")
    first, last = context.parse_date(from_, "--from"), context.parse_date(to, "--to")
    rt = context.cli_of(ctx).runtime(strict=True)
    if not dry_run and not yes:
        planned = actions.trigger_range(rt, schedule, first=first, last=last, force_new=force_new, dry_run=True)
        acting = [r for r in planned.results if r.action != "unchanged"]
        if not acting:
            bulk_render.trigger_range(planned, True, as_json)
            return
        if not as_json:
            bulk_render.trigger_range(planned, True, False)
        context.confirm(f"trigger {len(acting)} period(s) of {schedule} from {first} to {last}?", "nothing triggered")
    with render.progress("trigger", quiet=as_json) as advance:
        report = actions.trigger_range(rt, schedule, first=first, last=last, force_new=force_new, dry_run=dry_run,
                                       progress=advance)
    bulk_render.trigger_range(report, dry_run, as_json)


def backfill(ctx: typer.Context, schedule: str,
             from_: Annotated[str, typer.Option("--from", help="First business date.")],
             to: Annotated[str, typer.Option("--to", help="Last business date.")],
             dry_run: Annotated[bool, typer.Option("--dry-run", help="List, change nothing.")] = False,
             include_pruned: Annotated[bool, typer.Option("--include-pruned",
                                                          help="Also periods a prune removed.")] = False,
             include_skipped: Annotated[bool, typer.Option(
                 "--include-skipped", help="Also run periods skipped for a holiday, maintenance or a pause.")] = False,
             as_json: context.JsonOpt = False) -> None:
    """Runs for every business period without a row or whose slot was missed, one report each; holidays and maintenance stay skipped unless --include-skipped. Example: reportflow backfill platform-daily --from 2026-09-01 --to 2026-09-30"""
    from engine.cli import render
    from engine.operations import actions

    first, last = context.parse_date(from_, "--from"), context.parse_date(to, "--to")
    rt = context.cli_of(ctx).runtime(strict=True)
    with render.progress("backfill", quiet=as_json) as advance:
        report = actions.backfill(rt, schedule, first=first, last=last, dry_run=dry_run, progress=advance,
                                     include_pruned=include_pruned, include_skipped=include_skipped)
    render.backfill_report(report, dry_run, as_json)


def prune_command(ctx: typer.Context,
          before: Annotated[str, typer.Option("--before", help="Business date: periods that ended before it.")],
          dry_run: Annotated[bool, typer.Option("--dry-run", help="Count, change nothing.")] = False,
          yes: Annotated[bool, typer.Option("--yes", help="Do not ask (for scripts).")] = False,
          as_json: context.JsonOpt = False) -> None:
    """Remove finished runs whose business period ended before a date (files and pages stay).

    Shows the count and asks first, unless --yes. Example: reportflow prune --before 2025-01-01 --dry-run
    """
    from engine.cli import render
    from engine.operations import prune

    day = context.parse_date(before, "--before")
    rt = context.cli_of(ctx).runtime(strict=True)
    if not dry_run and not yes:
        count = prune.prune(rt, day, dry_run=True)
        if count.removed == 0:
            render.prune_report(count, as_json)
            return
        question = (f"remove {count.removed} finished runs whose period ended before {day.isoformat()}? "
                    "(their files and Notion pages stay)")
        try:
            confirmed = typer.confirm(question, default=False, err=True)
        except typer.Abort:
            confirmed = False
        if not confirmed:
            raise errors.InvalidInput("nothing removed: prune not confirmed (answer y, or pass --yes in scripts)")
    render.prune_report(prune.prune(rt, day, dry_run=dry_run), as_json)
