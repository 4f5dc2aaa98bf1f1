"""The creation policy: a new schedule's runs/day and runs/month are shown at apply, above
``[limits] warn_runs_per_day`` with a warning, above ``max_runs_per_day`` refused with nothing written."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from engine.core import errors
from engine.core.clock import ManualClock
from engine.scheduling import definitions
from engine.store import schedule_rows
from tests.flows.testflows import FOUR_STEPS
from tests.support import make_runtime

T0 = datetime(2026, 9, 29, 9, 0, tzinfo=UTC)
MINUTELY = dict(name="minutely", workflow="four_steps", project="p1", cron="* * * * *", timezone="UTC",
                allow_frequent=True)


def test_a_new_minutely_schedule_is_created_with_its_counts_and_a_warning(store_url: str, tmp_path: Path) -> None:
    rt = make_runtime(store_url, schedules=[MINUTELY], clock=ManualClock(T0), registry={"four_steps": FOUR_STEPS},
                      extra={"testflow": {"log": str(tmp_path / "log")}})
    report = definitions.apply(rt)
    assert report.created == ["minutely"]
    assert report.counts == ["minutely: 1,440 runs a day at most, 43,200 runs in September 2026"]
    assert report.warnings == ["schedule 'minutely' makes 1,440 runs/day (43,200 a month), above "
                               "[limits] warn_runs_per_day = 48"]


def test_above_max_runs_per_day_the_config_is_refused_and_nothing_is_written(store_url: str, tmp_path: Path) -> None:
    with pytest.raises(errors.ConfigInvalid) as caught:
        make_runtime(store_url, schedules=[MINUTELY], clock=ManualClock(T0), registry={"four_steps": FOUR_STEPS},
                     extra={"limits": {"max_runs_per_day": 1000}, "testflow": {"log": str(tmp_path / "log")}})
    assert caught.value.key == "schedules[0].cron" and "max_runs_per_day = 1,000" in caught.value.message
    rt = make_runtime(store_url, clock=ManualClock(T0), registry={"four_steps": FOUR_STEPS},
                      extra={"testflow": {"log": str(tmp_path / "log")}})
    with rt.store.read() as conn:
        assert schedule_rows.list_schedules(conn, include_archived=True) == []
