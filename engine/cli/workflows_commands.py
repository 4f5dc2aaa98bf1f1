"""``reportflow workflows ...``: the workflows this config can run (list, show).

No ``from __future__ import annotations``: Typer reads every command's signature at each start
(see ``cli.app``); engine types are quoted and engine modules imported inside the commands.
"""

import typer

from engine.cli import context

app = typer.Typer(help="Workflows: installed (entry points) and configured ([\\[workflows]]).",
                  no_args_is_help=True)

@app.command("list")
def workflows_list(ctx: typer.Context, as_json: context.JsonOpt = False) -> None:
    """Every workflow this config can run: period, payload version, steps, origin.

    Example: reportflow --config examples/release_notes/reportflow.toml workflows list
    """
    from engine.cli import render

    registry = context.cli_of(ctx).registry()
    render.workflows([registry[name] for name in sorted(registry)], as_json)


@app.command("show")
def workflows_show(ctx: typer.Context, name: str, as_json: context.JsonOpt = False) -> None:
    """One workflow's steps (timeout, optional, output model, retryable codes, retry budget) and origin.

    Example: reportflow workflows show daily_report
    """
    from engine.cli import render
    from engine.plugins import workflow_registry

    render.workflow(workflow_registry.get(context.cli_of(ctx).registry(), name), as_json)
