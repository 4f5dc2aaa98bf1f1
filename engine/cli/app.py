"""The ``reportflow`` command line: a thin Typer adapter over the engine.

Each command parses options, builds the runtime, calls one engine function and
renders its result (rich tables, or ``--json``). Exit codes are decided in one
place, ``main``: ReportflowError subclasses map to theirs (1 run-time failure,
2 invalid input, 3 conflict) and a database error is 1. The other ``try``
blocks only turn an unparsable option into ``InvalidInput`` or close a worker.
"""

import os
import signal
import sys
import threading
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from engine.cli import options, output
from engine.cli.version import version_text
from engine.core import errors, limits
from engine.core.models import DstFold, DstGap, Misfire, Overlap, PeriodKind, ReportOn, RunStatus

if TYPE_CHECKING:
    from engine.cli import fast_tick
    from engine.config import config_file
    from engine.core import clock
    from engine.plugins import workflow_registry
    from engine.runtime import Runtime

# Start-up cost (SPEC §11: --help, --version and a tick with nothing due within 1.3x of
# ``import sqlalchemy``): this module imports typer, the stdlib and ``engine.core.models`` only.
# The store, the config (pydantic), cron, the registry (workflows) and rich tables
# (``engine.cli.render``) are imported inside the commands that use them;
# tests/unit/test_import_budget.py keeps it so. No ``from __future__ import annotations`` here:
# Typer reads every command's signature at each start, and string annotations cost it a
# compile and an eval each (about 15 ms per start); the few engine types are quoted instead.

app = typer.Typer(help="reportflow: step-resumable scheduled pipelines and git work reports.\n\n"
                  "Example: reportflow --config reportflow.toml schedules apply",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
schedules_app = typer.Typer(help="Schedule definitions: apply, inspect, preview, edit.", no_args_is_help=True)
runs_app = typer.Typer(help="Run history and operator actions: list, show, retry, approve, cancel.",
                       no_args_is_help=True)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
app.add_typer(schedules_app, name="schedules")
app.add_typer(runs_app, name="runs")
app.add_typer(db_app, name="db")
workflows_app = typer.Typer(help="Workflows: installed (entry points) and configured ([[workflows]]).",
                            no_args_is_help=True)
app.add_typer(workflows_app, name="workflows")

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


def _cli(ctx: typer.Context) -> Cli:
    state = ctx.obj
    assert isinstance(state, Cli), "the main callback sets ctx.obj"
    return state


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
        from engine.config.config_file import DEFAULT_CONFIG

        config = Path(DEFAULT_CONFIG)
        explicit = False
    else:
        explicit = True
    ctx.obj = Cli(config_path=config, now_spec=now, db_url=db, explicit_config=explicit)
    if now:
        from engine.core import clock

        clock.clock_from_spec(now)  # refuse a bad --now before anything runs


def _parse_date(text: str, option: str) -> date:
    from engine.core import inputs

    return inputs.day(text, option)


def _parse_run_id(text: str) -> int:
    from engine.core import inputs

    return inputs.run_id(text)


# --- setup -------------------------------------------------------------------

@app.command("init")
def init_command(ctx: typer.Context,
         repo: Annotated[Path, typer.Option(help="Git repository to report on.")] = Path("."),
         timezone: Annotated[str, typer.Option(help="IANA timezone of the schedules.")] = "UTC",
         force: Annotated[bool, typer.Option(help="Overwrite an existing config.")] = False) -> None:
    """Write a starter reportflow.toml and create the database.

    Example: reportflow init --repo ~/src/platform --timezone Asia/Seoul
    """
    from engine.app import init
    from engine.store import database

    cli = _cli(ctx)
    path = init.write_starter(cli.config_path, repo=repo, timezone=timezone, force=force)
    runtime = cli.runtime()
    output.say(f"wrote {path}; database ready at {database.safe_url(runtime.config.store_url)}")


@db_app.command("upgrade")
def db_upgrade(ctx: typer.Context) -> None:
    """Run Alembic migrations to head. Example: reportflow db upgrade"""
    from engine.store import database

    cli = _cli(ctx)
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


@db_app.command("backup")
def db_backup(ctx: typer.Context, path: Path) -> None:
    """A consistent copy of a SQLite database while workers run. Example: reportflow db backup backup.db"""
    from engine.store import backup, database

    cli = _cli(ctx)
    url = cli.store_url()
    engine = database.create_db_engine(url)
    _exit_on_sigterm()  # the partial copy is removed on the way out, as for Ctrl-C
    try:
        if engine.dialect.name == "sqlite":
            database.ensure_schema(engine, auto_migrate=False)
        pages = backup.backup_sqlite(engine, path)
    finally:
        engine.dispose()
    output.say(f"backed up {database.safe_url(url)} to {path} ({pages} pages)")


# --- schedules -----------------------------------------------------------------

@schedules_app.command("apply")
def schedules_apply(ctx: typer.Context,
                    yes: Annotated[bool, typer.Option("--yes", help="Confirm a high-risk change.")] = False,
                    overwrite: Annotated[bool, typer.Option(
                        "--overwrite", help="Let the file win over edits made in the database (audited).")] = False,
                    dry_run: Annotated[bool, typer.Option(
                        "--dry-run", help="Print the plan (diffs and drift included); write nothing.")] = False) -> None:
    """Sync [[schedules]] from the config into the database; refuses drift (exit 3). Example: reportflow schedules apply --dry-run"""
    from engine.cli import render
    from engine.scheduling import definitions

    report = definitions.apply(_cli(ctx).runtime(strict=True), confirmed=yes, overwrite=overwrite, dry_run=dry_run)
    render.apply_report(report)


@schedules_app.command("list")
def schedules_list(ctx: typer.Context, as_json: JsonOpt = False,
                   archived: Annotated[bool, typer.Option(help="Include archived schedules.")] = False) -> None:
    """Definitions, next run (local and UTC) and last result. Example: reportflow schedules list --json"""
    from engine.cli import render
    from engine.read import schedule_queries

    render.schedules(schedule_queries.schedules_overview(_cli(ctx).runtime(), include_archived=archived), as_json)


@schedules_app.command("show")
def schedules_show(ctx: typer.Context, name: str, as_json: JsonOpt = False) -> None:
    """One schedule in full. Example: reportflow schedules show platform-daily"""
    from engine.cli import render
    from engine.read import schedule_queries

    render.schedule_detail(schedule_queries.schedule_overview(_cli(ctx).runtime(), name), as_json)


@schedules_app.command("history")
def schedules_history(ctx: typer.Context, name: str, as_json: JsonOpt = False) -> None:
    """The audit trail of a schedule. Example: reportflow schedules history platform-daily"""
    from engine.cli import render
    from engine.scheduling import definitions

    render.audit(definitions.history(_cli(ctx).runtime(), name), as_json)


@schedules_app.command("preview")
def schedules_preview(ctx: typer.Context, name: str,
                      n: Annotated[int, typer.Option("-n", min=1, max=1000, help="How many fire times.")] = 5,
                      as_json: JsonOpt = False) -> None:
    """Next fire times from now, local and UTC; DST-moved ones are marked.

    Example: reportflow schedules preview platform-daily -n 10
    """
    from engine.cli import render
    from engine.read import schedule_queries

    rt = _cli(ctx).runtime()
    spec, fires = schedule_queries.preview(rt, name, n)
    render.fires(spec.timezone, fires, as_json)


@schedules_app.command("validate")
def schedules_validate(
    ctx: typer.Context,
    cron_expr: Annotated[str, typer.Option("--cron", help="Cron expression (5 fields).")],
    timezone: Annotated[str, typer.Option("--timezone", help="IANA timezone.")],
    workflow: Annotated[Optional[str], typer.Option("--workflow", help="Check one slot per period.")] = None,
    allow_frequent: Annotated[bool, typer.Option(help="Allow intervals under 5 minutes.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Validate a cron and timezone; exit 2 if invalid.

    Example: reportflow schedules validate --cron "30 19 * * *" --timezone Asia/Seoul --workflow daily_report
    """
    from engine.cli import render
    from engine.core import cron, run_counts

    period = PeriodKind.SLOT
    if workflow is not None:
        registry = _cli(ctx).registry()
        if workflow not in registry:
            raise errors.InvalidInput(f"unknown workflow '{workflow}' (known: {', '.join(sorted(registry))})")
        period = registry[workflow].period
    now = _cli(ctx).clock().now()
    result = cron.check(cron_expr, timezone, now=now, period=period, allow_frequent=allow_frequent)
    counts, policy = run_counts.check_cron(cron_expr, timezone, now)
    render.validation(cron_expr, timezone, result, as_json, counts, policy)
    if not result.ok:
        raise typer.Exit(2)


@schedules_app.command("enable")
def schedules_enable(ctx: typer.Context, name: str,
                     reason: Annotated[Optional[str], typer.Option(help="Why (audited).")] = None) -> None:
    """Re-enable a schedule; it starts from now. Example: reportflow schedules enable platform-daily"""
    from engine.scheduling import definitions

    schedule, changed = definitions.set_enabled(_cli(ctx).runtime(strict=True), name, enabled=True, reason=reason)
    output.say(f"schedule {name} {'enabled' if changed else 'was already enabled'} (version {schedule.version})")


@schedules_app.command("disable")
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
    rt = _cli(ctx).runtime(strict=True)
    if name is None:
        changed = definitions.disable_all(rt, reason=reason, cancel_queued=cancel_queued)
        output.say(f"disabled {len(changed)} schedule(s)" + (f": {', '.join(s.name for s in changed)}" if changed else ""))
        return
    schedule, did = definitions.set_enabled(rt, name, enabled=False, reason=reason, cancel_queued=cancel_queued)
    output.say(f"schedule {name} {'disabled' if did else 'was already disabled'} (version {schedule.version})")


@schedules_app.command("set")
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
    reason: Annotated[Optional[str], typer.Option(help="Why (audited).")] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Confirm a high-risk change.")] = False,
) -> None:
    """Audited edit with an optimistic lock; a stale --expect-version exits 3.

    Example: reportflow schedules set platform-daily --cron "0 20 * * *" --expect-version 3
    """
    from engine.config import config_file
    from engine.scheduling import definitions

    changes: dict[str, Any] = {k: v for k, v in dict(cron=cron_expr, timezone=timezone, misfire=misfire,
                                                     overlap=overlap, report_on=report_on, dst_gap=dst_gap,
                                                     dst_fold=dst_fold).items() if v is not None}
    if grace is not None:
        try:
            changes["grace"] = config_file.parse_duration(grace)
        except ValueError as exc:
            raise errors.InvalidInput(f"--grace: {exc}") from None
    if not changes:
        raise errors.InvalidInput("nothing to change: pass --cron, --timezone, --misfire, --overlap, ...")
    schedule, warning = definitions.set_schedule(_cli(ctx).runtime(strict=True), name, expect_version=expect_version,
                                               changes=changes, confirmed=yes, reason=reason)
    if warning:
        output.warn(warning)
    output.say(f"schedule {name} is now version {schedule.version}")


@schedules_app.command("draft")
def schedules_draft(
    ctx: typer.Context, text: str,
    project: Annotated[Optional[str], typer.Option("--project", help="The project it is for.")] = None,
    workflow: Annotated[Optional[str], typer.Option("--workflow", help="The workflow it runs.")] = None,
    name: Annotated[Optional[str], typer.Option("--name", help="The schedule's name.")] = None,
    write: Annotated[bool, typer.Option("--write", help="Append the block to the config file.")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Write without asking.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """A schedule from a sentence, validated and previewed; never touches the database.

    The draft loses no commit: it reports from the previous slot to this one, placing each commit
    in the report after it landed. A sentence that names no timezone is read in the config's.

    Example: reportflow schedules draft "every weekday at 18:30 Seoul time, daily report for web"
    """
    from engine.cli import render
    from engine.operations import drafts
    from engine.plugins import workflow_registry

    cli = _cli(ctx)
    config, registry = workflow_registry.load_with_config(cli.config_path, db_override=cli.db_url)
    report = drafts.draft(config, registry, text, now=cli.clock().now(), project=project,
                          workflow=workflow, name=name)
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


# --- the loops ---------------------------------------------------------------

@app.command("tick")
def tick_command(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """One scheduler pass: create the runs that are due. Example: reportflow tick"""
    from engine.cli import fast_tick
    from engine.scheduling import heartbeat, tick

    cli = _cli(ctx)
    seen = _inputs_seen(cli)
    runtime = cli.runtime()
    if seen is not None:
        fast_tick.remember(runtime, seen)  # the next nothing-due tick can skip the validation
    report = tick.tick(runtime)
    heartbeat.beat(runtime, "tick")
    _deliver(runtime)
    output.tick_report(report, as_json)


def _deliver(rt: Any, stop: threading.Event | None = None) -> None:
    """The alert sender, at the end of a command that may have recorded alerts (never raises; bounded)."""
    from engine.operations import outbox_sender

    outbox_sender.deliver_pending(rt, stop=stop)


def _exit_on_sigterm() -> None:
    """SIGTERM ends the command as SystemExit(143), so ``finally`` and cleanup blocks run (default: none do)."""

    def _handler(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _handler)


class SignalStop(threading.Event):
    """The stop event of a loop command, set by SIGINT or SIGTERM, remembering which came first."""

    signum: int | None = None


def _stop_on_signals() -> SignalStop:
    stop = SignalStop()

    def _handler(signum: int, _frame: Any) -> None:
        if stop.signum is None:
            stop.signum = signum
        stop.set()

    signal.signal(signal.SIGTERM, _handler)
    signal.signal(signal.SIGINT, _handler)
    return stop


def _exit_if_signalled(stop: SignalStop) -> None:
    """After a graceful stop (the run in flight handed back): exit 130 after SIGINT, 143 after SIGTERM, as a
    shell does, so that a script or a supervisor can tell an interrupted pass from a finished one."""
    if stop.signum is not None:
        raise typer.Exit(128 + stop.signum)


@app.command()
def work(ctx: typer.Context,
         until_idle: Annotated[bool, typer.Option("--until-idle", help="Exit when nothing is claimable now.")] = False,
         max_runs: Annotated[Optional[int], typer.Option("--max-runs", min=1)] = None,
         worker_id: Annotated[Optional[str], typer.Option("--worker-id", help="Default: host:pid.")] = None,
         concurrency: Annotated[Optional[int], typer.Option(
             "--concurrency", min=1, max=10, help="Runs in flight in this process. Default: [worker] concurrency.")]
         = None) -> None:
    """Claim and execute runs. Example: reportflow work --until-idle --concurrency 4"""
    from engine.execution.pool import WorkerPool

    rt = _cli(ctx).runtime()
    stop = _stop_on_signals()
    pool = WorkerPool(rt, worker_id, stop=stop, concurrency=concurrency)
    sender = None
    if not until_idle:  # a long-running worker sends its alerts beside the runs, off every step's path
        from engine.operations import outbox_sender

        sender = threading.Thread(target=outbox_sender.deliver_until, args=(rt, stop), name="alerts", daemon=True)
        sender.start()
    try:
        outcomes = pool.work(until_idle=until_idle, max_runs=max_runs)
    finally:
        pool.close()
        if sender is not None:
            stop.set()
            sender.join(30)
    if sender is None:
        _deliver(rt, stop)
    from engine.read import idle

    # An interrupted pass is not idle: what waits is said only when the loop ran out of work.
    output.outcomes(outcomes, None if stop.signum is not None else idle.what_waits(rt))
    _exit_if_signalled(stop)


@app.command("cycle")
def cycle_command(ctx: typer.Context, as_json: JsonOpt = False,
          worker_id: Annotated[Optional[str], typer.Option("--worker-id", help="Default: host:pid.")] = None,
          concurrency: Annotated[Optional[int], typer.Option(
              "--concurrency", min=1, max=10, help="Runs in flight in this process. Default: [worker] concurrency.")]
          = None) -> None:
    """One pass of tick, reconcile, heal (re-queue runs whose service answers again) and work until idle, for
    cron. Example: * * * * * reportflow cycle"""
    from engine.app import cycle
    from engine.cli import fast_tick

    cli = _cli(ctx)
    seen = _inputs_seen(cli)
    rt = cli.runtime()
    if seen is not None:
        fast_tick.remember(rt, seen)  # the next cycle with nothing to do can skip the validation
    stop = _stop_on_signals()
    report = cycle.cycle(rt, stop=stop, worker_id=worker_id, concurrency=concurrency)
    from engine.read import idle

    output.cycle_report(report, as_json, None if stop.signum is not None else idle.what_waits(rt))
    _exit_if_signalled(stop)


def _inputs_seen(cli: Cli) -> "fast_tick.Inputs | None":
    """The fast path's fingerprint of the config, read before validation (what is recorded is what was validated)."""
    from engine.cli import fast_tick  # noqa: F811 - at run time, not only for the type

    try:
        return fast_tick.read_inputs(cli.config_path, cli.db_url)
    except (OSError, errors.ConfigInvalid):
        return None  # no config to read: runtime() says so


@app.command()
def reconcile(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """One reconciler pass: recover expired leases, promote PENDING runs, report stalled and silent.

    Example: reportflow reconcile
    """
    from engine.execution import reconciler

    rt = _cli(ctx).runtime()
    report = reconciler.sweep(rt)
    _deliver(rt)
    output.sweep_report(report, as_json)


@app.command("serve")
def serve_command(ctx: typer.Context,
          metrics_port: Annotated[Optional[int], typer.Option("--metrics-port", min=0, max=65535)] = None,
          ui_port: Annotated[Optional[int], typer.Option("--ui-port", min=0, max=65535,
                                                         help="Also serve the web page on [ui] host, this port.")] = None,
          worker_id: Annotated[Optional[str], typer.Option("--worker-id")] = None) -> None:
    """Scheduler, worker, reconciler and healer loops in one process; SIGTERM hands the run back and exits 143
    (within 60 s).

    The healer probes Ollama and Notion every [notify] health_every and re-queues the runs they failed.

    Example: reportflow serve --metrics-port 9464 --ui-port 8321
    """
    from engine.app import serve

    rt = _cli(ctx).runtime()
    stop = _stop_on_signals()
    serve.serve(rt, stop=stop, worker_id=worker_id, metrics_port=metrics_port, ui_port=ui_port)
    _exit_if_signalled(stop)


@app.command()
def ui(ctx: typer.Context,
       host: Annotated[Optional[str], typer.Option("--host", help="Bind address (default [ui] host, 127.0.0.1).")] = None,
       port: Annotated[Optional[int], typer.Option("--port", min=0, max=65535,
                                                   help="Port (default [ui] port, 8321).")] = None) -> None:
    """The run-history web page and its /api/; read-only unless the [ui] token_env variable is set.

    A non-loopback --host without a token is refused (exit 2). Example: reportflow ui --port 8321
    """
    from engine.web import server

    rt = _cli(ctx).runtime()
    bind_host = host or rt.config.ui.host
    bind_port = rt.config.ui.port if port is None else port
    output.say(f"reportflow ui on http://{bind_host}:{bind_port}/ "
               f"({'actions need the token' if os.environ.get(rt.config.ui.token_env) else 'read-only: no token set'})")
    server.run(rt, bind_host, bind_port)


# --- runs --------------------------------------------------------------------

@app.command()
def trigger(ctx: typer.Context, schedule: str,
            date_: Annotated[Optional[str], typer.Option("--date", help="Business date (YYYY-MM-DD).")] = None,
            from_: Annotated[Optional[str], typer.Option("--from", help="First business date of a range.")] = None,
            to: Annotated[Optional[str], typer.Option("--to", help="Last business date of a range.")] = None,
            force_new: Annotated[bool, typer.Option("--force-new", help="Make a new revision.")] = False,
            dry_run: Annotated[bool, typer.Option("--dry-run", help="A range: list, change nothing.")] = False,
            yes: Annotated[bool, typer.Option("--yes", help="A range: do not ask (for scripts).")] = False,
            as_json: JsonOpt = False) -> None:
    """A manual run for a business date (default: the latest slot), or for each period of a range (asks first).

    Example: reportflow trigger platform-daily --date 2026-09-29; reportflow trigger platform-daily --from 2026-09-01 --to 2026-09-07
    """
    from engine.operations import actions

    if from_ is None and to is None:
        if dry_run or yes:
            raise errors.InvalidInput("--dry-run and --yes go with a range (--from D --to D)")
        day = _parse_date(date_, "--date") if date_ else None
        output.action(actions.trigger(_cli(ctx).runtime(strict=True), schedule, day=day, force_new=force_new), as_json)
        return
    from engine.cli import bulk_render, render

    if date_ is not None or from_ is None or to is None:
        raise errors.InvalidInput("give --date D, or a range: --from D --to D (both)")
    first, last = _parse_date(from_, "--from"), _parse_date(to, "--to")
    rt = _cli(ctx).runtime(strict=True)
    if not dry_run and not yes:
        planned = actions.trigger_range(rt, schedule, first=first, last=last, force_new=force_new, dry_run=True)
        acting = [r for r in planned.results if r.action != "unchanged"]
        if not acting:
            bulk_render.trigger_range(planned, True, as_json)
            return
        if not as_json:
            bulk_render.trigger_range(planned, True, False)
        _confirm(f"trigger {len(acting)} period(s) of {schedule} from {first} to {last}?", "nothing triggered")
    with render.progress("trigger", quiet=as_json) as advance:
        report = actions.trigger_range(rt, schedule, first=first, last=last, force_new=force_new, dry_run=dry_run,
                                       progress=advance)
    bulk_render.trigger_range(report, dry_run, as_json)


def _confirm(question: str, refusal: str) -> None:
    """Ask on stderr (default no); anything but yes, or no answer at all, changes nothing and exits 2."""
    try:
        confirmed = typer.confirm(question, default=False, err=True)
    except typer.Abort:  # no answer at all (a script without --yes): end the prompt's line first
        sys.stderr.write("\n")
        confirmed = False
    if not confirmed:
        raise errors.InvalidInput(f"{refusal}: not confirmed (answer y, or pass --yes in scripts)")


@app.command()
def backfill(ctx: typer.Context, schedule: str,
             from_: Annotated[str, typer.Option("--from", help="First business date.")],
             to: Annotated[str, typer.Option("--to", help="Last business date.")],
             dry_run: Annotated[bool, typer.Option("--dry-run", help="List, change nothing.")] = False,
             include_pruned: Annotated[bool, typer.Option("--include-pruned",
                                                          help="Also periods a prune removed.")] = False,
             as_json: JsonOpt = False) -> None:
    """Runs for every business period without a row. Example: reportflow backfill platform-daily --from 2026-09-01 --to 2026-09-30"""
    from engine.cli import render
    from engine.operations import actions

    first, last = _parse_date(from_, "--from"), _parse_date(to, "--to")
    rt = _cli(ctx).runtime(strict=True)
    with render.progress("backfill", quiet=as_json) as advance:
        report = actions.backfill(rt, schedule, first=first, last=last, dry_run=dry_run, progress=advance,
                                     include_pruned=include_pruned)
    render.backfill_report(report, dry_run, as_json)


@app.command("prune")
def prune_command(ctx: typer.Context,
          before: Annotated[str, typer.Option("--before", help="Business date: periods that ended before it.")],
          dry_run: Annotated[bool, typer.Option("--dry-run", help="Count, change nothing.")] = False,
          yes: Annotated[bool, typer.Option("--yes", help="Do not ask (for scripts).")] = False,
          as_json: JsonOpt = False) -> None:
    """Remove finished runs whose business period ended before a date (files and pages stay).

    Shows the count and asks first, unless --yes. Example: reportflow prune --before 2025-01-01 --dry-run
    """
    from engine.cli import render
    from engine.operations import prune

    day = _parse_date(before, "--before")
    rt = _cli(ctx).runtime(strict=True)
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


@runs_app.command("list")
def runs_list(ctx: typer.Context,
              status: Annotated[Optional[list[str]], typer.Option("--status", help="Filter by status.")] = None,
              schedule: Annotated[Optional[str], typer.Option("--schedule")] = None,
              limit: Annotated[int, typer.Option("--limit", min=0, help="0 for all.")] = limits.RUNS_LIST,
              parent: Annotated[Optional[str], typer.Option("--parent", help="Only this run's child runs.")] = None,
              as_json: JsonOpt = False) -> None:
    """Run history, newest first. Example: reportflow runs list --status FAILED --json"""
    from engine.cli import render
    from engine.read import run_queries

    statuses = [s.upper() for s in status or []]
    for value in statuses:
        if value not in RunStatus.__members__:
            raise errors.InvalidInput(f"unknown status '{value}' (one of {', '.join(RunStatus.__members__)})")
    rt = _cli(ctx).runtime()
    parent_id = _parse_run_id(parent) if parent is not None else None
    render.runs(run_queries.list_runs(rt, statuses=statuses, schedule=schedule, limit=limit, parent=parent_id),
                rt.clock.now(), as_json)


@runs_app.command("show")
def runs_show(ctx: typer.Context, run: str, as_json: JsonOpt = False) -> None:
    """Steps, attempts, pinned inputs, artifacts, errors. Example: reportflow runs show 42"""
    from engine.cli import render
    from engine.read import run_queries

    rt = _cli(ctx).runtime()
    render.run_detail(run_queries.get_run(rt, _parse_run_id(run)), rt.clock.now(), as_json)


@runs_app.command("retry")
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
               as_json: JsonOpt = False) -> None:
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
        output.action(actions.retry(_cli(ctx).runtime(strict=True), _parse_run_id(run), from_step=from_step), as_json)
        return
    if run is not None:
        raise errors.InvalidInput("name a run or --schedule, not both")
    if from_step is not None:
        raise errors.InvalidInput("--from-step takes one run: `reportflow runs retry RUN --from-step STEP`")
    statuses = bulk.parse_statuses(status or [], bulk.RETRYABLE)
    first, last = _optional_range(from_, to)
    rt = _cli(ctx).runtime(strict=True)
    _bulk(bulk_actions.plan_retry(rt, schedule, statuses=statuses, first=first, last=last), rt,
          dry_run=dry_run, yes=yes, as_json=as_json)


@runs_app.command("approve")
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
                 as_json: JsonOpt = False) -> None:
    """Queue a MANUAL_REQUIRED run, or all of a schedule's (asks first).

    Example: reportflow runs approve 42; reportflow runs approve --schedule platform-daily --all
    """
    from engine.operations import actions, bulk_actions

    if schedule is None and not all_:
        if run is None:
            raise errors.InvalidInput("name a run, or --schedule S --all")
        if from_ or to or dry_run or yes:
            raise errors.InvalidInput("--from, --to, --dry-run and --yes go with --schedule S --all")
        output.action(actions.approve(_cli(ctx).runtime(strict=True), _parse_run_id(run)), as_json)
        return
    if run is not None:
        raise errors.InvalidInput("name a run or --schedule S --all, not both")
    if schedule is None or not all_:
        raise errors.InvalidInput("approving in bulk takes both --schedule S and --all")
    first, last = _optional_range(from_, to)
    rt = _cli(ctx).runtime(strict=True)
    _bulk(bulk_actions.plan_approve(rt, schedule, first=first, last=last), rt, dry_run=dry_run, yes=yes,
          as_json=as_json)


def _optional_range(from_: str | None, to: str | None) -> "tuple[date | None, date | None]":
    return (_parse_date(from_, "--from") if from_ else None, _parse_date(to, "--to") if to else None)


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
        _confirm(bulk_render.question(plan), f"nothing {bulk_render.VERB[plan.action][1]}")
    with render.progress(plan.action, quiet=as_json) as advance:
        done = bulk_actions.execute(rt, plan, progress=advance)
    bulk_render.outcomes(plan, done, as_json)


@runs_app.command("cancel")
def runs_cancel(ctx: typer.Context, run: str, as_json: JsonOpt = False) -> None:
    """Cancel a run that has not finished (a RUNNING one stops at its next step). Example: reportflow runs cancel 42"""
    from engine.operations import actions

    output.action(actions.cancel(_cli(ctx).runtime(strict=True), _parse_run_id(run)), as_json)


@workflows_app.command("list")
def workflows_list(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Every workflow this config can run: period, payload version, steps, origin.

    Example: reportflow --config examples/release_notes/reportflow.toml workflows list
    """
    from engine.cli import render

    registry = _cli(ctx).registry()
    render.workflows([registry[name] for name in sorted(registry)], as_json)


@workflows_app.command("show")
def workflows_show(ctx: typer.Context, name: str, as_json: JsonOpt = False) -> None:
    """One workflow's steps (timeout, optional, output model, retryable codes, retry budget) and origin.

    Example: reportflow workflows show daily_report
    """
    from engine.cli import render
    from engine.plugins import workflow_registry

    render.workflow(workflow_registry.get(_cli(ctx).registry(), name), as_json)


@app.command("metrics")
def metrics_command(ctx: typer.Context) -> None:
    """Prometheus text exposition computed from the database. Example: reportflow metrics"""
    from engine.read import metrics

    rt = _cli(ctx).runtime()
    sys.stdout.write(metrics.exposition(rt))


@app.command("doctor")
def doctor_command(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Check config, database, repositories, Ollama, Notion, artifacts, stalled runs, silent schedules, clock skew.

    Exits 1 when something needs a person. Example: reportflow doctor
    """
    from engine.cli import render
    from engine.read import doctor

    cli = _cli(ctx)
    findings = doctor.run_checks(cli.config_path, db_url=cli.db_url, clock=cli.clock())
    render.findings(findings, as_json)
    if any(f.problem for f in findings):
        raise typer.Exit(1)


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


# --- notifications -----------------------------------------------------------

notifications_app = typer.Typer(help="Alerts recorded in the outbox and their delivery.",
                                no_args_is_help=True)
app.add_typer(notifications_app, name="notifications")


@notifications_app.command("list")
def notifications_list(ctx: typer.Context,
                       pending: Annotated[bool, typer.Option("--pending", help="Only those not delivered yet.")] = False,
                       schedule: Annotated[Optional[str], typer.Option("--schedule", help="Only this schedule's.")] = None,
                       limit: Annotated[int, typer.Option("--limit", min=1, max=limits.NOTIFICATIONS_MAX)] = limits.NOTIFICATIONS,
                       as_json: JsonOpt = False) -> None:
    """Recorded alerts, newest first, with their delivery state. Example: reportflow notifications list --pending"""
    from engine.cli import render
    from engine.read import alert_log

    items = alert_log.list_notifications(_cli(ctx).runtime(), pending_only=pending, schedule=schedule, limit=limit)
    render.notifications(items, as_json)
