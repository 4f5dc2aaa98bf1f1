"""Heals itself from the system's cron (SPEC §15.5): real ``reportflow cycle`` processes, one per minute.

Notion refuses the token; the run ends PARTIAL_SUCCESS and ``runs list`` says what it waits for. While
Notion stays broken, a cycle whose wait is not due takes the fast path (no workflow, no client loaded);
once Notion is fixed, the next due cycle re-queues the run and it ends SUCCESS. Nobody types a command
but ``cycle``; each process gets its instant with ``--now``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.fakes.fake_notion import FakeNotion
from tests.fakes.gitrepo import make_repo
from tests.support import run_cli, run_cli_modules, write_config

pytestmark = pytest.mark.slow

SLOT = datetime(2026, 9, 29, 19, 30, tzinfo=UTC)
TOKEN = "secret_cron_heal_token"
HEAVY = ("typer", "pydantic", "engine.execution", "engine.plugins", "workflows", "steps", "notion_client", "httpx")


def iso(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
def notion() -> Iterator[FakeNotion]:
    with FakeNotion(token=TOKEN) as fake:
        yield fake


def test_cron_cycles_heal_a_partial_run_once_notion_is_fixed_and_stay_fast_while_waiting(
        tmp_path: Path, notion: FakeNotion) -> None:
    repo = make_repo(tmp_path)
    repo.commit("a change of the day", at=SLOT - timedelta(hours=3), files={"src/app/a.py": "a = 1\n"})
    config = write_config(
        tmp_path / "reportflow.toml", db_url=f"sqlite:///{tmp_path / 'rf.db'}",
        sections={"reports": {"dir": "reports"}, "notify": {"health_every": "5m"},
                  "notion": {"enabled": True, "token_env": "RF_CRON_NOTION", "database_id": notion.database_id,
                             "base_url": notion.url, "retry_budget": "1s", "timeout": "5s"}},
        projects=[{"key": "platform", "repo": str(repo.path), "branches": ["main"]}],
        schedules=[{"name": "platform-daily", "workflow": "daily_report", "project": "platform",
                    "cron": "30 19 * * *", "timezone": "UTC", "report_on": "current"}])
    env = {"REPORTFLOW_CONFIG": str(config), "RF_CRON_NOTION": TOKEN}

    def cycle(at: datetime) -> tuple[set[str], str]:
        proc, modules = run_cli_modules("--now", iso(at), "cycle", cwd=tmp_path, env=env)
        assert proc.returncode == 0, proc.stderr
        return modules, proc.stdout

    assert run_cli("schedules", "apply", config=config, now=iso(SLOT - timedelta(hours=1)),
                   env={"RF_CRON_NOTION": TOKEN}).returncode == 0
    notion.outage(401)

    _, first = cycle(SLOT + timedelta(seconds=30))
    assert "PARTIAL_SUCCESS NOTION_UNAUTHORIZED" in first
    _, probed = cycle(SLOT + timedelta(minutes=1))  # the run waits: this full cycle probes Notion
    assert "does not answer" in probed
    listed = run_cli("runs", "list", "--json", config=config, now=iso(SLOT + timedelta(minutes=2)), env=env)
    (run,) = json.loads(listed.stdout)
    assert run["status"] == "PARTIAL_SUCCESS" and run["waits_for"]["healthy"] is False
    assert run["waits_for"]["message"].startswith(f"waits for notion at {notion.url} (database ")
    assert TOKEN not in listed.stdout
    doctor = run_cli("doctor", config=config, now=iso(SLOT + timedelta(minutes=2)), env=env)
    assert doctor.returncode == 1  # Notion refuses the token: a person's cause to fix
    assert f"1 run(s) wait for notion at {notion.url} (database {notion.database_id}) (down since " in doctor.stdout
    assert TOKEN not in doctor.stdout + doctor.stderr

    modules, idle = cycle(SLOT + timedelta(minutes=3))  # Notion's next check is at 19:36: nothing to do
    assert "engine.cli.fast_tick" in modules and "nothing to do" in idle
    assert sorted(m for m in modules if m.split(".")[0] in HEAVY or m.startswith("engine.execution")) == []

    _, still = cycle(SLOT + timedelta(minutes=6, seconds=30))  # due again: probed, still refused
    assert "does not answer" in still and "re-queued" not in still

    notion.heal()  # access given back in Notion
    _, healed = cycle(SLOT + timedelta(minutes=12))  # Notion's next check: 19:41:30 and the earlier cycle's run time
    assert "answers" in healed and f"re-queued 1 run(s) whose provider answers again: {run['id']}" in healed
    assert f"run {run['id']} {run['idempotency_key']}: SUCCESS" in healed

    shown = json.loads(run_cli("runs", "show", str(run["id"]), "--json", config=config,
                               now=iso(SLOT + timedelta(minutes=12, seconds=30)), env=env).stdout)
    assert shown["status"] == "SUCCESS" and shown["waits_for"] is None
    assert [a["trigger"] for a in shown["attempts"]] == ["scheduled", "recovery"]
    assert shown["attempts"][-1]["from_step"] == "UPLOAD_NOTION"
    (page,) = notion.live_pages(run["idempotency_key"])
    assert [a["kind"] for a in shown["artifacts"]].count("notion_page") == 1
    assert len(list((tmp_path / "reports").rglob("*.md"))) == 1
    notifications = json.loads(run_cli("notifications", "list", "--json", config=config, env=env).stdout)
    assert sorted(n["event"] for n in notifications) == ["recovered", "run_partial"]

    modules, idle = cycle(SLOT + timedelta(minutes=13))  # nothing waits any more: fast again
    assert "engine.cli.fast_tick" in modules and "nothing to do" in idle
