"""The engine's own sections of ``reportflow.toml``: ``[store]``, ``[worker]``, ``[notify]``, ``[ui]``,
``[limits]``."""

from __future__ import annotations

import os
import re
from datetime import timedelta
from typing import Annotated

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    StrictBool,
    StrictInt,
    field_validator,
    model_validator,
)

from engine.config import backup_config
from engine.config.defaults import DEFAULT_DB_URL
from engine.config.fields import NAME_PATTERN, Duration, Strict, check_store_url, optional_duration
from engine.core import concurrency_caps


class StoreConfig(Strict):
    url: Annotated[str, AfterValidator(check_store_url)] = DEFAULT_DB_URL
    retain: Annotated[timedelta | None, BeforeValidator(optional_duration)] = None  # serve prunes older runs
    retain_max: int = Field(default=5000, ge=1)  # a daily prune that would delete more deletes none (SPEC §15.4)
    backup: backup_config.BackupConfig | None = None  # verified backups on a cron (SQLite), a dump's age (PostgreSQL)

    @field_validator("retain")
    @classmethod
    def _retain_floor(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and value < timedelta(days=1):
            raise ValueError("retain must be at least 1d (or \"\" to keep every run)")
        return value


class WorkerConfig(Strict):
    lease: Duration = timedelta(seconds=60)
    max_attempts: int = Field(default=3, ge=1, le=100)
    retry_backoff: Duration = timedelta(minutes=1)
    backfill_concurrency: int = Field(default=1, ge=1, le=1000)
    poll_interval: Duration = timedelta(seconds=1)
    # Runs in flight in one process, each in its own thread (``work --concurrency`` overrides it).
    concurrency: int = Field(default=1, ge=1, le=10)  # the store keeps at most 15 connections
    # With concurrency > 1: step boundaries arriving within this window share one commit; "0s" turns it off.
    group_commit: Duration = timedelta(milliseconds=2)

    @field_validator("group_commit")
    @classmethod
    def _group_commit_bound(cls, value: timedelta) -> timedelta:
        if value > timedelta(milliseconds=100):
            raise ValueError("group_commit must be at most 100ms (every step boundary may wait that long)")
        return value

    @field_validator("lease")
    @classmethod
    def _lease_floor(cls, value: timedelta) -> timedelta:
        if value < timedelta(seconds=1):
            raise ValueError("lease must be at least 1s (30s or more when several nodes share a database)")
        return value


ENV_NAME = r"^([A-Za-z_][A-Za-z0-9_]*)?$"


class NotifyConfig(Strict):
    """``[notify]``: the NAMES of the variables holding the webhook and Apprise URLs (SPEC §15.1), and the alert timings."""

    webhook_env: Annotated[str, Field(pattern=ENV_NAME)] = ""
    apprise_env: Annotated[str, Field(pattern=ENV_NAME)] = ""
    stuck_after: Duration = timedelta(minutes=30)
    slo_window: Duration = timedelta(days=30)
    # Providers (a model server, Notion...) are probed at most this often by serve and cycle (SPEC §15.5).
    health_every: Duration = timedelta(minutes=5)

    @field_validator("health_every")
    @classmethod
    def _health_floor(cls, value: timedelta) -> timedelta:
        if value < timedelta(seconds=10):
            raise ValueError("health_every must be at least 10s (each probe is a request to the provider)")
        return value

    @model_validator(mode="after")
    def _webhook_scheme(self) -> NotifyConfig:
        url = os.environ.get(self.webhook_env, "") if self.webhook_env else ""
        if url and not re.match(r"^https?://", url, re.IGNORECASE):
            raise ValueError(f"the variable {self.webhook_env} must hold an http:// or https:// URL")
        return self


class UiConfig(Strict):
    """``[ui]``: where the web page binds, and the NAME of the variable holding its write token."""

    host: str = "127.0.0.1"
    port: int = Field(default=8321, ge=0, le=65535)
    token_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] = "REPORTFLOW_UI_TOKEN"
    allowed_hosts: tuple[Annotated[str, Field(pattern=r"^[A-Za-z0-9.\-\[\]:]+$", max_length=255)], ...] = ()
    session_ttl: Duration = timedelta(hours=12)
    secure_cookies: StrictBool = False


class LimitsConfig(Strict):
    """``[limits]``: the creation policy and the concurrency caps (SPEC §18).

    A schedule whose busiest day has more runs than ``warn_runs_per_day`` is shown with a warning
    (``apply``, ``validate``, ``draft``); more than ``max_runs_per_day`` is refused. At most
    ``max_running`` runs RUNNING at once across every process sharing the database, and at most
    ``workflows[NAME]`` of workflow NAME (``[limits.workflows]``); claims enforce both.
    """

    warn_runs_per_day: int = Field(default=48, ge=1)
    max_runs_per_day: int | None = Field(default=None, ge=1)
    max_running: StrictInt | None = Field(default=None, ge=1, le=100_000)
    workflows: dict[Annotated[str, Field(pattern=NAME_PATTERN, max_length=100)],
                    Annotated[StrictInt, Field(ge=1, le=100_000)]] = {}

    def caps(self) -> concurrency_caps.Caps:
        """The caps the claim enforces."""
        return concurrency_caps.Caps(self.max_running, tuple(sorted(self.workflows.items())))


#: The project of a projectless workflow's runs (``{workflow}:ops:{business_key}``).
