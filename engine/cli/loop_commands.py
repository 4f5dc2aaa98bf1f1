"""The loops and servers: ``tick``, ``work``, ``cycle``, ``reconcile``, ``serve``, ``ui`` (``cli.app`` registers them).

No ``from __future__ import annotations``: Typer reads every command's signature at each start
(see ``cli.app``); engine types are quoted and engine modules imported inside the commands.
"""

import os
import threading
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from engine.cli import context, output
from engine.core import errors

if TYPE_CHECKING:
    from engine.app import signals
    from engine.cli import fast_tick


def tick_command(ctx: typer.Context, as_json: context.JsonOpt = False) -> None:
    """One scheduler pass: create the runs that are due. Example: reportflow tick"""
    from engine.cli import fast_tick
    from engine.scheduling import heartbeat, tick

    cli = context.cli_of(ctx)
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


def _exit_if_signalled(stop: "signals.SignalStop") -> None:
    """After a graceful stop (the run in flight handed back): exit 130 after SIGINT, 143 after SIGTERM, as a
    shell does, so that a script or a supervisor can tell an interrupted pass from a finished one."""
    if stop.signum is not None:
        raise typer.Exit(128 + stop.signum)


def work_command(ctx: typer.Context,
                 until_idle: Annotated[bool, typer.Option("--until-idle",
                                                          help="Exit when nothing is claimable now.")] = False,
                 max_runs: Annotated[Optional[int], typer.Option("--max-runs", min=1)] = None,
                 worker_id: Annotated[Optional[str], typer.Option("--worker-id", help="Default: host:pid.")] = None,
                 concurrency: Annotated[Optional[int], typer.Option(
                     "--concurrency", min=1, max=10,
                     help="Runs in flight in this process. Default: \\[worker] concurrency.")] = None) -> None:
    """Claim and execute runs. Example: reportflow work --until-idle --concurrency 4"""
    from engine.app import signals, work
    from engine.read import idle

    rt = context.cli_of(ctx).runtime()
    stop = signals.stop_on_signals()
    outcomes = work.work(rt, stop=stop, worker_id=worker_id, concurrency=concurrency, until_idle=until_idle,
                         max_runs=max_runs)
    # An interrupted pass is not idle: what waits is said only when the loop ran out of work.
    output.outcomes(outcomes, None if stop.signum is not None else idle.what_waits(rt))
    _exit_if_signalled(stop)


def cycle_command(ctx: typer.Context, as_json: context.JsonOpt = False,
          worker_id: Annotated[Optional[str], typer.Option("--worker-id", help="Default: host:pid.")] = None,
          concurrency: Annotated[Optional[int], typer.Option(
              "--concurrency", min=1, max=10, help="Runs in flight in this process. Default: \\[worker] concurrency.")]
          = None) -> None:
    """One pass of tick, reconcile, heal (re-queue runs whose service answers again) and work until idle, for
    cron. Example: * * * * * reportflow cycle"""
    from engine.app import cycle, signals
    from engine.cli import fast_tick

    cli = context.cli_of(ctx)
    seen = _inputs_seen(cli)
    rt = cli.runtime()
    if seen is not None:
        fast_tick.remember(rt, seen)  # the next cycle with nothing to do can skip the validation
    stop = signals.stop_on_signals()
    report = cycle.cycle(rt, stop=stop, worker_id=worker_id, concurrency=concurrency)
    from engine.read import idle

    output.cycle_report(report, as_json, None if stop.signum is not None else idle.what_waits(rt))
    _exit_if_signalled(stop)


def _inputs_seen(cli: context.Cli) -> "fast_tick.Inputs | None":
    """The fast path's fingerprint of the config, read before validation (what is recorded is what was validated)."""
    from engine.cli import fast_tick

    try:
        return fast_tick.read_inputs(cli.config_path, cli.db_url)
    except (OSError, errors.ConfigInvalid):
        return None  # no config to read: runtime() says so


def reconcile(ctx: typer.Context, as_json: context.JsonOpt = False) -> None:
    """One reconciler pass: recover expired leases, promote PENDING runs, report stalled and silent.

    Example: reportflow reconcile
    """
    from engine.execution import reconciler

    rt = context.cli_of(ctx).runtime()
    report = reconciler.sweep(rt)
    _deliver(rt)
    output.sweep_report(report, as_json)


def serve_command(ctx: typer.Context,
          metrics_port: Annotated[Optional[int], typer.Option("--metrics-port", min=0, max=65535)] = None,
          ui_port: Annotated[Optional[int], typer.Option("--ui-port", min=0, max=65535,
                                                         help="Also serve the web page on \\[ui] host, this port.")] = None,
          worker_id: Annotated[Optional[str], typer.Option("--worker-id")] = None) -> None:
    """Scheduler, worker, reconciler and healer loops in one process; SIGTERM hands the run back and exits 143
    (within 60 s).

    The healer probes Ollama and Notion every \\[notify] health_every and re-queues the runs they failed.

    Example: reportflow serve --metrics-port 9464 --ui-port 8321
    """
    from engine.app import serve, signals

    rt = context.cli_of(ctx).runtime()
    stop = signals.stop_on_signals()
    serve.serve(rt, stop=stop, worker_id=worker_id, metrics_port=metrics_port, ui_port=ui_port)
    _exit_if_signalled(stop)


def ui(ctx: typer.Context,
       host: Annotated[Optional[str], typer.Option("--host", help="Bind address (default \\[ui] host, 127.0.0.1).")] = None,
       port: Annotated[Optional[int], typer.Option("--port", min=0, max=65535,
                                                   help="Port (default \\[ui] port, 8321).")] = None) -> None:
    r"""The run-history web page and its /api/; read-only unless the \[ui] token_env variable is set.

    A non-loopback --host without a token is refused (exit 2). Example: reportflow ui --port 8321
    """
    from engine.web import server

    rt = context.cli_of(ctx).runtime()
    bind_host = host or rt.config.ui.host
    bind_port = rt.config.ui.port if port is None else port
    output.say(f"reportflow ui on http://{bind_host}:{bind_port}/ "
               f"({'actions need the token' if os.environ.get(rt.config.ui.token_env) else 'read-only: no token set'})")
    server.run(rt, bind_host, bind_port)
