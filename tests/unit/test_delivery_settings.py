"""``[[deliveries]]`` in the file: each entry names whose reports it sends and the variables of its targets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.core import errors
from workflows import report_settings, team_report

BASE: dict[str, Any] = {"projects": [{"key": "api", "repo": "."}],
                        "schedules": [{"name": "api-daily", "workflow": "daily_report", "project": "api"}]}


def load(entries: list[dict[str, Any]]) -> report_settings.ReportSettings:
    return report_settings.load({**BASE, "deliveries": entries}, Path("."))


def test_entries_name_a_project_a_team_or_a_schedule() -> None:
    settings = load([{"project": "api", "to_env": ["SLACK_URL", "MAIL_URL"], "timeout": "20s"},
                     {"schedule": "api-daily", "to_env": ["MAIL_URL"]}])
    first, second = settings.deliveries
    assert first.covers(project="api", team=None, schedule="other")
    assert second.covers(project="web", team=None, schedule="api-daily")
    assert not second.covers(project="api", team=None, schedule=None)
    assert first.timeout.total_seconds() == 20


@pytest.mark.parametrize(("entry", "key", "words"), [
    ({"to_env": ["X"]}, "deliveries[0]", "exactly one of project, team or schedule"),
    ({"project": "api", "schedule": "api-daily", "to_env": ["X"]}, "deliveries[0]", "exactly one"),
    ({"project": "api", "to_env": []}, "deliveries[0].to_env", ""),
    ({"project": "api", "to_env": ["slack://T/B/secret"]}, "deliveries[0].to_env", "NAME of an environment variable"),
    ({"project": "web", "to_env": ["X"]}, "deliveries[0].project", "no [[projects]] entry with key 'web'"),
    ({"schedule": "web-daily", "to_env": ["X"]}, "deliveries[0].schedule", "no [[schedules]] entry named"),
    ({"project": "api", "to": ["X"]}, "deliveries[0]", ""),
])
def test_a_bad_entry_is_refused_naming_its_key(entry: dict[str, Any], key: str, words: str) -> None:
    with pytest.raises(errors.ConfigInvalid) as caught:
        load([entry])
    assert (caught.value.key or "").startswith(key), caught.value
    assert words in str(caught.value)
    assert "secret" not in str(caught.value)  # a URL given where a variable's name goes is not echoed


def test_a_team_entry_names_a_team() -> None:
    raw = {**BASE, "teams": [{"key": "core", "projects": ["api"]}],
           "deliveries": [{"team": "core", "to_env": ["X"]}]}
    assert team_report.load("team_daily_report", raw, Path(".")).deliveries[0].team == "core"
    with pytest.raises(errors.ConfigInvalid) as caught:
        team_report.load("team_daily_report", {**raw, "deliveries": [{"team": "infra", "to_env": ["X"]}]}, Path("."))
    assert caught.value.key == "deliveries[0].team"
