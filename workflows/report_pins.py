"""What a report's run pins, as one typed model per workflow: parsed once (``ctx.pins(Model)``), read by name.

A run's pins are stored as JSON under the keys runs have always used; these models are their only readers in
``workflows/``, so a renamed key is a type error, not a silent ``.get`` miss. Each version gate (``text_rules``,
``layout``, ``language``, ``on_empty``...) is a field whose default is what a run pinned before that key existed
did: such a run reads back as it ran, and its re-runs write the same bytes.

- ``WriterPins``: the writer's inputs every report pins (the ops reports pin only these).
- ``ReportPins``: a project report's, and a team report's child's: the window, the project's filters, the range
  COLLECT_GIT pins (``range``: ``workflows.range_pins.RangePins``).
- ``TeamPins``: a team report's: its projects, and its own texts' version.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.core import inputs
from workflows.range_pins import RangePins


class WriterPins(BaseModel):
    """The writer: provider, model, fallback, options, and the rules its text is rendered by."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    provider: str | None = None  # anything but "ollama" is the built-in writer
    model: str = ""
    fallback: str | None = None  # "builtin": the built-in writer's report when the model is down
    llm_options: dict[str, Any] = {}
    #: ``steps.untrusted``'s rules; 0 for runs pinned before commit text was neutralised: they render as they did.
    text_rules: int = 0

    def stored(self) -> dict[str, Any]:
        """The pins as the run stores them: the fields given, under their stored names."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

    @property
    def ollama(self) -> bool:
        return self.provider == "ollama"


class ReportPins(WriterPins):
    """A report's run: its window as the engine pinned it, what shapes its content, and its commit range."""

    # Pinned by the engine when the run is created (``engine.scheduling.new_runs``).
    schedule: str | None = None
    window_start: str | None = None
    window_end: str | None = None
    window_start_local: str | None = None
    window_end_local: str | None = None
    # Pinned from the configuration when the run is created (``report_settings.pins``).
    prompt_version: str = "v1"
    language: str = "en"  # runs pinned before the language existed were English, and stay so
    layout: int = 1  # runs pinned before layout 2 keep top-level areas and every author alike
    attribution: Literal["landed", "authored"] | None = None  # None: a window of authored dates, no range
    branches: list[str] = []
    authors: list[str] = []
    on_empty: Literal["skip", "report"] = "skip"
    include_merges: bool = False
    exclude: list[str] | None = None  # None for runs pinned before exclusion existed: they count every file
    bots: list[str] = []
    kinds: dict[str, list[str]] = {}
    wip_branches: list[str] = []
    paths: list[str] = []  # a sub-project's folders (layout 5); empty: the whole repository
    exclude_paths: list[str] = []
    # Pinned by COLLECT_GIT's first execution (``RangePins.pins``): what a retry reports again.
    heads: dict[str, str] | None = None
    head_sha: str | None = None
    forge: str | None = None  # where links in the model's text may point (text rules 2 on)
    since_heads: dict[str, str] | None = None
    since: str | None = None
    until: str | None = None
    covered: bool = False
    covered_by: str | None = None
    excluded: list[str] = Field([], alias="excluded_heads")
    held_later: list[str] = []
    also_covers: list[str] = []

    @property
    def range(self) -> RangePins | None:
        """The commit range COLLECT_GIT pinned, or None when it has pinned none yet (or runs by window)."""
        if self.since_heads is None or self.heads is None or self.since is None:
            return None
        return RangePins(upper=dict(self.heads), lower=dict(self.since_heads), since=inputs.instant(self.since),
                         until=inputs.instant(self.until) if self.until else None,
                         covered_by=(self.covered_by or "") if self.covered else None, excluded=list(self.excluded),
                         held_later=list(self.held_later), also_covers=list(self.also_covers))

    def range_front(self, taken: RangePins) -> dict[str, Any]:
        """What the report's front matter says of its range; a run pinned before ``covered_by`` keeps its old key,
        so its re-runs write the same bytes."""
        covered = ({"covered_by": taken.covered_by} if "covered_by" in self.model_fields_set
                   else {"covered_by_later_report": self.covered})
        return {"covers_since": self.since, "covers_until": self.until, "since_heads": taken.lower,
                "also_covers": taken.also_covers, **covered}

    @property
    def bot_names(self) -> frozenset[str]:
        return frozenset(b.casefold() for b in self.bots)


class TeamPins(ReportPins):
    """A team report's run: its projects, and whether its own words are translated (``team_texts``)."""

    projects: list[str] = []
    team_texts: int = 0  # 0 for runs pinned before the team report's words were translated: English
