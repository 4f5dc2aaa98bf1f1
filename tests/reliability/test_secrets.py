"""Secrets: a canary Notion token appears nowhere the product writes (SPEC §7, §10.7).

A full run with the token variable set to a canary FakeNotion accepts, then
failing runs with a second canary it refuses (401), ``doctor`` with each,
``runs show --json``, ``runs list --json``, ``metrics`` and the schedule views,
every command logging with ``--log-format json``. Afterwards neither canary
is in any command's stdout or stderr, the database file and its WAL (kept on
disk by a connection this test holds open), the reports, or the pages
FakeNotion stored. A database password given through ``REPORTFLOW_DB`` is
checked the same way.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.acceptance import procs
from tests.fakes.fake_notion import FakeNotion
from tests.fakes.fake_ollama import FakeOllama
from tests.reliability.harness import daily_history, daily_schedule, report_config
from tests.support import utc

pytestmark = pytest.mark.slow

TOKEN_ENV = "RF_SECRETS_NOTION_TOKEN"
CANARY = "secret_CANARY7f3a9c2e5b1d"  # accepted by FakeNotion
WRONG = "secret_WRONGCANARY4d8e2a90"  # refused: 401
NOW = "2026-03-05T12:00:00Z"
TEN_MINUTES_LATER = "2026-03-05T12:10:00Z"


class Transcript:
    """Every command run, with what it printed."""

    def __init__(self, tmp: Path, config: Path) -> None:
        self.tmp, self.config = tmp, config
        self.outputs: list[tuple[str, str]] = []

    def run(self, *args: str, token: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        result = procs.run(self.tmp, self.config, "--log-format", "json", *args, now=NOW,
                           env={TOKEN_ENV: token})
        self.outputs.append((" ".join(args), result.stdout + result.stderr))
        if ok:
            assert result.returncode == 0, f"{args}: exit {result.returncode}\n{result.stderr[-2000:]}"
        return result


def test_the_notion_token_appears_nowhere(tmp_path: Path) -> None:
    repo = daily_history(tmp_path, utc(2026, 3, 1), 4)
    with FakeOllama() as ollama, FakeNotion(token=CANARY) as notion:
        config = report_config(
            tmp_path, db_url="sqlite:///rf.db", repo=repo.path, project="secrets",
            schedules=[daily_schedule("secrets-daily", "secrets")], worker={"max_attempts": 1},
            llm={"provider": "ollama", "host": ollama.url},
            notion={"enabled": True, "token_env": TOKEN_ENV, "database_id": notion.database_id,
                    "base_url": notion.url})
        log = Transcript(tmp_path, config)
        result = procs.run(tmp_path, config, "--log-format", "json", "schedules", "apply",
                           now="2026-03-02T00:00:00Z", env={TOKEN_ENV: CANARY})
        assert result.returncode == 0, result.stderr
        log.outputs.append(("schedules apply", result.stdout + result.stderr))
        keeper = sqlite3.connect(tmp_path / "rf.db")  # an open connection keeps the WAL file on disk
        try:
            keeper.execute("SELECT count(*) FROM runs").fetchone()
            log.run("tick", token=CANARY)
            log.run("work", "--until-idle", token=CANARY)
            runs = json.loads(log.run("runs", "list", "--json", token=CANARY).stdout)
            assert {r["status"] for r in runs} == {"SUCCESS"} and len(runs) == 4, runs
            assert len(notion.live_pages()) == 4
            # Failing runs: the second canary is refused.
            log.run("trigger", "secrets-daily", "--date", "2026-03-01", "--force-new", token=WRONG)
            log.run("runs", "retry", str(runs[0]["id"]), "--from-step", "UPLOAD_NOTION", token=WRONG)
            log.run("work", "--until-idle", token=WRONG)
            after = json.loads(log.run("runs", "list", "--json", token=WRONG).stdout)
            failed = [r for r in after if r["status"] == "PARTIAL_SUCCESS"]
            assert len(failed) == 2 and {r["error_code"] for r in failed} == {"NOTION_UNAUTHORIZED"}, after
            for run in (failed[0], next(r for r in after if r["status"] == "SUCCESS")):  # each shape once
                log.run("runs", "show", str(run["id"]), "--json", token=WRONG)
                log.run("runs", "show", str(run["id"]), token=CANARY)
            log.run("runs", "list", token=CANARY)
            log.run("metrics", token=WRONG)
            for token in (CANARY, WRONG):
                log.run("doctor", token=token, ok=False)
                log.run("doctor", "--json", token=token, ok=False)
            for args in (("schedules", "list", "--json"), ("schedules", "show", "secrets-daily", "--json"),
                         ("schedules", "history", "secrets-daily", "--json"), ("reconcile", "--json")):
                log.run(*args, token=WRONG)
            stored = [tmp_path / name for name in ("rf.db", "rf.db-wal", "rf.db-shm")]
            assert stored[1].exists(), "the WAL file should still be there to be read"
            blobs = {str(path): path.read_bytes() for path in stored if path.exists()}
        finally:
            keeper.close()
        with notion.lock:
            pages = json.dumps([notion.pages, notion.blocks])
    reports = {str(p): p.read_bytes() for p in (tmp_path / "reports").rglob("*") if p.is_file()}
    assert len(reports) == 5  # four reports and the revision the refused run saved
    for secret in (CANARY, WRONG):
        leaks = [name for name, text in log.outputs if secret in text]
        leaks += [name for name, data in {**blobs, **reports}.items() if secret.encode() in data]
        leaks += ["FakeNotion pages"] if secret in pages else []
        assert not leaks, f"{secret} found in: {leaks}"
    print(f"\nsecrets: {len(log.outputs)} commands, {len(blobs)} database files "
          f"({sum(len(b) for b in blobs.values())} bytes), {len(reports)} reports: no canary anywhere")


def test_a_database_password_is_never_printed(tmp_path: Path, pg_url: str) -> None:
    """Regression for a bug this suite found (fixed in a952ff5): a password in the database URL was printed.

    ``init`` said ``database ready at postgresql+psycopg://user:PASSWORD@host/db``
    and an unsupported URL was echoed whole (``store url 'mysql://user:PASSWORD@…'``).
    """
    password = "PWCANARY5e6f7a8b"
    user, rest = pg_url.split("://", 1)[1].split("@", 1)
    with_password = f"postgresql+psycopg://{user}:{password}@{rest}"
    outputs = []
    for db_url, args in ((with_password, ("init", "--repo", str(tmp_path))),
                         (with_password, ("doctor",)),
                         (f"mysql://root:{password}@localhost/reports", ("tick",))):
        result = procs.run(tmp_path, tmp_path / "reportflow.toml", *args, env={"REPORTFLOW_DB": db_url})
        outputs.append((" ".join(args), result.stdout + result.stderr))
    leaks = [name for name, text in outputs if password in text]
    assert not leaks, f"the database password is printed by: {leaks}"


URL_CANARIES = {"llm": "LLMPWCANARY91a2", "notion": "NOTIONPWCANARY83b4", "hook": "HOOKPWCANARY75c6",
                "store": "STOREPWCANARY67d8"}


def test_passwords_in_urls_appear_nowhere(tmp_path: Path, pg_url: str) -> None:
    """Canary passwords in ``[llm] host``, ``[notion] base_url``, the webhook URL and the store URL,
    through the flows that fail on them: Ollama unreachable, Notion unreachable, the webhook down,
    then ``runs show``, ``runs list``, ``doctor``. No canary in any output, database row, log or report."""
    from tests.fakes.fake_ollama import closed_port

    repo = daily_history(tmp_path, utc(2026, 3, 1), 2)
    # Without a scheme, as the Ollama client accepts it: its password is masked all the same (issue 36, item 13).
    llm_host = f"rf:{URL_CANARIES['llm']}@127.0.0.1:{closed_port()}"
    notion_url = f"http://rf:{URL_CANARIES['notion']}@127.0.0.1:{closed_port()}/"
    hook = f"http://rf:{URL_CANARIES['hook']}@127.0.0.1:{closed_port()}/alerts"
    user, rest = pg_url.split("://", 1)[1].split("@", 1)
    store = f"postgresql+psycopg://{user.split(':')[0]}:{URL_CANARIES['store']}@{rest}"  # trust auth ignores it
    env = {TOKEN_ENV: CANARY, "RF_SECRETS_HOOK": hook}
    outputs: list[tuple[str, str]] = []

    def configure(provider: str) -> Path:
        config = report_config(
            tmp_path, db_url="sqlite:///rf.db", repo=repo.path, project="secrets",
            schedules=[daily_schedule("secrets-daily", "secrets")], worker={"max_attempts": 1},
            llm={"provider": provider, "host": llm_host, "retry_budget": "1s", "timeout": "2s"},
            notion={"enabled": True, "token_env": TOKEN_ENV, "database_id": "0123456789abcdef0123456789abcdef",
                    "base_url": notion_url, "retry_budget": "1s", "timeout": "2s"})
        config.write_text(config.read_text() + '\n[notify]\nwebhook_env = "RF_SECRETS_HOOK"\n')
        return config

    def run(config: Path, *args: str, db: str | None = None) -> subprocess.CompletedProcess[str]:
        extra = ("--db", db) if db else ()
        result = procs.run(tmp_path, config, *extra, "--log-format", "text", *args, now=NOW, env=env)
        outputs.append((" ".join(args), result.stdout + result.stderr))
        return result

    config = configure("ollama")
    assert run(config, "schedules", "apply").returncode == 0
    run(config, "trigger", "secrets-daily", "--date", "2026-03-02")
    run(config, "work", "--until-idle")  # Ollama unreachable: FAILED, the webhook down too
    config = configure("builtin")
    run(config, "trigger", "secrets-daily", "--date", "2026-03-01", "--force-new")
    run(config, "work", "--until-idle")  # Notion unreachable: PARTIAL_SUCCESS
    runs = json.loads(run(config, "runs", "list", "--json").stdout)
    codes = {r["error_code"] for r in runs}
    assert {"MODEL_UNAVAILABLE", "NOTION_UNAVAILABLE"} <= codes, runs
    for found in runs:
        run(config, "runs", "show", str(found["id"]), "--json")
        run(config, "runs", "show", str(found["id"]))
    config = configure("ollama")
    # Ten minutes on, the failed runs wait for their providers: a cycle probes Ollama and Notion (through the URLs
    # with canaries), records their health and audits it.
    probed = procs.run(tmp_path, config, "--log-format", "text", "cycle", now=TEN_MINUTES_LATER, env=env)
    outputs.append(("cycle", probed.stdout + probed.stderr))
    assert probed.stdout.count("does not answer") == 2, probed.stdout + probed.stderr
    run(config, "runs", "list")  # says what each run waits for
    run(config, "doctor")
    run(config, "doctor", "--json")
    # The store URL's password, on PostgreSQL: a whole flow against it.
    assert run(config, "db", "upgrade", db=store).returncode == 0, outputs[-1]
    for args in (("schedules", "apply"), ("tick",), ("work", "--until-idle"), ("runs", "list", "--json"),
                 ("doctor",), ("reconcile", "--json")):
        run(config, *args, db=store)
    files = {str(p): p.read_bytes() for p in tmp_path.rglob("*")  # every file but the config that holds them
             if p.is_file() and ".git" not in p.parts and p.name != "reportflow.toml"}
    import sqlalchemy

    engine = sqlalchemy.create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://", 1)
                                      if pg_url.startswith("postgresql://") else pg_url)
    try:
        with engine.connect() as conn:
            names = [r[0] for r in conn.execute(sqlalchemy.text(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"))]
            rows = json.dumps([[str(v) for v in row] for name in names
                               for row in conn.execute(sqlalchemy.text(f'SELECT * FROM "{name}"'))])
    finally:
        engine.dispose()
    for what, secret in URL_CANARIES.items():
        leaks = [name for name, text in outputs if secret in text]
        leaks += [name for name, data in files.items() if secret.encode() in data]
        leaks += ["postgresql rows"] if secret in rows else []
        assert not leaks, f"the {what} password was found in: {leaks}"
    assert any("rf:***@" in text for _, text in outputs), "the URLs are shown, masked"
