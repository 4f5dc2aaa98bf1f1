"""``reportflow notifications ...``: the alerts recorded in the outbox and their delivery.

No ``from __future__ import annotations``: Typer reads every command's signature at each start
(see ``cli.app``); engine types are quoted and engine modules imported inside the commands.
"""

from typing import Annotated, Optional

import typer

from engine.cli import context
from engine.core import limits

app = typer.Typer(help="Alerts recorded in the outbox and their delivery.",
                  no_args_is_help=True)

@app.command("list")
def notifications_list(ctx: typer.Context,
                       pending: Annotated[bool, typer.Option("--pending", help="Only those not delivered yet.")] = False,
                       schedule: Annotated[Optional[str], typer.Option("--schedule", help="Only this schedule's.")] = None,
                       limit: Annotated[int, typer.Option("--limit", min=1, max=limits.NOTIFICATIONS_MAX)] = limits.NOTIFICATIONS,
                       as_json: context.JsonOpt = False) -> None:
    """Recorded alerts, newest first, with their delivery state. Example: reportflow notifications list --pending"""
    from engine.cli import render
    from engine.read import alert_log

    rt = context.cli_of(ctx).runtime()
    items = alert_log.list_notifications(rt, pending_only=pending, schedule=schedule, limit=limit)
    render.notifications(items, as_json, targets=rt.transports.has_targets)
