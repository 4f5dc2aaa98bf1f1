"""A report's commit range as its run pins it: one model, one name per meaning, parsed once.

COLLECT_GIT of a run pinned with an attribution decides its range once (``steps.coverage.settle``) and pins it; a
retry, a resume after a crash or ``--from-step`` reads it back and reports the same commits, and the front matter
says it. The stored keys stay what runs pinned before wrote (``heads``, ``since_heads``, ``since``, ``until``,
``covered``, ``covered_by``, ``excluded_heads``, ``also_covers``, ``held_later``): ``workflows.report_pins`` reads
them, this module writes them, so a renamed field is a type error, not a silent ``.get`` miss.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from engine.core.clock import format_instant


class RangePins(BaseModel):
    """The range: the heads it runs between, the span it covers, and what it leaves out or also holds."""

    model_config = ConfigDict(frozen=True)

    upper: dict[str, str]  # pinned as "heads": the end edge
    lower: dict[str, str]  # "since_heads": the start edge
    since: datetime
    until: datetime | None = None  # None: the window's end (runs pinned before "until" existed)
    #: The report whose span holds this window ("" for a run pinned before it was named); None: not covered.
    covered_by: str | None = None
    excluded: list[str] = []  # "excluded_heads": earlier marks' heads, once the line was rewritten
    held_later: list[str] = []  # commits later reports over rewritten ranges hold
    also_covers: list[str] = []  # earlier periods that will have no report of their own, held here

    @property
    def covered(self) -> bool:
        return self.covered_by is not None

    def pins(self, head_sha: str) -> dict[str, Any]:
        """The pins to store, under the keys runs have always used (``head_sha``: the first branch's head)."""
        return {"heads": self.upper, "head_sha": head_sha, "since_heads": self.lower,
                "since": format_instant(self.since), "until": format_instant(self.until) if self.until else None,
                "covered": self.covered, "excluded_heads": self.excluded, "also_covers": self.also_covers,
                "covered_by": self.covered_by, **({"held_later": self.held_later} if self.held_later else {})}
