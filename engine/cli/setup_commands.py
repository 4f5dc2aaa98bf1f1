"""Setting a node up and checking it: ``init``, ``metrics``, ``doctor`` (``cli.app`` registers them).

No ``from __future__ import annotations``: Typer reads every command's signature at each start
(see ``cli.app``); engine types are quoted and engine modules imported inside the commands.
"""

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from engine.cli import context, output


def init_command(ctx: typer.Context,
         repo: Annotated[Optional[list[Path]], typer.Option(
             help="Git repository to report on; give it once per repository.")] = None,
         timezone: Annotated[str, typer.Option(help="IANA timezone of the schedules.")] = "UTC",
         force: Annotated[bool, typer.Option(help="Overwrite an existing config.")] = False) -> None:
    """Write a starter reportflow.toml and create the database.

    Example: reportflow init --repo ~/src/platform --repo ~/src/web --timezone Asia/Seoul
    """
    from engine.app import init
    from engine.store import database

    cli = context.cli_of(ctx)
    path = init.write_starter(cli.config_path, repos=repo or [Path(".")], timezone=timezone, force=force)
    runtime = cli.runtime()
    output.say(f"wrote {path} ({len(runtime.config.schedules)} schedules); database ready at "
               f"{database.safe_url(runtime.config.store_url)}")
    output.say("next: `reportflow schedules apply`, then keep `reportflow serve` running, or add "
               "`* * * * * reportflow cycle` to the system's crontab")


def metrics_command(ctx: typer.Context) -> None:
    """Prometheus text exposition computed from the database. Example: reportflow metrics"""
    from engine.read import metrics

    rt = context.cli_of(ctx).runtime()
    sys.stdout.write(metrics.exposition(rt))


def doctor_command(ctx: typer.Context, as_json: context.JsonOpt = False) -> None:
    """Check config, database, repositories, Ollama, Notion, artifacts, stalled runs, silent schedules, clock skew.

    Exits 1 when something needs a person. Example: reportflow doctor
    """
    from engine.cli import render
    from engine.read import doctor

    cli = context.cli_of(ctx)
    findings = doctor.run_checks(cli.config_path, db_url=cli.db_url, clock=cli.clock())
    render.findings(findings, as_json)
    if any(f.problem for f in findings):
        raise typer.Exit(1)
