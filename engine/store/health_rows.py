"""The SQL of healing (SPEC §15.5): providers' latest probes, and the runs that wait for a provider.

A run waits for a provider when it ended FAILED or PARTIAL_SUCCESS with one of that
provider's error codes, or succeeded around it (a degraded step). The row is written,
or removed, by the transaction that ends the run (``sync_wait``), so it can never
disagree with the run's outcome; the healer (``engine.execution.healing``) reads the
rows whose ``check_after`` has come, decides (``engine.core.healing``) and writes back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Join, delete, func, select, update
from sqlalchemy.engine import Connection, RowMapping

from engine.core import redact
from engine.core.healing import ProviderHealth
from engine.core.models import ProviderWait, StepStatus
from engine.store.run_rows import IN_LIST_BATCH, dialect_insert
from engine.store.tables import audit_events, provider_health, run_waits, steps

#: The audit action of an automatic re-queue (actor ``SYSTEM_RECONCILER``); the daily cap counts them.
AUTO_REQUEUED = "run_auto_requeued"


@dataclass(frozen=True)
class WaitFor:
    """What the transaction that ends a run records: the provider it waits for, and from which step."""

    provider: str
    label: str
    error_code: str
    step: str
    degraded: bool


def _health(row: RowMapping) -> ProviderHealth:
    return ProviderHealth(provider=row["provider"], label=row["label"], healthy=bool(row["healthy"]),
                          detail=row["detail"], checked_at=row["checked_at"], since_at=row["since_at"],
                          next_check_at=row["next_check_at"])


def get_health(conn: Connection, providers: Iterable[str] | None = None) -> dict[str, ProviderHealth]:
    """The latest probe of each provider (of ``providers`` only, when given), by name."""
    query = select(provider_health)
    if providers is not None:
        query = query.where(provider_health.c.provider.in_(sorted(set(providers))))
    return {row["provider"]: _health(row) for row in conn.execute(query).mappings()}


def record_probe(conn: Connection, provider: str, label: str, *, healthy: bool, detail: str, now: datetime,
                 every: timedelta) -> ProviderHealth | None:
    """Store a probe's result (next probe at ``now + every``); returns the provider's previous state, if any.

    ``since_at`` moves only when the provider turns healthy or unhealthy.
    """
    previous = get_health(conn, [provider]).get(provider)
    since = previous.since_at if previous is not None and previous.healthy == healthy else now
    values = {"label": label, "healthy": healthy, "detail": redact.mask_urls(detail)[:500], "checked_at": now,
              "since_at": since, "next_check_at": now + every}
    stmt = dialect_insert(conn)(provider_health).values(provider=provider, **values)
    conn.execute(stmt.on_conflict_do_update(index_elements=["provider"], set_=values))
    return previous


def degraded_step(conn: Connection, run_id: int) -> tuple[str, str] | None:
    """The first step of the run that succeeded around a failure: (its name, the code it worked around)."""
    query = (select(steps.c.name, steps.c.error_code)
             .where(steps.c.run_id == run_id, steps.c.status == StepStatus.SUCCESS.value,
                    steps.c.error_code.is_not(None))
             .order_by(steps.c.position).limit(1))
    row = conn.execute(query).first()
    return None if row is None else (str(row[0]), str(row[1]))


def sync_wait(conn: Connection, run_id: int, wait: WaitFor | None, now: datetime) -> None:
    """Record what the run ending now waits for (None: nothing, the row goes), in the caller's transaction.

    A run that waits again keeps its count of automatic re-queues (the budget is per run,
    whatever it failed with), and is looked at by the next healer pass.
    """
    if wait is None:
        conn.execute(delete(run_waits).where(run_waits.c.run_id == run_id))
        return
    values = {"provider": wait.provider, "label": redact.mask_urls(wait.label), "error_code": wait.error_code,
              "step": wait.step, "degraded": wait.degraded, "since_at": now, "check_after": now, "gave_up": None}
    stmt = dialect_insert(conn)(run_waits).values(run_id=run_id, recoveries=0, **values)
    conn.execute(stmt.on_conflict_do_update(index_elements=["run_id"], set_=values))


def _wait(row: RowMapping) -> ProviderWait:
    checked = row.get("checked_at")
    return ProviderWait(
        run_id=row["run_id"], provider=row["provider"], label=row["label"], error_code=row["error_code"],
        step=row["step"], degraded=bool(row["degraded"]), since_at=row["since_at"], recoveries=row["recoveries"],
        check_after=row["check_after"], gave_up=row["gave_up"],
        healthy=None if checked is None else bool(row["healthy"]), health_since_at=row.get("health_since_at"),
        health_detail=row.get("detail"), checked_at=checked)


def _with_health() -> tuple[Any, ...]:
    return (run_waits, provider_health.c.healthy, provider_health.c.since_at.label("health_since_at"),
            provider_health.c.detail, provider_health.c.checked_at)


def _joined() -> Join:
    return run_waits.outerjoin(provider_health, provider_health.c.provider == run_waits.c.provider)


def waits_due(conn: Connection, now: datetime, *, limit: int = 500) -> list[ProviderWait]:
    """Waiting runs whose ``check_after`` has come, oldest wait first."""
    query = (select(*_with_health()).select_from(_joined())
             .where(run_waits.c.check_after <= now).order_by(run_waits.c.since_at, run_waits.c.run_id).limit(limit))
    return [_wait(row) for row in conn.execute(query).mappings()]


def list_waits(conn: Connection, *, limit: int = 500) -> list[ProviderWait]:
    """Every run that waits for a provider, oldest wait first (``doctor``)."""
    query = (select(*_with_health()).select_from(_joined())
             .order_by(run_waits.c.since_at, run_waits.c.run_id).limit(limit))
    return [_wait(row) for row in conn.execute(query).mappings()]


def waits_of(conn: Connection, run_ids: Sequence[int]) -> dict[int, ProviderWait]:
    """What each of these runs waits for (runs that wait for nothing are left out)."""
    found: dict[int, ProviderWait] = {}
    ids = sorted(set(run_ids))
    for start in range(0, len(ids), IN_LIST_BATCH):
        query = (select(*_with_health()).select_from(_joined())
                 .where(run_waits.c.run_id.in_(ids[start:start + IN_LIST_BATCH])))
        found.update((row["run_id"], _wait(row)) for row in conn.execute(query).mappings())
    return found


def providers_waited_for(conn: Connection, now: datetime) -> set[str]:
    """The providers that runs due for a look (``check_after`` come) wait for."""
    query = select(run_waits.c.provider).distinct().where(run_waits.c.check_after <= now)
    return set(conn.execute(query).scalars())


def mark_wait(conn: Connection, run_id: int, *, check_after: datetime | None, gave_up: str | None = None,
              requeued: bool = False) -> None:
    """After the healer's decision: when to look again, why it gave up, and one more re-queue counted."""
    values: dict[str, object] = {"check_after": check_after, "gave_up": gave_up}
    if requeued:
        values["recoveries"] = run_waits.c.recoveries + 1
    conn.execute(update(run_waits).where(run_waits.c.run_id == run_id).values(**values))


def forget_wait(conn: Connection, run_id: int) -> None:
    """The run no longer waits (it ends otherwise now): its row goes."""
    conn.execute(delete(run_waits).where(run_waits.c.run_id == run_id))


def auto_requeues_since(conn: Connection, schedule_id: int, since: datetime) -> int:
    """Automatic re-queues of the schedule's runs since ``since`` (the daily cap's count)."""
    query = select(func.count()).select_from(audit_events).where(
        audit_events.c.schedule_id == schedule_id, audit_events.c.action == AUTO_REQUEUED,
        audit_events.c.at > since)
    return int(conn.execute(query).scalar_one())
