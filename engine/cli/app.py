"""The ``reportflow`` command line: a thin Typer adapter over the engine, assembled here.

Each command parses options, builds the runtime, calls one engine function and
renders its result (rich tables, or ``--json``). The commands live by sub-app
(``schedules_commands``, ``runs_commands``, ``db_commands``, ``workflows_commands``,
``notifications_commands``) and, for the top level, by kind (``setup_commands``,
``loop_commands``, ``action_commands``); this module declares the global options and
registers them all, in the order ``--help`` lists them. Exit codes are decided in one
place, ``main``: ReportflowError subclasses map to theirs (1 run-time failure,
2 invalid input, 3 conflict) and a database error is 1. The other ``try``
blocks only turn an unparsable option into ``InvalidInput`` or close a worker.
"""

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from engine.cli import (
    action_commands,
    context,
    db_commands,
    loop_commands,
    notifications_commands,
    options,
    output,
    runs_commands,
    schedules_commands,
    setup_commands,
    workflows_commands,
)
from engine.cli.version import version_text
from engine.core import errors

# Start-up cost (SPEC §11: --help, --version and a tick with nothing due within 1.3x of
# ``import sqlalchemy``): this module and the command modules import typer, the stdlib and
# ``engine.core`` (the option enums, errors, limits) only.
# The store, the config (pydantic), cron, the registry (workflows) and rich tables
# (``engine.cli.render``) are imported inside the commands that use them;
# tests/unit/test_import_budget.py keeps it so. No ``from __future__ import annotations`` here:
# Typer reads every command's signature at each start, and string annotations cost it a
# compile and an eval each (about 15 ms per start); the few engine types are quoted instead.

app = typer.Typer(help="reportflow: step-resumable scheduled pipelines and git work reports.\n\n"
                  "Example: reportflow --config reportflow.toml schedules apply",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
# The top-level commands, then the sub-apps, in the order of ``--help``.
for name, command in (("init", setup_commands.init_command), ("tick", loop_commands.tick_command),
                      ("work", loop_commands.work_command), ("cycle", loop_commands.cycle_command),
                      ("reconcile", loop_commands.reconcile), ("serve", loop_commands.serve_command),
                      ("ui", loop_commands.ui), ("trigger", action_commands.trigger),
                      ("backfill", action_commands.backfill), ("prune", action_commands.prune_command),
                      ("metrics", setup_commands.metrics_command), ("doctor", setup_commands.doctor_command)):
    app.command(name)(command)
for name, sub_app in (("schedules", schedules_commands.app), ("runs", runs_commands.app), ("db", db_commands.app),
                      ("workflows", workflows_commands.app), ("notifications", notifications_commands.app)):
    app.add_typer(sub_app, name=name)


def _print_version(value: bool) -> None:
    if value:
        sys.stdout.write(version_text() + "\n")
        raise typer.Exit()


@app.callback()
def main_options(
    ctx: typer.Context,
    config: Annotated[Optional[Path], typer.Option(options.CONFIG, envvar=options.ENV[options.CONFIG],
                                                   help="Config file (default ./reportflow.toml).")] = None,
    now: Annotated[Optional[str], typer.Option(options.NOW, envvar=options.ENV[options.NOW],
                                               help="Start the clock at T (ISO 8601), or T@UNIX to share it.")] = None,
    db: Annotated[Optional[str], typer.Option(options.DB, envvar=options.ENV[options.DB],
                                              help="Database URL override.")] = None,
    log_format: Annotated[str, typer.Option(options.LOG_FORMAT, help="text or json.")] = "text",
    version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_print_version,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Global options come before the subcommand: reportflow --config F --now T tick"""
    from engine.core import logs

    if log_format not in options.LOG_FORMATS:
        raise errors.InvalidInput(f"--log-format must be text or json, not '{log_format}'")
    logs.configure(log_format)
    if config is None:
        from engine.config.defaults import DEFAULT_CONFIG

        config = Path(DEFAULT_CONFIG)
        explicit = False
    else:
        explicit = True
    ctx.obj = context.Cli(config_path=config, now_spec=now, db_url=db, explicit_config=explicit)
    if now:
        from engine.core import clock

        clock.clock_from_spec(now)  # refuse a bad --now before anything runs


def main() -> None:
    """Console entry point: Typer handles usage errors (exit 2); engine errors map to their exit codes."""
    try:
        app()
    except errors.ReportflowError as exc:
        output.error(exc.message, code=exc.code)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        # A database error can only come from SQLAlchemy once a command imported it.
        sa_exc = sys.modules.get("sqlalchemy.exc")
        if sa_exc is None or not isinstance(exc, sa_exc.SQLAlchemyError):
            raise
        # The driver's first line only: no SQL echo, no parameters.
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        output.error(f"database error: {reason}", code="DATABASE_ERROR")
        sys.exit(1)


if __name__ == "__main__":
    main()
