"""The page's schedule draft (issue 36, item 2): a POST behind login and CSRF, limited per session,
under the model host's generation lock, within a deadline, echoing a cut answer.

It used to be ``GET /schedules?draft=TEXT``: no login, no CSRF (an ``<img>`` on any page the
operator visited could fire it), no limit, no deadline, no lock; 45 such requests against a slow
model left every page unanswered. The model is the loopback fake (``tests.fakes.fake_ollama``).
"""

from __future__ import annotations

import json
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.core.clock import ManualClock
from engine.plugins.contract import node_name
from engine.runtime import Runtime
from engine.web import routes
from engine.web.app import create_app
from tests.fakes.fake_ollama import FakeOllama
from tests.integration.test_web import NOW, TOKEN, csrf_of
from tests.support import make_runtime
from workflows import providers

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

SENTENCE = "every weekday at 18:30 New York time for web"


@pytest.fixture
def model() -> Iterator[FakeOllama]:
    with FakeOllama() as fake:
        yield fake


def site(url: str, tmp_path: Path, provider: str, host: str = "http://127.0.0.1:9") -> Runtime:
    extra = {"projects": [{"key": "web", "repo": str(tmp_path)}], "reports": {"dir": str(tmp_path / "reports")},
             "llm": {"provider": provider, "host": host, "timeout": "60s"}}
    return make_runtime(url, clock=ManualClock(NOW), extra=extra)


def logged_in(rt: Runtime) -> tuple[TestClient, str]:
    c = TestClient(create_app(rt, token=TOKEN), base_url="http://127.0.0.1:8321", follow_redirects=False)
    csrf = csrf_of(c.get("/login").text)
    assert c.post("/login", data={"token": TOKEN, "csrf_token": csrf}).status_code == 303
    return c, csrf_of(c.get("/schedules").text)


def test_a_get_no_longer_drafts_and_a_post_needs_a_login_and_the_csrf_token(sqlite_url: str, tmp_path: Path,
                                                                            model: FakeOllama) -> None:
    rt = site(sqlite_url, tmp_path, "ollama", model.url)
    anonymous = TestClient(create_app(rt, token=TOKEN), base_url="http://127.0.0.1:8321", follow_redirects=False)
    page = anonymous.get("/schedules", params={"draft": SENTENCE})  # what an <img src=...> on any page sends
    assert page.status_code == 200 and "data-draft" not in page.text
    assert model.requests_to("/api/chat") == []
    refused = anonymous.post("/schedules/draft", data={"draft": SENTENCE})
    assert refused.status_code == 403 and "log in first" in refused.text
    c, csrf = logged_in(rt)
    assert c.post("/schedules/draft", data={"draft": SENTENCE}).status_code == 403  # no CSRF token
    assert c.post("/schedules/draft", data={"draft": SENTENCE, "csrf_token": "forged"}).status_code == 403
    assert model.requests_to("/api/chat") == []
    model.replies([json.dumps({"name": "web-evening", "workflow": "daily_report", "project": "web",
                               "cron": "30 18 * * 1-5", "timezone": "America/New_York", "rationale": "weekdays"})])
    done = c.post("/schedules/draft", data={"draft": SENTENCE, "csrf_token": csrf})
    assert done.status_code == 200 and 'data-draft="valid"' in done.text, done.text
    assert len(model.requests_to("/api/chat")) == 1


def test_drafts_are_limited_per_session(sqlite_url: str, tmp_path: Path) -> None:
    rt = site(sqlite_url, tmp_path, "builtin")
    c, csrf = logged_in(rt)
    for _ in range(5):
        assert 'data-draft="valid"' in c.post("/schedules/draft", data={"draft": SENTENCE, "csrf_token": csrf}).text
    limited = c.post("/schedules/draft", data={"draft": SENTENCE, "csrf_token": csrf})
    assert limited.status_code == 429 and 1 <= int(limited.headers["retry-after"]) <= 60
    other, other_csrf = logged_in(rt)  # another session has its own allowance
    assert other.post("/schedules/draft", data={"draft": SENTENCE, "csrf_token": other_csrf}).status_code == 200


def test_a_draft_waits_for_no_generation_it_says_the_host_is_busy(sqlite_url: str, tmp_path: Path,
                                                                  model: FakeOllama) -> None:
    rt = site(sqlite_url, tmp_path, "ollama", model.url)
    c, csrf = logged_in(rt)
    # The pool a report's generation holds on that (local) host, as GENERATE_REPORT names it.
    with rt.store.slot(providers.pool_name(model.url, node_name()), 1):
        busy = c.post("/schedules/draft", data={"draft": SENTENCE, "csrf_token": csrf})
    assert busy.status_code == 200 and 'data-draft="error"' in busy.text
    assert "every generation slot of the host is taken" in busy.text
    assert model.requests_to("/api/chat") == []


def test_a_draft_takes_a_free_slot_of_the_host_and_is_refused_when_all_are_held(
        sqlite_url: str, tmp_path: Path, model: FakeOllama) -> None:
    rt = make_runtime(sqlite_url, clock=ManualClock(NOW), extra={
        "projects": [{"key": "web", "repo": str(tmp_path)}], "reports": {"dir": str(tmp_path / "reports")},
        "llm": {"provider": "ollama", "host": model.url, "timeout": "60s", "slots": 2}})
    c, csrf = logged_in(rt)
    pool = providers.pool_name(model.url, node_name())
    model.replies([json.dumps({"name": "web-evening", "workflow": "daily_report", "project": "web",
                               "cron": "30 18 * * 1-5", "timezone": "America/New_York", "rationale": "weekdays"})])
    with rt.store.slot(pool, 2):  # one report generating: the other slot is free
        done = c.post("/schedules/draft", data={"draft": SENTENCE, "csrf_token": csrf})
    assert 'data-draft="valid"' in done.text, done.text
    with rt.store.slot(pool, 2), rt.store.slot(pool, 2):  # two reports generating: none free
        busy = c.post("/schedules/draft", data={"draft": SENTENCE, "csrf_token": csrf})
    assert 'data-draft="error"' in busy.text and "[llm] slots = 2" in busy.text
    assert len(model.requests_to("/api/chat")) == 1


def test_a_slow_model_ends_the_draft_at_its_deadline(sqlite_url: str, tmp_path: Path, model: FakeOllama,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(routes, "DRAFT_DEADLINE_S", 2.0)
    rt = site(sqlite_url, tmp_path, "ollama", model.url)
    c, csrf = logged_in(rt)
    model.script("/api/chat", [(200, None, 60.0)])  # the model takes a minute
    answered = threading.Event()
    result: dict[str, str] = {}

    def post() -> None:
        result["text"] = c.post("/schedules/draft", data={"draft": SENTENCE, "csrf_token": csrf}).text
        answered.set()

    threading.Thread(target=post, daemon=True).start()
    assert answered.wait(30), "the draft did not end at its deadline"
    assert 'data-draft="error"' in result["text"] and "ollama at" in result["text"]


def test_a_huge_answer_is_cut_on_the_page(sqlite_url: str, tmp_path: Path, model: FakeOllama) -> None:
    rt = site(sqlite_url, tmp_path, "ollama", model.url)
    c, csrf = logged_in(rt)
    huge = "n" * 100_000
    model.replies([json.dumps({"name": huge, "workflow": "daily_report", "project": "web", "cron": "30 18 * * 1-5",
                               "timezone": "America/New_York", "rationale": "r" * 100_000})])
    page = c.post("/schedules/draft", data={"draft": SENTENCE, "csrf_token": csrf})
    assert page.status_code == 200 and 'data-draft="invalid"' in page.text
    assert huge not in page.text and "r" * 1000 not in page.text and len(page.text) < 60_000
    too_long = c.post("/schedules/draft", data={"draft": "x" * 5000, "csrf_token": csrf})
    assert "at most 500" in too_long.text and "x" * 600 not in too_long.text
