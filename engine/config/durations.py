"""Durations as a config writes them: ``"30s"``, ``"10m"``, ``"1.5h"``, ``"7d"``, ``"2w"`` (or a number of seconds),
read (``parse``) and written back (``text``). One module, below ``config_file`` and ``backup_config`` alike."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

_DURATION = re.compile(r"^\s*([0-9]{1,15}(?:\.[0-9]{1,9})?)\s*(ms|s|m|h|d|w)\s*$")
MAX_DURATION = timedelta(days=36_525)  # 100 years: any longer one is a typo, and overflows dates
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse(value: Any) -> timedelta:
    """``"30m"``, ``"7d"``, ``"60s"``, ``"1.5h"`` (or a number of seconds) to a timedelta."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    seconds: float | None = None
    if isinstance(value, int | float):
        if not value >= 0:  # NaN too
            raise ValueError(f"{value!r}: a duration cannot be negative")
        seconds = float(min(value, MAX_DURATION.total_seconds() + 1))
    elif isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if seconds is not None:
        if seconds > MAX_DURATION.total_seconds():
            raise ValueError(f"{value!r} is longer than 100 years")
        return timedelta(seconds=seconds)
    raise ValueError(f"{value!r} is not a duration (use e.g. '30s', '10m', '1h', '7d')")


def text(duration: timedelta) -> str:
    """A duration as a config would write it (``30m``, ``1h``, ``90s``)."""
    seconds = int(duration.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{duration.total_seconds():g}s"
