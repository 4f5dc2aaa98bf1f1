"""A report's pins are typed: one model per workflow reads what its runs stored, and runs pinned before a key
existed read it as they ran (the version gates' defaults), so their re-runs write the same bytes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from engine.core.models import PeriodKind
from engine.plugins.contract import WorkflowDef
from workflows import ops_report, report, team_report
from workflows.report_pins import ReportPins, TeamPins, WriterPins

ROOT = Path(__file__).resolve().parents[2]

RAW: dict[str, Any] = {
    "llm": {"provider": "ollama", "model": "llama3.1:8b", "fallback": "builtin", "prompt_version": "v4"},
    "reports": {"language": "ko"},
    "projects": [{"key": "app", "repo": ".", "branches": ["main"], "authors": ["ann@example.com"],
                  "exclude": ["vendor/"], "bots": ["deploy-bot"], "wip_branches": ["feature/*"],
                  "paths": ["services/api"], "exclude_paths": ["services/api/gen"], "include_merges": True,
                  "on_empty": "report", "kinds": {"fixes": ["hotfix"]}}],
    "teams": [{"key": "core", "projects": ["app"]}],
    "schedules": [{"name": "app-daily", "workflow": "daily_report", "project": "app", "attribution": "landed"}],
}

#: Each workflow's pins, the model that reads them, and the key its runs are made for.
WORKFLOWS: list[tuple[WorkflowDef, type[WriterPins], str]] = [
    (report.report_workflow("daily_report", PeriodKind.DAY, "daily"), ReportPins, "app"),
    (team_report.CHILD, ReportPins, "app"), (team_report.DAILY, TeamPins, "core"), (ops_report.DAILY, WriterPins, "")]


def stored_pins(index: int) -> dict[str, Any]:
    workflow, _model, key = WORKFLOWS[index]
    return dict(workflow.pin(workflow.load_settings(RAW, ROOT), key))


@pytest.mark.parametrize("index", range(len(WORKFLOWS)), ids=[w.name for w, _m, _k in WORKFLOWS])
def test_what_a_new_run_pins_its_model_reads_back_whole(index: int) -> None:
    """Every key a new run stores is a field its workflow's model reads (none written that nothing reads), and the
    model stores it back unchanged."""
    _workflow, model, _key = WORKFLOWS[index]
    pinned = stored_pins(index)
    known = {field.alias or name for name, field in model.model_fields.items()}
    assert set(pinned) <= known, f"pinned but read by no field: {set(pinned) - known}"
    parsed: BaseModel = model.model_validate(pinned)
    assert isinstance(parsed, WriterPins) and parsed.stored() == pinned


def test_a_new_report_run_pins_what_its_settings_say() -> None:
    pinned = ReportPins.model_validate(stored_pins(0))
    assert (pinned.provider, pinned.model, pinned.fallback, pinned.prompt_version) == (
        "ollama", "llama3.1:8b", "builtin", "v4")
    assert (pinned.language, pinned.attribution, pinned.branches, pinned.exclude) == ("ko", "landed", ["main"],
                                                                                    ["vendor/"])
    assert (pinned.paths, pinned.wip_branches, pinned.kinds, pinned.bot_names) == (
        ["services/api"], ["feature/*"], {"fixes": ["hotfix"]}, frozenset({"deploy-bot"}))
    assert "attribution" not in stored_pins(1)  # a team's child takes its parent's, with the period


#: What a run pinned before each key existed did, as the report it wrote shows it: written here from the release
#: notes of each version gate, not read from the models.
BEFORE = {"text_rules": 0, "layout": 1, "language": "en", "on_empty": "skip", "exclude": None, "bots": [],
          "kinds": {}, "wip_branches": [], "paths": [], "exclude_paths": [], "fallback": None, "attribution": None,
          "authors": [], "include_merges": False, "llm_options": {}, "team_texts": 0, "covered_by": None,
          "until": None, "held_later": []}


@pytest.mark.parametrize("key", sorted(BEFORE))
def test_a_run_pinned_before_a_key_existed_reads_as_it_ran(key: str) -> None:
    """Take a new run's pins, remove one key as runs pinned before it existed lack it: that field reads as those
    runs ran, and every other field reads as before."""
    model = TeamPins if key == "team_texts" else ReportPins
    pinned = stored_pins(2 if model is TeamPins else 0)
    pinned.update({"covered_by": "2026-11-03", "until": "2026-11-04T00:00:00Z", "held_later": ["c" * 40]})
    whole = model.model_validate(pinned)
    older = model.model_validate({k: v for k, v in pinned.items() if k != key})
    assert getattr(older, key) == BEFORE[key]
    assert getattr(whole, key) != BEFORE[key], f"the fixture must pin {key} to something else to show the default"
    others = [name for name in model.model_fields if name != key]
    assert [getattr(older, n) for n in others] == [getattr(whole, n) for n in others]


def test_workflows_read_pins_only_through_their_models() -> None:
    """A pin read by its string (``ctx.pinned["layout"]``, ``.get("layout", 1)``) would miss a renamed key
    silently and scatter its default: the models are the only readers."""
    readers = re.compile(r"pinned\s*(\[|\.get\()")
    found = [f"{path.name}:{n}: {line.strip()}" for path in sorted((ROOT / "workflows").glob("*.py"))
             if path.name != "report_pins.py"
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if readers.search(line)]
    assert not found, "\n".join(found)
