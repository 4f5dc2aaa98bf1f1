"""COLLECT_GIT edges that its speed-ups could break (issue 14): the author-window
prefilter of the deep-history walk, token-based numstat parsing, and the handles
kept between calls (GitPython's repository, gitdb's object database)."""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.errors import StepError
from steps import git_log
from steps.collect_git import CollectOutput, WalkBounds, collect
from tests.fakes.gitrepo import build_large_repo, make_repo

UTC = timezone.utc
OLD_LAPTOP = ("alice", "alice@old-laptop.local")
BOB = ("Bob Builder", "bob@example.com")
SHA = b"0123456789abcdef0123456789abcdef01234567"
STRATEGIES = {
    "default": WalkBounds(),
    "single-pass": WalkBounds(near=timedelta(days=3650)),
    "two-pass": WalkBounds(near=timedelta(0)),
}


@pytest.fixture(params=sorted(STRATEGIES))
def bounds(request: pytest.FixtureRequest) -> WalkBounds:
    return STRATEGIES[request.param]


def subjects(out: CollectOutput) -> list[str]:
    return [c.subject for c in out.commits]


def at(ts: int) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


@settings(max_examples=300, deadline=None)
@given(lo=st.integers(0, 10 ** 11), width=st.integers(1, 10 ** 8),
       offsets=st.lists(st.integers(-10 ** 6, 10 ** 6), max_size=8))
def test_window_pattern_matches_exactly_the_times_in_the_window(lo: int, width: int,
                                                                offsets: list[int]) -> None:
    hi = lo + width
    pattern = git_log.window_pattern(lo, hi)
    probes = {lo - 1, lo, lo + 1, hi - 1, hi, hi + 1, *(lo + o for o in offsets),
              *(hi + o for o in offsets)}
    for t in sorted(p for p in probes if p >= 0):
        line = b"\n%d %s\x1fName\x1fmail" % (t, SHA)
        assert bool(pattern.fullmatch(line)) == (lo <= t < hi), t


def test_window_across_a_change_in_the_number_of_digits(tmp_path: Path,
                                                          bounds: WalkBounds) -> None:
    # 2001-09-09T01:46:40Z is Unix time 1,000,000,000: author times gain a digit there.
    repo = make_repo(tmp_path)
    for ts in (999_999_998, 999_999_999, 1_000_000_000, 1_000_000_001, 1_000_090_000):
        repo.commit(f"at {ts}", at=at(ts))

    out = collect(repo.path, ["main"], at(999_999_999), at(1_000_000_001), bounds=bounds)

    assert subjects(out) == ["at 999999999", "at 1000000000"]


def test_deep_history_window_keeps_late_commits_and_honours_mailmap(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    large = build_large_repo(tmp_path, commits=600, per_day=50)  # 12 days of history
    repo = large.repo
    repo.git("reset", "-q", "--hard")  # a work tree for the commits made on top
    start = large.first_at + timedelta(days=3)
    end = start + timedelta(days=1)
    tip = large.authored_at(large.commits - 1)
    repo.commit("mailmap", at=tip, files={
        ".mailmap": "Alice Kim <alice@example.com> <alice@old-laptop.local>\n"})
    repo.commit("rebased onto the tip: authored in the window", at=start + timedelta(hours=5),
                committed_at=tip + timedelta(hours=1), author=OLD_LAPTOP)
    repo.commit("binary, committed after the window", at=start + timedelta(hours=6),
                committed_at=tip + timedelta(hours=2), author=BOB,
                files={"assets/blob.bin": b"\x00\x01\x02\xff" * 64})
    repo.commit("authored one second before the window", at=start - timedelta(seconds=1),
                committed_at=tip + timedelta(hours=3))
    repo.commit("authored at the window end", at=end, committed_at=tip + timedelta(hours=4))
    walked: list[int] = []
    real_walk = git_log.walk

    def counting_walk(*args: object, **kwargs: object) -> object:
        walked.append(1)
        return real_walk(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(git_log, "walk", counting_walk)

    out = collect(repo.path, ["main"], start, end)
    alice = collect(repo.path, ["main"], start, end, authors=["alice@example.com"])
    single = collect(repo.path, ["main"], start, end, bounds=STRATEGIES["single-pass"])

    assert walked, "the default strategy should walk this window deep in history"
    expected = sorted([(large.authored_at(i), f"change {i}") for i in range(150, 200)]
                      + [(start + timedelta(hours=5), "rebased onto the tip"),
                         (start + timedelta(hours=6), "binary, committed after the window")])
    assert [s.split(":")[0] for s in subjects(out)] == [label for _, label in expected]
    assert out == single
    [rebased] = alice.commits  # the other commits in the window are by the "Dev n" authors and Bob
    assert (rebased.author_name, rebased.author_email) == ("Alice Kim", "alice@example.com")
    [binary] = [c for c in out.commits if c.subject.startswith("binary")]
    assert [(f.path, f.binary, f.insertions, f.deletions) for f in binary.files] == \
        [("assets/blob.bin", True, 0, 0)]


def test_odd_paths_and_messages_survive_parsing(tmp_path: Path, bounds: WalkBounds) -> None:
    repo = make_repo(tmp_path)
    day = datetime(2026, 9, 29, tzinfo=UTC)
    repo.commit("seed", at=day - timedelta(days=1), files={"\x1estarts with RS.txt": "a\n"})
    repo.git("mv", "--", "\x1estarts with RS.txt", "renamed\ttab.txt")
    # The header's own separators inside a message (inside: the subject/body split strips
    # them at the ends and breaks lines at RS, as Python's str.splitlines does).
    sha = repo.commit("odd \x1f separator\n\nbody with \x1f and \x1e inside", at=day, files={
        "renamed\ttab.txt": "a\nb\n",
        "line\nbreak.txt": "x\n",
        "\x1fstarts with US.bin": b"\x00\xff",
    })

    out = collect(repo.path, ["main"], day, day + timedelta(days=1), bounds=bounds)

    [commit] = out.commits
    assert commit.sha == sha
    assert (commit.subject, commit.body) == ("odd \x1f separator", "body with \x1f and \x1e inside")
    files = {f.path: (f.old_path, f.insertions, f.deletions, f.binary) for f in commit.files}
    assert files == {"renamed\ttab.txt": ("\x1estarts with RS.txt", 1, 0, False),
                     "line\nbreak.txt": (None, 1, 0, False),
                     "\x1fstarts with US.bin": (None, 0, 0, True)}
    assert (commit.insertions, commit.deletions) == (2, 0)


def test_kept_object_database_sees_objects_written_later(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    objects = repo.path / ".git" / "objects"
    first = repo.commit("one", at=datetime(2026, 9, 29, 9, tzinfo=UTC))
    assert git_log.committer_times(objects, [first]) == [int(datetime(2026, 9, 29, 9, tzinfo=UTC).timestamp())]

    repo.git("gc", "-q", "--prune=now")  # every object moves into a new pack; the loose ones go
    second = repo.commit("two", at=datetime(2026, 9, 29, 10, tzinfo=UTC))  # loose
    repo.git("repack", "-q", "-d")  # and another pack, written just after
    third = repo.commit("three", at=datetime(2026, 9, 29, 11, tzinfo=UTC))

    times = git_log.committer_times(objects, [first, second, third])

    assert times == [int(datetime(2026, 9, 29, h, tzinfo=UTC).timestamp()) for h in (9, 10, 11)]


def test_kept_repository_handle_follows_the_path(tmp_path: Path) -> None:
    day = datetime(2026, 9, 29, tzinfo=UTC)
    repo = make_repo(tmp_path)
    repo.commit("first life", at=day + timedelta(hours=9))
    assert subjects(collect(repo.path, ["main"], day, day + timedelta(days=1))) == ["first life"]

    shutil.rmtree(repo.path)
    with pytest.raises(StepError) as caught:
        collect(repo.path, ["main"], day, day + timedelta(days=1))
    assert caught.value.code == "GIT_REPO_NOT_FOUND" and not caught.value.retryable

    again = make_repo(tmp_path, branch="trunk")
    again.commit("second life", at=day + timedelta(hours=10))
    assert subjects(collect(again.path, ["trunk"], day, day + timedelta(days=1))) == ["second life"]
    with pytest.raises(StepError) as unknown:
        collect(again.path, ["main"], day, day + timedelta(days=1))
    assert unknown.value.code == "CONFIG_INVALID"


def test_a_shallow_clone_is_refused_without_asking_git(tmp_path: Path) -> None:
    """A clone whose history stops short cannot tell what a report holds: GIT_REPO_SHALLOW, naming the fix."""
    import subprocess

    from engine.core import errors
    from steps import git_repo
    from tests.fakes.gitrepo import git_env, make_repo

    source = make_repo(tmp_path, "source")
    for n in range(3):
        source.commit(f"c{n}", at=datetime(2026, 11, 2, 9 + n, tzinfo=UTC))
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{source.path}", str(shallow)], env=git_env(),
                   check=True)
    with pytest.raises(errors.StepError) as caught:
        git_repo.current_heads(shallow, ["main"])
    assert caught.value.code == "GIT_REPO_SHALLOW" and "git fetch --unshallow" in caught.value.message
    assert git_repo.current_heads(source.path, ["main"])  # the full clone is read


def test_the_forge_is_read_from_origin_and_follows_url_rewrites(tmp_path: Path) -> None:
    from steps import git_repo

    repo = make_repo(tmp_path, "forge")
    assert git_repo.forge(repo.path) is None  # no origin
    repo.git("remote", "add", "origin", "git@github.com:psf/requests.git")
    assert git_repo.forge(repo.path) == "https://github.com/psf/requests"
    repo.git("remote", "set-url", "origin", "gh:psf/httpx")
    repo.git("config", "url.https://github.com/.insteadOf", "gh:")  # git applies it; so does the forge
    assert git_repo.forge(repo.path) == "https://github.com/psf/httpx"
