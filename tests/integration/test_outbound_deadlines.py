"""Outbound HTTP ends within an overall deadline, and every failure is a counted attempt (issue 36, items 3, 6, 7, 16).

The receivers are real loopback sockets in threads (``tests.fakes.bad_http``, ``tests.fakes.webhook``):
one that sends one header byte every half second (under any per-read timeout), one that answers a
garbage status line, one with 150 headers, one that never answers. The clients are the real ones:
httpx through ``engine.core.http_deadline`` for the webhook, the official ``ollama.Client`` and
``notion_client.Client``, and Apprise.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import httpx
import ollama
import pytest

from engine.alert_transports import AlertTransports
from engine.core.clock import REAL, ManualClock
from engine.execution.pool import WorkerPool
from engine.operations import outbox_sender
from engine.scheduling import definitions, tick
from engine.store import outbox
from tests.fakes import bad_http, webhook
from tests.flows.testflows import FOUR_STEPS
from tests.support import make_runtime

T0 = datetime(2026, 9, 29, 9, 0, tzinfo=UTC)
T = TypeVar("T")


def finishes_within(seconds: float, fn: Callable[[], T]) -> tuple[T, float]:
    """``fn()`` in a thread; its result and how long it took, or a failure if it has not returned in ``seconds``."""
    result: list[T] = []
    done = threading.Event()

    def run() -> None:
        result.append(fn())
        done.set()

    started = REAL.monotonic()
    threading.Thread(target=run, daemon=True).start()
    assert done.wait(seconds), f"still running after {seconds}s"
    return result[0], REAL.monotonic() - started


def failed_run(url: str, tmp: Path, notify: dict[str, str]) -> Any:
    """A runtime with one run_failed alert pending."""
    spec = dict(name="four", workflow="four_steps", project="p1", cron="0 * * * *", timezone="UTC",
                misfire="CATCH_UP_ALL", overlap="ALLOW")
    rt = make_runtime(url, schedules=[spec], clock=ManualClock(T0), registry={"four_steps": FOUR_STEPS},
                      extra={"notify": notify, "worker": {"max_attempts": 1},
                             "testflow": {"log": str(tmp / "log"), "fail": {"ONE": 9},
                                          "fail_code": "NOTION_UNAUTHORIZED"}})
    definitions.apply(rt)
    rt.clock.set(T0 + timedelta(hours=1, minutes=1))
    tick.tick(rt)
    assert [o.status.value for o in WorkerPool(rt, "w", concurrency=1).work(until_idle=True)] == ["FAILED"]
    return rt


def pending(rt: Any) -> list[Any]:
    with rt.store.read() as conn:
        return outbox.list_events(conn, pending_only=True)


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> Callable[[Any], None]:
    """Give a runtime transports with a 2 s deadline (the product's is 10 s), so the tests stay short."""
    def apply(rt: Any) -> None:
        notify = rt.config.notify
        rt.__dict__["transports"] = AlertTransports(notify.webhook_env, notify.apprise_env, timeout_s=5.0,
                                                    webhook_deadline_s=2.0, apprise_deadline_s=2.0)
    return apply


def test_a_webhook_that_drips_its_answer_ends_at_the_deadline_as_a_failed_attempt(
        sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, quick: Callable[[Any], None]) -> None:
    with bad_http.serve("drip", every_s=0.5) as slow:
        monkeypatch.setenv("RF_HOOK", slow.url)
        rt = failed_run(sqlite_url, tmp_path, {"webhook_env": "RF_HOOK"})
        quick(rt)
        report, took = finishes_within(60, lambda: outbox_sender.deliver_pending(rt))
    assert slow.requests and took < 10, took  # the per-read timeout (5 s) never tripped: the deadline did
    assert report.delivered == [] and len(report.failed) == 1 and report.error is None
    [event] = pending(rt)
    assert event.attempts == 1 and "ReadTimeout" in (event.last_error or "")
    assert event.next_try_at is not None and event.next_try_at > rt.clock.now()
    assert rt.transports.failures.labels(event="run_failed")._value.get() == 1


@pytest.mark.parametrize("mode", ["garbage", "headers"])
def test_a_protocol_error_is_a_failed_attempt_with_backoff(sqlite_url: str, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """A garbage status line escaped the sender's accounting: no attempt, no backoff, no failure counted."""
    with bad_http.serve(mode) as bad:
        monkeypatch.setenv("RF_HOOK", bad.url)
        rt = failed_run(sqlite_url, tmp_path, {"webhook_env": "RF_HOOK"})
        report = outbox_sender.deliver_pending(rt)
    assert bad.requests and report.error is None
    if mode == "headers":  # 150 headers is odd, not wrong: httpx reads them, the 200 delivers
        assert len(report.delivered) == 1 and pending(rt) == []
        return
    [event] = pending(rt)
    assert len(report.failed) == 1 and event.attempts == 1 and "ProtocolError" in (event.last_error or "")
    assert event.next_try_at is not None and event.next_try_at > rt.clock.now()


def test_a_webhook_url_with_a_password_is_delivered_with_basic_auth(sqlite_url: str, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """urllib has no userinfo support: such a webhook was never delivered (only counted as failed)."""
    with webhook.serve() as hook:
        monkeypatch.setenv("RF_HOOK", hook.url.replace("http://", "http://alerts:pa55-w0rd@"))
        rt = failed_run(sqlite_url, tmp_path, {"webhook_env": "RF_HOOK"})
        report = outbox_sender.deliver_pending(rt)
    assert len(report.delivered) == 1, report
    [received] = hook.received
    assert received.headers["authorization"] == "Basic " + base64.b64encode(b"alerts:pa55-w0rd").decode()
    assert received.body["event"] == "run_failed"
    assert "pa55-w0rd" not in caplog.text


class Redirecting:
    """``/hook`` answers ``status`` with Location ``/elsewhere``; every request is recorded."""

    def __init__(self, status: int) -> None:
        self.seen: list[tuple[str, str, bytes]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
                server.seen.append((self.command, self.path, body))
                if self.path.startswith("/hook"):
                    self.send_response(status)
                    self.send_header("Location", "/elsewhere")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = _any  # noqa: N815 - the http.server API

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.url = f"json://127.0.0.1:{self.http.server_address[1]}/hook"


@pytest.mark.parametrize("status", [302, 307])
def test_apprise_follows_no_redirect(sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     status: int) -> None:
    """A 302 was recorded as delivered when only an empty GET reached the target; a 307 sent the body there."""
    target = Redirecting(status)
    try:
        monkeypatch.setenv("RF_APPRISE", target.url)
        rt = failed_run(sqlite_url, tmp_path, {"apprise_env": "RF_APPRISE"})
        report = outbox_sender.deliver_pending(rt)
    finally:
        target.http.shutdown()
        target.http.server_close()
    assert report.delivered == [] and len(report.failed) == 1
    assert [(method, path) for method, path, _ in target.seen] == [("POST", "/hook")]
    [event] = pending(rt)
    assert event.attempts == 1


def test_a_silent_apprise_target_ends_at_the_deadline(sqlite_url: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      quick: Callable[[Any], None]) -> None:
    with bad_http.serve("drip", every_s=0.5) as slow:
        monkeypatch.setenv("RF_APPRISE", slow.url.replace("http://", "json://"))
        rt = failed_run(sqlite_url, tmp_path, {"apprise_env": "RF_APPRISE"})
        quick(rt)
        report, took = finishes_within(60, lambda: outbox_sender.deliver_pending(rt))
    assert slow.requests and took < 10, took
    assert len(report.failed) == 1 and "within" in (pending(rt)[0].last_error or "")


@pytest.fixture
def drip() -> Iterator[bad_http.BadServer]:
    with bad_http.serve("drip", every_s=0.5) as slow:
        yield slow


def test_the_ollama_client_ends_at_the_deadline(drip: bad_http.BadServer) -> None:
    from engine.core import http_deadline

    def ask() -> str:
        try:
            with ollama.Client(host=drip.url.removesuffix("/hook"), timeout=5.0,
                               transport=http_deadline.DeadlineTransport(2.0, max_bytes=1 << 20)) as client:
                client.list()
        except httpx.TimeoutException as exc:
            return type(exc).__name__
        return "answered"

    outcome, took = finishes_within(60, ask)
    assert outcome == "ReadTimeout" and took < 10, (outcome, took)


def test_the_writer_and_the_notion_upload_end_at_their_deadlines(drip: bad_http.BadServer) -> None:
    """The report writer and the Notion client, as the steps build them."""
    from engine.core import errors
    from steps import notion_api, ollama_chat, ollama_writer

    writer = ollama_writer.OllamaWriter(drip.url.removesuffix("/hook"), "llama3.1:8b", timeout_s=2.0,
                                        retry=ollama_chat.RetryPolicy(budget_s=0.0, max_attempts=1),
                                        sleep=lambda s: None)

    def write() -> str:
        try:
            writer.write("prompt", system="s", options={}, material=None)  # type: ignore[arg-type]
        except errors.StepError as exc:
            return exc.code
        return "answered"

    code, took = finishes_within(60, write)
    assert code == "MODEL_UNAVAILABLE" and took < 10, (code, took)

    client = notion_api.make_client("secret_x", drip.url.removesuffix("/hook"), timeout_s=2.0)

    def query() -> str:
        try:
            client.search(query="x")
        except Exception as exc:  # noqa: BLE001 - notion-client's timeout error
            return type(exc).__name__
        return "answered"

    name, took = finishes_within(60, query)
    assert name == "RequestTimeoutError" and took < 10, (name, took)


def test_a_server_that_answers_in_time_is_read_whole(tmp_path: Path) -> None:
    from engine.core import http_deadline

    with webhook.serve() as hook:
        with http_deadline.client(5.0, max_bytes=1 << 20) as client:
            answer = client.post(hook.url, content=json.dumps({"id": "x"}).encode())
    assert answer.status_code == 200 and answer.json() == {} and hook.received[0].body == {"id": "x"}


# Security round 3, item 2: a 2 GB answer took `work` to 4.3 GB of memory (webhook), MemoryError and a traceback
# (Ollama, Notion). Every answer is now read up to its kind's cap, then dropped with one clear error.
@pytest.mark.parametrize("mode", ["flood", "declared"])
def test_an_endless_answer_is_read_up_to_its_cap_everywhere(mode: str, sqlite_url: str, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             quick: Callable[[Any], None]) -> None:
    import resource

    from engine.core import errors, http_deadline
    from steps import notion_api, ollama_chat

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with bad_http.serve(mode) as flood:
        host = flood.url.removesuffix("/hook")
        monkeypatch.setenv("RF_HOOK", flood.url)
        rt = failed_run(sqlite_url, tmp_path, {"webhook_env": "RF_HOOK"})
        quick(rt)
        report, took = finishes_within(60, lambda: outbox_sender.deliver_pending(rt))
        assert report.delivered == [] and len(report.failed) == 1 and took < 10, took
        assert "ResponseTooLarge" in (pending(rt)[0].last_error or "")

        server = ollama_chat.Server(host, "llama3.1:8b", timeout_s=20.0,
                                    retry=ollama_chat.RetryPolicy(budget_s=0.0, max_attempts=3))
        with pytest.raises(errors.StepError) as model:
            server.digest()
        assert model.value.code == "RESPONSE_TOO_LARGE" and not model.value.retryable
        assert "16,777,216 bytes" in model.value.message

        client = notion_api.make_client("secret_x", host, timeout_s=20.0)
        with pytest.raises(errors.StepError) as notion:
            notion_api.call("searching", client.search, query="x")
        assert notion.value.code == "RESPONSE_TOO_LARGE" and "secret_x" not in notion.value.message
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 200, grown_mib  # three answers of up to 16 MiB each were read, not gigabytes
    assert http_deadline.OLLAMA_MAX_BYTES == http_deadline.NOTION_MAX_BYTES == 16 * 1024 * 1024
