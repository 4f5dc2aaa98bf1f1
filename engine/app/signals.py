"""How a command's process answers SIGINT and SIGTERM.

A loop (``work``, ``cycle``, ``serve``) stops gracefully: the signal sets a ``SignalStop``, the run in
flight is handed back at its next step boundary, and the command then exits 128 + the signal, as a
shell does. A command with files to clean up (``db backup``) turns SIGTERM into ``SystemExit`` so that
its ``finally`` blocks run.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from typing import Any

from engine.core import logs

log = logging.getLogger(__name__)


class SignalStop(threading.Event):
    """The stop event of a loop command, set by SIGINT or SIGTERM, remembering which came first."""

    signum: int | None = None


def stop_on_signals() -> SignalStop:
    """A stop event that SIGINT and SIGTERM set from now on (the process's handlers are replaced).

    The event is set by a thread of its own, woken through the signal wakeup pipe, never by the handler:
    a Python handler runs in the main thread between two bytecodes, possibly inside ``Event.wait`` while
    that thread holds the event's lock, and ``stop.set()`` there would wait for that lock forever (the
    handler was seen running with the lock held under a storm of signals).
    """
    stop = SignalStop()
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)  # the C handler writes the signal's number

    def _watch() -> None:
        while True:
            for signum in os.read(wake_read, 64):
                if signum in (signal.SIGTERM, signal.SIGINT):
                    if stop.signum is None:
                        stop.signum = signum
                    stop.set()
                    # What the operator sees at once: the process is stopping, not hung, and why it still runs.
                    logs.event(log, logging.INFO, "stop_requested", signal=signal.Signals(signum).name,
                               then="the run in flight is handed back at its next step boundary")

    def _handler(signum: int, _frame: Any) -> None:
        """Replaces the default action (which would end the process); the watcher does the rest."""

    threading.Thread(target=_watch, name="signals", daemon=True).start()
    signal.signal(signal.SIGTERM, _handler)
    signal.signal(signal.SIGINT, _handler)
    return stop


def exit_on_sigterm() -> None:
    """SIGTERM ends the command as SystemExit(143), so ``finally`` and cleanup blocks run (default: none do)."""

    def _handler(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _handler)
