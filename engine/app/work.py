"""``reportflow work``: the worker pool, and beside a long-running one the alert sender.

``work --until-idle`` (a cron line's pass) ends when nothing is claimable and then delivers the
alerts it recorded; a long-running ``work`` sends alerts in a thread of their own, off every
step's path, until ``stop`` is set. Either way the pool is closed on the way out, so a run in
flight is handed back rather than left to its lease.
"""

from __future__ import annotations

import threading

from engine.core.run_end import RunOutcome
from engine.execution.pool import WorkerPool
from engine.operations import outbox_sender
from engine.runtime import Runtime

#: How long ``work`` waits for the alert sender to finish a delivery once stopped.
SENDER_JOIN_S = 30


def work(rt: Runtime, *, stop: threading.Event, worker_id: str | None = None, concurrency: int | None = None,
         until_idle: bool = False, max_runs: int | None = None) -> list[RunOutcome]:
    """Claim and execute runs until idle (``until_idle``), ``max_runs`` or ``stop``; what each run came to."""
    pool = WorkerPool(rt, worker_id, stop=stop, concurrency=concurrency)
    sender = None
    if not until_idle:
        sender = threading.Thread(target=outbox_sender.deliver_until, args=(rt, stop), name="alerts", daemon=True)
        sender.start()
    try:
        outcomes = pool.work(until_idle=until_idle, max_runs=max_runs)
    finally:
        pool.close()
        if sender is not None:
            stop.set()
            sender.join(SENDER_JOIN_S)
    if sender is None:
        outbox_sender.deliver_pending(rt, stop=stop)
    return outcomes
