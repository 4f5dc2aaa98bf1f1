"""Config errors in the product's own words with the right key path, never pydantic's (issue 36, item 17).

``build_config`` on parsed configs: each bad value is refused as ``ConfigInvalid`` naming its key path,
and no message carries pydantic's sentences or its documentation URL. The CLI side (exit 2, one line,
nothing written) is ``tests/reliability/test_bad_input.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.config import config_file, defaults
from engine.core import errors
from engine.plugins.workflow_registry import load_registry

SCHEDULE = {"name": "s", "workflow": "echo", "project": "p", "cron": "0 9 * * *", "timezone": "UTC"}
TEAM = {"name": "core-weekly", "workflow": "team_weekly_report", "project": "core", "projects": ["p"],
        "cron": "0 9 * * 1", "timezone": "UTC"}
PROJECTS = [{"key": "p", "repo": "."}]
FOREIGN = ("pydantic", "Input should", "String should", "Field required", "validation error", "Value error")

CASES: list[tuple[dict[str, Any], str, str]] = [
    ({"schedules": [{**SCHEDULE, "timezone": 9}]}, "schedules[0].timezone", "must be a string"),
    ({"schedules": [{**SCHEDULE, "projects": 5}]}, "schedules[0].projects", "list"),
    ({"schedules": [{k: v for k, v in SCHEDULE.items() if k != "cron"}]}, "schedules[0].cron", "is required"),
    ({"schedules": [{**SCHEDULE, "enabled": "yes"}]}, "schedules[0].enabled", "true or false"),
    ({"worker": {"max_attempts": 1000}}, "worker.max_attempts", "must be at most 100"),
    ({"worker": {"concurrency": "four"}}, "worker.concurrency", "whole number"),
    ({"store": "sqlite:///x.db"}, "store", "must be a table"),
    ({"reports": {"on_existing": "replace"}}, "reports.on_existing", "must be one of"),
    ({"llm": {"temperature": "warm"}}, "llm.temperature", "must be a number"),
    ({"projects": [{"key": "P Q"}]}, "projects[0].key", "must match"),
    ({"projects": PROJECTS, "schedules": [{k: v for k, v in TEAM.items() if k != "project"}]},
     "schedules[0].project", "names its team"),
    ({"projects": PROJECTS, "schedules": [{**TEAM, "project": "Core Team"}]}, "schedules[0].project", "must match"),
    ({"projects": PROJECTS, "schedules": [{**TEAM, "projects": "all"}]}, "schedules[0].projects", ""),
    ({"projects": PROJECTS, "teams": [{"key": "core", "projects": ["p"], "colour": "red"}]}, "teams[0].colour",
     "unknown key"),
    ({"projects": PROJECTS, "schedules": [{**TEAM, "name": "Core.Team"}]}, "schedules[0].name", "report file"),
    ({"store": {"url": "sqlite:///" + "d/" * 150 + "x.db"}}, "store.url", "151 folders deep"),
    ({"workflows": [{"path": "flows/\x00x.py"}]}, "workflows[0].path", "NUL"),
    ({"llm": {"host": "gopher://model:70"}}, "llm.host", "http:// or https://"),
    # Security round 3, item 11: a scheme written without "//" passed as a host name.
    ({"llm": {"host": "javascript:alert(document.domain)"}}, "llm.host", "not javascript:"),
    ({"llm": {"host": "data:text/html,<script>x</script>"}}, "llm.host", "not data:"),
    ({"llm": {"host": "VBScript:msgbox"}}, "llm.host", "not VBScript:"),
    ({"llm": {"host": "file:///etc/passwd"}}, "llm.host", "not file://"),
    # Issue 43, item 8: a misspelled key is named, with the key it should be, not "timezone: is required".
    ({"projects": PROJECTS, "schedules": [{k if k != "timezone" else "timezoen": v for k, v in TEAM.items()}]},
     "schedules[0].timezoen", "unknown key (did you mean 'timezone'?)"),
]


@pytest.mark.parametrize(("raw", "key", "says"), CASES, ids=[case[1] + ":" + case[2] for case in CASES])
def test_a_bad_value_is_named_by_its_key_path_in_the_products_words(tmp_path: Path, raw: dict[str, Any], key: str,
                                                                    says: str) -> None:
    with pytest.raises(errors.ConfigInvalid) as refused:
        config_file.build_config(raw, path=tmp_path / "reportflow.toml", registry=load_registry())
    message = refused.value.message
    assert refused.value.key == key, message
    assert message.startswith(f"{tmp_path / 'reportflow.toml'}: {key}: ") and says in message, message
    assert not any(word in message for word in FOREIGN) and "https://errors" not in message, message
    assert "\n" not in message


def test_the_path_rule_refuses_only_what_the_system_cannot_take() -> None:
    assert defaults.path_problem("reports/2026") is None
    assert defaults.path_problem("/" + "a/" * 99 + "b") is None
    assert "NUL" in (defaults.path_problem("a\x00b") or "")
    assert "folders deep" in (defaults.path_problem("a/" * 101) or "")
    assert "characters long" in (defaults.path_problem("a" * 4097) or "")
    assert "255 bytes" in (defaults.path_problem("x" * 256) or "")


def test_a_current_window_at_the_periods_start_is_refused_from_the_file_after_a_valid_twin(tmp_path: Path) -> None:
    """Issue 43, item 2: the validation cache left ``report_on`` out of its key, so a schedule checked once with
    "previous" let the same cron with "current" at 00:00 through (apply, validate, doctor exited 0)."""
    entry = {"name": "d", "workflow": "daily_report", "project": "p", "cron": "0 0 * * *", "timezone": "UTC"}
    raw: dict[str, Any] = {"projects": [{"key": "p", "repo": str(tmp_path)}], "schedules": [entry]}
    config_file.build_config(raw, path=tmp_path / "reportflow.toml", registry=load_registry())  # cached as valid
    raw["schedules"] = [{**entry, "report_on": "current"}]
    with pytest.raises(errors.ConfigInvalid) as refused:
        config_file.build_config(raw, path=tmp_path / "reportflow.toml", registry=load_registry())
    assert "reports an empty window" in refused.value.message and "report_on" in (refused.value.key or "")
