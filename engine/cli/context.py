"""What every command is handed: the global options (``Cli``, set by the main callback as ``ctx.obj``),
the runtime built from them, and the option parsing the sub-apps share.

Start-up cost: like ``cli.app``, this module imports typer, the stdlib and ``engine.core`` only; the
config, the registry and the store are imported inside the methods that build them. No
``from __future__ import annotations``: Typer reads the signatures that use ``JsonOpt`` at each start.
"""

import sys
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from engine.cli import output
from engine.core import errors

if TYPE_CHECKING:
    from engine.config import config_file
    from engine.core import clock
    from engine.plugins import workflow_registry
    from engine.runtime import Runtime

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


@dataclass
class Cli:
    config_path: Path
    now_spec: str | None
    db_url: str | None
    explicit_config: bool = False
    _runtime: "Runtime | None" = field(default=None)

    def clock(self) -> "clock.Clock":
        """The clock of this command: real time, or ``--now``'s."""
        from engine.core import clock

        return clock.clock_from_spec(self.now_spec)

    def config(self) -> "config_file.AppConfig":
        """The validated config (with ``--db`` applied); raises ConfigInvalid."""
        from engine.plugins import workflow_registry

        return workflow_registry.load_with_config(self.config_path, db_override=self.db_url)[0]

    def store_url(self) -> str:
        """The store URL as every command resolves it; with ``--db``/REPORTFLOW_DB the config is not read."""
        if self.db_url:
            from engine.config import defaults

            return defaults.store_url(self.db_url, None, self.config_path.parent.resolve())
        return self.config().store_url

    def registry(self) -> "workflow_registry.Registry":
        """Installed workflows plus the config's ``[[workflows]]``; installed only when no config file exists."""
        from engine.plugins import workflow_registry

        if self._runtime is not None:
            return self._runtime.registry
        if not self.config_path.exists() and not self.explicit_config:
            return workflow_registry.load_registry()
        return workflow_registry.load_with_config(self.config_path, db_override=self.db_url)[1]

    def runtime(self, *, strict: bool = False) -> "Runtime":
        """Validate the config first (bad input writes nothing), then open the store.

        An invalid ``[[schedules]]`` entry is left out, said in one line on stderr, so that reading
        history and the scheduling loops (``tick``, ``work``, ``cycle``, ``serve``) go on for the other
        schedules; ``strict``, for what an operator asks to change (``schedules apply``, ``trigger``,
        ``backfill``, ``runs retry``...), refuses the file instead: exit 2, nothing written.
        """
        if self._runtime is None:
            from engine.plugins import workflow_registry
            from engine.runtime import Runtime
            from engine.store.handle import Store

            clock = self.clock()
            config, registry = workflow_registry.load_with_config(self.config_path, db_override=self.db_url,
                                                                  sparing=not strict)
            for line in config.left_out:
                output.warn(f"{line} (the other schedules go on; fix it, then `reportflow schedules apply`)")
            store = Store.open(config.store_url)
            self._runtime = Runtime(store=store, registry=registry, config=config, clock=clock)
        return self._runtime


def cli_of(ctx: typer.Context) -> Cli:
    """The global options of this invocation (the main callback set them)."""
    state = ctx.obj
    assert isinstance(state, Cli), "the main callback sets ctx.obj"
    return state


def parse_date(text: str, option: str) -> date:
    """A business date given as ``option``; raises InvalidInput."""
    from engine.core import inputs

    return inputs.day(text, option)


def parse_run_id(text: str) -> int:
    """A run id as typed; raises InvalidInput."""
    from engine.core import inputs

    return inputs.run_id(text)


def optional_range(from_: str | None, to: str | None) -> "tuple[date | None, date | None]":
    """``--from`` and ``--to`` when given, each a business date."""
    return (parse_date(from_, "--from") if from_ else None, parse_date(to, "--to") if to else None)


def confirm(question: str, refusal: str) -> None:
    """Ask on stderr (default no); anything but yes, or no answer at all, changes nothing and exits 2."""
    try:
        confirmed = typer.confirm(question, default=False, err=True)
    except typer.Abort:  # no answer at all (a script without --yes): end the prompt's line first
        sys.stderr.write("\n")
        confirmed = False
    if not confirmed:
        raise errors.InvalidInput(f"{refusal}: not confirmed (answer y, or pass --yes in scripts)")
