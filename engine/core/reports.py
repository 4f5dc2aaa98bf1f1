"""What the one-pass commands report (``tick``, ``reconcile``, ``cycle``): plain dataclasses, stdlib only.

The full paths fill them in; the fast paths (``engine.cli.fast_tick``) build the same
classes for a pass with nothing to do, so the two cannot drift apart, and
``engine.cli.output`` renders both.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.core.models import Run
    from engine.core.run_end import RunOutcome
    from engine.core.stuck import StuckRun


@dataclass
class TickReport:
    """One scheduler pass: schedules due and handled, runs created by status, the next due slot."""

    now: datetime
    due: int = 0
    handled: int = 0
    lost_races: int = 0
    created: Counter[str] = field(default_factory=Counter)
    already_present: int = 0
    too_old_slots: int = 0
    next_due_at: datetime | None = None

    @property
    def runs_created(self) -> int:
        """Runs created in every status."""
        return sum(self.created.values())


@dataclass
class SweepReport:
    """One reconciler pass: runs recovered, failed, promoted and released; stalled, stuck and silent."""

    recovered: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    promoted: list[int] = field(default_factory=list)
    released: list[int] = field(default_factory=list)  # WAITING parents whose children had all finished
    orphans: list[Run] = field(default_factory=list)  # children whose parent row is gone
    stalled: list[Run] = field(default_factory=list)
    silent: list[tuple[str, datetime]] = field(default_factory=list)
    stuck: list[StuckRun] = field(default_factory=list)
    late: int = 0  # periods newly found late (run_late)
    missed: list[int] = field(default_factory=list)  # scheduled runs not started by their start_by
    freshness_low: int = 0  # schedules newly found below their freshness_target (freshness_low)
    upstream: list[int] = field(default_factory=list)  # dependent runs whose wait for an upstream ended


@dataclass
class HealReport:
    """One healer pass (SPEC §15.5): providers probed, runs queued again (and which of them to be written
    again in place), runs still waiting, and runs left to a person."""

    probed: list[tuple[str, bool]] = field(default_factory=list)  # (label, healthy)
    requeued: list[int] = field(default_factory=list)
    regenerated: list[int] = field(default_factory=list)  # among ``requeued``: written again in place
    waiting: int = 0
    gave_up: list[int] = field(default_factory=list)


@dataclass
class CycleReport:
    """One ``cycle``: its tick, its sweep, its healer pass, and the runs it executed (``RunOutcome``s)."""

    tick: TickReport
    sweep: SweepReport = field(default_factory=SweepReport)
    outcomes: list[RunOutcome] = field(default_factory=list)
    heal: HealReport = field(default_factory=HealReport)
