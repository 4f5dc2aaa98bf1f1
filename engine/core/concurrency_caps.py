"""Concurrency caps across processes (SPEC §18): ``[limits] max_running`` and ``[limits.workflows]``. Pure.

The claim enforces them in SQL (``store.claims``, serialised with every other claim);
this module names them for a person: what ``work`` says it waits for, the reason a
``run_stuck`` alert gives.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Caps:
    """At most ``max_running`` runs RUNNING at once (None: no cap), and per workflow its own cap."""

    max_running: int | None = None
    workflows: tuple[tuple[str, int], ...] = ()  # (workflow, cap), sorted: hashable, so a claim's query is cached

    def __bool__(self) -> bool:
        return self.max_running is not None or bool(self.workflows)

    def of(self, workflow: str) -> int | None:
        """The cap of ``workflow``'s runs, or None."""
        return dict(self.workflows).get(workflow)

    def full(self, workflow: str, *, running: int, running_of: Mapping[str, int]) -> str | None:
        """What keeps a run of ``workflow`` from being claimed now (the cap, in config words), or None.

        ``running`` counts every RUNNING run, ``running_of`` those of each workflow.
        """
        if self.max_running is not None and running >= self.max_running:
            return f"max_running = {self.max_running} ({running} running)"
        cap = self.of(workflow)
        if cap is not None and running_of.get(workflow, 0) >= cap:
            return f"[limits.workflows] {workflow} = {cap} ({running_of.get(workflow, 0)} running)"
        return None
