"""How a command's process answers SIGINT and SIGTERM.

A loop (``work``, ``cycle``, ``serve``) stops gracefully: the signal sets a ``SignalStop``, the run in
flight is handed back at its next step boundary, and the command then exits 128 + the signal, as a
shell does. A command with files to clean up (``db backup``) turns SIGTERM into ``SystemExit`` so that
its ``finally`` blocks run.
"""

from __future__ import annotations

import signal
import threading
from typing import Any


class SignalStop(threading.Event):
    """The stop event of a loop command, set by SIGINT or SIGTERM, remembering which came first."""

    signum: int | None = None


def stop_on_signals() -> SignalStop:
    """A stop event that SIGINT and SIGTERM set from now on (the process's handlers are replaced)."""
    stop = SignalStop()

    def _handler(signum: int, _frame: Any) -> None:
        if stop.signum is None:
            stop.signum = signum
        stop.set()

    signal.signal(signal.SIGTERM, _handler)
    signal.signal(signal.SIGINT, _handler)
    return stop


def exit_on_sigterm() -> None:
    """SIGTERM ends the command as SystemExit(143), so ``finally`` and cleanup blocks run (default: none do)."""

    def _handler(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _handler)
