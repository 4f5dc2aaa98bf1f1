"""Where reportflow looks by default, and how a relative SQLite URL resolves: one source, no pydantic.

``engine.config.config_file`` validates the file, ``engine.cli.fast_tick`` finds the store of a
nothing-due ``tick`` without it, and ``db upgrade``/``db backup`` open it with no config at all:
every one of them picks and resolves the store URL with ``store_url``.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_CONFIG = "reportflow.toml"
DEFAULT_DB_URL = "sqlite:///.reportflow/reportflow.db"


def resolve_store_url(url: str, base_dir: Path) -> str:
    """Resolve a relative SQLite path against the config's folder."""
    prefix = "sqlite:///"
    if url.startswith(prefix) and not url.startswith("sqlite:////") and url != "sqlite:///:memory:":
        path = url[len(prefix):]
        if not os.path.isabs(path):
            return prefix + str((base_dir / path).resolve())
    return url


def store_url(override: str | None, configured: str | None, base_dir: Path) -> str:
    """The store URL of every command: ``--db``/REPORTFLOW_DB, else ``[store] url``, else the default.

    A relative SQLite path resolves against ``base_dir`` (the config's folder), never the working directory.
    """
    url = override or os.environ.get("REPORTFLOW_DB") or configured or DEFAULT_DB_URL
    return resolve_store_url(url, base_dir)
