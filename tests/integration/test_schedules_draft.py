"""`reportflow schedules draft` through the real CLI (SPEC §16.2): the builtin grammar and the
fake model's structured answers, validated like the file, previewed, appended only when asked."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from steps import schedule_model
from tests.fakes.fake_ollama import FakeOllama
from tests.support import run_cli

pytestmark = pytest.mark.slow  # real CLI processes: in the full suite, not in --fast

NOW = "2026-03-05T00:00:00Z"  # before the US moves its clocks (2026-03-08)
BASE = """[store]
url = "sqlite:///{db}"

[llm]
provider = "{provider}"
host = "{host}"

[[projects]]
key = "web"
repo = "."

[[projects]]
key = "api"
repo = "."

[[schedules]]
name = "web-daily"
workflow = "daily_report"
project = "web"
cron = "0 19 * * *"
timezone = "Asia/Seoul"

[[schedules]]
name = "echo-tick"
workflow = "echo"
project = "web"
cron = "0 9 * * *"
timezone = "UTC"
"""


@pytest.fixture
def model() -> Iterator[FakeOllama]:
    with FakeOllama() as fake:
        yield fake


def config(tmp_path: Path, provider: str = "builtin", host: str = "http://127.0.0.1:9") -> Path:
    path = tmp_path / "reportflow.toml"
    path.write_text(BASE.format(db=tmp_path / "state.db", provider=provider, host=host))
    return path


def draft(path: Path, *args: str, stdin: str | None = None) -> Any:
    if stdin is None:
        return run_cli("schedules", "draft", *args, config=path, now=NOW)
    import subprocess

    from tests.support import CLI, REPO_ROOT
    env = {"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"}
    return subprocess.run([*CLI, "--config", str(path), "--now", NOW, "schedules", "draft", *args],
                          input=stdin, capture_output=True, text=True, env=env, timeout=120)


def test_builtin_draft_previews_and_writes_nothing(tmp_path: Path) -> None:
    path = config(tmp_path)
    before = path.read_bytes()
    shown = draft(path, "every weekday at 18:30 New York time, daily report for api", "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["valid"] and data["errors"] == []
    assert data["draft"] == {"name": "api-daily", "workflow": "daily_report", "project": "api",
                             "cron": "30 18 * * 1-5", "timezone": "America/New_York",
                             # Lossless: Monday's report runs from Friday 18:30, commits placed by landing.
                             "report_on": "interval", "attribution": "landed"}
    assert data["runs_per_day"] == pytest.approx(5 / 7, abs=0.01)
    assert [p["local"] for p in data["preview"]][:3] == [
        "2026-03-05T18:30:00-05:00", "2026-03-06T18:30:00-05:00", "2026-03-09T18:30:00-04:00"]
    assert [p["utc"] for p in data["preview"]][2] == "2026-03-09T22:30:00Z"  # the offset moved
    assert tomllib.loads(data["toml"])["schedules"] == [data["draft"]]
    text = draft(path, "every weekday at 18:30 New York time, daily report for api")
    assert "30 18 * * 1-5" in text.stdout and "[[schedules]]" in text.stdout
    assert path.read_bytes() == before and not (tmp_path / "state.db").exists()


def test_write_appends_once_then_the_name_exists(tmp_path: Path) -> None:
    path = config(tmp_path)
    before = path.read_bytes()
    wrote = draft(path, "매주 월요일 오전 9시 api 주간 보고", "--write", "--yes")
    assert wrote.returncode == 0, wrote.stderr
    after = path.read_bytes()
    assert after.startswith(before)
    added = tomllib.loads(after.decode())["schedules"][-1]
    assert added == {"name": "api-weekly", "workflow": "weekly_report", "project": "api",
                     "cron": "0 9 * * 1", "timezone": "Asia/Seoul", "report_on": "interval",
                     "attribution": "landed"}
    named = draft(path, "매주 월요일 오전 9시 api 주간 보고", "--name", "api-weekly", "--write", "--yes")
    assert named.returncode == 3 and "already in" in named.stderr  # a name given is the operator's: never renamed
    assert path.read_bytes() == after and not (tmp_path / "state.db").exists()
    again = draft(path, "매주 월요일 오전 9시 api 주간 보고", "--write", "--yes")  # named api-weekly-2: the same report
    assert again.returncode == 2 and "'api-weekly' already runs weekly_report for project 'api'" in again.stderr
    assert path.read_bytes() == after


def test_name_and_the_configs_timezone_and_a_model_answer_with_a_window(tmp_path: Path, model: FakeOllama) -> None:
    path = config(tmp_path)
    named = draft(path, "every Friday at 17:00, weekly report for api", "--name", "api-friday", "--json")
    data = json.loads(named.stdout)
    assert data["valid"] and data["draft"]["name"] == "api-friday"
    assert data["draft"]["report_on"] == "interval"  # the week up to this Friday, not the week before last
    one_zone = tmp_path / "one" / "reportflow.toml"
    one_zone.parent.mkdir()
    one_zone.write_text(path.read_text().replace('timezone = "UTC"', 'timezone = "Asia/Seoul"'))
    read = json.loads(draft(one_zone, "every day at 07:00 for api", "--json").stdout)
    assert read["draft"]["timezone"] == "Asia/Seoul"  # the sentence names none: the config's
    (tmp_path / "m").mkdir()
    by_model = config(tmp_path / "m", "ollama", model.url)
    model.replies([model_answer(report_on="previous", misfire="RUN_ONCE")])
    answered = json.loads(draft(by_model, "daily at six in the evening for api", "--json").stdout)
    assert answered["valid"], answered["errors"]
    assert (answered["draft"]["report_on"], answered["draft"]["misfire"], answered["draft"]["attribution"]) == (
        "previous", "RUN_ONCE", "landed")


def test_an_unconfirmed_write_and_an_invalid_draft_write_nothing(tmp_path: Path) -> None:
    path = config(tmp_path)
    before = path.read_bytes()
    declined = draft(path, "every day at 07:00 for api", "--write", stdin="n\n")
    assert declined.returncode == 1 and path.read_bytes() == before
    # A weekly report on every weekday: five slots a week, refused by the file's validator.
    invalid = draft(path, "every weekday at 07:00, weekly report for api", "--write", "--yes")
    assert invalid.returncode == 2
    assert "schedules[2].cron: fires 5 times" in invalid.stderr and "one slot per ISO week" in invalid.stderr
    assert path.read_bytes() == before
    unknown = draft(path, "twice a fortnight for api")
    assert unknown.returncode == 2 and "needs a model" in unknown.stderr


def model_answer(**fields: Any) -> str:
    entry = {"name": "api-daily", "workflow": "daily_report", "project": "api",
             "cron": "0 18 * * *", "timezone": "Asia/Seoul", "rationale": "every day at 18:00"}
    return json.dumps({**entry, **fields})


def test_a_model_draft_asks_for_the_schema_and_a_bad_cron_is_refused(tmp_path: Path,
                                                                     model: FakeOllama) -> None:
    path = config(tmp_path, "ollama", model.url)
    before = path.read_bytes()
    model.replies([model_answer(cron="61 18 * * *")])
    shown = draft(path, "daily at six in the evening for api", "--write", "--yes")
    assert shown.returncode == 2, shown.stdout
    assert "schedules[2].cron" in shown.stderr and "61" in shown.stderr
    assert model.formats == [schedule_model.schema()]
    assert model.formats[0]["required"] == ["name", "workflow", "project", "cron", "timezone",
                                            "rationale"]
    assert path.read_bytes() == before


def test_a_model_draft_naming_an_unknown_workflow_is_refused(tmp_path: Path,
                                                            model: FakeOllama) -> None:
    path = config(tmp_path, "ollama", model.url)
    model.replies([model_answer(workflow="yearly_report")])
    shown = draft(path, "a monthly report for api", "--json")
    assert shown.returncode == 2
    data = json.loads(shown.stdout)
    assert not data["valid"] and "unknown workflow 'yearly_report'" in data["errors"][0]
    assert data["rationale"] == "every day at 18:00"


def test_a_model_draft_with_a_tenfold_rise_shows_the_risk(tmp_path: Path, model: FakeOllama) -> None:
    path = config(tmp_path, "ollama", model.url)
    before = path.read_bytes()
    rise = model_answer(name="echo-tick", workflow="echo", project="web", cron="0 * * * *",
                        timezone="UTC", rationale="hourly")
    model.replies([rise, rise])
    drafted = json.loads(draft(path, "echo every hour", "--json").stdout)
    assert drafted["draft"]["name"] == "echo-tick-2" and not drafted["exists"]  # the model's name was taken
    model.replies([rise, rise])
    shown = draft(path, "echo every hour", "--name", "echo-tick", "--json")  # named: it replaces echo-tick
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["valid"] and data["exists"] and data["runs_per_day"] == 24
    assert data["risk"] == ("high risk: schedule 'echo-tick' goes from 1.0 to 24.0 runs/day "
                            "('0 * * * *'); confirm with --yes")
    refused = draft(path, "echo every hour", "--name", "echo-tick", "--write", "--yes")
    assert refused.returncode == 3 and "high risk" in refused.stderr
    assert path.read_bytes() == before


def test_the_schedules_page_drafts_with_the_same_validation(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from engine.core.clock import ManualClock
    from engine.plugins import workflow_registry
    from engine.runtime import Runtime
    from engine.store.handle import Store
    from engine.web.app import create_app

    path = config(tmp_path)
    before = path.read_bytes()
    cfg, registry = workflow_registry.load_with_config(path)
    from datetime import UTC, datetime
    rt = Runtime(store=Store.open(cfg.store_url, auto_migrate=True), registry=registry, config=cfg,
                 clock=ManualClock(datetime(2026, 3, 5, tzinfo=UTC)))
    from tests.integration.test_web import TOKEN, csrf_of

    web = TestClient(create_app(rt, token=TOKEN), base_url="http://127.0.0.1", follow_redirects=False)
    login = csrf_of(web.get("/login").text)
    assert web.post("/login", data={"token": TOKEN, "csrf_token": login}).status_code == 303
    csrf = csrf_of(web.get("/schedules").text)

    def draft_on_page(text: str) -> Any:
        return web.post("/schedules/draft", data={"draft": text, "csrf_token": csrf})

    ok = draft_on_page("every weekday at 18:30 New York time for api")
    assert ok.status_code == 200 and 'data-draft="valid"' in ok.text
    assert "0.71 runs/day" in ok.text and "Mon 2026-03-09 18:30 -0400" in ok.text
    assert 'cron = &#34;30 18 * * 1-5&#34;' in ok.text
    bad = draft_on_page("every weekday at 07:00, weekly report for api")
    assert 'data-draft="invalid"' in bad.text and "one slot per ISO week" in bad.text
    unread = draft_on_page("now and then")
    assert 'data-draft="error"' in unread.text and "needs a model" in unread.text
    assert path.read_bytes() == before


def test_a_symlink_at_the_temporary_name_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    from engine.operations import drafts

    path = config(tmp_path)
    before = path.read_bytes()
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("keep")
    drafts.temporary_path(path).symlink_to(elsewhere)
    refused = draft(path, "every day at 07:00 for api", "--write", "--yes")
    assert refused.returncode == 1 and "the file is unchanged" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    assert path.read_bytes() == before and elsewhere.read_text() == "keep"
    assert drafts.temporary_path(path).is_symlink()  # what was planted is left for its owner to look at


def test_write_through_a_symlinked_config_writes_the_real_file_and_keeps_the_link(tmp_path: Path) -> None:
    """Issue 36, item 9: the rename used to replace the symlink with a plain file; the real config never
    got the schedule (and the next edit of the real file was silently ignored)."""
    real_dir = tmp_path / "etc-reportflow"
    real_dir.mkdir()
    real = config(real_dir)
    link = tmp_path / "reportflow.toml"
    link.symlink_to(real)
    written = draft(link, "every day at 07:00 for api", "--write", "--yes")
    assert written.returncode == 0, written.stderr
    assert link.is_symlink() and link.resolve() == real.resolve()
    names = [s["name"] for s in tomllib.loads(real.read_text())["schedules"]]
    assert len(names) == 3 and names[-1] not in ("web-daily", "echo-tick")
    assert not list(real_dir.glob(".*.draft")) and not list(tmp_path.glob(".*.draft"))


# -- issue 36, item 14: the model's draft printed as data, bounded ------------------------------------------

def test_a_huge_value_in_the_models_draft_is_quoted_clipped(tmp_path: Path, model: FakeOllama) -> None:
    """A 4 MB name was printed whole, twice (8.4 MB); now 200 characters of it, and its length."""
    path = config(tmp_path, "ollama", model.url)
    model.replies([model_answer(name="n" * 200_000)])
    shown = draft(path, "daily at six in the evening for api")
    assert shown.returncode == 2
    assert len(shown.stdout) + len(shown.stderr) < 3000, (len(shown.stdout), len(shown.stderr))
    assert f"name: '{'n' * 199}…' (200,000 characters): longer than a schedule's name may be" in shown.stderr


def test_an_answer_larger_than_the_bound_is_refused_unread_in_one_line(tmp_path: Path, model: FakeOllama) -> None:
    path = config(tmp_path, "ollama", model.url)
    model.replies(["{" + "x" * 5_000_000])
    shown = draft(path, "daily at six in the evening for api")
    assert shown.returncode == 2 and "Traceback" not in shown.stderr
    assert shown.stderr.count("\n") == 1 and "larger than 256 KB and was not read" in shown.stderr
    assert len(shown.stdout) + len(shown.stderr) < 500


def test_the_models_rationale_is_printed_as_data(tmp_path: Path, model: FakeOllama) -> None:
    path = config(tmp_path, "ollama", model.url)
    model.replies([model_answer(rationale="\x1b]0;PWNED\x07 [bold]loud[/] :ghost: \u202eevil\nsecond line")])
    shown = draft(path, "daily at six in the evening for api")
    assert shown.returncode == 0, shown.stderr
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", shown.stdout)
    assert "]0;PWNED [bold]loud[/] :ghost: evil second line" in shown.stdout


def test_a_model_draft_says_what_its_month_asks_of_the_model_and_never_creates_the_database(
        tmp_path: Path, model: FakeOllama) -> None:
    path = config(tmp_path, "ollama", model.url)
    model.replies([model_answer()])
    before = json.loads(draft(path, "daily at six in the evening for api", "--json").stdout)
    assert before["valid"] and before["runs_per_month"] == 31 and before["model_time"] == []
    assert not (tmp_path / "state.db").exists()  # nothing recorded to estimate from, and nothing created
    assert run_cli("schedules", "apply", config=path, now=NOW).returncode == 0
    model.replies([model_answer()])
    after = draft(path, "daily at six in the evening for api")
    assert after.returncode == 0, after.stderr
    assert f"api-daily: ollama at {model.url}: model time: no generation recorded yet" in after.stdout
