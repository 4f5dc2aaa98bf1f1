"""``reportflow cycle``: one pass of everything ``serve`` loops over, for the system's cron (SPEC §8).

Tick (create the runs that are due), reconcile (recover expired leases, promote
PENDING runs, report stalled runs and silent schedules), heal (when runs wait for a
provider whose check has come: probe it, and queue again the runs it failed once it
answers; SPEC §15.5), take the backup whose slot came (``[store] backup``), then work until nothing
is claimable, on the same run loop as ``work --until-idle``, and last deliver the
alerts the pass recorded (and any due again) outside every transaction: a
database error ends the pass (exit 1) and the next minute's cycle starts over;
SIGTERM hands the current run back at its next step boundary, or
10 s later at the latest (``step_call.STOP_GRACE_S``). ``engine.cli.fast_tick`` answers a
cycle with nothing to do without coming here.
"""

from __future__ import annotations

import threading

from engine.core import reports
from engine.execution import healer, reconciler
from engine.execution.pool import WorkerPool
from engine.operations import outbox_sender, scheduled_backups
from engine.runtime import Runtime
from engine.scheduling import heartbeat, tick


def cycle(rt: Runtime, *, stop: threading.Event, worker_id: str | None = None,
          concurrency: int | None = None) -> reports.CycleReport:
    """Tick, reconcile, heal, work until idle and deliver pending alerts, once; what each part did."""
    report = reports.CycleReport(tick=tick.tick(rt))
    heartbeat.beat(rt, "cycle")
    report.sweep = reconciler.sweep(rt)
    report.heal = healer.heal(rt)  # probes only for runs that wait for a provider: an idle pass asks no one
    scheduled_backups.take_due(rt)  # before the delivery below, which sends a backup_failed it raised
    pool = WorkerPool(rt, worker_id, stop=stop, concurrency=concurrency)
    try:
        report.outcomes = pool.work(until_idle=True)
    finally:
        pool.close()
        outbox_sender.deliver_pending(rt, stop=stop)  # never raises: a webhook that is down is retried by a later pass
    return report
