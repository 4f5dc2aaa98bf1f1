"""A report's short form (``steps.report_brief``) and how a send's answer is read (``steps.delivery_send.classify``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from engine.core.deliveries import DeliveryState
from steps import delivery_send, report_brief
from steps.report_brief import PullRequest

REPORT = """# Daily report: platform, 2026-09-29

- **Covers:** the commits authored during 2026-09-29 (Asia/Seoul); UTC 2026-09-28T15:00:00Z → 2026-09-29T15:00:00Z
- **Activity:** 12 commits by 3 authors, 20 files changed, +300 / −40 lines
- **Written by:** builtin

## Summary

The team reworked the claim path and fixed two races in the reconciler. Most work was in engine/store.
A second line of the same paragraph.

| Area | Commits |
| --- | --- |
| engine/store | 8 |

## Changes by area

- something
"""
STATS = {"commits": 12, "kinds": {"features": 3, "fixes": 2, "docs": 0}}


def brief(**kwargs: object) -> report_brief.Brief:
    options: dict[str, object] = dict(language="en", stats=STATS, link="https://notion.so/page-1", page=True)
    options.update(kwargs)
    return report_brief.compose(REPORT, **options)  # type: ignore[arg-type]


def test_the_short_form_is_read_from_the_report() -> None:
    message = report_brief.fit(brief(), title_chars=250, body_chars=2000)
    assert message.title == "Daily report: platform, 2026-09-29"
    body = message.body
    assert "• **Covers:** the commits authored during 2026-09-29" in body
    assert "• **Activity:** 12 commits by 3 authors" in body
    assert "Written by" not in body  # only a fallback's line is worth a chat's attention
    assert "Features 3 · Fixes 2" in body and "Docs" not in body
    assert "reworked the claim path" in body and "A second line of the same paragraph." in body
    assert "| Area |" not in body and "something" not in body
    assert body.endswith("Notion page: https://notion.so/page-1")


def test_an_update_and_a_fallback_say_so() -> None:
    message = report_brief.fit(brief(update=True, fallback=True), title_chars=250, body_chars=2000)
    assert message.title == "Updated: Daily report: platform, 2026-09-29"
    assert "**Written by:** builtin" in message.body


def test_korean_words() -> None:
    message = report_brief.fit(brief(language="ko", update=True, page=False), title_chars=250, body_chars=2000)
    assert message.title.startswith("수정됨: ") and "파일: https://notion.so/page-1" in message.body
    assert "기능" in message.body or "Features" not in message.body


@pytest.mark.parametrize("body_chars", [0, 2000, 500, 300, 120, 40, 10])
def test_a_message_fits_its_target_and_keeps_the_link(body_chars: int) -> None:
    many = [PullRequest(n, f"Merge pull request #{n} from team/branch-{n}", f"https://github.com/o/r/issues/{n}")
            for n in range(1, 40)]
    message = report_brief.fit(brief(pull_requests=many), title_chars=250, body_chars=body_chars)
    limit = body_chars or report_brief.BODY_CHARS
    assert len(message.body) <= limit
    if body_chars == 0 or body_chars >= 300:
        assert message.body.endswith("Notion page: https://notion.so/page-1")
    if body_chars == 0:
        assert "#10 " in message.body and "…and 29 more" in message.body  # ten listed at most


def test_a_target_without_titles_gets_the_title_in_the_body() -> None:
    message = report_brief.fit(brief(), title_chars=0, body_chars=2000)
    assert message.title == "" and message.body.startswith("Daily report: platform, 2026-09-29\n\n")


def test_pull_requests_are_read_from_merge_subjects_once() -> None:
    merges = [SimpleNamespace(subject="Merge pull request #12 from team/claims"),
              SimpleNamespace(subject="Merge branch 'main' into feature"),
              SimpleNamespace(subject="Merge branch 'x' into 'main' (See merge request group/p!7)"),
              SimpleNamespace(subject="Merge pull request #12 from team/claims")]
    found = report_brief.pull_requests_of(merges, lambda n: f"https://forge/issues/{n}")
    assert [(p.number, p.url) for p in found] == [(12, "https://forge/issues/12"), (7, None)]


def test_the_digest_follows_the_text() -> None:
    assert report_brief.digest(REPORT) == report_brief.digest(REPORT)
    assert report_brief.digest(REPORT) != report_brief.digest(REPORT + "\n")


# Apprise's answer (yes/no, the lines it logged for the send) -> (state, step error code)
ANSWERS = {
    "accepted": (True, [], DeliveryState.SENT, None),
    "429": (False, ["Failed to send JSON POST notification: Too Many Requests - error=429."], DeliveryState.FAILED,
            "DELIVERY_RATE_LIMITED"),
    "503": (False, ["Failed to send Slack notification: error=503."], DeliveryState.FAILED, "DELIVERY_UNAVAILABLE"),
    "404: refused, for good": (False, ["Failed to send JSON POST notification: error=404."], DeliveryState.FAILED,
                               "DELIVERY_REFUSED"),
    "500: may have arrived": (False, ["Failed to send notification: error=500."], DeliveryState.UNCONFIRMED, None),
    "a dropped connection": (False, ["A Connection error occurred sending JSON notification to 127.0.0.1."],
                             DeliveryState.UNCONFIRMED, None),
    "an SMTP failure": (False, ["Connection error while submitting email to 127.0.0.1."], DeliveryState.UNCONFIRMED,
                        None),
    "words this module does not know": (False, ["Something new went wrong"], DeliveryState.UNCONFIRMED, None),
}


@pytest.mark.parametrize("case", list(ANSWERS))
def test_a_send_is_read_as_sent_clearly_not_taken_or_unknown(case: str) -> None:
    accepted, logged, state, code = ANSWERS[case]
    verdict = delivery_send.classify(accepted, logged)
    assert (verdict.state, verdict.code) == (state, code)


def test_a_target_repr_never_shows_its_url() -> None:
    target = delivery_send.Target("RF_CHAT", "slack://T1/B2/s3cr3t")
    assert "s3cr3t" not in repr(target) and "RF_CHAT" in repr(target)


def test_a_bad_variable_is_named_never_quoted() -> None:
    from engine.core import errors

    for url in ("", "json://a/x json://b/y", "nosuchscheme://s3cr3t@host"):
        with pytest.raises(errors.StepError) as caught:
            delivery_send.load(delivery_send.Target("RF_CHAT", url))
        assert caught.value.code == "DELIVERY_TARGET_INVALID" and "RF_CHAT" in caught.value.message
        assert "s3cr3t" not in caught.value.message


def test_apprise_retries_are_off_whatever_the_url_says() -> None:
    loaded = delivery_send.load(delivery_send.Target("RF_CHAT", "json://127.0.0.1:9/x?retry=3&overflow=split"))
    assert getattr(loaded.service, "retry", 0) == 0
    assert str(loaded.service.overflow_mode.value) == "truncate"
