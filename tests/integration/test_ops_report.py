"""The engine's own report (SPEC §16.3): its numbers against the runs table, on SQLite and
PostgreSQL; the facts persisted so a retry writes the same bytes."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from engine.core import error_codes
from engine.core.clock import ManualClock
from engine.core.models import RunStatus
from engine.execution.worker import Worker
from engine.operations import actions
from engine.scheduling import definitions
from engine.store.tables import runs
from tests.fakes.gitrepo import GitRepo
from tests.integration.test_report_workflow import SEOUL, show
from tests.integration.test_report_workflow import repo as repo  # noqa: F401 - the fixture
from tests.support import make_runtime, output_of, run_next

NOW = datetime(2026, 10, 6, 1, 0, tzinfo=UTC)  # Tuesday 10:00 in Seoul


def ops_runtime(url: str, tmp_path: Path, repo: GitRepo) -> Any:
    extra = {"projects": [{"key": "platform", "repo": str(repo.path), "branches": ["main"]}],
             "reports": {"dir": str(tmp_path / "reports")}, "llm": {"provider": "builtin"}}
    specs = [dict(name="platform-report", workflow="daily_report", project="platform",
                  cron="0 3 * * *", timezone="Asia/Seoul"),
             dict(name="ops-weekly", workflow="ops_weekly_report", cron="0 6 * * 1",
                  timezone="Asia/Seoul"),
             dict(name="echo-tick", workflow="echo", project="platform", cron="0 9 * * *",
                  timezone="UTC")]
    rt = make_runtime(url, schedules=specs, clock=ManualClock(NOW - timedelta(days=5)), extra=extra)
    definitions.apply(rt)
    rt.clock.set(NOW)
    return rt


def test_the_ops_report_counts_what_the_runs_table_holds(store_url: str, tmp_path: Path,
                                                         repo: GitRepo) -> None:
    rt = ops_runtime(store_url, tmp_path, repo)
    for day in (27, 28):  # two good days
        actions.trigger(rt, "platform-report", day=date(2026, 9, day))
        assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    repo.git("branch", "-m", "main", "gone")  # then the branch disappears: a permanent failure
    for day in (29, 30):
        actions.trigger(rt, "platform-report", day=date(2026, 9, day))
        assert run_next(Worker(rt, "w")).status is RunStatus.FAILED
    cancelled = actions.trigger(rt, "platform-report", day=date(2026, 10, 2))
    actions.cancel(rt, cancelled.run_id)  # a slot that will not run
    rt.clock.set(datetime(2026, 10, 2, 12, 0, tzinfo=UTC))  # an operator makes echo hourly
    echo = definitions.set_schedule(rt, "echo-tick", expect_version=1, changes={"cron": "0 * * * *"},
                                  confirmed=True)
    assert echo[1] is not None and "high risk" in echo[1]
    rt.clock.set(NOW)
    ops = actions.trigger(rt, "ops-weekly", day=date(2026, 9, 28))
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    run = show(rt, ops.run_id)
    assert run.idempotency_key == "ops_weekly_report:ops:2026-W40"
    facts = output_of(run, 0)["facts"]
    start, end = (datetime.fromisoformat(facts[k].replace("Z", "+00:00")) for k in ("start", "end"))
    assert (start, end) == (datetime(2026, 9, 28, tzinfo=SEOUL), datetime(2026, 10, 5, tzinfo=SEOUL))
    window = (runs.c.scheduled_for >= start, runs.c.scheduled_for < end, runs.c.workflow == "daily_report")
    with rt.store.read() as conn:
        table = dict(conn.execute(select(runs.c.status, func.count()).where(*window)
                                  .group_by(runs.c.status)).all())
        failed_keys = sorted(conn.execute(select(runs.c.business_key).where(
            *window, runs.c.status == "FAILED")).scalars())
    [platform] = [s for s in facts["schedules"] if s["schedule"] == "platform-report"]
    assert platform["by_status"] == table == {"SUCCESS": 2, "FAILED": 2, "CANCELLED": 1}
    assert platform["runs"] == sum(table.values())
    # SPEC §15.2 over the week: seven daily periods due, a period with no row or a failed one is not a success
    assert platform["periods_due"] == 7 and platform["success_rate"] == table["SUCCESS"] / 7
    assert platform["freshness"] is not None and platform["freshness"] <= platform["success_rate"]
    [unrun] = facts["unrun"]
    assert (unrun["schedule"], unrun["status"], unrun["count"], unrun["keys"]) == (
        "platform-report", "CANCELLED", 1, ["2026-10-02"])
    [changed] = facts["changes"]
    # runs/day as `schedules set` estimates it (a week of fires, both ends counted: 169 / 7)
    assert (changed["schedule"], changed["actor"], changed["runs_per_day"], changed["risk"]) == (
        "echo-tick", "tester", [1.0, 24.14], "high")
    [group] = facts["failures"]
    assert (group["schedule"], group["error_code"], group["count"]) == ("platform-report", "CONFIG_INVALID", 2)
    assert [group["first"], group["last"]] == failed_keys == ["2026-09-29", "2026-09-30"]

    path = tmp_path / "reports" / "_ops" / "ops" / "2026-W40-ops-weekly-summary.md"
    text = path.read_text()
    assert "| platform-report | daily_report | platform | 5 | CANCELLED 1, FAILED 2, SUCCESS 2 | 29% |" in text
    assert ("tester changed echo-tick: `0 9 * * *` → `0 * * * *`, 1 → 24.14 runs/day (**high risk**"
            in text)
    assert "| platform-report | `CONFIG_INVALID` | 2 | 2026-09-29 | 2026-09-30 |" in text
    assert error_codes.runbook("CONFIG_INVALID") in text  # type: ignore[operator]

    # A retry re-reads nothing: a new failure after the facts were read is not in the rerun.
    first = path.read_bytes()
    actions.trigger(rt, "platform-report", day=date(2026, 10, 1))
    assert run_next(Worker(rt, "w")).status is RunStatus.FAILED
    actions.retry(rt, ops.run_id, from_step="WRITE_OPS")
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    assert path.read_bytes() == first


def test_an_ops_schedule_names_no_project(sqlite_url: str, tmp_path: Path) -> None:
    import pytest

    from engine.core import errors

    spec = dict(name="ops", workflow="ops_daily_report", project="platform", cron="0 6 * * *",
                timezone="UTC")
    with pytest.raises(errors.ConfigInvalid, match="leave out project"):
        make_runtime(sqlite_url, schedules=[spec])
    with pytest.raises(errors.ConfigInvalid, match="project is required"):
        make_runtime(sqlite_url, schedules=[dict(name="x", workflow="echo", cron="0 6 * * *",
                                                 timezone="UTC")])


def test_the_ops_report_goes_to_notion_when_enabled(sqlite_url: str, tmp_path: Path, repo: GitRepo,
                                                   monkeypatch: Any) -> None:
    from tests.fakes.fake_notion import FakeNotion
    from tests.integration.test_report_workflow import TOKEN

    monkeypatch.setenv("RF_TEST_NOTION", TOKEN)
    with FakeNotion(token=TOKEN) as notion:
        extra = {"projects": [{"key": "platform", "repo": str(repo.path), "branches": ["main"]}],
                 "reports": {"dir": str(tmp_path / "reports")}, "llm": {"provider": "builtin"},
                 "notion": {"enabled": True, "token_env": "RF_TEST_NOTION",
                            "database_id": notion.database_id, "base_url": notion.url,
                            "retry_budget": "0.3s", "timeout": "5s"}}
        spec = dict(name="ops-weekly", workflow="ops_weekly_report", cron="0 6 * * 1", timezone="UTC")
        rt = make_runtime(sqlite_url, schedules=[spec], clock=ManualClock(NOW - timedelta(days=5)),
                          extra=extra)
        definitions.apply(rt)
        rt.clock.set(NOW)
        ops = actions.trigger(rt, "ops-weekly", day=date(2026, 9, 28))
        assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
        (page,) = notion.live_pages("ops_weekly_report:ops:2026-W40")
        assert {a.kind for a in show(rt, ops.run_id).artifacts} == {"markdown", "notion_page"}


def test_a_model_summary_may_cite_only_what_the_facts_hold(sqlite_url: str, tmp_path: Path,
                                                          repo: GitRepo) -> None:
    import json

    from tests.fakes.fake_ollama import FakeOllama

    with FakeOllama() as model:
        extra = {"projects": [{"key": "platform", "repo": str(repo.path), "branches": ["main"]}],
                 "reports": {"dir": str(tmp_path / "reports")},
                 "llm": {"provider": "ollama", "host": model.url, "retry_budget": "0.2s"}}
        specs = [dict(name="platform-report", workflow="daily_report", project="platform",
                      cron="0 3 * * *", timezone="Asia/Seoul"),
                 dict(name="ops-weekly", workflow="ops_weekly_report", cron="0 6 * * 1",
                      timezone="Asia/Seoul")]
        rt = make_runtime(sqlite_url, schedules=specs, clock=ManualClock(NOW - timedelta(days=5)),
                          extra=extra)
        definitions.apply(rt)
        rt.clock.set(NOW)
        repo.git("branch", "-m", "main", "gone")
        failed = actions.trigger(rt, "platform-report", day=date(2026, 9, 29))
        assert run_next(Worker(rt, "w")).status is RunStatus.FAILED
        invented = json.dumps({"summary": "Run 999 hit GIT_TIMEOUT_ERROR in `nightly-backup`."})
        grounded = json.dumps({"summary": f"Run {failed.run_id} of `platform-report` failed "
                                          "with CONFIG_INVALID."})
        model.replies([invented, grounded])
        ops = actions.trigger(rt, "ops-weekly", day=date(2026, 9, 28))
        assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
        schema = model.formats[-1]
        repair = model.requests_to("/api/chat")[-1].body["messages"][-1]["content"]
    assert schema["required"] == ["summary"] and model.formats[-2] == schema
    assert "cites run 999" in repair and "GIT_TIMEOUT_ERROR" in repair and "nightly-backup" in repair
    output = output_of(show(rt, ops.run_id), 1)
    assert output["grounding"]["verdict"] == "repaired"
    text = (tmp_path / "reports/_ops/ops/2026-W40-ops-weekly-summary.md").read_text()
    assert f"## Summary\n\nRun {failed.run_id} of `platform-report` failed with CONFIG_INVALID." in text
    assert "999" not in text and 'grounding: "repaired"' in text


def test_the_ops_report_lists_stuck_runs_and_slots_too_old_to_record(store_url: str, tmp_path: Path,
                                                                    repo: GitRepo) -> None:
    from engine.scheduling import tick

    extra = {"projects": [{"key": "platform", "repo": str(repo.path), "branches": ["main"]}],
             "reports": {"dir": str(tmp_path / "reports")}, "llm": {"provider": "builtin"}}
    specs = [dict(name="nightly", workflow="echo", project="platform", cron="0 9 * * *", timezone="UTC"),
             dict(name="ops-weekly", workflow="ops_weekly_report", cron="0 6 * * 1", timezone="Asia/Seoul")]
    rt = make_runtime(store_url, schedules=specs, clock=ManualClock(datetime(2026, 9, 10, tzinfo=UTC)),
                      extra=extra)
    definitions.apply(rt)
    definitions.set_enabled(rt, "ops-weekly", enabled=False, reason="only triggered here")
    rt.clock.set(datetime(2026, 10, 4, 12, 0, tzinfo=UTC))  # the scheduler was down for 24 days
    tick.tick(rt)  # a week of catch-up runs, the 18 slots before the 7-day window too old to record
    definitions.set_enabled(rt, "nightly", enabled=False, reason="held while the repository moves")
    definitions.set_enabled(rt, "ops-weekly", enabled=True, reason=None)
    rt.clock.set(NOW)
    ops = actions.trigger(rt, "ops-weekly", day=date(2026, 9, 28))
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    facts = output_of(show(rt, ops.run_id), 0)["facts"]
    with rt.store.read() as conn:
        held = conn.execute(select(runs.c.id, runs.c.status).where(runs.c.workflow == "echo")
                            .order_by(runs.c.scheduled_for)).all()
    # the first catch-up run QUEUED, six PENDING behind it (overlap), all held by the disabled schedule
    assert [status for _, status in held] == ["QUEUED"] + ["PENDING"] * 6
    assert [(s["run"], s["status"], s["reason"]) for s in facts["stuck"]] == [
        (run_id, status, "schedule disabled") for run_id, status in held]
    [old] = facts["too_old"]
    assert (old["schedule"], old["from"], old["to"]) == ("nightly", "2026-09-10T09:00:00Z", "2026-09-27T12:00:00Z")
    assert abs(old["estimated_slots"] - 18) <= 1  # an estimate (never enumerated): 18 nine o'clocks in truth
    text = (tmp_path / "reports/_ops/ops/2026-W40-ops-weekly-summary.md").read_text()
    assert f"- run {held[0][0]} (nightly): QUEUED, unclaimed since 2026-10-04T12:00:00Z: schedule disabled" in text
    assert f"- nightly: about {old['estimated_slots']} slot(s) from 2026-09-10T09:00:00Z to 2026-09-27T12:00:00Z older than" in text


def test_the_ops_report_lists_holidays_and_maintenance_windows_of_its_period(store_url: str, tmp_path: Path,
                                                                             repo: GitRepo) -> None:
    extra = {"projects": [{"key": "platform", "repo": str(repo.path), "branches": ["main"]}],
             "reports": {"dir": str(tmp_path / "reports")}, "llm": {"provider": "builtin"},
             "maintenance": [{"start": "2026-09-30T00:00:00+09:00", "end": "2026-09-30T06:00:00+09:00",
                              "reason": "database upgrade"},
                             {"start": "2026-10-20T00:00:00Z", "end": "2026-10-21T00:00:00Z", "reason": "later"}]}
    specs = [dict(name="nightly", workflow="echo", project="platform", cron="0 9 * * *", timezone="Asia/Seoul",
                  calendar="KR"),
             dict(name="ops-weekly", workflow="ops_weekly_report", cron="0 6 * * 1", timezone="Asia/Seoul")]
    rt = make_runtime(store_url, schedules=specs, clock=ManualClock(datetime(2026, 9, 27, tzinfo=UTC)),
                      extra=extra)
    definitions.apply(rt)
    rt.clock.set(datetime(2026, 10, 1, 12, tzinfo=UTC))
    definitions.pause(rt, "nightly", until=datetime(2026, 10, 2, 12, tzinfo=UTC), reason="repo move")
    rt.clock.set(NOW)
    ops = actions.trigger(rt, "ops-weekly", day=date(2026, 9, 28))
    assert run_next(Worker(rt, "w")).status is RunStatus.SUCCESS
    facts = output_of(show(rt, ops.run_id), 0)["facts"]
    # Chuseok (2026-09-24..26 and its substitute day) and National Foundation Day (Saturday 2026-10-03).
    assert ("nightly", "2026-10-03", "National Foundation Day") in [
        (h["schedule"], h["date"], h["name"]) for h in facts["holidays"]]
    assert all("2026-09-28" <= h["date"] <= "2026-10-04" for h in facts["holidays"])
    assert [(w["start"], w["reason"], w["paused"]) for w in facts["maintenance"]] == [
        ("2026-09-29T15:00:00Z", "database upgrade", False), ("2026-10-01T12:00:00Z", "repo move", True)]
    text = (tmp_path / "reports/_ops/ops/2026-W40-ops-weekly-summary.md").read_text()
    assert "- nightly: 2026-10-03 National Foundation Day" in text
    assert "- 2026-09-29T15:00:00Z → 2026-09-29T21:00:00Z all schedules: database upgrade" in text
    assert "- 2026-10-01T12:00:00Z → 2026-10-02T12:00:00Z nightly (paused): repo move" in text
