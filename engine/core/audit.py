"""An audit event: who did what to a schedule or a run, before and after, and why; and the system's actors."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class AuditEvent:
    id: int
    at: datetime
    actor: str
    action: str
    schedule_id: int | None
    run_id: int | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    reason: str | None
    version: int | None


SYSTEM_SCHEDULER = "SYSTEM_SCHEDULER"
SYSTEM_RECONCILER = "SYSTEM_RECONCILER"
