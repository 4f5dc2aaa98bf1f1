"""What every shell needs: the store, the workflows, the configuration and a clock."""

from __future__ import annotations

import getpass
import logging
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from engine.alert_transports import AlertTransports
from engine.config.config_file import AppConfig
from engine.core import policies
from engine.core.clock import Clock
from engine.core.models import PeriodKind
from engine.core.schedule_spec import Schedule
from engine.plugins import workflow_registry
from engine.plugins.contract import WorkflowDef
from engine.plugins.workflow_registry import Registry
from engine.store.handle import Store

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    store: Store
    registry: Registry
    config: AppConfig
    clock: Clock
    actor: str = field(default_factory=lambda: _cli_user())

    @cached_property
    def transports(self) -> AlertTransports:
        """One per runtime, so its failure counter covers the process's whole life."""
        return AlertTransports(self.config.notify.webhook_env, self.config.notify.apprise_env)

    def workflow(self, name: str) -> WorkflowDef:
        """The installed workflow named ``name``; raises NotFound."""
        return workflow_registry.get(self.registry, name)

    def period_kind(self, workflow: str) -> PeriodKind | None:
        """The period of workflow ``workflow``, or None when it is not installed here."""
        found = self.registry.get(workflow)
        return found.period if found is not None else None

    def period_key(self, schedule: Schedule, slot: datetime) -> str | None:
        """The business key of the period ``slot`` of ``schedule`` reports on; None when its workflow is not
        installed here."""
        kind = self.period_kind(schedule.spec.workflow)
        if kind is None:
            return None
        return policies.business_period(kind, slot, schedule.spec.timezone, schedule.spec.report_on, schedule.spec.sprint).key

    def settings(self, workflow: str) -> Any:
        """The validated settings of workflow ``workflow`` (None if it has none)."""
        return self.config.workflow_settings.get(workflow)


def _cli_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "cli"
