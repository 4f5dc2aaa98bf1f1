"""What a month of a schedule asks of its model server: ``schedules apply`` and ``schedules draft`` estimate it from
the generations recorded (the median duration of the provider's timed step, times the month's runs)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from engine.core.models import RunStatus
from engine.execution.pool import WorkerPool
from engine.operations import drafts
from engine.plugins.contract import ProbeResult, Provider
from engine.scheduling import definitions, model_time, tick
from tests.flows.testflows import FOUR_STEPS
from tests.support import RuntimeFactory
from workflows import providers, report_settings
from workflows.report_settings import ReportSettings

T0 = datetime(2026, 10, 1, 8, 0, tzinfo=UTC)
MODEL = Provider(name="model:local", label="model at local", codes=frozenset({"MODEL_DOWN"}),
                 probe=lambda: ProbeResult(True, "up"), timed_step="TWO")
TIMED = dataclasses.replace(FOUR_STEPS, providers=lambda settings: (MODEL,))
DAILY = dict(name="daily", workflow="four_steps", project="p1", cron="0 9 * * *", timezone="UTC")


def generate_for_three_days(rt: Any) -> None:
    for day in range(3):
        rt.clock.set(T0 + timedelta(days=day, hours=1, minutes=1))
        tick.tick(rt)
        outcomes = WorkerPool(rt, "w", concurrency=1).work(until_idle=True)
        assert [o.status for o in outcomes] == [RunStatus.SUCCESS]


def test_apply_and_draft_estimate_a_month_of_model_time_from_the_generations_recorded(
        store_url: str, tmp_path: Path, runtime: RuntimeFactory) -> None:
    flow = {"log": str(tmp_path / "log"), "wait_on": ["TWO"], "wait_s": 40}  # each generation takes 40 s
    rt = runtime(store_url, schedules=[DAILY], at=T0, workflows={"four_steps": TIMED}, installed=False,
                 config={"testflow": flow})
    first = definitions.apply(rt)
    assert first.counts == ["daily: 1 run a day at most, 31 runs in October 2026",
                            "daily: model at local: model time: no generation recorded yet"]
    generate_for_three_days(rt)

    hourly = dict(DAILY, cron="0 * * * *")
    changed = runtime(store_url, schedules=[hourly], at=rt.clock.now(), workflows={"four_steps": TIMED},
                      installed=False, config={"testflow": flow})
    report = definitions.apply(changed, confirmed=True)
    assert report.counts == ["daily: 24 runs a day at most, 744 runs in October 2026",
                             "daily: model at local: model time: about 8.3 h a month "
                             "(40 s median of the last 3 generations x 744 runs)"]

    # A new schedule of the same workflow is estimated from the workflow's generations.
    entry = dict(DAILY, name="twice", project="p2", cron="0 9,17 * * *")
    draft = drafts.evaluate(changed.config, changed.registry, entry, now=changed.clock.now(),
                            model_time=model_time.reader(changed.store, changed.registry, changed.settings))
    assert draft.valid and draft.model_time == (
        "twice: model at local: model time: about 0.7 h a month (40 s median of the last 3 generations x 62 runs)",)


def test_a_workflow_that_asks_no_model_gets_no_estimate(store_url: str, tmp_path: Path,
                                                        runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[DAILY], at=T0, workflows={"four_steps": FOUR_STEPS}, installed=False,
                 config={"testflow": {"log": str(tmp_path / "log")}})
    assert definitions.apply(rt).counts == ["daily: 1 run a day at most, 31 runs in October 2026"]


def test_the_report_workflow_times_generate_report_on_ollama_and_nothing_on_the_built_in_writer(
        tmp_path: Path) -> None:
    def settings(llm: dict[str, Any]) -> ReportSettings:
        return report_settings.load({"llm": llm}, tmp_path)

    [ollama] = providers.providers(settings({"provider": "ollama", "host": "http://127.0.0.1:11434"}))
    assert ollama.timed_step == "GENERATE_REPORT"
    assert [p.timed_step for p in providers.providers(settings({"provider": "builtin"}))] == []
