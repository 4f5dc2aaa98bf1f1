"""The forge's view read through the real client from a loopback fake forge (GitHub, Gitea, GitLab shapes):
merged pull requests of the range with reviewers and approvals, issues closed in the window, pagination by
``Link`` and ``X-Next-Page``, the ETag cache, rate limits waited out (and held for every process) or given up
past the step's patience, and a forge that is down, refuses the token or answers too much: the view says why."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine.core.clock import ManualClock
from engine.core.pacing import LocalLimits
from steps import forge_api, forge_view
from steps.forge_model import ForgeView
from steps.forge_view import ForgeSource
from tests.fakes.fake_forge import FakeForge

NOW = datetime(2026, 10, 1, tzinfo=UTC)
START, END = datetime(2026, 9, 30, tzinfo=UTC), datetime(2026, 10, 1, tzinfo=UTC)
MERGE_14, MERGE_15, OTHER = "a" * 40, "b" * 40, "c" * 40
WEB = "https://github.com/acme/shop"


def at(hour: int, day: int = 30, month: int = 9) -> datetime:
    return datetime(2026, month, day, hour, tzinfo=UTC)


def seed(forge: FakeForge) -> None:
    """Two pull requests merged in the range, one merged elsewhere, one closed unmerged, an old one; issues closed
    in the window and before it."""
    forge.add_pull(14, "Payments API", "bob", updated_at=at(9), merged_at=at(9), merge_sha=MERGE_14,
                   labels=("feature", "api"), body="Adds the API.\n\nCloses #12", assigned=("alice",))
    forge.add_pull(15, "Fix cart totals (#9)", "carol", updated_at=at(11), merged_at=at(11), merge_sha=MERGE_15,
                   body="fixes #13")
    forge.add_pull(16, "Merged into another branch", "dave", updated_at=at(12), merged_at=at(12), merge_sha=OTHER)
    forge.add_pull(17, "Abandoned", "erin", updated_at=at(13))
    forge.add_pull(3, "Old", "bob", updated_at=datetime(2026, 8, 1, tzinfo=UTC), merged_at=datetime(2026, 8, 1, tzinfo=UTC),
                   merge_sha="d" * 40)
    for login, state in (("alice", "COMMENTED"), ("bob", "COMMENTED"), ("alice", "APPROVED"), ("dave", "CHANGES_REQUESTED")):
        forge.review(14, login, state)
    forge.review(15, "alice", "APPROVED")
    forge.review(15, "bob", "PENDING")
    forge.add_issue(12, "Checkout fails", "erin", closed_at=at(9), labels=("bug",))
    forge.add_issue(13, "Totals off by one", "frank", closed_at=at(11))
    forge.add_issue(8, "Closed before", "erin", closed_at=datetime(2026, 9, 29, 23, tzinfo=UTC), updated_at=at(1))


def gather(forge: FakeForge, *, token: str | None = None, cache: Path | None = None, clock: ManualClock | None = None,
           limits: LocalLimits | None = None, web: str = WEB) -> ForgeView:
    clock = clock or ManualClock(NOW)
    limits = limits or LocalLimits(clock)
    source = ForgeSource(kind=forge.kind, api=forge.api, deadline_s=5, cache_dir=cache)
    span = forge_view.span_of(START, END, [MERGE_14, MERGE_15, "e" * 40])
    return forge_view.gather(source, web, forge.token if token is None else token, span, pace=limits.pace,
                             sleep=clock.sleep)


def test_github_merged_pull_requests_of_the_range_with_reviewers_and_the_issues_closed_in_the_window() -> None:
    with FakeForge("github", page_size=2) as forge:
        seed(forge)
        view = gather(forge)
    assert view.missing is None and view.kind == "github" and not view.truncated
    pulls = {p.number: p for p in view.pulls}
    assert list(pulls) == [14, 15]  # in merge order; 16 landed elsewhere, 17 was never merged, 3 is too old
    assert (pulls[14].title, pulls[14].author, pulls[14].reviewers, pulls[14].approvals) == (
        "Payments API", "bob", ["alice", "dave"], ["alice"])  # the author's own comment is no review
    assert (pulls[14].labels, pulls[14].closes, pulls[14].sha) == (["feature", "api"], [12], MERGE_14)
    assert (pulls[15].reviewers, pulls[15].approvals, pulls[15].closes) == (["alice"], ["alice"], [13])
    assert [(i.number, i.title, i.author, i.labels) for i in view.issues] == [
        (12, "Checkout fails", "erin", ["bug"]), (13, "Totals off by one", "frank", [])]
    listed = [r for r in forge.requests if r.path.endswith("/pulls")]
    assert len(listed) == 3  # pages of 2 followed by Link until one holds a pull request updated before the range
    assert all(r.headers["authorization"] == f"Bearer {forge.token}" for r in forge.requests)


def test_gitea_speaks_the_same_shapes_with_its_own_parameters() -> None:
    with FakeForge("gitea", token="gitea_token", page_size=2) as forge:
        seed(forge)
        view = gather(forge, web="https://codeberg.org/acme/shop")
    assert [(p.number, p.reviewers, p.approvals) for p in view.pulls] == [(14, ["alice", "dave"], ["alice"]),
                                                                          (15, ["alice"], ["alice"])]
    assert [i.number for i in view.issues] == [12, 13]
    issues = [r for r in forge.requests if r.path.endswith("/issues")]
    assert issues and all(r.query["type"] == ["issues"] and "limit" in r.query for r in issues)


def test_gitlab_merge_requests_pages_by_x_next_page_and_approvals() -> None:
    with FakeForge("gitlab", token="glpat-fake", page_size=1) as forge:
        seed(forge)
        view = gather(forge, web="https://gitlab.com/acme/shop")
    assert view.missing is None and view.kind == "gitlab"
    pulls = {p.number: p for p in view.pulls}
    assert list(pulls) == [14, 15]
    assert (pulls[14].reviewers, pulls[14].approvals, pulls[14].labels) == (["alice"], ["alice"], ["feature", "api"])
    assert [i.number for i in view.issues] == [12, 13]
    pages = [r.query.get("page", ["1"])[0] for r in forge.requests if r.path.endswith("/merge_requests")]
    assert pages[:3] == ["1", "2", "3"]  # one entry a page, followed by X-Next-Page (the fake sends no Link)
    assert all(r.headers["private-token"] == "glpat-fake" for r in forge.requests)


def test_a_second_read_is_answered_from_the_etag_cache(tmp_path: Path) -> None:
    with FakeForge("github") as forge:
        seed(forge)
        first = gather(forge, cache=tmp_path / "cache")
        asked = len(forge.requests)
        second = gather(forge, cache=tmp_path / "cache")
    again = forge.requests[asked:]
    assert second == first
    assert again and all("if-none-match" in r.headers for r in again if "since=" not in str(r.query))
    assert [r.status for r in again if r.path.endswith(("/pulls", "/reviews"))] == [304] * 3
    assert not any(forge.token in p.read_text() for p in (tmp_path / "cache").iterdir())  # keys are digests


def test_a_rate_limit_is_waited_for_until_its_reset_and_held_for_every_caller() -> None:
    clock = ManualClock(NOW)
    limits = LocalLimits(clock)
    held: list[tuple[str, timedelta]] = []

    def pace(name: str, interval: timedelta) -> None:
        held.append((name, interval))
        limits.pace(name, interval)

    with FakeForge("github") as forge:
        seed(forge)
        forge.rate_limit_next(1, reset_in_s=30)
        source = ForgeSource(kind="github", api=forge.api, deadline_s=5)
        view = forge_view.gather(source, WEB, forge.token, forge_view.span_of(START, END, [MERGE_14, MERGE_15]),
                                 pace=pace, sleep=clock.sleep)
    assert view.missing is None and [p.number for p in view.pulls] == [14, 15]
    assert [r.status for r in forge.requests][:2] == [403, 200]
    assert clock.now() - NOW >= timedelta(seconds=29)  # the request after the 403 went after the reset
    # The hold is a slot of the shared limit (the store's, in a run) whose interval reaches the reset: every
    # process's next request of this token waits for it, not only this one's.
    name = forge_api.limit_name(forge.api, forge.token)
    assert {n for n, _ in held} == {name}
    assert any(interval >= timedelta(seconds=29) for _, interval in held)


def test_a_reset_further_than_the_step_waits_leaves_the_view_missing_with_its_time() -> None:
    clock = ManualClock(NOW)
    with FakeForge("github") as forge:
        seed(forge)
        forge.rate_limit_next(1, reset_in_s=3600)
        view = gather(forge, clock=clock)
    assert view.missing is not None and view.missing.reason == "rate_limited"
    assert view.missing.detail.startswith("20") and view.missing.detail.endswith("Z")
    assert clock.now() - NOW < timedelta(seconds=5) and len(forge.requests) == 1


def test_gitlab_429_retry_after_is_honoured() -> None:
    clock = ManualClock(NOW)
    with FakeForge("gitlab", token="glpat-fake") as forge:
        seed(forge)
        forge.rate_limit_next(1, reset_in_s=20, status=429)
        view = gather(forge, clock=clock, web="https://gitlab.com/acme/shop")
    assert view.missing is None and len(view.pulls) == 2
    assert clock.now() - NOW >= timedelta(seconds=20)


def test_no_token_says_which_variable_and_asks_nothing() -> None:
    with FakeForge("github") as forge:
        view = gather(forge, token="")
    assert view.missing is not None and (view.missing.reason, view.missing.detail) == ("no_token", "GITHUB_TOKEN")
    assert forge.requests == []


@pytest.mark.parametrize(("fault", "reason"), [(401, "refused"), (404, "not_found"), (503, "unavailable")])
def test_a_failing_forge_leaves_the_view_missing_with_its_reason(fault: int, reason: str) -> None:
    with FakeForge("github") as forge:
        seed(forge)
        forge.fail_next(5, fault)
        view = gather(forge)
    assert view.missing is not None and view.missing.reason == reason and view.pulls == []
    assert len(forge.requests) == (forge_api.ATTEMPTS if fault == 503 else 1)


def test_a_5xx_is_tried_again() -> None:
    with FakeForge("github") as forge:
        seed(forge)
        forge.fail_next(1, 502)
        view = gather(forge)
    assert view.missing is None and len(view.pulls) == 2


def test_a_forge_that_is_down_and_one_that_answers_too_much() -> None:
    with FakeForge("github") as forge:
        closed = forge.api
    down = forge_view.gather(ForgeSource(kind="github", api=closed, deadline_s=2), WEB, "t",
                             forge_view.span_of(START, END, [MERGE_14]), pace=LocalLimits(ManualClock(NOW)).pace,
                             sleep=ManualClock(NOW).sleep)
    assert down.missing is not None and down.missing.reason == "unavailable"
    with FakeForge("github") as forge:
        forge.add_pull(14, "Huge", "bob", updated_at=at(9), merged_at=at(9), merge_sha=MERGE_14,
                       body="x" * (forge_api.MAX_BYTES + 1))
        view = gather(forge)
    assert view.missing is not None and view.missing.reason == "too_large"


def test_a_next_page_on_another_host_is_not_followed(tmp_path: Path) -> None:
    with FakeForge("github", page_size=1) as forge, FakeForge("github", token="x") as elsewhere:
        seed(forge)
        forge.link_base = elsewhere.url
        view = gather(forge)
    assert elsewhere.requests == []  # the token never went there
    assert view.missing is None


def test_the_token_is_in_no_log_line_and_no_view(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with FakeForge("github", token="ghp_CANARY_0123456789") as forge:
        seed(forge)
        forge.fail_next(1, 401)
        refused = gather(forge)
        read = gather(forge)
    assert "ghp_CANARY" not in caplog.text + refused.model_dump_json() + read.model_dump_json()
    assert "forge_not_read" in caplog.text and "forge_read" in caplog.text


def test_rate_limit_waits_are_bounded_for_the_whole_reading() -> None:
    clock = ManualClock(NOW)
    with FakeForge("github") as forge:
        seed(forge)
        forge.rate_limit_next(2, reset_in_s=40)  # each wait fits alone; together they pass the step's patience
        view = gather(forge, clock=clock)
    assert view.missing is not None and view.missing.reason == "rate_limited"
    assert timedelta(seconds=39) <= clock.now() - NOW <= timedelta(seconds=forge_api.MAX_RATE_WAIT_S)
