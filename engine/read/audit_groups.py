"""The audit trail for people: consecutive events of one action by one actor as one line (count and range)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from engine.core.audit import AuditEvent


@dataclass(frozen=True)
class AuditGroup:
    action: str
    actor: str
    first_at: datetime
    last_at: datetime
    events: tuple[AuditEvent, ...]

    @property
    def count(self) -> int:
        """How many events the line stands for."""
        return len(self.events)

    @property
    def reasons(self) -> list[str]:
        """The distinct reasons, in order."""
        return list(dict.fromkeys(e.reason for e in self.events if e.reason))


def group_audit(events: Sequence[AuditEvent]) -> list[AuditGroup]:
    """Group runs of consecutive events with the same action and actor (a backfill's 365 rows become one)."""
    groups: list[list[AuditEvent]] = []
    for event in events:
        if groups and groups[-1][0].action == event.action and groups[-1][0].actor == event.actor:
            groups[-1].append(event)
        else:
            groups.append([event])
    return [AuditGroup(g[0].action, g[0].actor, min(e.at for e in g), max(e.at for e in g), tuple(g))
            for g in groups]
