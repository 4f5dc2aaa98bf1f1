"""Temporary git repositories with controlled authors, dates and zones.

``GitRepo`` drives the real ``git`` binary in a scratch directory, isolated
from the machine's global and system git configuration, so tests can place
commits exactly where they need them (author date and committer date apart,
in any UTC offset). ``build_large_repo`` writes a long linear history through
``git fast-import`` in one process, for the COLLECT_GIT benchmark and cost test.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

DEFAULT_AUTHOR = ("Alice Kim", "alice@example.com")


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for scratch git commands: no user or system config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "LC_ALL": "C",
        # An identity for commands that need one (tags, merges) without a user config.
        "GIT_AUTHOR_NAME": DEFAULT_AUTHOR[0], "GIT_AUTHOR_EMAIL": DEFAULT_AUTHOR[1],
        "GIT_COMMITTER_NAME": DEFAULT_AUTHOR[0], "GIT_COMMITTER_EMAIL": DEFAULT_AUTHOR[1],
    })
    env.update(extra or {})
    return env


def git_date(at: datetime) -> str:
    """Git's internal date format (``@<unix> +hhmm``), keeping the instant's UTC offset."""
    if at.tzinfo is None:
        raise ValueError("dates given to the git helpers must be timezone-aware")
    offset = at.utcoffset() or timedelta(0)
    minutes = int(offset.total_seconds()) // 60
    sign = "+" if minutes >= 0 else "-"
    minutes = abs(minutes)
    return f"@{int(at.timestamp())} {sign}{minutes // 60:02d}{minutes % 60:02d}"


@dataclass
class GitRepo:
    """A scratch repository; every method runs ``git`` in ``path``."""

    path: Path

    def git(self, *args: str, env: Mapping[str, str] | None = None, input: bytes | None = None) -> str:
        """Run git here; raise ``CalledProcessError`` (with stderr) on failure."""
        proc = subprocess.run(["git", *args], cwd=self.path, env=git_env(env), input=input,
                              capture_output=True, check=False)
        if proc.returncode != 0:
            raise subprocess.CalledProcessError(proc.returncode, ["git", *args],
                                                proc.stdout, proc.stderr)
        return proc.stdout.decode("utf-8", "replace").strip()

    def write(self, files: Mapping[str, str | bytes | None]) -> None:
        """Write (``str``/``bytes``) or delete (``None``) files and stage the change."""
        for rel, content in files.items():
            target = self.path / rel
            if content is None:
                self.git("rm", "-q", "--", rel)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content, encoding="utf-8")
            self.git("add", "--", rel)

    def commit(self, message: str, *, at: datetime, committed_at: datetime | None = None,
               files: Mapping[str, str | bytes | None] | None = None,
               author: tuple[str, str] = DEFAULT_AUTHOR,
               committer: tuple[str, str] | None = None) -> str:
        """Commit staged changes plus ``files``; return the new SHA.

        ``at`` is the author date, ``committed_at`` the committer date (default:
        the same instant); both keep their UTC offset. Without ``files`` a
        unique file is touched so that every commit has a diff.
        """
        if files is None:
            digest = hashlib.sha1(f"{message}@{at.isoformat()}".encode()).hexdigest()[:12]
            files = {f"notes/{digest}.txt": f"{message}\n"}
        self.write(files)
        who = committer or author
        env = {
            "GIT_AUTHOR_NAME": author[0], "GIT_AUTHOR_EMAIL": author[1],
            "GIT_AUTHOR_DATE": git_date(at),
            "GIT_COMMITTER_NAME": who[0], "GIT_COMMITTER_EMAIL": who[1],
            "GIT_COMMITTER_DATE": git_date(committed_at or at),
        }
        self.git("commit", "-q", "--allow-empty", "--no-verify", "-m", message, env=env)
        return self.head()

    def corrupt_commit(self, message: str, *, at: datetime) -> str:
        """A commit git cannot parse on top of HEAD: a NUL in its author header (``git fsck``:
        ``nulInHeader``), written with ``hash-object --literally``; committed ``at``. Returns its SHA."""
        stamp = git_date(at).lstrip("@").encode()
        raw = (f"tree {self.git('write-tree')}\nparent {self.head()}\n".encode()
               + b"author Mallory\x00Null <m@example.com> " + stamp + b"\n"
               + b"committer Mallory <m@example.com> " + stamp + b"\n\n" + message.encode() + b"\n")
        sha = self.git("hash-object", "-t", "commit", "--literally", "-w", "--stdin", input=raw)
        self.git("update-ref", "HEAD", sha)
        return sha

    def merge(self, branch: str, *, at: datetime, message: str | None = None) -> str:
        """A ``--no-ff`` merge of ``branch`` into the current branch, dated ``at``."""
        name, email = DEFAULT_AUTHOR
        env = {
            "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": git_date(at),
            "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email,
            "GIT_COMMITTER_DATE": git_date(at),
        }
        self.git("merge", "-q", "--no-ff", "-m", message or f"Merge branch '{branch}'", branch,
                 env=env)
        return self.head()

    def checkout(self, branch: str, *, create: bool = False, start: str | None = None) -> None:
        args = ["checkout", "-q"] + (["-b", branch] if create else [branch])
        if create and start:
            args.append(start)
        self.git(*args)

    def head(self, ref: str = "HEAD") -> str:
        return self.git("rev-parse", f"{ref}^{{commit}}")


def make_repo(root: Path, name: str = "repo", *, branch: str = "main") -> GitRepo:
    """Create an empty repository ``root/name`` whose first branch is ``branch``."""
    path = root / name
    path.mkdir(parents=True, exist_ok=True)
    repo = GitRepo(path)
    repo.git("init", "-q", "-b", branch)
    return repo


def clone_repo(source: GitRepo, root: Path, name: str) -> GitRepo:
    """A clone of ``source`` (its ``origin`` remote points back at it)."""
    subprocess.run(["git", "clone", "-q", str(source.path), str(root / name)],
                   env=git_env(), check=True, capture_output=True)
    return GitRepo(root / name)


@dataclass(frozen=True)
class LargeRepo:
    """What ``build_large_repo`` made: the first commit's instant and the spacing."""

    repo: GitRepo
    commits: int
    first_at: datetime
    step: timedelta

    def authored_at(self, index: int) -> datetime:
        return self.first_at + index * self.step


def build_large_repo(root: Path, *, commits: int = 20_000, name: str = "large",
                     first_at: datetime = datetime(2025, 1, 1, tzinfo=timezone.utc),
                     per_day: int = 50, files: int = 400, authors: int = 12,
                     commit_graph: bool = False) -> LargeRepo:
    """A linear ``main`` of ``commits`` commits, ``per_day`` a day, via ``git fast-import``.

    Commit ``i`` is authored and committed at ``first_at + i * step`` and edits
    one to three of ``files`` small text files spread over ten top-level
    directories, so ``--numstat`` has real diffs to compute. Deterministic:
    the same arguments give the same SHAs. ``commit_graph`` also writes a
    commit-graph file, as ``git gc`` would in a long-lived clone.
    """
    repo = make_repo(root, name)
    step = timedelta(seconds=86_400 / per_day)
    contents: dict[int, list[str]] = {}
    chunks: list[bytes] = []
    for i in range(commits):
        at = int((first_at + i * step).timestamp())
        who = i % authors
        ident = f"Dev {who} <dev{who}@example.com> {at} +0000"
        message = f"change {i}: update module {i % 37}\n".encode()
        lines = [b"commit refs/heads/main\n", f"mark :{i + 1}\n".encode(),
                 f"author {ident}\ncommitter {ident}\n".encode(),
                 f"data {len(message)}\n".encode(), message]
        if i:
            lines.append(f"from :{i}\n".encode())
        for k in range(1 + i % 3):
            index = (i * 7 + k * 131) % files
            body = contents.setdefault(index, [f"line {n}\n" for n in range(40)])
            body[(i + k) % len(body)] = f"line {(i + k) % len(body)} rev {i}\n"
            if i % 5 == 0:
                body.append(f"added in {i}\n")
            data = "".join(body).encode()
            path = f"area{index % 10}/pkg{index % 7}/file{index}.txt"
            lines.append(f"M 100644 inline {path}\ndata {len(data)}\n".encode())
            lines.append(data)
        lines.append(b"\n")
        chunks.append(b"".join(lines))
    repo.git("fast-import", "--quiet", input=b"".join(chunks))
    if commit_graph:
        repo.git("commit-graph", "write", "--reachable")
    return LargeRepo(repo=repo, commits=commits, first_at=first_at, step=step)
