"""Cron expressions at the CLI: N-N and list stars read as cron reads them, refusals exit 2 in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.support import run_cli, write_config
from tests.unit.test_cron_dialect import FIVE_FIELDS

PROJECT = dict(key="platform", repo=".")
SCHEDULE = dict(name="platform-weekly", workflow="daily_report", project="platform", cron="0 0 * * 1-1",
                timezone="Europe/Berlin")


def validate(expr: str, *extra: str) -> dict[str, object]:
    result = run_cli("schedules", "validate", "--cron", expr, "--timezone", "UTC", "--json", *extra)
    assert result.returncode == 0, result.stdout + result.stderr
    data: dict[str, object] = json.loads(result.stdout)
    return data


def test_n_n_ranges_are_single_values_at_the_cli() -> None:
    assert validate("0 9-9 * * 1-5")["runs_per_day"] == pytest.approx(5 / 7, abs=0.01)
    weekly = validate("0 0 * * MON-MON", "--workflow", "daily_report")
    assert weekly["valid"] and weekly["runs_per_day"] == pytest.approx(1 / 7, abs=0.01)


@pytest.mark.parametrize(("expr", "code", "words"), [
    ("0 0 * * *,sat#3", 0, ""),  # was a traceback, exit 1
    ("0 *,3 * * *", 0, ""),
    ("* * * * *,0", 2, "fires every 1m"),  # every minute: refused for its interval, not for its syntax
    ("0 0 *,sat#3 * *", 2, "day-of-month 'sat#3'"),
    ("0 0 * * 1#6", 2, "day-of-week '1#6'"),
    ("0 0 LW * *", 2, "day-of-month 'LW'"),
    ("0 0 L-L * *", 2, "day-of-month"),
    ("0 0 * * 5L", 2, "day-of-week '5L'"),
    ("?,5 * * * *", 2, "minute '?,5'"),
])
def test_validate_never_prints_a_traceback(expr: str, code: int, words: str) -> None:
    result = run_cli("schedules", "validate", "--cron", expr, "--timezone", "America/Sao_Paulo")
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    if code == 2:
        [line] = result.stderr.strip().splitlines()
        assert words in line


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FIVE_FIELDS.filter(lambda expr: "\x00" not in expr))  # argv cannot carry a NUL byte
def test_validate_of_random_fields_exits_0_or_2_in_a_real_process(expr: str) -> None:
    result = run_cli("schedules", "validate", "--cron", expr, "--timezone", "Europe/London")
    assert result.returncode in (0, 2) and "Traceback" not in result.stdout + result.stderr, result.stderr


def test_apply_refuses_an_unreadable_cron_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    config = write_config(tmp_path / "reportflow.toml", projects=[PROJECT],
                          schedules=[dict(SCHEDULE, cron="0 0 * * *,sat#9")])
    result = run_cli("schedules", "apply", config=config)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert "schedules[0].cron" in line and "day-of-week 'sat#9'" in line and "Traceback" not in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reportflow.toml"]  # no database, no reports/


def test_apply_takes_a_weekly_n_n_cron_on_a_daily_workflow(tmp_path: Path) -> None:
    config = write_config(tmp_path / "reportflow.toml", projects=[PROJECT], schedules=[SCHEDULE])
    assert run_cli("schedules", "apply", config=config).returncode == 0, "0 0 * * 1-1 is one slot a week"
    shown = run_cli("schedules", "preview", "platform-weekly", "-n", "3", "--json", config=config,
                    now="2026-12-01T12:00:00Z")
    assert shown.returncode == 0, shown.stderr
    assert [fire["local"][:10] for fire in json.loads(shown.stdout)] == ["2026-12-07", "2026-12-14", "2026-12-21"]
