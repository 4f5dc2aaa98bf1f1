"""SAVE_MARKDOWN: paths that cannot escape, atomic writes, one file per (key, content)."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.core import errors
from steps import save_markdown

FRONT = {"run_id": 7, "business_key": "2026-09-29", "heads": {"main": "abc123", "dev": "def456"},
         "model": "builtin", "prompt_version": "v1", "window": ["2026-09-28T15:00:00Z", "2026-09-29T15:00:00Z"]}


def save(reports: Path, document: str, **kwargs: Any) -> save_markdown.SaveOutput:
    return save_markdown.save(reports, "platform", "2026-09-29", "daily", 1, document, hostname="node-a", **kwargs)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.rglob("*") if p.name.endswith(".tmp"))


def test_report_paths(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    assert save_markdown.report_path(tmp_path, "platform", "2026-09-29", "daily", 1) == \
        root / "platform" / "2026-09-29-platform-daily-summary.md"
    assert save_markdown.report_path(tmp_path, "platform", "2026-W40", "weekly", 1).name == "2026-W40-platform-weekly-summary.md"
    assert save_markdown.report_path(tmp_path, "p_1", "2026-09-29T10:30Z", "daily", 3).name == \
        "2026-09-29T10:30Z-p_1-daily-summary.r3.md"


@pytest.mark.parametrize(("project", "key", "kind", "revision"), [
    ("../x", "2026-09-29", "daily", 1),
    ("..", "2026-09-29", "daily", 1),
    ("Platform", "2026-09-29", "daily", 1),
    ("", "2026-09-29", "daily", 1),
    ("platform", "2026/09/29", "daily", 1),
    ("platform", "../../etc/passwd", "daily", 1),
    ("platform", "..", "daily", 1),
    ("platform", "", "daily", 1),
    ("platform", "2026-09-29", "hourly", 1),
    ("platform", "2026-09-29", "daily", 0),
])
def test_unsafe_names_are_refused(tmp_path: Path, project: str, key: str, kind: str, revision: int) -> None:
    with pytest.raises(errors.StepError) as caught:
        save_markdown.save(tmp_path / "reports", project, key, kind, revision, "x")
    assert caught.value.code == "REPORT_WRITE_FAILED"
    assert not caught.value.retryable
    assert list(tmp_path.iterdir()) == []


def test_symlink_out_of_the_reports_dir_is_refused(tmp_path: Path) -> None:
    reports, outside = tmp_path / "reports", tmp_path / "outside"
    reports.mkdir()
    outside.mkdir()
    (reports / "platform").symlink_to(outside, target_is_directory=True)
    with pytest.raises(errors.StepError, match="outside the reports directory") as caught:
        save(reports, "doc")
    assert caught.value.code == "REPORT_WRITE_FAILED"
    assert list(outside.iterdir()) == []


def test_a_symlink_swapped_in_after_the_path_was_checked_creates_no_folder_out_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reports, outside = tmp_path / "reports", tmp_path / "outside"
    reports.mkdir()
    outside.mkdir()
    checked = save_markdown.report_path

    def then_swapped(*args: Any) -> Path:
        path = checked(*args)  # the path is checked while the folder is not there yet...
        (reports / "platform").symlink_to(outside / "made-by-us", target_is_directory=True)  # ...then it is
        return path

    monkeypatch.setattr(save_markdown, "report_path", then_swapped)
    with pytest.raises(errors.StepError, match="outside the reports directory"):
        save(reports, "doc")
    assert list(outside.iterdir()) == []  # checked again before the folder was created, not only after


def test_symlinked_file_out_of_the_reports_dir_is_refused(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    (reports / "platform").mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (reports / "platform" / "2026-09-29-platform-daily-summary.md").symlink_to(victim)
    with pytest.raises(errors.StepError):
        save(reports, "doc")
    assert victim.read_text() == "keep"


def test_render_is_deterministic_and_has_front_matter() -> None:
    reordered = dict(reversed(list(FRONT.items())))
    reordered["heads"] = {"dev": "def456", "main": "abc123"}
    first = save_markdown.render_document(FRONT, "# Report\n\nbody\n\n")
    assert first == save_markdown.render_document(reordered, "# Report\n\nbody")
    assert first.startswith("---\nbusiness_key: \"2026-09-29\"\nheads:\n  dev: \"def456\"\n  main: \"abc123\"\n")
    assert first.endswith("---\n\n# Report\n\nbody\n")
    assert 'window: ["2026-09-28T15:00:00Z", "2026-09-29T15:00:00Z"]' in first


def test_created_then_unchanged_writes_identical_bytes_once(tmp_path: Path) -> None:
    document = save_markdown.render_document(FRONT, "# Report")
    first = save(tmp_path, document)
    assert (first.action, first.written) == ("created", True)
    path = Path(first.path)
    assert path.read_bytes() == document.encode()
    assert first.location == f"node-a:{path}"
    before = path.stat()
    again = save(tmp_path, save_markdown.render_document(dict(FRONT), "# Report"))
    assert (again.action, again.written, again.path, again.sha256) == ("unchanged", False, first.path, first.sha256)
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert oct(after.st_mode & 0o777) == oct(0o644)
    assert leftovers(tmp_path) == []


def test_different_content_is_versioned_once_per_content(tmp_path: Path) -> None:
    base = save(tmp_path, "one")
    second = save(tmp_path, "two")
    third = save(tmp_path, "three")
    assert (second.action, Path(second.path).name) == ("versioned", "2026-09-29-platform-daily-summary-v2.md")
    assert Path(third.path).name.endswith("-summary-v3.md")
    retry = save(tmp_path, "two")
    assert (retry.action, retry.path, retry.written) == ("unchanged", second.path, False)
    assert save(tmp_path, "one").path == base.path
    assert sorted(p.name for p in (tmp_path / "platform").iterdir()) == [
        "2026-09-29-platform-daily-summary-v2.md", "2026-09-29-platform-daily-summary-v3.md",
        "2026-09-29-platform-daily-summary.md"]


def test_revision_files_are_separate(tmp_path: Path) -> None:
    out = save_markdown.save(tmp_path, "platform", "2026-09-29", "daily", 2, "r2", hostname="h")
    assert Path(out.path).name == "2026-09-29-platform-daily-summary.r2.md"
    assert save_markdown.save(tmp_path, "platform", "2026-09-29", "daily", 2, "r2b", hostname="h").path.endswith(".r2-v2.md")


def test_overwrite_and_skip(tmp_path: Path) -> None:
    first = save(tmp_path, "one")
    skipped = save(tmp_path, "two", on_existing="skip")
    assert (skipped.action, skipped.written, skipped.sha256) == ("skipped", False, first.sha256)
    assert Path(first.path).read_text() == "one"
    over = save(tmp_path, "two", on_existing="overwrite")
    assert (over.action, over.written, over.path) == ("overwritten", True, first.path)
    assert Path(first.path).read_text() == "two"
    assert len(list((tmp_path / "platform").iterdir())) == 1
    with pytest.raises(errors.StepError):
        save(tmp_path, "three", on_existing="append")


def lease_lost() -> None:
    raise errors.LeaseLost(run_id=1, token=5)


def test_lost_fence_before_rename_leaves_no_file(tmp_path: Path) -> None:
    with pytest.raises(errors.LeaseLost):
        save(tmp_path, "doc", check_fence=lease_lost)
    assert list((tmp_path / "platform").iterdir()) == []
    save(tmp_path, "doc")
    with pytest.raises(errors.LeaseLost):
        save(tmp_path, "other", check_fence=lease_lost)
    assert [p.name for p in (tmp_path / "platform").iterdir()] == ["2026-09-29-platform-daily-summary.md"]


@pytest.fixture
def unwritable_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory this process cannot create files in (chmod, or chattr +i when running as root)."""
    directory = tmp_path / "reports" / "platform"
    directory.mkdir(parents=True)
    directory.chmod(0o555)
    immutable = False
    probe = directory / "probe"
    try:
        probe.touch()
    except PermissionError:
        pass
    else:  # root ignores the mode bits
        probe.unlink()
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(directory)],
                                                            capture_output=True).returncode != 0:
            directory.chmod(0o755)
            pytest.skip("cannot make a directory read-only here")
        immutable = True
    yield directory.parent
    if immutable:
        subprocess.run(["chattr", "-i", str(directory)], check=True)
    directory.chmod(0o755)


def test_read_only_directory_is_a_clear_permanent_failure(unwritable_dir: Path) -> None:
    with pytest.raises(errors.StepError) as caught:
        save(unwritable_dir, "doc")
    assert caught.value.code == "REPORT_WRITE_FAILED"
    assert not caught.value.retryable
    assert "not writable" in caught.value.message or "not permitted" in caught.value.message
    assert list((unwritable_dir / "platform").iterdir()) == []


def test_disk_full_removes_the_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(errors.StepError, match="disk is full") as caught:
        save(tmp_path, "doc")
    assert caught.value.code == "REPORT_WRITE_FAILED"
    assert list((tmp_path / "platform").iterdir()) == []


def test_failed_rename_removes_the_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    save(tmp_path, "old")

    def read_only(src: str, dst: str) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(os, "replace", read_only)
    with pytest.raises(errors.StepError, match="read-only"):
        save(tmp_path, "new", on_existing="overwrite")
    assert [p.name for p in (tmp_path / "platform").iterdir()] == ["2026-09-29-platform-daily-summary.md"]
    assert (tmp_path / "platform" / "2026-09-29-platform-daily-summary.md").read_text() == "old"


@pytest.mark.parametrize(("umask", "mode"), [(0o077, 0o600), (0o002, 0o664), (0o022, 0o644)])
def test_a_report_follows_the_umask_as_the_database_does(tmp_path: Path, umask: int, mode: int) -> None:
    previous = os.umask(umask)
    try:
        first = save(tmp_path, save_markdown.render_document(FRONT, "# Report"))
    finally:
        os.umask(previous)
    assert oct(Path(first.path).stat().st_mode & 0o777) == oct(mode)
    assert leftovers(tmp_path) == []


def test_a_team_file_names_its_period_once_from_layout_5(tmp_path: Path) -> None:
    def name(schedule: str, kind: str, period_once: bool) -> str:
        return save_markdown.team_report_path(tmp_path, schedule, "2026-W40", kind, 1, period_once=period_once).name

    assert name("core-weekly", "weekly", True) == "2026-W40-core-weekly-summary.md"
    assert name("weekly", "weekly", True) == "2026-W40-weekly-summary.md"
    assert name("core", "weekly", True) == "2026-W40-core-weekly-summary.md"
    assert name("core-daily", "weekly", True) == "2026-W40-core-daily-weekly-summary.md"  # another period: kept
    # A run pinned before layout 5 keeps the name it was written under: its retry finds its own file.
    assert name("core-weekly", "weekly", False) == "2026-W40-core-weekly-weekly-summary.md"
    assert save_markdown.team_report_path(tmp_path, "core-weekly", "2026-W40", "weekly", 2,
                                          period_once=True).name == "2026-W40-core-weekly-summary.r2.md"
