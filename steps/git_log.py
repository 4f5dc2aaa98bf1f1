"""Running ``git`` for COLLECT_GIT and parsing what it prints.

Owns the commit models and the three git invocations the collector uses:

- ``window_log``: one ``git log -z --numstat`` over the committer-date
  range, for a window near the heads; read as a stream and abandoned
  (``None``) once more than ``abort_after`` commits newer than the window have
  gone by, since diffing those would cost more than listing them;
- ``walk``: the cheap pass for a window deep in history: author time and SHA
  of every commit in the range, no diffs (written to a temporary file), of
  which only the lines whose author time is in the window are decoded (one
  regular expression over the whole output, see ``window_pattern``);
- ``details``: ``git log --no-walk --numstat`` over exactly the chosen SHAs;
- ``committer_times``: the heads' committer times, read in-process (gitdb,
  one handle per object directory kept for the process), which tell the
  collector which of the two strategies is cheaper;
- ``attribute_set``: which paths a commit's ``.gitattributes`` mark with an
  attribute (``linguist-generated``...), read by ``git check-attr`` from a
  scratch index of that commit, so the answer is the pinned head's, whatever
  the work tree holds.

Git runs in a session of its own (``start_new_session``): the SIGINT a terminal sends to
its foreground process group at Ctrl-C reaches reportflow, which decides what an
interruption means (the run is handed back), and never kills git under a step. A git
killed by a signal all the same is an interruption (``GitFailure.killed``), never a
missing repository.

Git runs with GitPython's git executable and options that make its output
independent of the user's configuration, and with ``GIT_FLUSH=0``: by default
git flushes stdout after every commit when it writes to a pipe, one wake-up of
the reader per commit, and every caller here reads the output whole.
"""

from __future__ import annotations

import functools
import io
import os
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple, cast

import git
import gitdb  # type: ignore[import-untyped]  # no stubs; only its exception types are used
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


class Unreadable(NamedTuple):
    """A commit git cannot parse (``git fsck``: ``nulInHeader``, a bad date), or whose author time no calendar
    date can hold (``timestamp``: before 1970 or after 9999). ``committed_at`` is its committer time when
    that one could be read, to place it in a window."""

    sha: str
    committed_at: int | None


class GitFailure(Exception):
    """A git command that failed; ``missing_object`` when it named an unknown object."""

    def __init__(self, args: Sequence[str], returncode: int, stderr: str, *, killed: bool | None = None) -> None:
        text = stderr.strip()
        super().__init__(f"git {' '.join(args[:1])} exited {returncode}: {text}")
        self.returncode = returncode
        #: Killed by a signal (a negative return code): an interruption, not a fault of the repository.
        self.killed = returncode < 0 if killed is None else killed
        self.missing_object = any(s in text for s in ("bad object", "unknown revision",
                                                      "bad revision", "not a valid object"))


# Per commit: RS sha US committer-time US author-time US name US email US message US NUL.
# The message goes last because it may contain anything but NUL.
FORMAT = "--format=%x1e%H%x1f%ct%x1f%at%x1f%aN%x1f%aE%x1f%B%x1f"
#: ``FORMAT`` with each commit's parents after its SHA: a listing ``parse_log`` can also return as a graph.
FORMAT_GRAPH = "--format=%x1e%H %P%x1f%ct%x1f%at%x1f%aN%x1f%aE%x1f%B%x1f"
_HEADER_TIMES = re.compile(rb"\x1e[0-9a-f]{40,64}\x1f([0-9]+)\x1f")
# A ``walk`` line of a commit whose author time git could not read: "LF SP sha US committer-time".
_NO_TIME = re.compile(rb"\n ([0-9a-f]{40,64})\x1f([0-9]*)")
_COMMITTER = re.compile(rb"^committer [^\n]* ([0-9]+) [+-][0-9]{4}$", re.MULTILINE)
DIFF_OPTIONS = ("-z", "--numstat", "--find-renames", "--no-textconv", "--no-ext-diff",
                 "--no-color")
_CONFIG = ("-c", "log.showSignature=false", "-c", "core.quotePath=false",
           "-c", "log.mailmap=true")
_READ_SIZE = 1 << 16


def _command(args: Sequence[str]) -> list[str]:
    return [git.Git.GIT_PYTHON_GIT_EXECUTABLE or "git", *_CONFIG, *args]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["GIT_TERMINAL_PROMPT"] = "0"  # a fetch must fail, never wait for a password
    env["GIT_FLUSH"] = "0"  # no flush per commit: the output is read whole (module docstring)
    return env


def run(repo_dir: Path, args: Sequence[str], *, stdin: bytes | None = None,
        timeout_s: float | None = None, env: dict[str, str] | None = None) -> bytes:
    """Run git in ``repo_dir`` (``env`` added to the environment) and return its stdout;
    raise ``GitFailure``."""
    try:
        proc = subprocess.run(_command(args), cwd=repo_dir, input=stdin, capture_output=True, start_new_session=True,
                              timeout=timeout_s, check=False, env={**_env(), **(env or {})})
    except subprocess.TimeoutExpired as exc:
        raise GitFailure(args, -1, f"timed out after {timeout_s}s", killed=False) from exc
    except OSError as exc:
        raise GitFailure(args, -1, str(exc), killed=False) from exc
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
    """Committer times of ``shas`` read with gitdb (no subprocess); None if unreadable.

    The gitdb handle is kept per object directory (``_object_db``); it rescans
    the packs when their directory changed, and once more when an object is
    missing (a pack written within the directory's timestamp granularity).
    """
    try:
        db, lock = _object_db(str(objects_dir))
        with lock:
            db.update_cache()
            times = []
            for sha in shas:
                binsha = bytes.fromhex(sha)
                if not db.has_object(binsha):
                    db.update_cache(force=True)
                stream = db.stream(binsha)
                match = _COMMITTER.search(stream.read()) if stream.type == b"commit" else None
                if match is None:
                    return None
                times.append(int(match.group(1)))
            return times
    except Exception:  # noqa: BLE001 - any failure only means "use the safe strategy"
        return None


@functools.lru_cache(maxsize=32)
def _object_db(objects_dir: str) -> tuple[gitdb.GitDB, threading.Lock]:
    """One gitdb handle per object directory, with the lock that serialises its readers."""
    return gitdb.GitDB(objects_dir), threading.Lock()


def window_log(repo_dir: Path, heads: Sequence[str], since: datetime, until: datetime | None,
               end_ts: int, *, include_merges: bool, abort_after: int,
               keep: Keep | None = None,
               unreadable: list[Unreadable] | None = None) -> list[tuple[int, RawCommit]] | None:
    """Every commit with committer date in [since, until], diffed; ``None`` when abandoned.

    Returns ``(author time, commit)`` pairs. Abandons (kills git, returns
    ``None``) once more than ``abort_after`` commits with committer time ≥
    ``end_ts`` have been printed (git writes in stdio-buffer chunks, so up to a
    few dozen more may have been diffed by then). ``keep`` and ``unreadable`` as for ``parse_log``.
    """
    args = ["log", FORMAT, *DIFF_OPTIONS, *_range(since, until, include_merges), *heads, "--"]
    # stderr stays unread until stdout ends: git prints at most a line or two there.
    with subprocess.Popen(_command(args), cwd=repo_dir, stdout=subprocess.PIPE, start_new_session=True,
                          stderr=subprocess.PIPE, env=_env()) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        buf = bytearray()
        scanned = newer = 0
        stdout = cast(io.BufferedReader, proc.stdout)  # Popen without text=: a buffered binary pipe
        while chunk := stdout.read1(_READ_SIZE):
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
    return parse_log(bytes(buf), keep, unreadable)


def walk(repo_dir: Path, heads: Sequence[str], since: datetime, until: datetime | None, *,
         lo: int, hi: int, include_merges: bool, with_idents: bool,
         unreadable: list[Unreadable] | None = None) -> list[tuple[int, str, frozenset[str]]]:
    """``(author time, sha, {name, email} casefolded or empty)`` of the range's commits
    whose author time is in ``[lo, hi)``; the commits whose author time git cannot read are
    added to ``unreadable``.

    No diffs, so git costs about as much as the walk of a plain ``git log
    --since --until``; of its output (one line per commit after ``since``,
    10,000 for a day half-way through a 20,000-commit history) only the lines
    in the window are decoded.
    """
    fmt = "--format=%at %H%x1f%ct" + ("%x1f%aN%x1f%aE" if with_idents else "")
    args = ["log", fmt, *_range(since, until, include_merges), *heads, "--"]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        code = subprocess.run(_command(args), cwd=repo_dir, stdout=out, stderr=err, start_new_session=True,
                              check=False, env=_env()).returncode
        if code != 0:
            err.seek(0)
            raise GitFailure(args, code, err.read().decode("utf-8", "replace"))
        out.seek(0)
        data = b"\n" + out.read()  # every line, the first included, starts after a LF
    rows: list[tuple[int, str, frozenset[str]]] = []
    for at, sha, rest in window_pattern(lo, hi).findall(data):
        idents = rest.decode("utf-8", "replace").split("\x1f")[2:]
        rows.append((int(at), sha.decode(), frozenset(i.strip().casefold() for i in idents)))
    if unreadable is not None:  # no author time printed: a line "SP sha US committer-time"
        unreadable += [Unreadable(sha.decode(), timestamp(ct)) for sha, ct in _NO_TIME.findall(data)]
    return rows


@functools.lru_cache(maxsize=64)
def window_pattern(lo: int, hi: int) -> re.Pattern[bytes]:
    """Matches ``LF time SP sha rest-of-line`` for the times in ``[lo, hi)`` exactly.

    Author times are printed in decimal without leading zeros, so the window
    is a union of same-length digit ranges (``decimal_range``), which the
    regular-expression engine checks without creating an object per line.
    """
    ranges = []
    first, last = max(lo, 0), hi - 1
    while first <= last:
        top = min(last, 10 ** len(str(first)) - 1)
        ranges.append(decimal_range(str(first), str(top)))
        first = top + 1
    times = "|".join(ranges) or "(?!)"
    return re.compile(rb"\n(" + times.encode() + rb") ([0-9a-f]{40,64})([^\n]*)")


def decimal_range(low: str, high: str) -> str:
    """A regular expression for the decimal strings from ``low`` to ``high`` inclusive.

    Both have the same length and no leading zero (unless ``"0"``), ``low <= high``.
    """
    if low == high:
        return low
    same = 0
    while low[same] == high[same]:
        same += 1
    prefix, low, high = low[:same], low[same:], high[same:]
    rest = len(low) - 1
    tail = f"[0-9]{{{rest}}}" if rest else ""
    if low[1:] == "0" * rest and high[1:] == "9" * rest:
        return f"{prefix}[{low[0]}-{high[0]}]{tail}"
    parts = [low[0] + decimal_range(low[1:], "9" * rest)]
    if int(high[0]) - int(low[0]) > 1:
        parts.append(f"[{int(low[0]) + 1}-{int(high[0]) - 1}]{tail}")
    parts.append(high[0] + decimal_range("0" * rest, high[1:]))
    return f"{prefix}(?:{'|'.join(parts)})"


def details(repo_dir: Path, shas: Sequence[str]) -> list[tuple[int, RawCommit]]:
    """``(author time, commit)`` for exactly ``shas``, in one ``git log --no-walk`` call."""
    args = ["log", "--no-walk=unsorted", "--stdin", FORMAT, *DIFF_OPTIONS]
    out = run(repo_dir, args, stdin="".join(f"{sha}\n" for sha in shas).encode())
    return parse_log(out)


def attributes_may_apply(repo_dir: Path, git_dir: Path, commit: str, paths: Sequence[str]) -> bool:
    """Whether any attributes file could apply to ``paths`` at ``commit``: a ``.gitattributes`` in a directory on
    their way (one ``git ls-tree`` of exactly those names), ``info/attributes``, or a user or system attributes
    file. Most repositories have none: then ``attribute_set`` (a scratch index and ``check-attr``) is skipped."""
    home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    if (git_dir / "info" / "attributes").exists() or (home / "git" / "attributes").exists() or \
            Path("/etc/gitattributes").exists() or _configures_attributes(Path.home() / ".gitconfig"):
        return True
    folders = sorted({"/".join(parts[:i]) for parts in (p.split("/") for p in paths) for i in range(len(parts))})
    names = [f"{folder}/.gitattributes" if folder else ".gitattributes" for folder in folders]
    listed = run(repo_dir, ["--literal-pathspecs", "ls-tree", "-z", "--name-only", commit, "--", *names])
    return bool(listed.strip(b"\0"))


def _configures_attributes(config: Path) -> bool:
    try:
        return b"attributesfile" in config.read_bytes().lower()
    except OSError:
        return False


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
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


Keep = Callable[[int, str, str], bool]
#: A commit (file) as a dict shaped like ``CommitInfo`` (``FileChange``): validating
#: them all at once in pydantic-core costs a quarter of building models one by one.
RawCommit = dict[str, Any]
RawFile = dict[str, Any]


def parse_log(data: bytes, keep: Keep | None = None, unreadable: list[Unreadable] | None = None,
              graph: dict[str, tuple[int, list[str]]] | None = None) -> list[tuple[int, RawCommit]]:
    """Parse ``git log -z --numstat`` output printed with ``FORMAT`` (or ``FORMAT_GRAPH``: then every commit's
    committer time and parents go to ``graph``, unreadable ones included).

    ``keep(author_time, name, email)`` drops commits before their files are
    built (the single pass also prints commits just outside the window).
    A commit whose author time git could not print (a corrupt header, which
    ``git fsck`` reports as ``nulInHeader`` or a bad date) is left out and
    added to ``unreadable``, never a crash: one such commit must not block
    every report of its project.

    Split at NUL, the output is a sequence of tokens: a commit header (``RS``
    fields separated by ``US``, ending with ``US``: the message cannot contain
    NUL, so a header is always one token), then, if the commit has a diff, its
    numstat records: ``ins TAB del TAB path``, or for a rename ``ins TAB del
    TAB`` followed by two tokens, the old and the new path (taken verbatim:
    a path may hold any byte but NUL). A header or a first record may be
    preceded by LFs. Binary files show ``-`` counts (taken as 0). Returns
    ``(author time, commit dict)`` in git's order.
    """
    tokens = data.decode("utf-8", "replace").split("\x00")
    commits: list[tuple[int, RawCommit]] = []
    files: list[RawFile] | None = None  # the current commit's, None while one is skipped
    started = False
    i, count = 0, len(tokens)
    while i < count:
        token = tokens[i].lstrip("\n")
        i += 1
        if not token:
            continue
        if token[0] == "\x1e":
            if token[-1] != "\x1f":
                raise ValueError(f"unexpected git log header in token {i - 1}")
            head, committed, authored, name, email, message = token[1:-1].split("\x1f", 5)
            sha, *parents = head.split(" ")
            if graph is not None:
                graph[sha] = (timestamp(committed) or 0, [p for p in parents if p])
            started = True
            files = None
            at_or_none = timestamp(authored)
            if at_or_none is None:
                if unreadable is not None:
                    unreadable.append(Unreadable(sha, timestamp(committed)))
                continue
            at = at_or_none
            if keep is None or keep(at, name, email):
                files = []
                subject, body = split_message(message)
                commits.append((at, {
                    "sha": sha, "author_name": name, "author_email": email,
                    "authored_at": iso_utc(at), "subject": subject, "body": body,
                    "files": files}))
            continue
        if not started:
            raise ValueError(f"unexpected git log output in token {i - 1}")
        ins, dele, path = token.split("\t", 2)
        old: str | None = None
        if path == "":
            old, path = tokens[i], tokens[i + 1]
            i += 2
        if files is not None:
            files.append({"path": path, "old_path": old, "binary": ins == "-" or dele == "-",
                          "insertions": 0 if ins == "-" else int(ins),
                          "deletions": 0 if dele == "-" else int(dele)})
    for _, commit in commits:
        commit["insertions"] = sum(f["insertions"] for f in commit["files"])
        commit["deletions"] = sum(f["deletions"] for f in commit["files"])
    return commits


def _number(text: str) -> bool:
    return text.isascii() and text.isdigit()


#: The last second a date can name (9999-12-31T23:59:59Z): git prints any number it finds in a header.
LATEST_TS = 253_402_300_799


def timestamp(text: str | bytes) -> int | None:
    """A Unix time git printed, or None when it printed none or one no date can hold (a commit written by a
    broken tool: ``git fsck`` calls a 20-digit one ``badDateOverflow``; year 10000 passes fsck)."""
    raw = text.decode("ascii", "replace") if isinstance(text, bytes) else text
    if not _number(raw) or len(raw) > 12:
        return None
    value = int(raw)
    return value if value <= LATEST_TS else None


def split_message(message: str) -> tuple[str, str]:
    """Git's ``%s``/``%b`` split: the first paragraph (lines joined by spaces) and the rest."""
    text = message.strip("\n")
    first, _, rest = text.partition("\n\n")
    subject = " ".join(line.strip() for line in first.splitlines() if line.strip())
    return subject, rest.strip("\n").rstrip()
