"""``reportflow db ...``: the schema (upgrade) and a consistent copy of a SQLite database (backup).

No ``from __future__ import annotations``: Typer reads every command's signature at each start
(see ``cli.app``); engine types are quoted and engine modules imported inside the commands.
"""

from pathlib import Path

import typer

from engine.cli import context, output

app = typer.Typer(help="Database schema.", no_args_is_help=True)

@app.command("upgrade")
def db_upgrade(ctx: typer.Context) -> None:
    """Run Alembic migrations to head. Example: reportflow db upgrade"""
    from engine.store import database

    cli = context.cli_of(ctx)
    url = cli.store_url()
    engine = database.create_db_engine(url)
    try:
        before = database.current_revision(engine)
        if before == database.HEAD_REVISION:
            output.say(f"schema already at head ({database.HEAD_REVISION}); nothing to do")
            return
        if before is not None and before not in database.KNOWN_REVISIONS:
            database.ensure_schema(engine, auto_migrate=False)  # refuses: a newer reportflow migrated it
        database.upgrade(engine, wait=False)
        output.say(f"schema {before or 'empty'} -> {database.HEAD_REVISION}")
    finally:
        engine.dispose()


@app.command("backup")
def db_backup(ctx: typer.Context, path: Path) -> None:
    """A consistent copy of a SQLite database while workers run. Example: reportflow db backup backup.db"""
    from engine.app import signals
    from engine.store import backup, database

    cli = context.cli_of(ctx)
    url = cli.store_url()
    engine = database.create_db_engine(url)
    signals.exit_on_sigterm()  # the partial copy is removed on the way out, as for Ctrl-C
    try:
        if engine.dialect.name == "sqlite":
            database.ensure_schema(engine, auto_migrate=False)
        pages = backup.backup_sqlite(engine, path)
    finally:
        engine.dispose()
    output.say(f"backed up {database.safe_url(url)} to {path} ({pages} pages)")
