"""SAVE_MARKDOWN: write a report as a Markdown file, atomically and idempotently.

Contract (SPEC §6, §10.4):

- The file lives at ``{reports_dir}/{project}/{business_key}-{project}-{kind}-summary.md``
  (``.r{n}.md`` for revision n >= 2) and can never leave ``reports_dir``: the
  project and key are validated strictly and the resolved path (symlinks
  followed) must stay inside the resolved reports directory.
- A write is a temp file in the target directory, fsynced, then renamed over
  the target with ``os.replace``; ``check_fence()`` runs immediately before
  the rename, so a worker that lost its lease renames nothing.
- One file per (key, content): an existing file with identical bytes is left
  alone (``unchanged``); different bytes follow ``on_existing``.
- Every ``OSError`` becomes ``REPORT_WRITE_FAILED`` and no temp file is left.

The front matter carries no wall-clock field, so a re-run writes identical bytes.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import secrets
import socket
from collections.abc import Callable, Mapping
from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from engine.core import errors

PROJECT_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
KEY_PATTERN = re.compile(r"[0-9A-Za-z][0-9A-Za-z:_-]{0,63}")
KINDS = ("daily", "weekly", "monthly", "quarterly", "sprint")
OnExisting = Literal["version", "overwrite", "skip"]
SaveAction = Literal["created", "unchanged", "versioned", "overwritten", "skipped"]
_MAX_VERSIONS = 10_000
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


class SaveOutput(BaseModel):
    """Where the report is and what this call did.

    ``sha256`` is the digest of the file at ``path`` after the call (for
    ``skipped`` that is the existing file, not the new document).
    """

    path: str
    location: str
    sha256: str
    written: bool
    action: SaveAction


def _refuse(message: str) -> errors.StepError:
    return errors.step_error("REPORT_WRITE_FAILED", message)


def report_path(reports_dir: Path, project: str, business_key: str, kind: str, revision: int) -> Path:
    """The absolute path of a report file; raises ``REPORT_WRITE_FAILED`` if unsafe.

    ``project`` must match ``[a-z0-9][a-z0-9_-]*`` and ``business_key``
    ``[0-9A-Za-z:_-]+`` (``2026-09-29``, ``2026-W40``, ``2026-09-29T10:30Z``);
    ``kind`` is ``daily``, ``weekly``, ``monthly``, ``quarterly`` or ``sprint``; ``revision`` >= 1. The result, with
    symlinks resolved, is checked to lie inside the resolved ``reports_dir``.
    """
    if not PROJECT_PATTERN.fullmatch(project):
        raise _refuse(f"refusing project name {project!r}: it must match [a-z0-9][a-z0-9_-]* (64 chars at most)")
    if not KEY_PATTERN.fullmatch(business_key):
        raise _refuse(f"refusing business key {business_key!r}: it must match [0-9A-Za-z:_-]+ (64 chars at most)")
    if kind not in KINDS:
        raise _refuse(f"refusing report kind {kind!r}: expected one of {', '.join(KINDS)}")
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 1:
        raise _refuse(f"refusing revision {revision!r}: expected an integer >= 1")
    suffix = f".r{revision}.md" if revision >= 2 else ".md"
    root = Path(os.path.abspath(reports_dir)).resolve()
    path = root / project / f"{business_key}-{project}-{kind}-summary{suffix}"
    _check_inside(root, path)
    return path


TEAM_FOLDER = "_team"


def team_report_path(reports_dir: Path, schedule: str, business_key: str, kind: str, revision: int, *,
                     period_once: bool = False) -> Path:
    """A team report's path: ``{reports_dir}/_team/{business_key}-{schedule}-{kind}-summary.md`` (SPEC §17).

    ``schedule`` obeys the project-name rule; the same checks as ``report_path`` apply. ``period_once``
    (runs pinned with layout 5 on): a schedule named for its period (``core-daily``) is not followed by
    the period again (``2026-09-29-core-daily-summary.md``, not ``…-core-daily-daily-summary.md``).
    """
    path = report_path(reports_dir, schedule, business_key, kind, revision)
    name = path.name
    if period_once and (schedule == kind or schedule.endswith(f"-{kind}")):
        name = name.replace(f"-{schedule}-{kind}-summary", f"-{schedule}-summary", 1)
    return path.parent.parent / TEAM_FOLDER / name


def _check_inside(root: Path, path: Path) -> None:
    resolved = path.resolve()
    if not resolved.is_relative_to(root):
        raise _refuse(f"refusing to write {path}: it resolves to {resolved}, outside the reports directory {root}")


def render_document(front_matter: Mapping[str, Any], body: str) -> str:
    """Markdown with a YAML front matter block; same input, same bytes.

    Keys are emitted sorted at every level; strings are JSON-quoted (valid
    YAML); mappings become indented blocks, lists of scalars flow sequences.
    Values may be str, int, float, bool, None, date/datetime (ISO 8601),
    lists/tuples and mappings. Callers must not put wall-clock values in it.
    The body ends with exactly one newline.
    """
    lines = ["---", *_yaml_lines(front_matter, 0), "---", ""]
    return "\n".join(lines) + "\n" + body.strip("\n") + "\n"


def _yaml_lines(mapping: Mapping[str, Any], indent: int) -> list[str]:
    pad = " " * indent
    out: list[str] = []
    for key in sorted(mapping, key=str):
        value = mapping[key]
        name = str(key) if _PLAIN_KEY.fullmatch(str(key)) else json.dumps(str(key), ensure_ascii=False)
        if isinstance(value, Mapping):
            out.append(f"{pad}{name}:" + (" {}" if not value else ""))
            out.extend(_yaml_lines(value, indent + 2))
        elif isinstance(value, list | tuple) and any(isinstance(v, Mapping | list | tuple) for v in value):
            out.append(f"{pad}{name}:")
            for item in value:
                if isinstance(item, Mapping):
                    nested = _yaml_lines(item, indent + 4) or [f"{pad}    {{}}"]
                    out.append(f"{pad}  - {nested[0].lstrip()}")
                    out.extend(nested[1:])
                else:
                    out.append(f"{pad}  - {_scalar(item)}")
        else:
            out.append(f"{pad}{name}: {_scalar(value)}")
    return out


def _scalar(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    if isinstance(value, datetime):
        text = value.isoformat()
        return json.dumps(text[:-6] + "Z" if text.endswith("+00:00") else text)
    if isinstance(value, date):
        return json.dumps(value.isoformat())
    if value is None or isinstance(value, bool | int | float | str):
        return json.dumps(value, ensure_ascii=False)
    raise TypeError(f"front matter value {value!r} of type {type(value).__name__} is not supported")


def _versioned(path: Path, n: int) -> Path:
    return path.with_name(f"{path.name[:-3]}-v{n}.md")


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _describe(exc: OSError) -> str:
    hint = {
        errno.ENOSPC: "the disk is full",
        errno.EDQUOT: "the disk quota is exceeded",
        errno.EROFS: "the file system is read-only",
        errno.EACCES: "permission denied: the reports directory is not writable by this user",
        errno.EPERM: "operation not permitted on the reports directory",
    }.get(exc.errno or -1)
    return hint or (exc.strerror or str(exc))


def _write_atomic(path: Path, data: bytes, check_fence: Callable[[], None]) -> None:
    """Temp file beside ``path``, write + fsync, fence check, ``os.replace``.

    Whatever goes wrong (including the fence raising), the temp file is removed.
    """
    tmp_name = str(path.parent / f".{path.name}.{secrets.token_hex(8)}.tmp")
    # 0o666 less the umask, as the database gets: `umask 077` keeps reports private.
    fd = os.open(tmp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        check_fence()
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable; not every platform lets a directory be opened.
    with contextlib.suppress(OSError):
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _own_file(path: Path, replacing: tuple[str, str] | None) -> Path | None:
    """The file to overwrite in place: ``replacing``'s path when it is ``path`` or one of its versions and
    still holds ``replacing``'s sha256; else None."""
    if replacing is None:
        return None
    earlier = Path(replacing[0])
    version = re.fullmatch(re.escape(path.name[:-3]) + r"-v[0-9]{1,4}\.md", earlier.name)
    if earlier != path and not (earlier.parent == path.parent and version):
        return None
    existing = _read(earlier)
    if existing is None or hashlib.sha256(existing).hexdigest() != replacing[1]:
        return None
    return earlier


def save(
    reports_dir: Path,
    project: str,
    business_key: str,
    kind: str,
    revision: int,
    document: str,
    *,
    on_existing: str = "version",
    check_fence: Callable[[], None] = lambda: None,
    hostname: str | None = None,
    team: bool = False,
    period_once: bool = False,
    replacing: tuple[str, str] | None = None,
) -> SaveOutput:
    """Write ``document`` (UTF-8) to the report path for (project, key, kind, revision).

    - No file yet: write it (``created``).
    - Same bytes already there: nothing written (``unchanged``).
    - Different bytes: ``version`` writes the first free ``-v{n}.md`` (n >= 2),
      unless some ``-v{n}.md`` already holds these bytes (``unchanged``, that
      path), so retries never multiply files; ``overwrite`` replaces the file;
      ``skip`` leaves it (``skipped``).

    ``replacing`` is ``(path, sha256)`` of a file this run saved before and now writes
    again in place (a report that replaces a fallback, SPEC §15.5): when that path is
    this report's own (``path`` or a ``-v{n}.md`` of it) and still holds those bytes,
    it is overwritten (``overwritten``) whatever ``on_existing`` says; a file edited or
    removed since is left alone and the rules above apply.

    ``check_fence`` is called right before the rename and may raise
    (``LeaseLost``): then nothing is renamed and the temp file is removed.
    Raises ``REPORT_WRITE_FAILED`` for an unsafe path or any ``OSError``.
    """
    if on_existing not in ("version", "overwrite", "skip"):
        raise _refuse(f"unknown on_existing {on_existing!r}: expected version, overwrite or skip")
    # ``team``: ``project`` is the team schedule's name, the file goes under ``_team/``.
    path = (team_report_path(reports_dir, project, business_key, kind, revision, period_once=period_once) if team
            else report_path(reports_dir, project, business_key, kind, revision))
    data = document.encode("utf-8")
    digest = hashlib.sha256(data).hexdigest()
    host = hostname if hostname is not None else socket.gethostname()

    def result(target: Path, action: SaveAction, written: bool, sha256: str = digest) -> SaveOutput:
        return SaveOutput(path=str(target), location=f"{host}:{target}", sha256=sha256,
                          written=written, action=action)

    target = path
    try:
        _check_inside(path.parents[1], path)  # before creating anything: a symlink swapped in since report_path
        path.parent.mkdir(parents=True, exist_ok=True)
        _check_inside(path.parents[1], path)  # and after: the folder made is the one checked
        own = _own_file(path, replacing)
        if own is not None:
            target = own
            if _read(own) == data:
                return result(own, "unchanged", False)
            _write_atomic(own, data, check_fence)
            return result(own, "overwritten", True)
        target = path
        existing = _read(path)
        if existing is None:
            _write_atomic(path, data, check_fence)
            return result(path, "created", True)
        if existing == data:
            return result(path, "unchanged", False)
        if on_existing == "skip":
            return result(path, "skipped", False, hashlib.sha256(existing).hexdigest())
        if on_existing == "overwrite":
            _write_atomic(path, data, check_fence)
            return result(path, "overwritten", True)
        for n in range(2, _MAX_VERSIONS):
            target = _versioned(path, n)
            existing = _read(target)
            if existing is None:
                _write_atomic(target, data, check_fence)
                return result(target, "versioned", True)
            if existing == data:
                return result(target, "unchanged", False)
    except OSError as exc:
        raise _refuse(f"cannot write report {target}: {_describe(exc)}") from exc
    raise _refuse(f"cannot write report {path}: more than {_MAX_VERSIONS} versions exist")
