"""The scheduler's heartbeat: ``serve``, ``cycle`` and a full ``tick`` say that something schedules on this host.

Workers beat as they work (``Worker.beat``); without a beat from a scheduler nothing
creates tomorrow's runs, which ``doctor`` and the metrics must be able to say. A
nothing-due ``tick`` or ``cycle`` on its fast path writes nothing, but takes the full
path (and beats) once its host's beat is older than ``due.BEAT_STALE_AFTER``.
"""

from __future__ import annotations

import os
import socket

from engine.runtime import Runtime
from engine.store import due, instances


def beat(rt: Runtime, role: str) -> None:
    """Record that ``role`` (``serve``, ``cycle`` or ``tick``) ticked on this host at ``rt.clock.now()``."""
    host = socket.gethostname()
    with rt.store.write() as conn:
        instances.beat(conn, instance_id=due.scheduler_id(host), role=role, host=host, pid=os.getpid(),
                       projects=None, now=rt.clock.now())
