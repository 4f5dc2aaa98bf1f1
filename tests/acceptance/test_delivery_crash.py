"""A report is never delivered twice: a worker SIGKILLed between the send and its record (SPEC §6.1), on both databases.

Real ``reportflow`` processes. The loopback receiver (Apprise's ``json://`` target) holds the POST of the
report's short form, so the test kills the worker while the message is in the receiver's hands and
before the worker could record that it was taken. The receiver's record, not the engine's, is the
witness: after recovery the run says the delivery is unconfirmed, nothing is sent again by itself,
and an operator's ``runs resend`` sends it once more.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tests.acceptance import procs
from tests.fakes import webhook
from tests.fakes.gitrepo import make_repo
from tests.support import write_config

pytestmark = pytest.mark.slow
SEOUL = ZoneInfo("Asia/Seoul")
T0 = datetime(2026, 9, 30, 1, 0, tzinfo=UTC)
TOKEN = "s3cr3t-chat-token"


def ok(result: object) -> None:
    assert getattr(result, "returncode") == 0, (getattr(result, "stdout"), getattr(result, "stderr"))


def test_a_sigkill_between_the_send_and_its_record_never_sends_twice(store_url: str, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    repo.commit("feat: the work of the day", at=datetime(2026, 9, 29, 12, 0, tzinfo=SEOUL), files={"a.py": "a = 1\n"})
    config = write_config(
        tmp_path / "reportflow.toml", db_url=store_url,
        sections={"reports": {"dir": str(tmp_path / "reports")}, "llm": {"provider": "builtin"},
                  "worker": {"lease": "30s", "retry_backoff": "1s", "poll_interval": "0.2s"}},
        projects=[dict(key="platform", repo=str(repo.path), branches=["main"])],
        schedules=[dict(name="daily", workflow="daily_report", project="platform", cron="0 3 * * *",
                        timezone="Asia/Seoul")])
    config.write_text(config.read_text() + '\n[[deliveries]]\nproject = "platform"\nto_env = ["RF_CHAT"]\n')
    clock = procs.Shared(T0)
    ok(procs.run(tmp_path, config, "schedules", "apply", now=clock.at()))
    ok(procs.run(tmp_path, config, "trigger", "daily", "--date", "2026-09-29", now=clock.at()))
    with webhook.serve() as hook:
        env = {"RF_CHAT": hook.url.replace("http://", "json://") + f"/{TOKEN}"}
        hook.hold_next()
        worker = procs.spawn(tmp_path, config, "work", "--until-idle", now=clock.at(), env=env)
        assert hook.arrived.wait(120), procs.finish(worker, timeout=5)
        procs.kill9(worker)  # the message is in the receiver's hands; the worker never hears it was taken
        hook.release()
        # The lease expires; the reconciler queues a recovery; the next worker resumes at DELIVER.
        ok(procs.run(tmp_path, config, "reconcile", now=clock.at(200), env=env))
        ok(procs.run(tmp_path, config, "work", "--until-idle", now=clock.at(201), env=env))
        ok(procs.run(tmp_path, config, "reconcile", now=clock.at(300), env=env))
        ok(procs.run(tmp_path, config, "work", "--until-idle", now=clock.at(301), env=env))
        assert len(hook.received) == 1  # never twice
        listed = procs.run(tmp_path, config, "runs", "list", "--json", now=clock.at(302), env=env)
        ok(listed)
        (run,) = json.loads(listed.stdout)
        shown = procs.run(tmp_path, config, "runs", "show", str(run["id"]), "--json", now=clock.at(302), env=env)
        ok(shown)
        detail = json.loads(shown.stdout)
        assert (detail["status"], detail["error_code"]) == ("PARTIAL_SUCCESS", "DELIVERY_UNCONFIRMED")
        (delivery,) = detail["deliveries"]
        assert (delivery["target"], delivery["state"]) == ("RF_CHAT", "UNCONFIRMED")
        assert delivery["resend"] == f"reportflow runs resend {run['id']} --target RF_CHAT"
        table = procs.run(tmp_path, config, "runs", "show", str(run["id"]), now=clock.at(302), env=env)
        ok(table)
        assert "UNCONFIRMED" in table.stdout and "runs resend" in table.stdout
        # An operator who looked and did not find it sends it again, once.
        ok(procs.run(tmp_path, config, "runs", "resend", str(run["id"]), now=clock.at(303), env=env))
        ok(procs.run(tmp_path, config, "work", "--until-idle", now=clock.at(304), env=env))
        assert len(hook.received) == 2
        again = json.loads(procs.run(tmp_path, config, "runs", "show", str(run["id"]), "--json",
                                     now=clock.at(305), env=env).stdout)
        assert again["status"] == "SUCCESS" and again["deliveries"][0]["state"] == "SENT"
    # The URL (and its token) was never written where people or the database would find it.
    everything = json.dumps(detail) + table.stdout + json.dumps(again)
    assert TOKEN not in everything
    if store_url.startswith("sqlite"):
        assert TOKEN.encode() not in Path(store_url.removeprefix("sqlite:///")).read_bytes()
