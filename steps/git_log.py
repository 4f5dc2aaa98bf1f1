"""Running ``git`` for COLLECT_GIT and parsing what it prints.

Owns the commit models and the three git invocations the collector uses:

- ``window_log``: one ``git log -z --numstat`` over the committer-date
  range, for a window near the heads; read as a stream and abandoned
  (``None``) once more than ``abort_after`` commits newer than the window have
  gone by, since diffing those would cost more than listing them;
- ``walk``: the cheap pass for a window deep in history: author time and SHA
  of every commit in the range, no diffs (written to a temporary file: git
  flushes per commit, and a pipe turns that into one wake-up per commit);
- ``details``: ``git log --no-walk --numstat`` over exactly the chosen SHAs;
- ``committer_times``: the heads' committer times, read in-process (gitdb),
  which tell the collector which of the two strategies is cheaper;
- ``attribute_set``: which paths a commit's ``.gitattributes`` mark with an
  attribute (``linguist-generated``...), read by ``git check-attr`` from a
  scratch index of that commit, so the answer is the pinned head's, whatever
  the work tree holds.

Git runs with GitPython's git executable and options that make its output
independent of the user's configuration.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from typing import Any
from datetime import datetime, timezone
from pathlib import Path

import git
import gitdb
from pydantic import BaseModel


class FileChange(BaseModel):
    """One file of a commit. Binary files count 0 lines; renames keep ``old_path``.
    ``excluded``: generated, vendored or matched by the project's ``exclude`` globs, so
    left out of the report's statistics."""

    path: str
    insertions: int
    deletions: int
    old_path: str | None = None
    binary: bool = False
    excluded: bool = False


class CommitInfo(BaseModel):
    """A commit as reported: identity after ``.mailmap``, author date in UTC (``…Z``)."""

    sha: str
    author_name: str
    author_email: str
    authored_at: str
    subject: str
    body: str
    files: list[FileChange]
    insertions: int
    deletions: int


class GitFailure(Exception):
    """A git command that failed; ``missing_object`` when it named an unknown object."""

    def __init__(self, args: Sequence[str], returncode: int, stderr: str) -> None:
        text = stderr.strip()
        super().__init__(f"git {' '.join(args[:1])} exited {returncode}: {text}")
        self.missing_object = any(s in text for s in ("bad object", "unknown revision",
                                                      "bad revision", "not a valid object"))


_RS, _US = b"\x1e", b"\x1f"
# Per commit: RS sha US committer-time US author-time US name US email US message US NUL.
# The message goes last because it may contain anything but NUL.
_FORMAT = "--format=%x1e%H%x1f%ct%x1f%at%x1f%aN%x1f%aE%x1f%B%x1f"
_HEADER_TIMES = re.compile(rb"\x1e[0-9a-f]{40,64}\x1f([0-9]+)\x1f")
_COMMITTER = re.compile(rb"^committer [^\n]* ([0-9]+) [+-][0-9]{4}$", re.MULTILINE)
_DIFF_OPTIONS = ("-z", "--numstat", "--find-renames", "--no-textconv", "--no-ext-diff",
                 "--no-color")
_CONFIG = ("-c", "log.showSignature=false", "-c", "core.quotePath=false",
           "-c", "log.mailmap=true")
_READ_SIZE = 1 << 16


def _command(args: Sequence[str]) -> list[str]:
    return [git.Git.GIT_PYTHON_GIT_EXECUTABLE or "git", *_CONFIG, *args]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["GIT_TERMINAL_PROMPT"] = "0"  # a fetch must fail, never wait for a password
    return env


def run(repo_dir: Path, args: Sequence[str], *, stdin: bytes | None = None,
        timeout_s: float | None = None, env: dict[str, str] | None = None) -> bytes:
    """Run git in ``repo_dir`` (``env`` added to the environment) and return its stdout;
    raise ``GitFailure``."""
    try:
        proc = subprocess.run(_command(args), cwd=repo_dir, input=stdin, capture_output=True,
                              timeout=timeout_s, check=False, env={**_env(), **(env or {})})
    except subprocess.TimeoutExpired as exc:
        raise GitFailure(args, -1, f"timed out after {timeout_s}s") from exc
    except OSError as exc:
        raise GitFailure(args, -1, str(exc)) from exc
    if proc.returncode != 0:
        raise GitFailure(args, proc.returncode, proc.stderr.decode("utf-8", "replace"))
    return proc.stdout


def _range(since: datetime, until: datetime | None, include_merges: bool) -> list[str]:
    """Committer-date bounds (git walks no further back than ``since``) and merge filter."""
    fmt = "%Y-%m-%d %H:%M:%S +0000"
    args = [f"--since={since.astimezone(timezone.utc):{fmt}}"]
    if until is not None:
        args.append(f"--until={until.astimezone(timezone.utc):{fmt}}")
    return args if include_merges else [*args, "--no-merges"]


def committer_times(objects_dir: Path, shas: Sequence[str]) -> list[int] | None:
    """Committer times of ``shas`` read with gitdb (no subprocess); None if unreadable."""
    try:
        db = gitdb.GitDB(str(objects_dir))
        times = []
        for sha in shas:
            stream = db.stream(bytes.fromhex(sha))
            match = _COMMITTER.search(stream.read()) if stream.type == b"commit" else None
            if match is None:
                return None
            times.append(int(match.group(1)))
        return times
    except Exception:  # noqa: BLE001 - any failure only means "use the safe strategy"
        return None


def window_log(repo_dir: Path, heads: Sequence[str], since: datetime, until: datetime | None,
               end_ts: int, *, include_merges: bool, abort_after: int,
               keep: Keep | None = None) -> list[tuple[int, RawCommit]] | None:
    """Every commit with committer date in [since, until], diffed; ``None`` when abandoned.

    Returns ``(author time, commit)`` pairs. Abandons (kills git, returns
    ``None``) once more than ``abort_after`` commits with committer time ≥
    ``end_ts`` have been printed. ``keep`` as for ``parse_log``.
    """
    args = ["log", _FORMAT, *_DIFF_OPTIONS, *_range(since, until, include_merges), *heads, "--"]
    # stderr stays unread until stdout ends: git prints at most a line or two there.
    with subprocess.Popen(_command(args), cwd=repo_dir, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=_env()) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        buf = bytearray()
        scanned = newer = 0
        while chunk := proc.stdout.read1(_READ_SIZE):
            buf += chunk
            last = scanned
            for match in _HEADER_TIMES.finditer(buf, scanned):
                last = match.end()
                if int(match.group(1)) >= end_ts:
                    newer += 1
            scanned = max(last, len(buf) - 96)  # re-read a header cut by the chunk edge
            if newer > abort_after:
                proc.kill()
                proc.wait()
                return None
        complaint = proc.stderr.read()
        if proc.wait() != 0:
            raise GitFailure(args, proc.returncode, complaint.decode("utf-8", "replace"))
    return parse_log(bytes(buf), keep)


def walk(repo_dir: Path, heads: Sequence[str], since: datetime, until: datetime | None, *,
         include_merges: bool, with_idents: bool) -> list[tuple[int, str, frozenset[str]]]:
    """``(author time, sha, {name, email} casefolded or empty)`` of the range's commits.

    No diffs, so this costs about as much as the walk of a plain ``git log
    --since --until``.
    """
    fmt = "--format=%at %H" + ("%x1f%aN%x1f%aE" if with_idents else "")
    args = ["log", fmt, *_range(since, until, include_merges), *heads, "--"]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        code = subprocess.run(_command(args), cwd=repo_dir, stdout=out, stderr=err,
                              check=False, env=_env()).returncode
        if code != 0:
            err.seek(0)
            raise GitFailure(args, code, err.read().decode("utf-8", "replace"))
        out.seek(0)
        data = out.read()
    rows: list[tuple[int, str, frozenset[str]]] = []
    for line in data.split(b"\n"):
        if not line:
            continue
        head, *idents = line.decode("utf-8", "replace").split("\x1f")
        at, _, sha = head.partition(" ")
        rows.append((int(at), sha, frozenset(i.strip().casefold() for i in idents)))
    return rows


def details(repo_dir: Path, shas: Sequence[str]) -> list[tuple[int, RawCommit]]:
    """``(author time, commit)`` for exactly ``shas``, in one ``git log --no-walk`` call."""
    args = ["log", "--no-walk=unsorted", "--stdin", _FORMAT, *_DIFF_OPTIONS]
    out = run(repo_dir, args, stdin="".join(f"{sha}\n" for sha in shas).encode())
    return parse_log(out)


def attribute_set(repo_dir: Path, commit: str, paths: Sequence[str], attributes: Sequence[str]) -> set[str]:
    """The ``paths`` for which any of ``attributes`` is set (``attr`` or ``attr=true``) at ``commit``."""
    if not paths:
        return set()
    with tempfile.TemporaryDirectory(prefix="reportflow-attr-") as scratch:
        env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        run(repo_dir, ["read-tree", commit], env=env)
        out = run(repo_dir, ["check-attr", "--cached", "--stdin", "-z", *attributes],
                  stdin=b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths), env=env)
    fields = out.split(b"\0")
    return {fields[i].decode("utf-8", "surrogateescape") for i in range(0, len(fields) - 2, 3)
            if fields[i + 2] in (b"set", b"true")}


def iso_utc(ts: int) -> str:
    """A Unix time as ISO 8601 UTC ending in ``Z``."""
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


Keep = Callable[[int, str, str], bool]
#: A commit (file) as a dict shaped like ``CommitInfo`` (``FileChange``): validating
#: them all at once in pydantic-core costs a quarter of building models one by one.
RawCommit = dict[str, Any]
RawFile = dict[str, Any]


def parse_log(data: bytes, keep: Keep | None = None) -> list[tuple[int, RawCommit]]:
    """Parse ``git log -z --numstat`` output printed with ``_FORMAT``.

    ``keep(author_time, name, email)`` drops commits before their files are
    built (the single pass also prints commits just outside the window).

    After each header comes, if the commit has a diff, ``LF`` and numstat
    records: ``ins TAB del TAB path NUL``, or for a rename ``ins TAB del TAB
    NUL old NUL new NUL``; binary files show ``-`` counts (taken as 0). The
    message cannot contain NUL, so the first ``US NUL`` ends the header.
    Returns ``(author time, commit dict)`` in git's order.
    """
    commits: list[tuple[int, RawCommit]] = []
    pos, size = 0, len(data)
    while True:
        while pos < size and data[pos] in b"\n\x00":
            pos += 1
        if pos >= size:
            return commits
        if data[pos:pos + 1] != _RS:
            raise ValueError(f"unexpected git log output at byte {pos}")
        end = data.index(_US + b"\x00", pos)
        header = data[pos + 1:end].decode("utf-8", "replace")
        sha, _committed, authored, name, email, message = header.split("\x1f", 5)
        at = int(authored)
        wanted = keep is None or keep(at, name, email)
        pos = end + 2
        files: list[RawFile] = []
        if data[pos:pos + 1] == b"\n":
            pos += 1
            while pos < size and data[pos:pos + 1] != _RS:
                change, pos = _numstat_record(data, pos, build=wanted)
                if change is not None:
                    files.append(change)
        if not wanted:
            continue
        subject, body = split_message(message)
        commits.append((at, {
            "sha": sha, "author_name": name, "author_email": email, "authored_at": iso_utc(at),
            "subject": subject, "body": body, "files": files,
            "insertions": sum(f["insertions"] for f in files),
            "deletions": sum(f["deletions"] for f in files)}))


def _numstat_record(data: bytes, pos: int, *, build: bool) -> tuple[RawFile | None, int]:
    """One numstat record starting at ``pos`` (None unless ``build``) and the position after."""
    def token(at: int) -> tuple[str, int]:
        stop = data.index(b"\x00", at)
        return data[at:stop].decode("utf-8", "replace"), stop + 1

    text, pos = token(pos)
    ins, dele, path = text.split("\t", 2)
    old: str | None = None
    if path == "":
        old, pos = token(pos)
        path, pos = token(pos)
    if not build:
        return None, pos
    return {"path": path, "old_path": old, "binary": ins == "-" or dele == "-",
            "insertions": 0 if ins == "-" else int(ins),
            "deletions": 0 if dele == "-" else int(dele)}, pos


def split_message(message: str) -> tuple[str, str]:
    """Git's ``%s``/``%b`` split: the first paragraph (lines joined by spaces) and the rest."""
    text = message.strip("\n")
    first, _, rest = text.partition("\n\n")
    subject = " ".join(line.strip() for line in first.splitlines() if line.strip())
    return subject, rest.strip("\n").rstrip()
