"""``reportflow doctor`` as a user runs it: the real CLI in a subprocess, one actionable line per problem."""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from engine.core.clock import SystemClock
from engine.core.models import RunStatus
from engine.execution.worker import Worker
from engine.operations import actions
from engine.plugins.contract import ArtifactRef
from engine.scheduling import definitions, heartbeat
from engine.store import claims, run_rows
from tests.fakes.fake_notion import FakeNotion
from tests.support import REPO_ROOT, make_runtime, run_cli, write_config

pytestmark = pytest.mark.slow
UNSET_TOKEN_ENV = "REPORTFLOW_TEST_DOCTOR_UNSET_TOKEN"
DAILY = dict(name="main-daily", workflow="daily_report", project="main", cron="0 19 * * *", timezone="UTC")


def free_port() -> int:
    """A loopback port with nothing listening on it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def problems(stdout: str) -> list[str]:
    """The problems reported about what a test set up (the scheduler's heartbeat is checked on its own below)."""
    return [line for line in stdout.splitlines() if line.startswith("PROBLEM") and "scheduler:" not in line]


def doctor(config: Path, env: Mapping[str, str] | None = None, now: str | None = None) -> Any:
    return run_cli("doctor", config=config, env={UNSET_TOKEN_ENV: "", **(env or {})}, now=now)


def migrate(config: Path) -> None:
    result = run_cli("db", "upgrade", config=config)
    assert result.returncode == 0, result.stderr


def test_missing_repository_unreachable_ollama_and_unset_token(tmp_path: Path) -> None:
    port = free_port()
    config = write_config(
        tmp_path / "reportflow.toml", db_url="sqlite:///rf.db",
        sections={"llm": {"provider": "ollama", "host": f"http://127.0.0.1:{port}", "model": "llama3.1:8b"},
                  "notion": {"enabled": True, "token_env": UNSET_TOKEN_ENV, "database_id": "0123abcd"}},
        projects=[{"key": "main", "repo": str(tmp_path / "no-such-repo")}], schedules=[DAILY])
    migrate(config)
    result = doctor(config)
    assert result.returncode == 1, result.stdout + result.stderr
    found = problems(result.stdout)
    assert len(found) == 3, result.stdout
    repo_line, ollama_line, notion_line = sorted(found, key=lambda line: ("repository" not in line,
                                                                          "ollama" not in line))
    assert str(tmp_path / "no-such-repo") in repo_line and "does not exist" in repo_line
    assert f"127.0.0.1:{port}" in ollama_line and "`ollama serve`" in ollama_line
    assert UNSET_TOKEN_ENV in notion_line and "not set" in notion_line


def test_healthy_setup_has_no_problem(store_url: str, tmp_path: Path) -> None:
    config = write_config(tmp_path / "reportflow.toml", db_url=store_url,
                          sections={"llm": {"provider": "builtin"}, "notion": {"enabled": False}},
                          projects=[{"key": "main", "repo": str(REPO_ROOT), "branches": ["HEAD"]}],
                          schedules=[DAILY])
    migrate(config)
    result = doctor(config)
    assert result.returncode == 0, result.stdout + result.stderr
    assert problems(result.stdout) == []
    assert f"repository {REPO_ROOT}: HEAD (" in result.stdout
    if store_url.startswith("postgresql"):
        assert "ok clock: agrees with the database server" in result.stdout


def test_missing_sqlite_database_is_reported_not_created(tmp_path: Path) -> None:
    config = write_config(tmp_path / "reportflow.toml", db_url="sqlite:///state/rf.db",
                          projects=[{"key": "main", "repo": str(REPO_ROOT)}], schedules=[DAILY])
    result = doctor(config)
    assert result.returncode == 1
    (line,) = problems(result.stdout)
    assert str(tmp_path / "state" / "rf.db") in line and "`reportflow db upgrade`" in line
    assert not (tmp_path / "state").exists()


def test_bad_config_names_file_and_key(tmp_path: Path) -> None:
    config = write_config(tmp_path / "reportflow.toml", db_url="sqlite:///rf.db",
                          projects=[{"key": "main", "repo": str(REPO_ROOT)}],
                          schedules=[{**DAILY, "cron": "61 * * * *"}])
    result = doctor(config)
    assert result.returncode == 1
    (line,) = problems(result.stdout)
    assert "reportflow.toml" in line and "schedules[0].cron" in line
    assert not (tmp_path / "rf.db").exists()


@pytest.mark.postgres
def test_postgres_clock_skew_and_short_lease(pg_url: str, tmp_path: Path) -> None:
    config = write_config(tmp_path / "reportflow.toml", db_url=pg_url, sections={"worker": {"lease": "10s"}})
    result = doctor(config, now="2020-01-01T00:00:00Z")  # this process's clock, years behind the server's
    assert result.returncode == 1
    (line,) = problems(result.stdout)
    assert "off the database server's" in line and "NTP" in line
    assert "warning lease: worker.lease is 10s" in result.stdout


def echo_runs(url: str, count: int) -> list[int]:
    """``count`` SUCCESS runs of the echo workflow (revisions of one period), on real time."""
    rt = make_runtime(url, schedules=[dict(name="e", workflow="echo", project="p", cron="0 * * * *",
                                           timezone="UTC")], clock=SystemClock())
    definitions.apply(rt)
    worker = Worker(rt, "w1")
    ids = []
    for index in range(count):
        actions.trigger(rt, "e", force_new=index > 0)
        outcome = worker.run_one()
        assert outcome is not None and outcome.status is RunStatus.SUCCESS
        ids.append(outcome.run_id)
    worker.close()
    rt.store.dispose()
    return ids


def record_file(url: str, run_id: int, path: Path, content: bytes) -> None:
    from engine.store.handle import Store

    path.write_bytes(content)
    ref = ArtifactRef("markdown", f"{socket.gethostname()}:{path}", hashlib.sha256(content).hexdigest())
    store = Store.open(url, auto_migrate=False)
    with store.write() as conn:
        claims.record_artifacts(conn, run_id, "ECHO", [ref], SystemClock().now())
    store.dispose()


def test_deleted_and_edited_markdown_files(store_url: str, tmp_path: Path) -> None:
    deleted_run, edited_run, intact_run = echo_runs(store_url, 3)
    for run_id in (deleted_run, edited_run, intact_run):
        record_file(store_url, run_id, tmp_path / f"{run_id}.md", f"# report {run_id}\n".encode())
    (tmp_path / f"{deleted_run}.md").unlink()
    (tmp_path / f"{edited_run}.md").write_text("# edited by hand\n")
    config = write_config(tmp_path / "reportflow.toml", db_url=store_url,
                          schedules=[dict(name="e", workflow="echo", project="p", cron="0 * * * *",
                                          timezone="UTC")])
    result = doctor(config)
    assert result.returncode == 1, result.stdout + result.stderr
    found = problems(result.stdout)
    assert len(found) == 2, result.stdout
    missing, edited = sorted(found, key=lambda line: "missing" not in line)
    assert f"{tmp_path / f'{deleted_run}.md'} is missing" in missing
    assert f"`reportflow runs retry {deleted_run} --from-step ECHO`" in missing
    assert "sha256 differs" in edited and f"`reportflow runs retry {edited_run} --from-step ECHO`" in edited


def report_config(path: Path, url: str, notion: Mapping[str, Any], projects: Sequence[Mapping[str, Any]]) -> Path:
    return write_config(path, db_url=url, sections={"reports": {"dir": "reports"}, "notion": notion},
                        projects=projects, schedules=[DAILY])


def test_trashed_notion_page_and_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real daily_report run uploads to the fake Notion; its page is then trashed by hand."""
    url = f"sqlite:///{tmp_path / 'rf.db'}"
    with FakeNotion() as fake:
        notion = {"enabled": True, "token_env": "RF_TEST_NOTION_TOKEN", "database_id": fake.database_id,
                  "base_url": fake.url}
        projects = [{"key": "main", "repo": str(REPO_ROOT), "on_empty": "report"}]
        monkeypatch.setenv("RF_TEST_NOTION_TOKEN", fake.token)
        rt = make_runtime(url, schedules=[DAILY], clock=SystemClock(), base_dir=tmp_path,
                          extra={"reports": {"dir": "reports"}, "notion": notion, "projects": projects})
        definitions.apply(rt)
        heartbeat.beat(rt, "serve")  # a scheduler is running: the installation is healthy
        actions.trigger(rt, "main-daily")
        outcome = Worker(rt, "w1").run_one()
        assert outcome is not None and outcome.status is RunStatus.SUCCESS, outcome
        with rt.store.read() as conn:
            run = run_rows.get_run(conn, outcome.run_id)
        rt.store.dispose()
        (page,) = [a for a in run.artifacts if a.kind == "notion_page"]
        config = report_config(tmp_path / "reportflow.toml", url, notion, projects)
        env = {"RF_TEST_NOTION_TOKEN": fake.token}

        healthy = doctor(config, env=env)
        assert healthy.returncode == 0, healthy.stdout + healthy.stderr
        assert "1 of 1 stored page(s) checked, all live" in healthy.stdout
        assert "1 file(s) on this host match" in healthy.stdout

        fake.trash(str(page.external_id))
        result = doctor(config, env=env)
        assert result.returncode == 1
        (line,) = problems(result.stdout)
        assert "in the trash" in line and f"`reportflow runs retry {run.id} --from-step UPLOAD_NOTION`" in line
        assert fake.token not in result.stdout + result.stderr

        with fake.lock:  # someone renamed the key property in Notion
            fake.schema["Key"] = {**fake.schema.pop("Report Key"), "name": "Key"}
        renamed = doctor(config, env=env)
        assert any("needs a text property named 'Report Key' (found none)" in line
                   for line in problems(renamed.stdout)), renamed.stdout

        fake.token = "another-token"  # the integration's token was rotated: the old one is refused
        refused = doctor(config, env=env)
        (line,) = problems(refused.stdout)
        assert "refused the token" in line and env["RF_TEST_NOTION_TOKEN"] not in refused.stdout


def test_doctor_says_never_ticked_until_something_ticks(tmp_path: Path) -> None:
    config = write_config(tmp_path / "reportflow.toml", db_url=f"sqlite:///{tmp_path / 'rf.db'}",
                          schedules=[dict(name="e", workflow="echo", project="p", cron="0 * * * *", timezone="UTC")])
    assert run_cli("schedules", "apply", config=config, now="2026-09-29T09:00:00Z").returncode == 0
    before = doctor(config, now="2026-09-29T09:01:00Z")
    assert before.returncode == 1 and "PROBLEM scheduler: never ticked" in before.stdout
    assert "being ticked" not in before.stdout  # it never claims what it has not seen
    assert run_cli("tick", config=config, now="2026-09-29T09:02:00Z").returncode == 0
    after = doctor(config, now="2026-09-29T09:03:00Z")
    assert "never ticked" not in after.stdout and "ok scheduler: tick on " in after.stdout, after.stdout
    late = doctor(config, now="2026-09-29T10:00:00Z")
    assert "PROBLEM scheduler: tick on " in late.stdout and "58 min ago" in late.stdout
