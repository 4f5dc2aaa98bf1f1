"""One Notion rule for the upload, ``doctor`` and the healer's probe, against the loopback fake Notion."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from engine.core import errors
from steps import notion_api, upload_notion
from tests.fakes.fake_notion import FakeNotion
from workflows import diagnose, providers
from workflows.report_settings import NotionSettings

TOKEN_ENV = "RF_TEST_NOTION_API_TOKEN"


def _unpaced(name: str, interval: timedelta) -> None:
    return None


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeNotion]:
    with FakeNotion() as server:
        monkeypatch.setenv(TOKEN_ENV, server.token)
        yield server


def settings(fake: FakeNotion) -> NotionSettings:
    return NotionSettings(enabled=True, token_env=TOKEN_ENV, database_id=fake.database_id, base_url=fake.url)


def upload_error(fake: FakeNotion, token: str | None = None) -> errors.StepError:
    client = notion_api.make_client(token or fake.token, base_url=fake.url, timeout_s=5)
    try:
        with pytest.raises(errors.StepError) as caught:
            upload_notion.upload(client, upload_notion.NotionTarget(database_id=fake.database_id),
                                 report_key="daily_report:p:2026-09-29", title="t", markdown="x",
                                 pace=upload_notion.SharedPace(_unpaced, "notion:test", lambda s: None),
                                 retry_wait_max_s=0)
    finally:
        client.close()
    return caught.value


def doctor_problems(fake: FakeNotion) -> list[str]:
    return [f.message for f in diagnose.check_notion(settings(fake), []) if f.problem]


def test_a_data_source_without_a_title_fails_the_upload_and_doctor_alike(fake: FakeNotion) -> None:
    with fake.lock:  # the title property was turned into plain text in Notion
        fake.schema["Name"] = {**fake.schema["Name"], "type": "rich_text", "rich_text": {}}
        fake.schema["Name"].pop("title", None)
    error = upload_error(fake)
    assert error.code == "CONFIG_INVALID" and "has no title property" in error.message
    assert doctor_problems(fake) == [error.message]
    assert fake.live_pages() == []  # no page was made under a guessed title


def test_a_healthy_target_passes_both(fake: FakeNotion) -> None:
    assert doctor_problems(fake) == []
    assert providers.probe_notion(settings(fake)).healthy


def test_a_refused_token_reads_the_same_in_the_upload_doctor_and_the_probe(fake: FakeNotion) -> None:
    token = fake.token
    fake.token = "a-rotated-token"  # the integration's token changed: the configured one is refused
    error = upload_error(fake, token)
    assert error.code == "NOTION_UNAUTHORIZED"
    (problem,) = doctor_problems(fake)
    probe = providers.probe_notion(settings(fake))
    assert not probe.healthy
    for message in (error.message, problem, probe.detail):
        assert message.startswith("Notion refused the token while reading the database (HTTP 401")
        assert token not in message


def test_a_missing_database_is_named_by_all_three(fake: FakeNotion) -> None:
    wanted = notion_api.missing("database", "0" * 32).message
    configured = NotionSettings(enabled=True, token_env=TOKEN_ENV, database_id="0" * 32, base_url=fake.url)
    client = notion_api.make_client(fake.token, base_url=fake.url, timeout_s=5)
    try:
        with pytest.raises(errors.StepError) as caught:
            upload_notion.upload(client, upload_notion.NotionTarget(database_id="0" * 32),
                                 report_key="k", title="t", markdown="x",
                                 pace=upload_notion.SharedPace(_unpaced, "notion:test", lambda s: None),
                                 retry_wait_max_s=0)
    finally:
        client.close()
    assert (caught.value.code, caught.value.message) == ("NOTION_NOT_FOUND", wanted)
    assert [f.message for f in diagnose.check_notion(configured, []) if f.problem] == [wanted]
    assert providers.probe_notion(configured).detail == wanted


def test_a_probe_of_a_notion_that_refuses_logs_nothing_of_the_clients_own(fake: FakeNotion,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    """Issue 43, item 3: the client's own warning came with every probe of a Notion that is down (288 a day);
    the probe's result is recorded by the healer, once per change."""
    import logging

    fake.token = "a-rotated-token"
    with caplog.at_level(logging.DEBUG):
        for _ in range(3):
            assert not providers.probe_notion(settings(fake)).healthy
    assert [r for r in caplog.records if r.name.startswith("steps.notion_api")] == []
    with caplog.at_level(logging.DEBUG):
        upload_error(fake, "a-token-refused")  # an upload's client still logs
    assert any(r.name == "steps.notion_api.client" for r in caplog.records)
