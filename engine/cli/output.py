"""The CLI's light output path: messages, errors, JSON and the loop commands' one-line reports.

Importing this module imports no rich (SPEC §11: a ``tick`` with nothing due
starts about as fast as ``import sqlalchemy``, and a cron line runs it every
minute). Text bound for a pipe or a file is written as it is; only a terminal
(or ``FORCE_COLOR``/``TTY_COMPATIBLE``) gets rich's colours, through the
consoles of ``console()``, created on first use. Tables and progress bars live
in ``engine.cli.render``, which uses the same consoles.

Values are printed as data, never as instructions to the terminal or to rich:
every value goes through ``shown`` (control and bidi characters removed, rich
markup escaped), and the consoles substitute no emoji codes (a key such as
``daily_report:ghost:2026-09-29`` holds ``:ghost:``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, is_dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import IO, TYPE_CHECKING, Any

from engine.core import redact
from engine.core.clock import format_instant

if TYPE_CHECKING:
    from rich.console import Console

# Piped output (files, CI logs, tests) gets wide tables instead of rich's 80-column default.
PIPE_WIDTH = 200

STATUS_STYLE = {
    "SUCCESS": "green", "PARTIAL_SUCCESS": "yellow", "FAILED": "bold red", "RUNNING": "cyan",
    "QUEUED": "blue", "PENDING": "blue", "RETRY_PENDING": "magenta", "MISSED": "red",
    "SKIPPED": "dim", "MANUAL_REQUIRED": "bold yellow", "CANCELLED": "dim", "WAITING": "cyan",
}


@lru_cache(maxsize=2)
def console(stderr: bool = False) -> Console:
    """The rich console for stdout (or stderr), made (and rich imported) on first use."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    # Piped output is wide (a script sees whole rows) unless TTY_COMPATIBLE=1 asks for a terminal's
    # (then rich reads COLUMNS, as on a terminal).
    terminal = stream.isatty() or os.environ.get("TTY_COMPATIBLE") == "1"
    return Console(stderr=stderr, width=None if terminal else PIPE_WIDTH, emoji=False)


def _plain(stream: IO[str]) -> bool:
    """Write without rich: not a terminal, and no environment variable asking for colours anyway."""
    if any(os.environ.get(name) for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")):
        return False
    try:
        return not stream.isatty()
    except (AttributeError, ValueError):
        return True


def escape(text: str) -> str:
    """``text`` with rich markup characters escaped, to print as it is."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def inert(text: str) -> str:
    """``text`` without control or bidi characters (line breaks kept): nothing a terminal runs."""
    return redact.neutralise(text, keep_newlines=True)


def shown(value: object) -> str:
    """A value to put inside rich markup: printed as written (markup escaped) and inert."""
    return escape(inert(str(value)))


def json_out(value: Any) -> None:
    """Print ``value`` as indented JSON on stdout."""
    sys.stdout.write(json.dumps(value, indent=2, default=json_default) + "\n")


def json_default(value: Any) -> Any:
    """JSON for what ``json`` cannot encode: instants as ISO 8601, durations as seconds, dataclasses as dicts."""
    if isinstance(value, datetime):
        return format_instant(value)
    if isinstance(value, timedelta):
        return value.total_seconds()
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    return str(value)


def status(value: str) -> str:
    """A run or step status in its colour (rich markup)."""
    return f"[{STATUS_STYLE.get(value, 'white')}]{value}[/]"


def say(message: str) -> None:
    """Print one line on stdout (plainly to a pipe)."""
    if _plain(sys.stdout):
        sys.stdout.write(inert(message) + "\n")
        return
    console().print(shown(message))


def warn(message: str) -> None:
    """Print a warning line on stderr."""
    if _plain(sys.stderr):
        sys.stderr.write(f"warning: {inert(message)}\n")
        return
    console(stderr=True).print(f"[yellow]warning:[/] {shown(message)}")


def error(message: str, code: str | None = None) -> None:
    """Print an error line on stderr, with its code when there is one."""
    prefix = f"error [{code}]" if code else "error"
    if _plain(sys.stderr):
        sys.stderr.write(f"{prefix}: {inert(message)}\n")
        return
    console(stderr=True).print(f"[bold red]{prefix}:[/] {shown(message)}", soft_wrap=True)  # one line


def tick_data(report: Any) -> dict[str, Any]:
    """A ``reports.TickReport`` as ``tick --json`` prints it."""
    return {"now": format_instant(report.now), "due_schedules": report.due, "handled": report.handled,
            "lost_races": report.lost_races, "created": dict(report.created), "runs_created": report.runs_created,
            "already_present": report.already_present, "too_old_slots": report.too_old_slots,
            "next_due_at": format_instant(report.next_due_at)}


def tick_report(report: Any, as_json: bool) -> None:
    """Print a ``reports.TickReport``: one line, or JSON."""
    data = tick_data(report)
    if as_json:
        json_out(data)
        return
    created = ", ".join(f"{n} {s}" for s, n in sorted(data["created"].items())) or "no runs"
    say(f"tick at {data['now']}: {data['due_schedules']} schedule(s) due, {created}; "
        f"next due {data['next_due_at'] or 'never'}")


def cycle_data(report: Any) -> dict[str, Any]:
    """A ``reports.CycleReport`` as ``cycle --json`` prints it."""
    return {"tick": tick_data(report.tick), "reconcile": sweep_data(report.sweep), "heal": heal_data(report.heal),
            "runs": [{"run_id": o.run_id, "key": o.key, "status": o.status.value, "error_code": o.error_code}
                     for o in report.outcomes]}


def heal_data(report: Any) -> dict[str, Any]:
    """A ``reports.HealReport`` as ``cycle --json`` prints it."""
    return {"probed": [{"provider": label, "healthy": healthy} for label, healthy in report.probed],
            "requeued": report.requeued, "regenerated": report.regenerated, "waiting": report.waiting,
            "gave_up": report.gave_up}


def heal_report(report: Any) -> None:
    """Print what a healer pass did, when it did anything: providers probed, runs queued again, runs given up."""
    for label, healthy in report.probed:
        say(f"{label}: {'answers' if healthy else 'does not answer'}")
    if report.requeued:
        again = f" ({len(report.regenerated)} to be written again in place)" if report.regenerated else ""
        say(f"re-queued {len(report.requeued)} run(s) whose provider answers again{again}: "
            + ", ".join(str(r) for r in report.requeued))
    for run_id in report.gave_up:
        warn(f"run {run_id} waits for a provider, but no automatic re-queue is left: see `reportflow runs show {run_id}`")


def cycle_report(report: Any, as_json: bool, waiting: str | None = None) -> None:
    """Print a ``reports.CycleReport``: its tick, its sweep and its runs, or all three as one JSON object."""
    if as_json:
        json_out(cycle_data(report) | {"waiting": waiting})
        return
    tick_report(report.tick, False)
    sweep_report(report.sweep, False)
    heal_report(report.heal)
    outcomes(report.outcomes, waiting)


def outcomes(items: Sequence[Any], waiting: str | None = None) -> None:
    """One line per run executed (``RunOutcome``), then what the runs left wait for (``waiting``); with
    nothing executed, "nothing claimable now: <waiting>", or "nothing to do" when no run waits at all."""
    if not items:
        say(f"nothing claimable now: {waiting}" if waiting else "nothing to do")
        return
    for item in items:
        line = f"run {item.run_id} {item.key}: {item.status.value}{' ' + item.error_code if item.error_code else ''}"
        if _plain(sys.stdout):
            sys.stdout.write(inert(line) + "\n")
        else:
            console().print(f"run {item.run_id} {shown(item.key)}: {status(item.status.value)}"
                            f"{' ' + shown(item.error_code) if item.error_code else ''}")
    if waiting:
        say(f"still waiting: {waiting}")


def sweep_data(report: Any) -> dict[str, Any]:
    """A ``reports.SweepReport`` as ``reconcile --json`` prints it."""
    return {"recovered": report.recovered, "failed": report.failed, "promoted": report.promoted,
            "stalled": [r.id for r in report.stalled],
            "silent": [{"schedule": n, "next_run_at": format_instant(t)} for n, t in report.silent],
            "stuck": [{"run_id": s.run_id, "status": s.status, "reason": s.reason} for s in report.stuck]}


def sweep_report(report: Any, as_json: bool) -> None:
    """Print a ``reports.SweepReport``: a summary line and a warning per stalled run or silent schedule."""
    data = sweep_data(report)
    if as_json:
        json_out(data)
        return
    say(f"recovered {len(report.recovered)}, failed {len(report.failed)}, promoted {len(report.promoted)}")
    for run in report.stalled:
        warn(f"run {run.id} ({run.idempotency_key}) is stalled: RUNNING since {format_instant(run.claimed_at)}")
    for name, at in report.silent:
        warn(f"schedule {name} is silent: its slot {format_instant(at)} has not been ticked (is a scheduler running?)")
    for waiting in report.stuck:
        warn(f"run {waiting.run_id} ({waiting.key}) is stuck: {waiting.status} since "
             f"{format_instant(waiting.waiting_since)} ({waiting.reason or 'reason unknown'})")


def action(result: Any, as_json: bool) -> None:
    """Print what an operator action did (``ActionResult``), or JSON."""
    if as_json:
        json_out(asdict(result))
        return
    say(result.message)
