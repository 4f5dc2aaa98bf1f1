"""``reportflow serve``: scheduler, worker and reconciler loops in one process.

The loop is ``tick; sweep (now and then); sleep`` while the ``WorkerPool``'s
threads claim and execute runs beside it, and three threads more: the alert sender,
the backups (``[store] backup``: each slot's copy taken and verified) and the healer (every ``[notify] health_every``: probe the providers in use, queue
again the runs they failed once they answer, SPEC §15.5): each batch of runs a tick commits wakes
the idle threads at once, so a burst's first runs start while the tick is still
creating the others. The loop sleeps until the next due slot or retry, but never
longer than the poll interval nor 30 s; an idle thread looks for runs queued by
other processes every poll interval. SIGTERM/SIGINT set ``stop``: the current
step finishes (or is abandoned 10 s later, ``step_call.STOP_GRACE_S``), the run is handed
back, the process exits 0.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta
from typing import Any
from wsgiref.simple_server import WSGIServer

from engine.app import config_reload
from engine.core import logs
from engine.core.clock import format_instant
from engine.execution import healer, loop, reconciler
from engine.execution.pool import WorkerPool
from engine.operations import outbox_sender, prune, scheduled_backups
from engine.runtime import Runtime
from engine.scheduling import heartbeat, tick
from engine.store import database, run_rows, schedule_rows

log = logging.getLogger(__name__)
BEAT_EVERY_S = 10.0  # the scheduler's heartbeat (engine.scheduling.heartbeat), at most this often
MAX_SLEEP = timedelta(seconds=30)


def decide_sleep(now: datetime, wakes: list[datetime | None], poll: timedelta) -> float:
    """Seconds to sleep: until the earliest wake-up, capped by the poll interval and 30 s."""
    cap = min(poll, MAX_SLEEP)
    upcoming = [w for w in wakes if w is not None]
    if not upcoming:
        return cap.total_seconds()
    return max(0.0, min(min(upcoming) - now, cap).total_seconds())


def _serving(rt: Runtime) -> dict[str, Any]:
    """What ``serve`` says at start: how many schedules it ticks, and which slot is due next (an operator reading
    the log at 3 a.m. sees at once whether it serves anything)."""
    with rt.store.read() as conn:
        live = [s for s in schedule_rows.list_schedules(conn) if s.enabled and s.next_run_at is not None]
    if not live:
        return {"schedules": 0, "next": "none (run `reportflow schedules apply`)"}
    first = min(live, key=lambda s: s.next_run_at or datetime.max)
    return {"schedules": len(live), "next": f"{format_instant(first.next_run_at)} ({first.name})"}


def serve(rt: Runtime, *, stop: threading.Event, worker_id: str | None = None,
          metrics_port: int | None = None, ui_port: int | None = None) -> None:
    """Tick, sweep and prune in this loop while the pool's threads execute runs, until ``stop`` is set."""
    page = _start_ui(rt, ui_port) if ui_port is not None else None
    worker = WorkerPool(rt, worker_id, stop=stop)  # [worker] concurrency runs at a time, in the background
    server = _start_metrics(rt, metrics_port) if metrics_port is not None else None
    sweep_every = max(1.0, rt.config.worker.lease.total_seconds() / 2)
    last_sweep = last_beat = float("-inf")
    followed = config_reload.watch(rt)
    # The alert sender beside the loop: a webhook that hangs delays neither a tick nor a claim.
    sender = threading.Thread(target=outbox_sender.deliver_until, args=(rt, stop), name="alerts", daemon=True)
    sender.start()
    # The healer beside the loop too: a probe that waits for a slow provider delays neither a tick nor a claim.
    healing = threading.Thread(target=healer.heal_until, args=(rt, stop), kwargs={"wake": worker.wake},
                               name="healer", daemon=True)
    healing.start()
    # Backups beside the loop too: a copy of a large database delays neither a tick nor a claim.
    backing_up = threading.Thread(target=scheduled_backups.backup_until, args=(rt, stop), name="backups", daemon=True)
    backing_up.start()
    logs.event(log, logging.INFO, "serve_started", worker=worker.worker_id, **_serving(rt))
    poll = rt.config.worker.poll_interval
    retention_timer = prune.RetentionTimer(rt.config.retain, rt.config.retain_max)
    backoff = loop.Backoff(rt.clock, poll, "serve_loop_failed")
    retry_at: datetime | None = None  # the next retry's not_before: the loop wakes for it
    reclaim = True  # at start (a restarted node) and after a database error: runs this worker id still holds
    try:
        while not stop.is_set():
            try:
                worker.check()  # a worker thread that died of anything but a database error ends serve
                if reclaim:
                    # Take them back now, not after their lease (leaving alone those the pool's threads
                    # are executing); inside the loop, so a database that goes away right at start-up
                    # is retried like any other outage. The threads start once that has been done.
                    worker.reclaim()
                    worker.start()
                    if failures := backoff.recovered():
                        logs.event(log, logging.INFO, "serve_loop_recovered", failures=failures)
                    reclaim = False
                if followed is not None:
                    config_reload.reload_if_changed(rt, followed)  # a changed file: new settings, or an alert
                report = tick.tick(rt, committed=worker.wake)
                if rt.clock.monotonic() - last_beat >= BEAT_EVERY_S:
                    heartbeat.beat(rt, "serve")
                    last_beat = rt.clock.monotonic()
                if rt.clock.monotonic() - last_sweep >= sweep_every:
                    reconciler.sweep(rt)
                    last_sweep = rt.clock.monotonic()
                    retention_timer.maybe_prune(rt)  # [store] retain: once a day
                    worker.wake()  # runs the sweep handed back or promoted
                worker.beat()
                now = rt.clock.now()
                if retry_at is not None and retry_at <= now:
                    worker.wake()  # the retry this loop slept for is due: no need to wait for a poll
                with rt.store.read() as conn:
                    retry_at = run_rows.next_due_at(conn, after=now)
                delay = decide_sleep(now, [report.next_due_at, retry_at], poll)
            except database.DATABASE_ERRORS as exc:
                # The database went away (restart, failover): keep the process, try again shortly.
                reclaim = True
                rt.clock.sleep(backoff.failed(exc), stop)
                continue
            rt.clock.wait(delay, stop)
    finally:
        stop.set()  # also on an error that ends serve: the sender sends what is pending once more, then stops
        sender.join(30)
        healing.join(30)
        backing_up.join(30)
        worker.close()
        if server is not None:
            server.shutdown()
            server.server_close()  # the listening socket: shutdown only stops the loop
        if page is not None:
            page.stop()
        logs.event(log, logging.INFO, "serve_stopped", worker=worker.worker_id)


def _start_ui(rt: Runtime, port: int) -> Any:
    """The web page in a thread beside the loops (``serve --ui-port``), on ``[ui] host``."""
    from engine.web import server

    page = server.Background(rt, rt.config.ui.host, port)
    page.start()
    return page


def _start_metrics(rt: Runtime, port: int) -> WSGIServer:
    """The exposition on 127.0.0.1 behind the page's Host check and its token (``web.metrics_endpoint``)."""
    from engine.web import metrics_endpoint

    return metrics_endpoint.start(rt, port)
