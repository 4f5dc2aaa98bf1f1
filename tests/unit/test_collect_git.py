"""COLLECT_GIT on real temporary repositories: windows, pins, merges, authors, errors."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from engine.core.errors import StepError
from steps.collect_git import CollectOutput, WalkBounds, collect
from tests.fakes.gitrepo import GitRepo, build_large_repo, clone_repo, make_repo

SEOUL = ZoneInfo("Asia/Seoul")
NEW_YORK = ZoneInfo("America/New_York")
BOB = ("Bob Builder", "bob@example.com")

# Every strategy must give the same answer: the default choice, the single diffing
# pass forced, the two-pass listing forced, and a single pass that gives up at once.
STRATEGIES = {
    "default": WalkBounds(),
    "single-pass": WalkBounds(near=timedelta(days=3650)),
    "two-pass": WalkBounds(near=timedelta(0)),
    "abandoned-single-pass": WalkBounds(near=timedelta(days=3650), abort_after=0),
}


@pytest.fixture(params=sorted(STRATEGIES))
def bounds(request: pytest.FixtureRequest) -> WalkBounds:
    return STRATEGIES[request.param]


def local(tz: ZoneInfo, y: int, mo: int, d: int, h: int = 0, mi: int = 0, s: int = 0) -> datetime:
    return datetime(y, mo, d, h, mi, s, tzinfo=tz)


def day_window(day: date, tz: ZoneInfo) -> tuple[datetime, datetime]:
    """Local midnight to the next local midnight (23 or 25 hours on DST days)."""
    return (datetime.combine(day, time(), tz),
            datetime.combine(day + timedelta(days=1), time(), tz))


def subjects(out: CollectOutput) -> list[str]:
    return [c.subject for c in out.commits]


def test_seoul_day_is_decided_by_author_date(tmp_path: Path, bounds: WalkBounds) -> None:
    repo = make_repo(tmp_path)
    repo.commit("before midnight", at=local(SEOUL, 2026, 9, 28, 23, 59, 59))
    repo.commit("at midnight", at=local(SEOUL, 2026, 9, 29))
    repo.commit("authored the day before, amended in the window",
                at=local(SEOUL, 2026, 9, 28, 23, 50), committed_at=local(SEOUL, 2026, 9, 29, 10))
    repo.commit("authored in another zone",
                at=datetime(2026, 9, 29, 8, tzinfo=timezone(timedelta(hours=-4))))  # 21:00 KST
    repo.commit("last second", at=local(SEOUL, 2026, 9, 29, 23, 59, 59))
    repo.commit("next midnight", at=local(SEOUL, 2026, 9, 30))
    repo.commit("authored in the window, rebased the next morning",
                at=local(SEOUL, 2026, 9, 29, 22), committed_at=local(SEOUL, 2026, 9, 30, 9))

    out = collect(repo.path, ["main"], *day_window(date(2026, 9, 29), SEOUL), bounds=bounds)

    assert subjects(out) == ["at midnight", "authored in another zone",
                             "authored in the window, rebased the next morning", "last second"]
    assert out.window_start == "2026-09-28T15:00:00Z"
    assert out.window_end == "2026-09-29T15:00:00Z"
    assert out.commits[0].authored_at == "2026-09-28T15:00:00Z"
    assert out.heads == {"main": repo.head()} and out.head_sha == repo.head()


def test_new_york_dst_day(tmp_path: Path, bounds: WalkBounds) -> None:
    repo = make_repo(tmp_path)
    repo.commit("saturday night", at=local(NEW_YORK, 2026, 3, 7, 23, 59, 59))
    repo.commit("sunday 00:00 EST", at=local(NEW_YORK, 2026, 3, 8))
    repo.commit("sunday 03:30 EDT", at=local(NEW_YORK, 2026, 3, 8, 3, 30))
    repo.commit("sunday 23:59:59 EDT", at=local(NEW_YORK, 2026, 3, 8, 23, 59, 59))
    repo.commit("monday 00:00 EDT", at=local(NEW_YORK, 2026, 3, 9))

    start, end = day_window(date(2026, 3, 8), NEW_YORK)
    out = collect(repo.path, ["main"], start, end, bounds=bounds)

    assert end.astimezone(timezone.utc) - start.astimezone(timezone.utc) == timedelta(hours=23)
    assert subjects(out) == ["sunday 00:00 EST", "sunday 03:30 EDT", "sunday 23:59:59 EDT"]
    assert (out.window_start, out.window_end) == ("2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z")


def test_pinned_heads_ignore_later_commits(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    repo.commit("first", at=local(SEOUL, 2026, 9, 29, 10))
    window = day_window(date(2026, 9, 29), SEOUL)
    first = collect(repo.path, ["main"], *window)

    repo.commit("late but authored in the window", at=local(SEOUL, 2026, 9, 29, 11),
                committed_at=local(SEOUL, 2026, 9, 30, 1))
    again = collect(repo.path, ["main"], *window, pinned_heads=first.heads)
    fresh = collect(repo.path, ["main"], *window)

    assert again == first
    assert subjects(fresh) == ["first", "late but authored in the window"]
    assert fresh.head_sha != first.head_sha


def test_merges_excluded_by_default_and_included_on_request(tmp_path: Path,
                                                            bounds: WalkBounds) -> None:
    repo = make_repo(tmp_path)
    repo.commit("base", at=local(SEOUL, 2026, 9, 28, 9))
    repo.checkout("feature", create=True)
    repo.commit("feature work", at=local(SEOUL, 2026, 9, 29, 9))
    repo.checkout("main")
    repo.commit("main work", at=local(SEOUL, 2026, 9, 29, 10))
    merge_sha = repo.merge("feature", at=local(SEOUL, 2026, 9, 29, 11))
    window = day_window(date(2026, 9, 29), SEOUL)

    plain = collect(repo.path, ["main"], *window, bounds=bounds)
    merged = collect(repo.path, ["main"], *window, include_merges=True, bounds=bounds)

    assert subjects(plain) == ["feature work", "main work"]
    assert subjects(merged) == ["feature work", "main work", "Merge branch 'feature'"]
    merge = merged.commits[-1]
    assert merge.sha == merge_sha and merge.files == [] and merge.insertions == 0


def test_author_filter_after_mailmap(tmp_path: Path, bounds: WalkBounds) -> None:
    repo = make_repo(tmp_path)
    repo.commit("mailmap", at=local(SEOUL, 2026, 9, 1),
                files={".mailmap": "Alice Kim <alice@example.com> <alice@old-laptop.local>\n"})
    repo.commit("from the old laptop", at=local(SEOUL, 2026, 9, 29, 9),
                author=("alice", "alice@old-laptop.local"))
    repo.commit("bob's change", at=local(SEOUL, 2026, 9, 29, 10), author=BOB)
    window = day_window(date(2026, 9, 29), SEOUL)

    by_email = collect(repo.path, ["main"], *window, authors=["ALICE@Example.com"], bounds=bounds)
    by_name = collect(repo.path, ["main"], *window, authors=["bob builder"], bounds=bounds)
    by_old_email = collect(repo.path, ["main"], *window, authors=["alice@old-laptop.local"],
                           bounds=bounds)
    everyone = collect(repo.path, ["main"], *window, bounds=bounds)

    assert subjects(by_email) == ["from the old laptop"]
    assert (by_email.commits[0].author_name, by_email.commits[0].author_email) == \
        ("Alice Kim", "alice@example.com")
    assert subjects(by_name) == ["bob's change"]
    assert by_old_email.commits == []
    assert len(everyone.commits) == 2


def test_files_binary_renames_and_odd_paths(tmp_path: Path, bounds: WalkBounds) -> None:
    repo = make_repo(tmp_path)
    repo.commit("seed", at=local(SEOUL, 2026, 9, 28, 9), files={
        "src/old_name.py": "".join(f"line {i}\n" for i in range(20)),
        "assets/logo.bin": b"\x00\x01\x02binary",
    })
    repo.git("mv", "src/old_name.py", "src/new_name.py")
    sha = repo.commit("Rename and more\n\nWhy: clarity.\nSecond line.", at=local(SEOUL, 2026, 9, 29, 9),
                      files={
                          "src/new_name.py": "".join(f"line {i}\n" for i in range(20)) + "extra\n",
                          "assets/logo.bin": b"\x00\x05binary changed",
                          "docs/naïve file => x.md": "a\nb\n",
                          "README": "hello\n",
                      })

    out = collect(repo.path, ["main"], *day_window(date(2026, 9, 29), SEOUL), bounds=bounds)

    [commit] = out.commits
    assert commit.sha == sha
    assert (commit.subject, commit.body) == ("Rename and more", "Why: clarity.\nSecond line.")
    files = {f.path: f for f in commit.files}
    assert set(files) == {"src/new_name.py", "assets/logo.bin", "docs/naïve file => x.md", "README"}
    assert files["src/new_name.py"].old_path == "src/old_name.py"
    assert (files["src/new_name.py"].insertions, files["src/new_name.py"].deletions) == (1, 0)
    assert files["assets/logo.bin"].binary
    assert (files["assets/logo.bin"].insertions, files["assets/logo.bin"].deletions) == (0, 0)
    assert files["docs/naïve file => x.md"].insertions == 2
    assert (commit.insertions, commit.deletions) == (4, 0)


def test_several_heads_are_deduplicated_and_sorted(tmp_path: Path, bounds: WalkBounds) -> None:
    repo = make_repo(tmp_path)
    repo.commit("shared", at=local(SEOUL, 2026, 9, 29, 9))
    repo.checkout("feature", create=True)
    repo.commit("feature only", at=local(SEOUL, 2026, 9, 29, 8))
    repo.checkout("main")
    repo.commit("main only", at=local(SEOUL, 2026, 9, 29, 10))

    out = collect(repo.path, ["main", "feature"], *day_window(date(2026, 9, 29), SEOUL),
                  bounds=bounds)

    assert subjects(out) == ["feature only", "shared", "main only"]
    assert out.heads == {"main": repo.head("main"), "feature": repo.head("feature")}
    assert out.head_sha == repo.head("main")


def test_tag_and_expression_branches_resolve_through_git(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    first = repo.commit("one", at=local(SEOUL, 2026, 9, 29, 9))
    repo.git("tag", "-a", "v1", "-m", "release")
    repo.commit("two", at=local(SEOUL, 2026, 9, 29, 10))

    out = collect(repo.path, ["v1", "main~1"], *day_window(date(2026, 9, 29), SEOUL))

    assert out.heads == {"v1": first, "main~1": first}
    assert subjects(out) == ["one"]


def test_large_history_window(tmp_path: Path, bounds: WalkBounds) -> None:
    large = build_large_repo(tmp_path, commits=600, per_day=50)
    start = large.first_at + timedelta(days=3)

    out = collect(large.repo.path, ["main"], start, start + timedelta(days=1), bounds=bounds)

    assert [c.subject.split(":")[0] for c in out.commits] == [f"change {i}" for i in range(150, 200)]
    assert all(c.files and c.insertions > 0 for c in out.commits)


def test_empty_window(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    repo.commit("old", at=local(SEOUL, 2026, 9, 1))
    out = collect(repo.path, ["main"], *day_window(date(2026, 9, 29), SEOUL))
    assert out.commits == [] and out.head_sha == repo.head()


@pytest.mark.parametrize("make", ["missing", "not-a-repo"])
def test_missing_repository_is_permanent(tmp_path: Path, make: str) -> None:
    path = tmp_path / "nowhere"
    if make == "not-a-repo":
        path.mkdir()
    with pytest.raises(StepError) as caught:
        collect(path, ["main"], *day_window(date(2026, 9, 29), SEOUL))
    assert caught.value.code == "GIT_REPO_NOT_FOUND"
    assert not caught.value.retryable
    assert str(path) in caught.value.message


def test_unknown_branch_is_a_config_error(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    repo.commit("one", at=local(SEOUL, 2026, 9, 29, 9))
    with pytest.raises(StepError) as caught:
        collect(repo.path, ["main", "release/9.9"], *day_window(date(2026, 9, 29), SEOUL))
    assert caught.value.code == "CONFIG_INVALID" and not caught.value.retryable
    assert "'release/9.9'" in caught.value.message


def test_missing_pinned_sha_is_retryable(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    repo.commit("one", at=local(SEOUL, 2026, 9, 29, 9))
    ghost = "0123456789abcdef0123456789abcdef01234567"
    with pytest.raises(StepError) as caught:
        collect(repo.path, ["main"], *day_window(date(2026, 9, 29), SEOUL),
                pinned_heads={"main": ghost})
    assert caught.value.code == "GIT_COMMIT_NOT_FOUND"
    assert caught.value.retryable
    assert "main=0123456789ab" in caught.value.message and "no remote" in caught.value.message


def test_missing_pinned_sha_is_fetched_from_origin(tmp_path: Path) -> None:
    origin = make_repo(tmp_path, "origin")
    origin.commit("one", at=local(SEOUL, 2026, 9, 29, 9))
    clone: GitRepo = clone_repo(origin, tmp_path, "node2")
    pinned = origin.commit("two, made after the clone", at=local(SEOUL, 2026, 9, 29, 10))

    out = collect(clone.path, ["main"], *day_window(date(2026, 9, 29), SEOUL),
                  pinned_heads={"main": pinned})

    assert out.head_sha == pinned
    assert subjects(out) == ["one", "two, made after the clone"]


def test_naive_window_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    repo.commit("one", at=local(SEOUL, 2026, 9, 29, 9))
    with pytest.raises(StepError) as caught:
        collect(repo.path, ["main"], datetime(2026, 9, 29), datetime(2026, 9, 30))
    assert caught.value.code == "CONFIG_INVALID"


def test_rebased_commits_stay_in_their_author_window(tmp_path: Path, bounds: WalkBounds) -> None:
    repo = make_repo(tmp_path)
    repo.commit("rebased three days later", at=local(SEOUL, 2026, 9, 29, 9),
                committed_at=local(SEOUL, 2026, 10, 2, 9))
    repo.commit("rebased ten days later", at=local(SEOUL, 2026, 9, 29, 10),
                committed_at=local(SEOUL, 2026, 10, 9, 9))
    window = day_window(date(2026, 9, 29), SEOUL)

    default = collect(repo.path, ["main"], *window, bounds=bounds)
    bounded = collect(repo.path, ["main"], *window,
                      bounds=WalkBounds(late=timedelta(days=7), near=bounds.near,
                                        abort_after=bounds.abort_after))

    # No upper bound by default: author date decides, however late the commit was re-committed.
    assert subjects(default) == ["rebased three days later", "rebased ten days later"]
    assert subjects(bounded) == ["rebased three days later"]
