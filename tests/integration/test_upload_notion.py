"""UPLOAD_NOTION against the loopback fake Notion, through the real notion_client.Client."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import notion_client
import pytest
from notion_client.errors import APIResponseError

from engine.core import errors
from engine.core.clock import ManualClock
from engine.core.pacing import LocalLimits
from steps import notion_api, notion_blocks, upload_notion
from tests.fakes.fake_notion import FakeNotion

KEY = "daily_report:platform:2026-09-29"
REPORT = "# Daily report\n\nSome **work** was done.\n\n- one\n- two\n"


START = datetime(2026, 9, 29, 10, 0, tzinfo=UTC)


class FakeTime(ManualClock):
    """Manual time that moves only when slept on; records every sleep."""

    def __init__(self) -> None:
        super().__init__(START)
        self.sleeps: list[float] = []

    def sleep(self, seconds: float, stop: threading.Event | None = None) -> bool:
        self.sleeps.append(seconds)
        return super().sleep(seconds, stop)

    def elapsed(self) -> float:
        return (self.now() - START).total_seconds()


def paced(clock: FakeTime, limits: LocalLimits | None = None) -> upload_notion.SharedPace:
    """A pacer like doctor's: Notion's interval, slots held in this process."""
    return upload_notion.SharedPace((limits or LocalLimits(clock)).pace, "notion:test", clock.sleep)


def _unpaced(name: str, interval: timedelta) -> None:
    return None


@pytest.fixture
def fake() -> Iterator[FakeNotion]:
    with FakeNotion() as server:
        yield server


@pytest.fixture
def client(fake: FakeNotion) -> Iterator[notion_client.Client]:
    made = notion_api.make_client(fake.token, base_url=fake.url, timeout_s=5)
    yield made
    made.close()


@pytest.fixture
def clock() -> FakeTime:
    return FakeTime()


def upload(client: notion_client.Client, fake: FakeNotion, clock: FakeTime, *, unpaced: bool = False,
           **kwargs: Any) -> upload_notion.UploadOutput:
    """upload() with test defaults; ``unpaced`` lifts pacing so only retry waits are slept."""
    pace = upload_notion.SharedPace(_unpaced, "notion:test", clock.sleep) if unpaced else paced(clock)
    args: dict[str, Any] = {"report_key": KEY, "title": "Platform 2026-09-29", "markdown": REPORT, "pace": pace}
    args.update(kwargs)
    target = args.pop("target", upload_notion.NotionTarget(database_id=fake.database_id))
    return upload_notion.upload(client, target, **args)


def texts(fake: FakeNotion, page_id: str) -> list[str]:
    return [notion_blocks.block_text(block) for block in fake.content(page_id)]


def test_create_then_reupload_updates_the_same_page(fake: FakeNotion, client: notion_client.Client,
                                                    clock: FakeTime) -> None:
    first = upload(client, fake, clock)
    assert first.action == "created"
    assert first.data_source_id == fake.data_source_id
    assert first.url.startswith("https://www.notion.so/")
    assert texts(fake, first.page_id) == ["Daily report", "Some work was done.", "one", "two"]

    second = upload(client, fake, clock, title="Renamed", markdown="# New\n\nreplaced")
    assert (second.action, second.page_id) == ("updated", first.page_id)
    [page] = fake.live_pages(KEY)
    assert page["properties"]["Name"]["title"][0]["plain_text"] == "Renamed"
    assert texts(fake, first.page_id) == ["New", "replaced"]
    assert upload(client, fake, clock, stored_page_id=first.page_id).page_id == first.page_id
    assert len(fake.live_pages()) == 1


def test_plain_client_and_data_source_target(fake: FakeNotion, clock: FakeTime) -> None:
    with notion_client.Client(auth=fake.token, base_url=fake.url) as plain:
        out = upload(plain, fake, clock, target=upload_notion.NotionTarget(data_source_id=fake.data_source_id),
                     properties_extra={})
    assert out.action == "created"
    assert fake.requests_matching("GET", r"^/v1/databases/") == []
    assert fake.pages[out.page_id]["parent"]["data_source_id"] == fake.data_source_id


def test_trashed_stored_page_is_forgotten_and_a_new_page_made(fake: FakeNotion, client: notion_client.Client,
                                                              clock: FakeTime) -> None:
    first = upload(client, fake, clock)
    fake.trash(first.page_id)
    again = upload(client, fake, clock, stored_page_id=first.page_id)
    assert again.action == "created"
    assert again.page_id != first.page_id
    assert [p["id"] for p in fake.live_pages(KEY)] == [again.page_id]


def test_missing_stored_page_is_forgotten_and_the_key_looked_up(fake: FakeNotion, client: notion_client.Client,
                                                                clock: FakeTime) -> None:
    first = upload(client, fake, clock)
    again = upload(client, fake, clock, stored_page_id="ffffffff-0000-4000-8000-00000000ffff")
    assert (again.action, again.page_id) == ("updated", first.page_id)


def test_dropped_create_is_found_again_without_a_twin(fake: FakeNotion, client: notion_client.Client,
                                                     clock: FakeTime) -> None:
    fake.drop_after_create(1)
    out = upload(client, fake, clock)
    [page] = fake.live_pages(KEY)
    assert out.page_id == page["id"]
    assert len(fake.requests_matching("POST", r"^/v1/pages$")) == 1
    assert texts(fake, page["id"]) == ["Daily report", "Some work was done.", "one", "two"]


def test_twin_after_a_dropped_create_leaves_one_live_page(fake: FakeNotion, client: notion_client.Client,
                                                          clock: FakeTime) -> None:
    fake.drop_after_create(1)
    fake.stale_queries(2)  # the retry's lookup does not see the page the lost request made
    out = upload(client, fake, clock)
    creates = fake.requests_matching("POST", r"^/v1/pages$")
    assert len(creates) == 2
    live = fake.live_pages(KEY)
    assert [p["id"] for p in live] == [out.page_id]
    oldest = min(fake.pages.values(), key=lambda p: (p["created_time"], p["id"]))
    assert out.page_id == oldest["id"]
    assert texts(fake, out.page_id) == ["Daily report", "Some work was done.", "one", "two"]


def test_existing_twins_collapse_to_the_oldest(fake: FakeNotion, client: notion_client.Client,
                                               clock: FakeTime) -> None:
    oldest = fake.add_page(KEY)
    fake.add_page(KEY)
    fake.add_page(KEY)
    out = upload(client, fake, clock)
    assert (out.action, out.page_id) == ("updated", oldest["id"])
    assert [p["id"] for p in fake.live_pages(KEY)] == [oldest["id"]]


def test_rate_limit_retry_after_is_honoured(fake: FakeNotion, client: notion_client.Client,
                                            clock: FakeTime) -> None:
    fake.fail_next(1, 429, {"Retry-After": "2"}, path="/query")
    out = upload(client, fake, clock, unpaced=True)
    assert out.action == "created"
    assert clock.sleeps == [2.0]
    assert [r.status for r in fake.requests_matching("POST", "/query")][:2] == [429, 200]


def test_retry_after_beyond_the_budget_becomes_not_before(fake: FakeNotion, client: notion_client.Client,
                                                          clock: FakeTime) -> None:
    fake.fail_next(1, 429, {"Retry-After": "120"})
    with pytest.raises(errors.StepError) as caught:
        upload(client, fake, clock, unpaced=True, retry_wait_max_s=30)
    assert caught.value.code == "NOTION_RATE_LIMITED"
    assert caught.value.retryable
    assert caught.value.retry_after_s == 120
    assert clock.sleeps == []


def test_server_errors_until_the_budget_is_spent(fake: FakeNotion, client: notion_client.Client,
                                                 clock: FakeTime) -> None:
    fake.fail_next(1000, 500)
    with pytest.raises(errors.StepError) as caught:
        upload(client, fake, clock, unpaced=True, retry_wait_max_s=5.0)
    assert caught.value.code == "NOTION_UNAVAILABLE"
    assert caught.value.retryable
    assert caught.value.retry_after_s is None
    assert len(clock.sleeps) >= 3
    assert sum(clock.sleeps) <= 5.0 + 1e-9
    assert clock.sleeps[1] > clock.sleeps[0] * 1.2 or clock.sleeps[1] >= 1.0  # backing off
    assert fake.pages == {}


def test_server_error_then_success(fake: FakeNotion, client: notion_client.Client, clock: FakeTime) -> None:
    fake.fail_next(2, 503, {})
    fake.fail_next(1, 502, path="/v1/pages")
    assert upload(client, fake, clock, unpaced=True).action == "created"
    assert len(fake.live_pages(KEY)) == 1


def test_timeout_is_retried(fake: FakeNotion, clock: FakeTime) -> None:
    impatient = notion_api.make_client(fake.token, base_url=fake.url, timeout_s=0.3)
    fake.timeout_next(1, delay_s=3.0)
    try:
        assert upload(impatient, fake, clock, unpaced=True).action == "created"
        fake.timeout_next(1, delay_s=3.0)
        with pytest.raises(errors.StepError) as caught:
            upload(impatient, fake, clock, unpaced=True, retry_wait_max_s=0)
        assert caught.value.code == "NOTION_UNAVAILABLE"
        assert "in time" in caught.value.message
    finally:
        impatient.close()


def test_connection_refused_is_unavailable(clock: FakeTime) -> None:
    with FakeNotion() as gone:
        url = gone.url
    refused = notion_api.make_client("t", base_url=url, timeout_s=1)
    with pytest.raises(errors.StepError) as caught:
        upload_notion.upload(refused, upload_notion.NotionTarget(database_id="db"), report_key=KEY, title="t", markdown="x",
                  pace=paced(clock), retry_wait_max_s=0)
    assert caught.value.code == "NOTION_UNAVAILABLE"


@pytest.mark.parametrize("status", [401, 403])
def test_unauthorized_never_shows_the_token(fake: FakeNotion, clock: FakeTime, status: int) -> None:
    token = "secret_wrong_token_0123456789"
    bad = notion_api.make_client(token if status == 401 else fake.token, base_url=fake.url, timeout_s=5)
    if status == 403:
        fake.fail_next(1, 403)
    with pytest.raises(errors.StepError) as caught:
        upload(bad, fake, clock)
    bad.close()
    assert caught.value.code == "NOTION_UNAUTHORIZED"
    assert not caught.value.retryable
    assert "token_env" in caught.value.message
    for secret in (token, fake.token):
        assert secret not in caught.value.message
        assert secret not in str(caught.value)
    assert len(fake.requests) == 1  # not retried


def test_unknown_database_is_not_found(fake: FakeNotion, client: notion_client.Client, clock: FakeTime) -> None:
    missing = "0badbad0-0000-4000-8000-000000000bad"
    with pytest.raises(errors.StepError) as caught:
        upload(client, fake, clock, target=upload_notion.NotionTarget(database_id=missing))
    assert caught.value.code == "NOTION_NOT_FOUND"
    assert not caught.value.retryable
    assert missing in caught.value.message and "shared with the integration" in caught.value.message
    with pytest.raises(errors.StepError) as caught:
        upload(client, fake, clock, target=upload_notion.NotionTarget(data_source_id=missing))
    assert caught.value.code == "NOTION_NOT_FOUND"


def test_large_report_is_sent_in_chunks_of_at_most_100(fake: FakeNotion, client: notion_client.Client,
                                                       clock: FakeTime) -> None:
    markdown = "\n\n".join(f"paragraph {i}" for i in range(250))
    out = upload(client, fake, clock, markdown=markdown)
    assert texts(fake, out.page_id) == [f"paragraph {i}" for i in range(250)]
    upload(client, fake, clock, markdown=markdown + "\n\nextra")
    assert len(texts(fake, out.page_id)) == 251
    sizes = [len(r.body["children"]) for r in fake.requests
             if r.method in ("POST", "PATCH") and isinstance(r.body, dict) and "children" in r.body]
    assert sizes == [100, 100, 50, 100, 100, 51]
    assert all(r.status == 200 for r in fake.requests)


def test_long_paragraph_is_split(fake: FakeNotion, client: notion_client.Client, clock: FakeTime) -> None:
    paragraph = "".join(f"{i % 10}" for i in range(5000))
    out = upload(client, fake, clock, markdown=paragraph)
    [block] = fake.content(out.page_id)
    items = block["paragraph"]["rich_text"]
    assert [len(i["plain_text"]) for i in items] == [2000, 2000, 1000]
    assert "".join(i["plain_text"] for i in items) == paragraph


def test_fake_enforces_the_api_limits(fake: FakeNotion, client: notion_client.Client) -> None:
    too_many = [{"type": "paragraph", "paragraph": {"rich_text": []}}] * 101
    too_long = [{"type": "paragraph", "paragraph": {"rich_text": [{"text": {"content": "x" * 2001}}]}}]
    parent = {"type": "data_source_id", "data_source_id": fake.data_source_id}
    for children in (too_many, too_long):
        with pytest.raises(APIResponseError) as caught:
            client.pages.create(parent=parent, properties={}, children=children)
        assert (caught.value.status, caught.value.code) == (400, "validation_error")
    assert fake.pages == {}


def test_lost_fence_stops_before_any_write(fake: FakeNotion, client: notion_client.Client,
                                           clock: FakeTime) -> None:
    def lease_lost() -> None:
        raise errors.LeaseLost(run_id=3, token=9)

    with pytest.raises(errors.LeaseLost):
        upload(client, fake, clock, check_fence=lease_lost)
    assert fake.pages == {}
    assert {r.method for r in fake.requests} <= {"GET", "POST"}
    assert fake.requests_matching("POST", r"^/v1/pages$") == []


def test_requests_are_paced_at_three_per_second(fake: FakeNotion, client: notion_client.Client,
                                                clock: FakeTime) -> None:
    shared = LocalLimits(clock)  # one per process, as in doctor
    upload(client, fake, clock, markdown="\n\n".join(f"p{i}" for i in range(20)), pace=paced(clock, shared))
    upload(client, fake, clock, markdown="short", pace=paced(clock, shared))  # an update: one delete per old block
    sent = len(fake.requests)
    assert sent > 20
    assert clock.elapsed() >= (sent - 1) * notion_api.REQUEST_INTERVAL.total_seconds() - 1e-6
    assert clock.elapsed() <= sent / 2.5  # under Notion's 3/s average, and not much slower


def test_local_limits_space_slots_and_let_the_first_after_a_quiet_spell_go_at_once(clock: FakeTime) -> None:
    limits = LocalLimits(clock)
    for _ in range(9):
        limits.pace("notion:a", notion_api.REQUEST_INTERVAL)
    assert clock.elapsed() == pytest.approx(8 * notion_api.REQUEST_INTERVAL.total_seconds())
    limits.pace("notion:b", notion_api.REQUEST_INTERVAL)  # another integration's limit is its own
    clock.advance(timedelta(seconds=10))
    slept = len(clock.sleeps)
    limits.pace("notion:a", notion_api.REQUEST_INTERVAL)
    assert len(clock.sleeps) == slept
    assert clock.elapsed() == pytest.approx(8 * notion_api.REQUEST_INTERVAL.total_seconds() + 10)


FORGED = "bad request\n2026-09-29T10:30:00Z INFO step_finished run=1 FORGED\x1b[2J\x07"


def test_server_text_in_the_error_and_the_log_line_is_one_inert_line(fake: FakeNotion, client: notion_client.Client,
                                                                      clock: FakeTime) -> None:
    import logging

    from engine.core import logs

    fake.fail_next(1, 400, message=FORGED)
    with pytest.raises(errors.StepError) as caught:
        upload(client, fake, clock)
    stored = caught.value.message  # what becomes the run's error_message and the alert's error
    assert "FORGED" in stored and "\n" not in stored and "\x1b" not in stored and "\x07" not in stored
    # The client's own line (a library logger, the server's text inside) and the engine's step line.
    library = logging.LogRecord("notion_client", logging.WARNING, __file__, 1, "API error: %s", (FORGED,), None)
    engine_line = logging.LogRecord("engine.execution.worker", logging.WARNING, __file__, 1, "%s",
                                    (logs.render("step_failed", {"message": FORGED}),), None)
    for formatter in (logs.TextFormatter("%(asctime)s %(levelname)s %(message)s"), logs.JsonFormatter()):
        for record in (library, engine_line):
            line = formatter.format(record)
            assert "\n" not in line and "\x1b" not in line and "\x07" not in line, line


def test_counts_fill_the_number_properties_the_database_has(clock: FakeTime) -> None:
    """A report's counts go to number properties of those names when the database has them; the others are left
    out (Notion refuses a property it does not have), and a property of another type is not written."""
    with FakeNotion(extra_schema={"Commits": "number", "Features": "number", "Fixes": "rich_text"}) as fake:
        client = notion_api.make_client(fake.token, base_url=fake.url, timeout_s=5)
        try:
            out = upload(client, fake, clock, counts={"Commits": 7, "Features": 3, "Fixes": 2, "Docs": 1})
            assert out.action == "created"
            [page] = fake.live_pages(KEY)
            props = page["properties"]
            assert props["Commits"]["number"] == 7 and props["Features"]["number"] == 3
            assert "Docs" not in props and props.get("Fixes", {}).get("number") is None
        finally:
            client.close()
