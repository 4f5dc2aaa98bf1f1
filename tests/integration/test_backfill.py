"""Backfill reports every period of the range: created, present, future, and those the cron has no slot for."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from engine.cli import render
from engine.core.clock import ManualClock
from engine.core.models import PeriodKind
from engine.operations import actions
from engine.scheduling import definitions
from tests.flows.testflows import FOUR_STEPS
from tests.support import make_runtime

DAILY = dataclasses.replace(FOUR_STEPS, name="four_daily", period=PeriodKind.DAY)


def test_periods_without_a_slot_are_reported_as_no_slot(store_url: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    weekdays = dict(name="weekdays", workflow="four_daily", project="p1", cron="0 9 * * 1-5", timezone="UTC",
                    report_on="current")
    rt = make_runtime(store_url, schedules=[weekdays], clock=ManualClock(datetime(2026, 10, 1, 12, tzinfo=UTC)),
                      registry={"four_daily": DAILY}, extra={"testflow": {"log": str(tmp_path / "log")}})
    definitions.apply(rt)
    # Fri 2026-09-25 .. Tue 2026-09-29: the weekend has no 09:00 weekday slot.
    report = actions.backfill(rt, "weekdays", first=date(2026, 9, 25), last=date(2026, 9, 29))
    assert report.created == ["2026-09-25", "2026-09-28", "2026-09-29"]
    assert report.no_slot == ["2026-09-26", "2026-09-27"]
    render.backfill_report(report, False, as_json=True)
    assert json.loads(capsys.readouterr().out)["no_slot"] == ["2026-09-26", "2026-09-27"]
    render.backfill_report(report, False, as_json=False)
    human = capsys.readouterr().out
    assert "no slot 2" in human and "2026-09-26, 2026-09-27" in human
