"""``[store] backup``: when ``serve`` and ``cycle`` take a verified SQLite backup, and where, and how many stay;
on PostgreSQL, only where the dumps of the system's ``pg_dump`` land and how old the newest may be.

Checked at load, before anything is written: a cron or zone that is not one, ``keep`` under 1, a folder
that is a file or that the reports' folder would not be allowed to be (the root, out of the config's
folder through ``..`` or a symlink, a system folder), or a key that the database's kind does not use.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from engine.config import defaults, durations
from engine.core import errors

#: PostgreSQL: a daily dump plus two hours of slack, unless ``max_age`` says otherwise.
DEFAULT_PG_MAX_AGE = timedelta(hours=26)


def _duration(value: Any) -> timedelta | None:
    return None if value in ("", None) else durations.parse(value)


class BackupConfig(BaseModel):
    """The ``[store] backup`` table as written."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dir: Annotated[str, Field(min_length=1)]
    cron: str | None = None
    timezone: str = "UTC"
    keep: int = Field(default=7, ge=1, le=10_000)
    max_age: Annotated[timedelta | None, BeforeValidator(_duration)] = None

    @field_validator("dir")
    @classmethod
    def _dir_path(cls, value: str) -> str:
        problem = defaults.path_problem(value)
        if problem is not None:
            raise ValueError(f"the path {problem}")
        return value

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is not None:
            from engine.core.cron import expression

            try:
                expression.check_expression(value)
            except errors.InvalidInput as exc:
                raise ValueError(exc.message) from None
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        from engine.core.cron import expression

        try:
            expression.zone(value)
        except errors.InvalidInput as exc:
            raise ValueError(exc.message) from None
        return value


@dataclass(frozen=True)
class BackupPlan:
    """``[store] backup`` resolved against the store: a folder made absolute, and what is done with it."""

    dir: Path
    cron: str | None  # None: this node takes no backup and only checks the folder's newest file (PostgreSQL)
    timezone: str
    keep: int
    max_age: timedelta | None


def resolve(config: BackupConfig, *, sqlite: bool, base_dir: Path, file: str | None) -> BackupPlan:
    """The plan for this store; ConfigInvalid (keyed ``store.backup.*``) when the table does not fit it."""
    folder = defaults.output_dir(Path(config.dir), base_dir, key="store.backup.dir", meant_for="backups", file=file)
    if folder.exists() and not folder.is_dir():
        raise errors.ConfigInvalid(f"{folder} is a file, not a folder", file=file, key="store.backup.dir")
    if sqlite and config.cron is None:
        raise errors.ConfigInvalid("is required on SQLite: when serve and cycle take a backup (e.g. \"0 3 * * *\")",
                                   file=file, key="store.backup.cron")
    if not sqlite and config.cron is not None:
        raise errors.ConfigInvalid(
            "reportflow copies SQLite databases only: on PostgreSQL run pg_dump from the system's cron into dir "
            "and give max_age (e.g. \"26h\"), which doctor checks", file=file, key="store.backup.cron")
    max_age = config.max_age if config.max_age is not None or sqlite else DEFAULT_PG_MAX_AGE
    return BackupPlan(dir=folder, cron=config.cron, timezone=config.timezone, keep=config.keep, max_age=max_age)
