"""``reportflow doctor``: everything a person may have to fix, one actionable line each.

Checks, in order: the config loads (else one problem naming the file and key,
and nothing more is checked); the database is reachable and at the schema
revision this code knows; no stalled run and no silent schedule; the clock
agrees with PostgreSQL's within 1 s and leases are >= 30 s there (SPEC §13); the runs
that wait for a provider (SPEC §15.5), and those no automatic re-queue will take;
the local files that successful runs recorded as artifacts still exist with
their sha256; then each installed workflow diagnoses its own dependencies and
external artifacts (``WorkflowDef.diagnose``).

The doctor never writes: it creates no database file, runs no migration and
repairs nothing; each problem line names the command that repairs it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import socket
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.engine.url import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from engine.config import config_file
from engine.core import error_codes, errors, healing, logs, redact
from engine.core.clock import Clock, format_instant
from engine.core.models import ArtifactRecord, ProviderWait
from engine.execution import reconciler
from engine.plugins import workflow_registry
from engine.plugins.contract import Finding
from engine.plugins.workflow_registry import Registry
from engine.read import backup_status
from engine.runtime import Runtime
from engine.store import database, delivery_rows, doctor_rows, health_rows, instances, schedule_rows
from engine.store.handle import Store

log = logging.getLogger(__name__)

MAX_SKEW = timedelta(seconds=1)
MIN_SHARED_LEASE = timedelta(seconds=30)
CONNECT_TIMEOUT_S = 5


def run_checks(config_path: Path, *, db_url: str | None, clock: Clock) -> list[Finding]:
    """Every finding, problems and passed checks alike, in check order, without duplicates.

    Never raises for a problem it can describe: a bad config, an unreachable
    database or a failing workflow check each become a ``problem`` finding.
    """
    try:
        cfg, registry = workflow_registry.load_with_config(config_path, db_override=db_url)
    except errors.ReportflowError as exc:
        return [Finding("config", f"{exc.message} (fix it, then run `reportflow doctor` again)", problem=True)]
    findings = [Finding("config", f"{config_path} is valid: {len(cfg.schedules)} schedule(s)")]
    artifacts_by_workflow: dict[str, list[ArtifactRecord]] = {}
    store = _open_store(cfg.store_url, findings)
    if store is not None:
        try:
            rt = Runtime(store=store, registry=registry, config=cfg, clock=clock, actor="doctor")
            findings += check_scheduler(rt)
            findings += check_runs(rt)
            findings += check_waits(rt)
            findings += check_deliveries(rt)
            findings += check_clock(store, clock)
            findings += check_lease(store, cfg.worker.lease)
            findings += backup_status.check_backups(rt)  # [store] backup: the newest backup's age
            latest, workflow_of = latest_artifacts(store)
            findings += check_files(latest, socket.gethostname())
            for record in latest:
                artifacts_by_workflow.setdefault(workflow_of[record.run_id], []).append(record)
        except SQLAlchemyError as exc:
            findings.append(Finding("database", f"query failed: {_reason(exc)}", problem=True))
        finally:
            store.dispose()
    findings += diagnose_workflows(registry, cfg, artifacts_by_workflow)
    # A workflow's check may name its server (``[llm] host``): no password leaves doctor.
    masked = [dataclasses.replace(f, message=redact.neutralise(redact.mask_urls(f.message))) for f in findings]
    return list(dict.fromkeys(masked))  # two workflows sharing a dependency report it once


# --- database ------------------------------------------------------------------------------------

def _reason(exc: BaseException) -> str:
    """The driver's first line, without SQLAlchemy's SQL echo and links (never a password)."""
    orig = getattr(exc, "orig", None) or exc
    return (str(orig).strip().splitlines() or [type(orig).__name__])[0]


def _open_store(url: str, findings: list[Finding]) -> Store | None:
    """A store on ``url`` if it is reachable and at HEAD; else append why and return None."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        findings.append(Finding("database", f"'{url}' is not a database URL: fix [store] url or REPORTFLOW_DB",
                                problem=True))
        return None
    shown = parsed.render_as_string(hide_password=True)
    path = database.sqlite_path(url)
    if path is not None and not path.exists():
        # Connecting would create an empty file: say what to run instead.
        findings.append(Finding("database", f"the SQLite database {path} does not exist: run `reportflow db "
                                            "upgrade` to create it (or `reportflow init` for a new setup)",
                                problem=True))
        return None
    if parsed.get_backend_name() == "postgresql" and "connect_timeout" not in parsed.query:
        parsed = parsed.update_query_dict({"connect_timeout": str(CONNECT_TIMEOUT_S)})
    try:
        engine = database.create_db_engine(parsed.render_as_string(hide_password=False))
        revision = database.current_revision(engine)
    except errors.ReportflowError as exc:
        findings.append(Finding("database", exc.message, problem=True))
        return None
    except SQLAlchemyError as exc:
        findings.append(Finding("database", f"cannot reach {shown}: {_reason(exc)} (check [store] url or "
                                            "REPORTFLOW_DB, and that the server is running)", problem=True))
        return None
    problem = None
    if revision is None:
        problem = f"{shown} has no reportflow schema: run `reportflow db upgrade`"
    elif revision not in database.KNOWN_REVISIONS:
        problem = (f"{shown} is at schema revision {revision}, unknown to this reportflow (it knows up to "
                   f"{database.HEAD_REVISION}): upgrade reportflow on this node")
    elif revision != database.HEAD_REVISION:
        problem = (f"{shown} is at schema revision {revision}, this reportflow needs {database.HEAD_REVISION}: "
                   "run `reportflow db upgrade`")
    if problem is not None:
        engine.dispose()
        findings.append(Finding("database", problem, problem=True))
        return None
    findings.append(Finding("database", f"{shown} is reachable, schema at revision {revision}"))
    return Store(engine)


#: A scheduler not heard from for this long is reported: ``serve`` beats every 10 s, a cron ``cycle`` or
#: ``tick`` at least every ``due.BEAT_STALE_AFTER`` (5 minutes) when it runs every minute.
SCHEDULER_SILENT_AFTER = timedelta(minutes=15)


#: A worker seen within this is listed by name; those seen before are counted in one line (a `work` from cron
#: each minute leaves a row per process).
WORKER_RECENT = timedelta(hours=1)
#: Recent workers listed by name, most recent first.
WORKERS_LISTED = 10


def check_scheduler(rt: Runtime) -> list[Finding]:
    """What ticks this database, from the heartbeats: the schedulers and workers seen lately, or "never ticked".

    Says only what the beats show: a scheduler is "ticking" when one beat within
    ``SCHEDULER_SILENT_AFTER``; with enabled schedules and no beat at all, nothing ever ticked. When one
    ticks, a scheduler silent since (a host retired, serve moved) is an older process, not a problem.
    """
    now = rt.clock.now()
    with rt.store.read() as conn:
        seen = instances.list_instances(conn)  # most recent first
        enabled = any(s.enabled for s in schedule_rows.list_schedules(conn))

    def last(node: Mapping[str, object]) -> datetime:
        at = node["last_seen_at"]
        assert isinstance(at, datetime)
        return at

    schedulers = [i for i in seen if i["role"] in instances.SCHEDULER_ROLES]
    workers = [i for i in seen if i["role"] not in instances.SCHEDULER_ROLES]
    found = []
    if not schedulers and enabled:
        found.append(Finding("scheduler", "never ticked: no `serve`, `cycle` or `tick` has run against this "
                                          "database, so no schedule makes runs; start `reportflow serve`, or "
                                          "add `* * * * * reportflow cycle` to the system's cron", problem=True))
    ticking = [node for node in schedulers if now - last(node) <= SCHEDULER_SILENT_AFTER]
    for node in ticking:
        found.append(Finding("scheduler", f"{node['role']} on {node['host']} (pid {node['pid']}) ticked "
                                          f"{_ago(now - last(node))} ago"))
    if schedulers and not ticking:  # the latest stands for them all
        node = schedulers[0]
        found.append(Finding("scheduler", f"{node['role']} on {node['host']} (pid {node['pid']}) last ticked "
                                          f"{format_instant(last(node))}, {_ago(now - last(node))} ago: is it "
                                          "still running (or the cron line in place)?", problem=enabled))
    older = schedulers[1:] if not ticking else schedulers[len(ticking):]
    if older:
        found.append(Finding("scheduler", _others(len(older), "older scheduler", now - last(older[0]))))
    recent = [node for node in workers if now - last(node) <= WORKER_RECENT][:WORKERS_LISTED]
    for node in recent:
        found.append(Finding("workers", f"worker {node['id']} last seen {_ago(now - last(node))} ago"))
    if len(workers) > len(recent):
        rest = workers[len(recent):]
        kind = "more worker" if now - last(rest[0]) <= WORKER_RECENT else "older worker"
        found.append(Finding("workers", _others(len(rest), kind, now - last(rest[0]))))
    return found


def _others(count: int, kind: str, newest: timedelta) -> str:
    """``37 older worker processes, the newest seen 3 h ago``."""
    return f"{count} {kind} process{'' if count == 1 else 'es'}, the newest seen {_ago(newest)} ago"


def _ago(span: timedelta) -> str:
    seconds = max(0, int(span.total_seconds()))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h" if seconds < 172800 else f"{seconds // 86400} days"


def check_runs(rt: Runtime) -> list[Finding]:
    """Stalled runs, silent schedules (``reconciler.find_problems``) and stuck runs (``find_stuck``) at ``rt.clock.now()``."""
    stalled, silent = reconciler.find_problems(rt, rt.clock.now())
    found = [Finding("runs", f"run {run.id} ({run.idempotency_key}) has been RUNNING since "
                             f"{format_instant(run.claimed_at)}, past its max_runtime of {run.max_runtime_s}s, and "
                             f"worker {run.lease_owner} still holds its lease: look at that worker "
                             f"(`reportflow runs show {run.id}`), or stop it with `reportflow runs cancel {run.id}`",
                     problem=True) for run in stalled]
    found += [Finding("schedules", f"schedule {name}: its slot at {format_instant(at)} is past its grace and no "
                                   "scheduler has handled it: start `reportflow serve` (or run `reportflow tick` "
                                   "from cron); the misfire policy decides about the late slots",
                      problem=True) for name, at in silent]
    for waiting in reconciler.find_stuck(rt, rt.clock.now()):
        why = waiting.reason or "no reason known: see `reportflow runs show`"
        found.append(Finding("runs", f"run {waiting.run_id} ({waiting.key}) is stuck: {waiting.status} and not "
                                     f"claimed since {format_instant(waiting.waiting_since)} ({why})", problem=True))
    if not found:
        found.append(Finding("runs", "no stalled or stuck run, and no schedule's slot left unhandled past its grace"))
    return found + check_failures(rt)


#: How far back ``doctor`` looks for failed runs.
FAILURE_WINDOW = timedelta(days=7)


def check_waits(rt: Runtime) -> list[Finding]:
    """Runs that wait for a provider (SPEC §15.5): one line per provider, and a problem per run left to a person."""
    with rt.store.read() as conn:
        waits = health_rows.list_waits(conn)
    found: list[Finding] = []
    by_provider: dict[str, list[ProviderWait]] = {}
    for wait in waits:
        if wait.gave_up:
            found.append(Finding("healing", f"run {wait.run_id}: {healing.describe_wait(wait)}", problem=True))
        else:
            by_provider.setdefault(wait.label, []).append(wait)
    for label, waiting in sorted(by_provider.items()):
        first = waiting[0]
        state = ("not probed yet" if first.healthy is None else
                 f"{'answering' if first.healthy else 'down'} since {format_instant(first.health_since_at)}")
        found.append(Finding("healing", f"{len(waiting)} run(s) wait for {label} ({state}): re-queued "
                                        "automatically when it answers", warning=True))
    return found


def check_deliveries(rt: Runtime) -> list[Finding]:
    """Deliveries left unconfirmed (``engine.core.deliveries``): never sent again by themselves, so each is named
    with the command that sends it again once a person has looked at the target."""
    with rt.store.read() as conn:
        held = delivery_rows.unconfirmed(conn)
    return [Finding("deliveries", f"{d.key} to {d.target} is unconfirmed since {format_instant(d.updated_at)} "
                                  f"({d.error or 'it may have arrived'}): look at the target, then "
                                  f"`reportflow runs resend {d.run_id} --target {d.target}` if it is not there",
                    warning=True) for d in held]


def check_failures(rt: Runtime) -> list[Finding]:
    """Runs FAILED in the last week, one line per error code with its runbook line."""
    since = rt.clock.now() - FAILURE_WINDOW
    with rt.store.read() as conn:
        rows = doctor_rows.failures_since(conn, since)
    return [Finding("failures", f"{count} run(s) FAILED with {code or 'no code'} in the last 7 days "
                                f"(latest: run {latest}): "
                                f"{error_codes.runbook(code) or 'see `reportflow runs show ' + str(latest) + '`'}",
                    problem=True) for code, count, latest in rows]


def check_clock(store: Store, clock: Clock) -> list[Finding]:
    """PostgreSQL: this host's clock against the server's, allowing half the round trip."""
    if store.dialect != "postgresql":
        return []  # SQLite lives on this host: one clock
    with store.read() as conn:
        before = clock.now()
        server_now = doctor_rows.server_now(conn)
        after = clock.now()
    skew = server_now - (before + (after - before) / 2)
    if abs(skew) > MAX_SKEW + (after - before) / 2:
        return [Finding("clock", f"this host's clock is {skew.total_seconds():+.1f}s off the database server's "
                                 f"(more than {MAX_SKEW.total_seconds():.0f}s): leases and slots assume one time; "
                                 "sync both with NTP (e.g. `timedatectl set-ntp true`, chrony)", problem=True)]
    return [Finding("clock", f"agrees with the database server ({skew.total_seconds():+.3f}s)")]


def check_lease(store: Store, lease: timedelta) -> list[Finding]:
    """A warning (not a problem) for leases under 30 s on a database that several nodes may share."""
    if store.dialect != "postgresql" or lease >= MIN_SHARED_LEASE:
        return []
    return [Finding("lease", f"worker.lease is {lease.total_seconds():g}s; with several nodes on one "
                             f"PostgreSQL database use {MIN_SHARED_LEASE.total_seconds():g}s or more, or a worker "
                             "paused for a moment loses its run to another node", warning=True)]


# --- artifacts -----------------------------------------------------------------------------------

def latest_artifacts(store: Store) -> tuple[list[ArtifactRecord], dict[int, str]]:
    """The latest artifact of each kind of every SUCCESS/PARTIAL_SUCCESS run, and each run's workflow.

    Only the latest per (run, kind): a re-save that wrote ``-v2.md`` or a page
    made after the old one was trashed supersedes the earlier record.
    """
    latest: dict[tuple[int, str], ArtifactRecord] = {}
    workflow_of: dict[int, str] = {}
    with store.read() as conn:
        for record, workflow in doctor_rows.successful_artifacts(conn):
            latest[(record.run_id, record.kind)] = record
            workflow_of[record.run_id] = workflow
    return list(latest.values()), workflow_of


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def check_files(records: Sequence[ArtifactRecord], host: str) -> list[Finding]:
    """Files of this host (``host:path``) that are missing or whose content changed since recorded."""
    found: list[Finding] = []
    checked = elsewhere = 0
    for record in records:
        # A file is recorded as "host:/absolute/path" with its sha256 (SPEC §13); URLs are not files.
        where, _, raw_path = record.location.partition(":")
        if not record.sha256 or not raw_path.startswith("/") or raw_path.startswith("//"):
            continue
        if where != host:
            elsewhere += 1
            continue
        checked += 1
        path = Path(raw_path)
        repair = f"run `reportflow runs retry {record.run_id} --from-step {record.step}`"
        try:
            actual = _sha256(path)
        except FileNotFoundError:
            found.append(Finding("artifacts", f"run {record.run_id}: {record.kind} file {path} is missing: {repair}",
                                 problem=True))
            continue
        except OSError as exc:
            found.append(Finding("artifacts", f"run {record.run_id}: cannot read {path} ({exc.strerror}): fix its "
                                              f"permissions, or {repair}", problem=True))
            continue
        if record.sha256 and actual != record.sha256:
            found.append(Finding("artifacts", f"run {record.run_id}: {path} changed since the run wrote it "
                                              f"(sha256 differs): {repair}", problem=True))
    if not found:
        note = f"; {elsewhere} on other hosts (run doctor there)" if elsewhere else ""
        found.append(Finding("artifacts", f"{checked} file(s) on this host match what their runs wrote{note}"))
    return found


# --- workflows -----------------------------------------------------------------------------------

def diagnose_workflows(registry: Registry, cfg: config_file.AppConfig,
                       artifacts_by_workflow: Mapping[str, Sequence[ArtifactRecord]]) -> list[Finding]:
    """Each workflow's own checks, for the projects its enabled schedules name and its runs' artifacts."""
    found: list[Finding] = []
    for name, workflow in sorted(registry.items()):
        projects = sorted({s.project for s in cfg.schedules if s.workflow == name and s.enabled})
        records = artifacts_by_workflow.get(name, ())
        if not projects and not records:
            continue
        settings: Any = cfg.workflow_settings.get(name)
        try:
            found += workflow.diagnose(settings, projects, list(records))
        except Exception as exc:  # noqa: BLE001 - one broken check must not hide every other finding
            logs.event(log, logging.ERROR, "diagnose_failed", exc_info=True, workflow=name)
            found.append(Finding(f"workflow {name}", f"its checks failed: {type(exc).__name__}: {exc}",
                                 problem=True))
    return found
