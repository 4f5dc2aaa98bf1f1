"""Heals itself (SPEC §15.5): outages end, and every affected period ends SUCCESS with no command typed.

Only ``cycle`` runs here (what ``* * * * * reportflow cycle`` does), on a manual clock moved
minute by minute or hour by hour; the outages are the loopback fakes' switches
(``FakeOllama.down``, ``FakeNotion.outage``), talking to the real ``ollama`` and
``notion-client`` packages. Each test ends with what a user would look at: the report
files, the Notion pages, the runs and their alerts.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from engine.app import cycle
from engine.core.clock import ManualClock
from engine.core.models import RunStatus
from engine.execution import healer
from engine.operations import actions
from engine.read import run_queries, views
from engine.runtime import Runtime
from engine.store import audit_rows, health_rows, outbox
from tests.fakes.fake_notion import FakeNotion
from tests.fakes.fake_ollama import DEFAULT_REPLY, FakeOllama
from tests.fakes.gitrepo import GitRepo, make_repo
from tests.support import ManualRuntime, RuntimeFactory

SEOUL = ZoneInfo("Asia/Seoul")
SLOT = datetime(2026, 9, 30, 1, 0, tzinfo=UTC)  # 10:00 in Seoul: the daily slot, reporting on the 29th
TOKEN = "secret_heal_token"
MODEL_TEXT = "The team moved the project forward."  # in the fake model's reply, never in the built-in report


def _reply(body: dict[str, Any]) -> str:
    """The fake model: a report narrative, or (asked for JSON) the ops report's summary."""
    if body.get("format"):
        return json.dumps({"summary": "Every schedule reported on time."})
    return DEFAULT_REPLY


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    repo = make_repo(tmp_path)
    repo.commit("before the window", at=datetime(2026, 9, 28, 12, 0, tzinfo=SEOUL))
    for day in (29, 30):
        repo.commit(f"work of the {day}th", at=datetime(2026, 9, day, 9, 0, tzinfo=SEOUL),
                    files={f"src/app/day{day}.py": f"x = {day}\n"})
        repo.commit(f"more work of the {day}th", at=datetime(2026, 9, day, 15, 0, tzinfo=SEOUL),
                    files={f"src/lib/day{day}.py": f"y = {day}\n"})
    return repo


@pytest.fixture
def ollama() -> Iterator[FakeOllama]:
    fake = FakeOllama(reply=_reply).start()
    yield fake
    fake.stop()


@pytest.fixture
def notion(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeNotion]:
    monkeypatch.setenv("RF_HEAL_NOTION", TOKEN)
    with FakeNotion(token=TOKEN) as fake:
        yield fake


def healing_runtime(runtime: RuntimeFactory, url: str, tmp_path: Path, repo: GitRepo, notion: FakeNotion, *,
                    llm: dict[str, Any], schedules: list[dict[str, Any]]) -> ManualRuntime:
    """``schedules`` (10:00 in Seoul) over two projects of ``repo``, uploading to ``notion``, applied a day before
    ``SLOT``; short retry budgets, a 1 min backoff, a health alert every 5 min."""
    extra: dict[str, Any] = {
        "projects": [{"key": "platform", "repo": str(repo.path), "branches": ["main"]},
                     {"key": "web", "repo": str(repo.path), "branches": ["main"]}],
        "reports": {"dir": str(tmp_path / "reports")},
        "llm": {"retry_budget": "4s", **llm},
        "notion": {"enabled": True, "token_env": "RF_HEAL_NOTION", "database_id": notion.database_id,
                   "base_url": notion.url, "retry_budget": "1s", "timeout": "5s"},
        "worker": {"retry_backoff": "1m", "max_attempts": 3},
        "notify": {"health_every": "5m"},
    }
    specs = [{"cron": "0 10 * * *", "timezone": "Asia/Seoul", **s} for s in schedules]
    return runtime(url, schedules=specs, at=SLOT - timedelta(days=1), config=extra, apply=True)


DAILY = {"name": "platform-daily", "workflow": "daily_report", "project": "platform"}
TEAM = {"name": "core-daily", "workflow": "team_daily_report", "project": "core", "projects": ["platform", "web"]}
OPS = {"name": "ops-daily", "workflow": "ops_daily_report"}


def cycles(rt: Runtime, until: datetime, every: timedelta) -> None:
    """What the system's cron does: a ``cycle`` at each step of the clock, up to ``until``."""
    clock = rt.clock
    assert isinstance(clock, ManualClock)
    while clock.now() < until:
        clock.set(min(until, clock.now() + every))
        cycle.cycle(rt, stop=threading.Event())


def periods(rt: Runtime) -> dict[str, Any]:
    """Each period's run (the top-level ones: a team's children are part of their parent's period)."""
    found = [r for r in run_queries.list_runs(rt, limit=0) if r.parent_id is None]
    assert len({r.idempotency_key for r in found}) == len(found)
    return {r.idempotency_key: run_queries.get_run(rt, r.id) for r in found}


def files_of(tmp_path: Path) -> list[Path]:
    return sorted(p for p in (tmp_path / "reports").rglob("*.md"))


def assert_one_file_and_one_page_per_period(rt: Runtime, tmp_path: Path, notion: FakeNotion) -> None:
    runs = periods(rt)
    files = files_of(tmp_path)
    assert len(files) == len(runs), files
    for key, run in runs.items():
        kinds = sorted(a.kind for a in run.artifacts)
        assert kinds == ["markdown", "notion_page"], (key, kinds)
        (page,) = notion.live_pages(key)
        (stored,) = [a for a in run.artifacts if a.kind == "notion_page"]
        assert stored.external_id == page["id"]
        (markdown,) = [a for a in run.artifacts if a.kind == "markdown"]
        assert Path(markdown.location.split(":", 1)[1]) in files
    assert len(notion.live_pages()) == len(runs)


def web(rt: Runtime) -> Any:
    """The run pages, as a browser gets them (read-only: no token)."""
    from starlette.testclient import TestClient

    from engine.web.app import create_app

    return TestClient(create_app(rt, token=None), base_url="http://127.0.0.1:8321", follow_redirects=False)


def page_text(notion: FakeNotion, page_id: str) -> str:
    return "\n".join("".join(i["plain_text"] for i in block[block["type"]].get("rich_text", []))
                     for block in notion.content(page_id))


def auto_requeues(rt: Runtime) -> list[Any]:
    with rt.store.read() as conn:
        return audit_rows.list_audit(conn, action=health_rows.AUTO_REQUEUED)


def test_ollama_down_for_an_hour_with_fallback_reports_on_time_then_the_model_writes_them_again_in_place(
        store_url: str, tmp_path: Path, repo: GitRepo, ollama: FakeOllama, notion: FakeNotion,
        runtime: RuntimeFactory) -> None:
    rt = healing_runtime(runtime, store_url, tmp_path, repo, notion,
                         llm={"provider": "ollama", "host": ollama.url, "fallback": "builtin"},
                         schedules=[DAILY, TEAM, OPS])
    ollama.down = True  # 09:55 Seoul: Ollama stops answering, for an hour
    rt.clock.set(SLOT - timedelta(minutes=5))

    cycles(rt, SLOT, timedelta(minutes=1))

    # On time: every period's report is saved and uploaded by the built-in writer, marked fallback.
    on_time = periods(rt)
    assert sorted(on_time) == ["daily_report:platform:2026-09-29", "ops_daily_report:ops:2026-09-29",
                               "team_daily_report:core:2026-09-29"]
    first_pages = {}
    for key, run in on_time.items():
        assert run.status is RunStatus.SUCCESS, (key, run.status, run.error_code)
        assert run.completed_at is not None and run.completed_at - SLOT < timedelta(minutes=2)
        (markdown,) = [a for a in run.artifacts if a.kind == "markdown"]
        text = Path(markdown.location.split(":", 1)[1]).read_text()
        assert "**fallback**: ollama `llama3.1:8b` did not answer" in text and MODEL_TEXT not in text
        assert 'instead_of: "ollama llama3.1:8b"' in text  # the front matter says so too
        generated = next(s for s in run.steps if s.name in ("GENERATE_REPORT", "WRITE_OPS"))
        assert generated.output is not None and generated.output["fallback"]["code"] == "MODEL_UNAVAILABLE"
        assert generated.error_code == "MODEL_UNAVAILABLE"  # a step that succeeded around the failure
        (page,) = notion.live_pages(key)
        first_pages[key] = page["id"]
        assert "fallback" in page_text(notion, page["id"])
        assert run.waits_for is not None and run.waits_for.degraded
        said = views.run_summary(run, rt.clock.now())["waits_for"]["message"]
        assert said.startswith(f"waits for ollama at {ollama.url}: ") and "written again in place" in said
    assert_one_file_and_one_page_per_period(rt, tmp_path, notion)

    cycles(rt, SLOT + timedelta(minutes=55), timedelta(minutes=5))  # still down: probed, nothing re-queued
    assert auto_requeues(rt) == []
    # Issue 43, item 3: the reports went out by the fallback, so the outage is said once (not per run), as a warning.
    [down_alert] = provider_alerts(rt, "provider_down")
    assert down_alert.severity.value == "warning" and ollama.url in down_alert.summary
    assert "fallback" in down_alert.summary and provider_alerts(rt, "provider_up") == []
    down = periods(rt)["daily_report:platform:2026-09-29"].waits_for
    assert down is not None and down.healthy is False and down.checked_at is not None

    ollama.down = False  # 10:55: Ollama answers again; nobody types anything
    cycles(rt, SLOT + timedelta(hours=1, minutes=5), timedelta(minutes=5))

    healed = periods(rt)
    for key, run in healed.items():
        assert run.status is RunStatus.SUCCESS, (key, run.status, run.error_code)
        assert run.waits_for is None
        (markdown,) = [a for a in run.artifacts if a.kind == "markdown"]
        path = Path(markdown.location.split(":", 1)[1])
        assert "-v2" not in path.name
        text = path.read_text()
        assert "fallback" not in text
        generated = next(s for s in run.steps if s.name in ("GENERATE_REPORT", "WRITE_OPS"))
        assert generated.error_code is None and generated.output is not None
        assert generated.output.get("fallback") is None and generated.output["provider"] == "ollama"
        (page,) = notion.live_pages(key)
        assert page["id"] == first_pages[key]  # the same page, updated
        assert "fallback" not in page_text(notion, page["id"])
        if key.startswith("daily_report"):
            assert MODEL_TEXT in text and MODEL_TEXT in page_text(notion, page["id"])
        attempts = [a.trigger.value for a in run.attempts]
        assert attempts[-1] == "recovery"
    requeued = auto_requeues(rt)
    assert sorted(e.run_id for e in requeued) == sorted(r.id for r in healed.values())
    # Queued again at the first probe after Ollama came back at 10:55: within health_every (5 min).
    assert all(e.at <= SLOT + timedelta(minutes=55 + 5) for e in requeued)
    assert {e.actor for e in requeued} == {"SYSTEM_RECONCILER"}
    assert all(e.after and e.after["regenerate"] is True and e.after["from_step"] in ("GENERATE_REPORT", "WRITE_OPS")
               for e in requeued)
    assert_one_file_and_one_page_per_period(rt, tmp_path, notion)
    [up_alert] = provider_alerts(rt, "provider_up")  # closed once the probe found it answering
    assert up_alert.severity.value == "info" and len(provider_alerts(rt, "provider_down")) == 1


def provider_alerts(rt: Any, event: str) -> list[Any]:
    with rt.store.read() as conn:
        return [e for e in outbox.list_events(conn) if e.event == event]


def test_ollama_down_for_an_hour_without_fallback_the_failed_run_is_queued_again_when_it_answers(
        store_url: str, tmp_path: Path, repo: GitRepo, ollama: FakeOllama, notion: FakeNotion,
        runtime: RuntimeFactory) -> None:
    rt = healing_runtime(runtime, store_url, tmp_path, repo, notion, llm={"provider": "ollama", "host": ollama.url},
                         schedules=[DAILY])
    ollama.down = True
    rt.clock.set(SLOT - timedelta(minutes=5))

    cycles(rt, SLOT + timedelta(minutes=15), timedelta(minutes=1))  # three attempts: 10:00, 10:01, 10:05

    (run,) = periods(rt).values()
    assert run.status is RunStatus.FAILED and run.error_code == "MODEL_UNAVAILABLE"
    assert files_of(tmp_path) == [] and notion.live_pages() == []
    listed = views.run_summary(run_queries.list_runs(rt)[0], rt.clock.now())["waits_for"]
    assert listed["message"].startswith(f"waits for ollama at {ollama.url}: down since ")
    assert listed["message"].endswith("re-queued from GENERATE_REPORT automatically when it answers")

    cycles(rt, SLOT + timedelta(minutes=55), timedelta(minutes=5))
    ollama.down = False
    cycles(rt, SLOT + timedelta(hours=1, minutes=5), timedelta(minutes=5))

    (run,) = periods(rt).values()
    assert run.status is RunStatus.SUCCESS and run.waits_for is None
    (requeued,) = auto_requeues(rt)
    assert requeued.at <= SLOT + timedelta(minutes=55 + 5)  # the first probe after Ollama came back
    assert [s.attempts for s in run.steps][:1] == [1]  # COLLECT_GIT was not run again
    assert MODEL_TEXT in files_of(tmp_path)[0].read_text()
    with rt.store.read() as conn:
        events = [e.event for e in outbox.list_events(conn, schedule="platform-daily")]
    assert events.count("run_failed") == 1 and events.count("recovered") == 1
    assert_one_file_and_one_page_per_period(rt, tmp_path, notion)


def test_notion_refusing_the_token_for_a_day_every_partial_period_ends_success_once_it_is_fixed(
        store_url: str, tmp_path: Path, repo: GitRepo, notion: FakeNotion, runtime: RuntimeFactory) -> None:
    rt = healing_runtime(runtime, store_url, tmp_path, repo, notion, llm={"provider": "builtin"},
                         schedules=[DAILY, TEAM])
    notion.outage(401)  # the integration lost its access a little before the slot
    rt.clock.set(SLOT - timedelta(minutes=5))

    cycles(rt, SLOT + timedelta(hours=1), timedelta(minutes=5))
    cycles(rt, SLOT + timedelta(days=1, hours=1), timedelta(hours=1))  # a day later, the next slot, still 401

    broken = periods(rt)
    assert len(broken) == 4  # two schedules, two days
    for key, run in broken.items():
        assert run.status is RunStatus.PARTIAL_SUCCESS and run.error_code == "NOTION_UNAUTHORIZED", key
        assert run.waits_for is not None and run.waits_for.healthy is False
        wait = views.wait_view(run)
        assert wait is not None and "re-queued from UPLOAD_NOTION automatically when it answers" in wait["message"]
    assert notion.live_pages() == [] and len(files_of(tmp_path)) == 4
    assert TOKEN not in json.dumps([views.run_detail(r, rt.clock.now()) for r in broken.values()])
    page = web(rt).get(f"/runs/{broken['daily_report:platform:2026-09-29'].id}")
    assert page.status_code == 200 and "waits for notion at " in page.text and TOKEN not in page.text

    notion.heal()  # access given back in Notion; nobody types anything
    cycles(rt, SLOT + timedelta(days=1, hours=2), timedelta(minutes=5))

    healed = periods(rt)
    for key, run in healed.items():
        assert run.status is RunStatus.SUCCESS and run.waits_for is None, (key, run.status)

        assert [s.name for s in run.steps if s.attempts > 1 and s.name != "UPLOAD_NOTION"] == []
    with rt.store.read() as conn:
        events = outbox.list_events(conn)
        health = health_rows.get_health(conn)
    recovered = sorted(e.key or "" for e in events if e.event == "recovered")
    assert len(recovered) == 4 and {e.event for e in events} >= {"run_partial", "recovered"}
    (notion_health,) = health.values()
    assert notion_health.healthy and TOKEN not in notion_health.detail
    requeued = auto_requeues(rt)
    assert len(requeued) == 4 and all(e.at <= SLOT + timedelta(days=1, hours=1, minutes=5) for e in requeued)
    assert_one_file_and_one_page_per_period(rt, tmp_path, notion)


def test_serves_healer_loop_probes_every_provider_in_use_before_anything_fails(
        store_url: str, tmp_path: Path, repo: GitRepo, ollama: FakeOllama, notion: FakeNotion,
        runtime: RuntimeFactory) -> None:
    """``serve`` probes what it depends on every ``health_every`` (a thread beside its loop), runs waiting or not."""
    rt = healing_runtime(runtime, store_url, tmp_path, repo, notion, llm={"provider": "ollama", "host": ollama.url},
                         schedules=[DAILY])
    rt.clock.set(SLOT)
    stop = threading.Event()
    loop = threading.Thread(target=healer.heal_until, args=(rt, stop), daemon=True)
    loop.start()
    try:
        # The manual clock's wait ends only with ``stop``: one pass, then the loop waits for it.
        while len(ollama.requests_to("/api/tags")) + len(notion.requests_matching("GET", "/v1/databases")) < 2:
            assert loop.is_alive()
            loop.join(0.05)
    finally:
        stop.set()
        loop.join(10)
    assert not loop.is_alive()
    with rt.store.read() as conn:
        health = health_rows.get_health(conn)
    assert sorted((h.label, h.healthy) for h in health.values()) == [
        (f"notion at {notion.url} (database {notion.database_id})", True), (f"ollama at {ollama.url}", True)]
    assert all(TOKEN not in h.detail for h in health.values())
    # Issue 43, item 3: the schedules page shows each provider's health.
    from starlette.testclient import TestClient

    from engine.web.app import create_app

    page = TestClient(create_app(rt, token=None), base_url="http://127.0.0.1").get("/schedules").text
    section = page.split('id="providers"')[1].split("<h2")[0]
    assert f"ollama at {ollama.url}" in section and "answers" in section and TOKEN not in page


@pytest.mark.slow  # eight hours of cycles on the manual clock: in the full suite, not in --fast
def test_a_provider_that_answers_probes_but_fails_runs_gets_auto_recover_re_queues_then_a_person(
        store_url: str, tmp_path: Path, repo: GitRepo, ollama: FakeOllama, notion: FakeNotion,
        runtime: RuntimeFactory) -> None:
    """The loop is bounded: the model lists its models (healthy) but every generation fails. The run is queued
    again ``auto_recover`` times, then ``runs list`` says a person must act; an operator's retry starts afresh."""
    rt = healing_runtime(runtime, store_url, tmp_path, repo, notion, llm={"provider": "ollama", "host": ollama.url},
                         schedules=[{**DAILY, "auto_recover": 2}])
    ollama.script("/api/chat", [(500, {"error": "out of memory"}, 0.0)] * 1000)
    rt.clock.set(SLOT - timedelta(minutes=1))

    cycles(rt, SLOT + timedelta(hours=3), timedelta(minutes=5))

    (run,) = periods(rt).values()
    assert run.status is RunStatus.FAILED and run.error_code == "MODEL_UNAVAILABLE"
    assert len(auto_requeues(rt)) == 2
    # Three attempts a time (max_attempts): the first three, and three after each of the two re-queues.
    assert [a.trigger.value for a in run.attempts] == ["scheduled", "auto", "auto"] + ["recovery", "auto", "auto"] * 2
    generations = len(ollama.requests_to("/api/chat"))
    said = views.wait_view(run)
    assert said is not None and said["gave_up"] and said["message"].endswith(
        f"no automatic re-queue: its 2 automatic re-queues are spent (auto_recover); "
        f"`reportflow runs retry {run.id}` when it is fixed")

    cycles(rt, SLOT + timedelta(hours=5), timedelta(minutes=10))  # nothing more happens by itself
    assert len(ollama.requests_to("/api/chat")) == generations and len(auto_requeues(rt)) == 2

    actions.retry(rt, run.id)  # the operator acts: should it fail again, it is healed afresh, as far again
    cycles(rt, SLOT + timedelta(hours=8), timedelta(minutes=5))
    (run,) = periods(rt).values()
    assert run.status is RunStatus.FAILED and len(auto_requeues(rt)) == 2 + 2
    assert run.waits_for is not None and run.waits_for.gave_up
