"""A running ``serve`` follows its config file: a change is loaded, a broken file is an alert, never an exit.

Without this, ``serve`` kept the settings it started with (a ``language = "ko"`` applied
meanwhile still made English reports). Each pass of its loop stats the file; when the
bytes changed, the config is validated again (an invalid ``[[schedules]]`` entry left out,
as every command does). Valid: the runtime takes the new settings, and the runs created
from then on are pinned to them. Invalid: ``config_invalid`` is raised once for that
content, and the last good config stays in force.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

from engine.config import defaults
from engine.core import alerts, errors, logs
from engine.core.schedule_spec import Criticality
from engine.plugins import workflow_registry
from engine.runtime import Runtime
from engine.store import outbox

log = logging.getLogger(__name__)


@dataclass
class ConfigWatch:
    """The config file ``serve`` follows, and what it last saw of it."""

    path: Path
    stamp: tuple[int, int]  # (mtime_ns, size): a cheap look before the bytes are read
    digest: str


def watch(rt: Runtime) -> ConfigWatch | None:
    """Start following ``rt``'s config file (None when it came from no file)."""
    path = rt.config.path
    if path is None or not path.is_file():
        return None
    return ConfigWatch(path, _stamp(path), _digest(path))


def reload_if_changed(rt: Runtime, seen: ConfigWatch) -> str | None:
    """Load the config again if its bytes changed: ``"reloaded"``, ``"invalid"`` (kept the last good one), or None."""
    try:
        stamp = _stamp(seen.path)
    except OSError:
        return None  # being replaced (an editor's rename): the next pass looks again
    if stamp == seen.stamp:
        return None
    seen.stamp = stamp
    try:
        digest = _digest(seen.path)
    except errors.ConfigInvalid as exc:  # a device, a FIFO, a file over the cap: refused before it is read
        if not seen.path.exists():
            seen.stamp = (0, 0)  # gone between two looks: the next pass looks again
            return None
        return _refuse(rt, seen, exc.message)
    if digest == seen.digest:
        return None
    seen.digest = digest
    try:
        config, registry = workflow_registry.load_with_config(seen.path, db_override=rt.config.store_url,
                                                              sparing=True)
    except errors.ReportflowError as exc:
        _raise(rt, digest, f"{seen.path} is invalid; serve keeps the configuration it had: {exc.message}")
        return "invalid"
    rt.config, rt.registry = config, registry
    logs.event(log, logging.INFO, "config_reloaded", path=str(seen.path))
    if config.left_out:
        _raise(rt, digest, "; ".join(config.left_out))
    return "reloaded"


def _refuse(rt: Runtime, seen: ConfigWatch, problem: str) -> str:
    """A file that cannot be a config: ``config_invalid`` once for that problem; the last good config stays."""
    key = hashlib.sha256(problem.encode()).hexdigest()
    if key != seen.digest:
        seen.digest = key
        _raise(rt, key, f"{seen.path} cannot be read as a config; serve keeps the configuration it had: {problem}")
    return "invalid"


def _raise(rt: Runtime, digest: str, summary: str) -> None:
    """``config_invalid``, once per content of the file."""
    with rt.store.write() as conn:
        outbox.record_event(conn, event=alerts.AlertEvent.CONFIG_INVALID, dedupe_key=f"config_invalid:{digest[:32]}",
                            at=rt.clock.now(), summary=summary,
                            decision=alerts.decide_severity(alerts.AlertEvent.CONFIG_INVALID, Criticality.NORMAL, 1))
    logs.event(log, logging.WARNING, "config_invalid", problem=summary)


def _stamp(path: Path) -> tuple[int, int]:
    info = path.stat()
    return info.st_mtime_ns, info.st_size


def _digest(path: Path) -> str:
    """The file's content hash, read as the first load reads it: a regular file within the size cap, opened
    without blocking (``ConfigInvalid`` otherwise, before anything is read)."""
    return hashlib.sha256(defaults.read_config_bytes(path)).hexdigest()
