"""How old the newest backup is, for ``reportflow doctor`` (``[store] backup``).

On SQLite the backups are the verified copies that ``serve`` and ``cycle`` recorded
(``engine.store.backup_rows``); one is a problem when none exists or the newest is older than two
intervals of the cron (or ``max_age``). On PostgreSQL reportflow takes none: the newest file in ``dir``,
where the system's ``pg_dump`` writes, must be younger than ``max_age`` (26 h unless set).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engine.config import backup_config, durations
from engine.core import backups
from engine.core.clock import format_instant
from engine.plugins.contract import Finding
from engine.runtime import Runtime
from engine.store import backup, backup_rows

CHECK = "backups"


def check_backups(rt: Runtime) -> list[Finding]:
    """One finding about the newest backup (none when ``[store] backup`` is not configured)."""
    plan = rt.config.backup
    if plan is None:
        return []
    now = rt.clock.now()
    if plan.cron is None:
        return [_dump_finding(plan, now)]
    with rt.store.read() as conn:
        kept = backup_rows.list_verified(conn)
    limit = plan.max_age or 2 * backups.interval(plan.cron, plan.timezone, now)
    newest = kept[0] if kept else None
    verdict = backups.decide_freshness(newest.finished_at if newest else None, limit, now)
    if newest is None or verdict.age is None:
        return [Finding(CHECK, f"no verified backup in {plan.dir} yet: serve or cycle takes one at each "
                               f"'{plan.cron}' slot ({plan.timezone}); is one of them running?", problem=True)]
    said = f"newest verified backup {newest.path} is {_age(verdict.age)} old"
    changed = _changed(newest)
    if changed is not None:
        return [Finding(CHECK, f"{said}, but {changed} since it was verified: it is not the copy that was checked; "
                               "keep the file aside and let the next slot take a new one (`reportflow cycle`)",
                        problem=True)]
    if verdict.problem:
        return [Finding(CHECK, f"{said}, more than {durations.text(limit)}: see the backup_failed alerts "
                               "(`reportflow notifications list`) and the serve or cycle logs", problem=True)]
    return [Finding(CHECK, f"{said} (verified at {format_instant(newest.finished_at or now)})")]


def _changed(row: backup_rows.BackupRow) -> str | None:
    """What became of a verified copy since (missing, another size, another sha256), or None when it is the same."""
    try:
        if row.size is None or row.sha256 is None:  # verified before they were recorded: only its presence
            return None if row.path.is_file() else "it is gone"
        size = row.path.stat().st_size
        if size != row.size:
            return f"it is {size:,} bytes, not {row.size:,}"
        return None if backup.digest(row.path)[1] == row.sha256 else "its sha256 differs"
    except OSError:
        return "it is gone"


def _dump_finding(plan: backup_config.BackupPlan, now: datetime) -> Finding:
    """PostgreSQL: the age of the newest regular file in ``dir`` (a dump), against ``max_age``."""
    limit = plan.max_age or backup_config.DEFAULT_PG_MAX_AGE
    dumps = [p for p in (plan.dir.iterdir() if plan.dir.is_dir() else ()) if p.is_file() and not p.name.startswith(".")]
    newest = max(dumps, key=lambda p: p.stat().st_mtime, default=None)
    stamped = datetime.fromtimestamp(newest.stat().st_mtime, UTC) if newest is not None else None
    verdict = backups.decide_freshness(stamped, limit, now)
    if newest is None or verdict.age is None:
        return Finding(CHECK, f"no dump in {plan.dir}: schedule pg_dump into it (README, \"Backups\")", problem=True)
    said = f"newest dump {newest} is {_age(verdict.age)} old"
    if verdict.problem:
        return Finding(CHECK, f"{said}, more than max_age {durations.text(limit)}: is the pg_dump cron line "
                              "still running?", problem=True)
    return Finding(CHECK, said)


def _age(span: timedelta) -> str:
    """A whole number of minutes (seconds under one), as a config writes durations."""
    return durations.text(span - span % timedelta(minutes=1) if span >= timedelta(minutes=1) else span)
