"""Where reportflow looks by default, and how a relative SQLite URL resolves: one source, no pydantic.

``engine.config.settings`` validates the file and ``engine.cli.fast_tick`` finds the store
of a nothing-due ``tick`` without it; both resolve the store URL here.
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
