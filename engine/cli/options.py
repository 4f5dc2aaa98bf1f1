"""The global options, named once: the Typer callback declares them from here, the fast paths parse them from here.

Stdlib only: a fast path imports it before it knows whether it needs Typer.
"""

from __future__ import annotations

CONFIG = "--config"
NOW = "--now"
DB = "--db"
LOG_FORMAT = "--log-format"
# Each global option and the variable that stands in for it (None: the option alone).
ENV: dict[str, str | None] = {CONFIG: "REPORTFLOW_CONFIG", NOW: "REPORTFLOW_NOW", DB: "REPORTFLOW_DB",
                              LOG_FORMAT: None}
LOG_FORMATS = ("text", "json")
