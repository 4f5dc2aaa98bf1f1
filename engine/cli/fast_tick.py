"""``reportflow tick`` with nothing due, and ``reportflow cycle`` with nothing to do, answered without
Typer, pydantic, croniter or the workflows.

A cron line runs ``tick`` every minute, and nearly every minute nothing is due
(SPEC §11: it must start within 1.3x ``import sqlalchemy``). The full path
imports Typer and pydantic, scans the installed workflows and validates the
config before it asks the store anything. This path asks the store directly,
and answers only when the full path would have printed the same and exited 0:

- the command line is exactly ``[global options] tick [--json]`` (``parse_argv``);
- a full ``tick`` recorded, after validating them, the *fingerprint* of the
  inputs seen now (``read_inputs``: the config's bytes and place, the store
  override, the interpreter, the installed distributions), and the source files
  that validation loaded are as they were then (``watched_files``);
- the schema is at head, and no live schedule has ``next_run_at <= now``;
- for ``cycle`` also (``cycle_has_work``): no enabled schedule is due (so none is silent), no run
  is claimable, PENDING, WAITING, or RUNNING with an expired lease or past its ``max_runtime``,
  and no run waiting for a provider is due for a look (``due.waits_due_query``).

Both build the full path's own report (``engine.core.reports``), print it with the same
``engine.cli.output`` functions, and parse the global options ``engine.cli.options`` names.

Anything else (another command line, an input that differs, something due, a
missing file, any error) makes ``run`` return False, and the command goes to
the full path, which does the work and reports errors as it always did. The
first tick after a change of the config, the code or the installed packages
therefore pays the full price, and records the new fingerprint (``remember``).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from engine.cli import options
from engine.config import defaults
from engine.config.defaults import DEFAULT_CONFIG
from engine.core import errors, reports

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from engine.runtime import Runtime

# The command lines this path answers, after global options (each at most once).
COMMAND_LINES = (["tick"], ["tick", "--json"], ["cycle"], ["cycle", "--json"], ["work", "--until-idle"])
COMMANDS = tuple(sorted({line[0] for line in COMMAND_LINES}))
RECIPE = "reportflow fast tick 1"  # change it when the fingerprint comes to cover something else
KEEP = 20  # fingerprints kept in the store: a few configs or code versions in turn all stay fast
# A file modified this close to (or after) the moment its config was read may have been
# validated in either version: the tick then records nothing. 50 ms is several times the
# coarse clock tick that file systems stamp mtimes with.
SETTLE = timedelta(milliseconds=50)
# What an entry-point scan (importlib.metadata) reads in a sys.path folder, and .pth files.
DIST_SUFFIXES = (".dist-info", ".egg-info", ".egg-link", ".pth")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Request:
    config_path: Path
    now_spec: str | None
    db_override: str | None
    as_json: bool
    command: str = "tick"


@dataclass(frozen=True)
class Inputs:
    """What validating a config reads, bar the source files it loads; ``read_at_ns`` is when."""

    fingerprint: str
    config_bytes: bytes
    read_at_ns: int


def run(argv: Sequence[str]) -> bool:
    """Answer ``reportflow *argv`` if it is a nothing-due ``tick`` or an idle ``cycle`` this path can vouch for.

    False means "not handled, nothing printed": the caller runs the full path.
    """
    request = parse_argv(argv, os.environ)
    if request is None:
        return False
    try:
        from engine.cli import output

        answer = quiet(request)
        if answer is None:
            return False
        report, waiting = answer
        # Rendered into data here, so that a report the printer cannot read falls back too.
        if isinstance(report, reports.CycleReport):
            output.cycle_data(report)
        elif isinstance(report, reports.TickReport):
            output.tick_data(report)
    except Exception:  # noqa: BLE001 - whatever it is, the full path meets it again and reports it properly
        return False
    if isinstance(report, reports.CycleReport):
        output.cycle_report(report, request.as_json, waiting)
    elif isinstance(report, reports.TickReport):
        output.tick_report(report, request.as_json)
    else:
        output.outcomes(report, waiting)
    return True


def parse_argv(argv: Sequence[str], environ: Mapping[str, str]) -> Request | None:
    """The ``tick`` or ``cycle`` that ``argv`` asks for, or None for anything else (Typer's to parse)."""
    given: dict[str, str] = {}
    rest = list(argv)
    while rest and rest[0] not in COMMANDS:
        name, eq, value = rest.pop(0).partition("=")
        if name not in options.ENV or name in given:
            return None
        if not eq:
            if not rest:
                return None
            value = rest.pop(0)
        if not value or value.startswith("-"):
            return None
        given[name] = value
    if rest not in COMMAND_LINES:
        return None
    if given.get(options.LOG_FORMAT, "text") not in options.LOG_FORMATS:
        return None

    def option(name: str) -> str | None:
        variable = options.ENV[name]
        # Click takes an empty variable for an unset one.
        return given.get(name) or (environ.get(variable) if variable else None) or None

    return Request(config_path=Path(option(options.CONFIG) or DEFAULT_CONFIG), now_spec=option(options.NOW),
                   db_override=option(options.DB), as_json=rest[1:] == ["--json"], command=rest[0])


def quiet(request: Request) -> tuple[reports.TickReport | reports.CycleReport | list[object], str | None] | None:
    """The report of a nothing-due tick, an idle cycle or a ``work --until-idle`` with nothing to claim
    (no outcome), with what the runs not started wait for (``read.idle``'s line), or None when this path
    cannot vouch for them."""
    from engine.core.clock import clock_from_spec
    from engine.store import database, due, fingerprints

    clock = clock_from_spec(request.now_spec)
    seen = read_inputs(request.config_path, request.db_override)
    engine = _reader(_store_url(seen.config_bytes, request))
    if engine is None:
        return None
    cycle = request.command == "cycle"
    work = request.command == "work"
    try:
        now = clock.now()
        with engine.connect() as conn:
            if database.revision_of(conn) != database.HEAD_REVISION:
                return None
            files = fingerprints.files_of(conn, seen.fingerprint)
            if files is None or not unchanged(files):
                return None
            next_due_at: datetime | None = conn.execute(due.next_wake_query()).scalar()
            retry_due = conn.execute(due.retry_due_query(now)).first() is not None
            if not work:  # a scheduler whose beat is stale says it is alive through the full path
                beat_at = conn.execute(due.scheduler_beat_query(due.scheduler_id(socket.gethostname()))).scalar()
                if beat_at is None or now - beat_at > due.BEAT_STALE_AFTER:
                    return None
            if work or cycle:
                # Both end by delivering the outbox: an event due while a target is named means work.
                if _has_notify_target(seen.config_bytes) and conn.execute(due.pending_due_query(now)).first():
                    return None
            if work:
                # A new process's worker id (host:pid) holds no run: nothing to take back, only to claim.
                claimable = conn.execute(due.work_query(now, claimable_only=True)).first()
            if cycle:
                first_enabled = conn.execute(due.next_enabled_query()).scalar()
                runs = [tuple(row) for row in conn.execute(due.work_query(now))]
                if conn.execute(due.waits_due_query(now)).first() is not None:
                    return None  # a run waits for a provider whose check has come: the full path heals
                if backup_due(seen.config_bytes, now, lambda: conn.execute(due.backup_slot_query()).first()):
                    return None  # a backup slot came: the full path takes it
            if work or cycle:
                later, next_at, pending = conn.execute(due.waiting_query(now)).one()
                # Runs of a disabled schedule are "held", whatever else they wait for: the full path tells.
                if (later or pending) and conn.execute(due.disabled_query()).first() is not None:
                    return None
    finally:
        engine.dispose()
    waiting = None
    if work or cycle:  # nothing is due now here (else the full path runs): these are all that can wait
        from engine.core import backlog

        waiting = backlog.describe(backlog.Backlog(later=int(later or 0), next_at=next_at, pending=int(pending or 0)),
                                   backfill_limit=1)  # no backfill is due: it would be claimable
    if work:
        return None if claimable is not None else ([], waiting)
    if (next_due_at is not None and next_due_at <= now) or retry_due:
        return None  # something is due: the full path creates its runs, or sends the alerts due again
    tick = reports.TickReport(now=now, next_due_at=next_due_at)
    if not cycle:
        return tick, None
    if cycle_has_work(now, first_enabled, runs):
        return None
    return reports.CycleReport(tick=tick), waiting


def _has_notify_target(config_bytes: bytes) -> bool:
    """Whether ``[notify]`` names a variable that is set (a webhook or Apprise URLs): events are sent then.

    Without one, events stay recorded and pending on purpose, and must not keep an idle cycle busy.
    Any doubt (a file tomllib cannot read) counts as a target, so the full path decides.
    """
    import os
    import tomllib

    try:
        notify = tomllib.loads(config_bytes.decode("utf-8")).get("notify", {})
    except (ValueError, UnicodeDecodeError):
        return True
    if not isinstance(notify, dict):
        return True
    return any(isinstance(name, str) and name and os.environ.get(name)
               for name in (notify.get("webhook_env"), notify.get("apprise_env")))


def backup_due(config_bytes: bytes, now: datetime, latest: Callable[[], Sequence[object] | None]) -> bool:
    """Whether ``[store] backup`` has a cron and no slot was claimed, the cron changed since the latest claim,
    or the next slot that claim computed has come. ``latest`` reads (next slot, cron) only when a cron is set.
    Any doubt (a file tomllib cannot read) counts as due, so the full path decides."""
    import tomllib

    try:
        store = tomllib.loads(config_bytes.decode("utf-8")).get("store", {})
    except (ValueError, UnicodeDecodeError):
        return True
    backup = store.get("backup") if isinstance(store, dict) else None
    if not isinstance(backup, dict) or backup.get("cron") is None:
        return False
    row = latest()
    if row is None:
        return True
    next_slot_at, cron = row[0], row[1]
    return cron != backup.get("cron") or not isinstance(next_slot_at, datetime) or next_slot_at <= now


def cycle_has_work(now: datetime, first_enabled: datetime | None,
                   runs: Sequence[tuple[str, datetime | None, datetime | None, int]]) -> bool:
    """Whether a cycle has anything to do besides ticking nothing: an enabled schedule due (or silent),
    or a run from ``due.work_query`` that is not RUNNING under a live lease within its ``max_runtime``."""
    if first_enabled is not None and first_enabled <= now:
        return True
    for status, lease_until, claimed_at, max_runtime_s in runs:
        if status != "RUNNING" or lease_until is None or lease_until <= now or claimed_at is None:
            return True
        if now - claimed_at > timedelta(seconds=max_runtime_s):
            return True  # stalled: the reconciler reports it
    return False


def _store_url(config_bytes: bytes, request: Request) -> str:
    """The store URL as ``engine.config.build_config`` resolves it: ``--db``/REPORTFLOW_DB, ``[store] url``, default."""
    configured = None
    if request.db_override is None:
        import tomllib

        configured = tomllib.loads(config_bytes.decode("utf-8")).get("store", {}).get("url")
        if configured is not None and not isinstance(configured, str):
            raise TypeError("store.url is not text")  # invalid: the full path says so
    return defaults.store_url(request.db_override, configured, request.config_path.parent.resolve())


def _reader(url: str) -> Engine | None:
    """An engine for reading the store, or None when the full path has to make it first."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine.url import make_url
    from sqlalchemy.pool import NullPool

    from engine.store import database

    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        path = database.sqlite_path(url)
        if path is None or not path.is_file():
            return None  # the full path creates and migrates it
        # Of database.create_db_engine's pragmas a read needs only the busy timeout (WAL is
        # the file's own mode); the DBAPI's ``timeout`` sets it.
        return create_engine(parsed, poolclass=NullPool, connect_args={"timeout": database.BUSY_TIMEOUT_MS / 1000})
    if backend == "postgresql":
        return create_engine(database.driver_url(parsed), poolclass=NullPool)
    return None


def read_inputs(config_path: Path, db_override: str | None) -> Inputs:
    """Read the config file and fingerprint it with the rest of what validation reads (ConfigInvalid if unreadable).

    Covered: the config's bytes, its absolute path and resolved folder (relative
    paths and the SQLite URL resolve against it), the store override, the
    interpreter, ``sys.path`` and what an entry-point scan finds on it
    (``_distributions``: installing, upgrading or removing a distribution
    changes it). The source files validation loads are checked apart
    (``watched_files``), since which they are is known only after loading them.
    """
    from engine.core import clock

    read_at = clock.REAL.now()
    data = defaults.read_config_bytes(config_path)  # never a FIFO or a device, never more than it allows
    digest = hashlib.sha256()
    parts = (RECIPE, sys.version, sys.executable, os.path.abspath(config_path), str(config_path.parent.resolve()),
             db_override or "", *(_distributions(entry) for entry in sys.path))
    for part in parts:
        digest.update(part.encode("utf-8", "surrogateescape") + b"\0")
    digest.update(hashlib.sha256(data).digest())
    return Inputs(digest.hexdigest(), data, (read_at - _EPOCH) // timedelta(microseconds=1) * 1000)


def _distributions(entry: str) -> str:
    """One ``sys.path`` entry as an entry-point scan sees it: its metadata folders and ``.pth`` files,
    each with its stamp and that of its ``entry_points.txt`` (pip writes them anew on every install,
    upgrade and removal); an entry that is no folder (a zip, nothing) by its own stamp."""
    folder = entry or "."
    try:
        names = sorted(name for name in os.listdir(folder) if name.endswith(DIST_SUFFIXES))
    except OSError:
        return f"{entry}={_stamp(folder)}"
    return entry + "=" + ";".join(f"{name}:{_stamp(os.path.join(folder, name))}:"
                                  f"{_stamp(os.path.join(folder, name, 'entry_points.txt'))}" for name in names)


def _stamp(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return "-"
    return f"{st.st_size}/{st.st_mtime_ns}"


def watched_files(extra: Iterable[Path] = ()) -> list[tuple[str, int, int]] | None:
    """``(path, size, mtime_ns)`` of every source file this process loaded from outside the Python
    installation, plus ``extra``; None if one cannot be read.

    The installation (the stdlib, site-packages) changes through pip, which
    ``_distributions`` sees; what lies outside it is the engine, the workflows
    and the steps of an editable install or a checkout, ``[[workflows]]`` files
    and modules, and whatever they import: edits to any of them are seen here.
    """
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    inside = tuple(os.path.join(p, "") for root in roots for p in {root, os.path.realpath(root)})
    paths = {os.path.abspath(path) for path in (getattr(module, "__file__", None) for module in list(sys.modules.values()))
             if isinstance(path, str) and not path.startswith(inside)}
    paths.update(str(path) for path in extra)
    files = []
    for path in sorted(paths):
        try:
            st = os.stat(path)
        except OSError:
            return None
        files.append((path, st.st_size, st.st_mtime_ns))
    return files


def unchanged(files_json: str) -> bool:
    """Whether every file recorded by ``remember`` still has its size and mtime (OSError if one is gone)."""
    for path, size, mtime_ns in json.loads(files_json):
        st = os.stat(path)
        if (st.st_size, st.st_mtime_ns) != (size, mtime_ns):
            return False
    return True


def remember(rt: Runtime, seen: Inputs) -> None:
    """Record ``seen`` as validated: the full ``tick`` calls it once ``Cli.runtime()`` succeeded.

    Nothing is recorded when the config or a loaded source file changed since
    ``seen`` was read (the validated version is then uncertain): the next tick
    validates again. An unchanged record is not written again.
    """
    import logging

    from sqlalchemy.exc import SQLAlchemyError

    from engine.core import logs
    from engine.store import fingerprints

    config = rt.config
    if config.path is None:
        return
    workflow_files = [(config.base_dir / entry["path"]).resolve() for entry in config.raw.get("workflows", [])
                      if isinstance(entry, dict) and isinstance(entry.get("path"), str)]
    files = watched_files([config.path.resolve(), *workflow_files])
    try:
        if files is None or defaults.read_config_bytes(config.path) != seen.config_bytes:
            return
    except (OSError, errors.ConfigInvalid):
        return
    settled_before = seen.read_at_ns - SETTLE // timedelta(microseconds=1) * 1000
    if any(mtime_ns >= settled_before for _, _, mtime_ns in files):
        return
    encoded = json.dumps(files)
    try:
        with rt.store.read() as conn:
            if fingerprints.files_of(conn, seen.fingerprint) == encoded:
                return
        with rt.store.write() as conn:
            fingerprints.record(conn, seen.fingerprint, encoded, rt.clock.now(), keep=KEEP)
    except SQLAlchemyError as exc:
        # Only the next tick's speed depends on it: a full disk or a read-only store must not
        # fail a tick that writes nothing else. The tick's own queries report a store that is down.
        reason = (str(getattr(exc, "orig", None) or exc).strip().splitlines() or [type(exc).__name__])[0]
        logs.event(logging.getLogger(__name__), logging.WARNING, "config_fingerprint_not_recorded", reason=reason)
