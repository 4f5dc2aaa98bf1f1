"""A team report's own Markdown: its section per repository, per person, and the missing projects.

Pure functions of the children's commits, in the report's language (``steps.report_texts``).
From layout 3 each repository's section has its own areas and busiest files, every path
prefixed with the repository (``flask/src/flask/app.py``: ``repository_paths``), so two
repositories' ``src`` or ``CHANGES.rst`` are never summed; a team that names ``authors``
gets a section per person across repositories; a project that was not collected is named in
the summary's first sentence. Runs pinned before layout 3 render as they did (``plain_section``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from steps import untrusted
from steps.forge_links import ForgeLinks
from steps.git_log import CommitInfo
from steps.report_markdown import areas_table, files_table, linked_sha
from steps.report_model import Layout, summarize
from steps.report_texts import Texts

#: Commits listed under a repository, and under a person, before "… and N more".
LISTED = 20


@dataclass(frozen=True)
class Repository:
    """One project of the team as its section shows it: how its child ended, its commits, its forge."""

    name: str
    succeeded: bool
    status: str
    error_code: str | None
    error_message: str | None
    commits: Sequence[CommitInfo]
    forge: str | None = None


def repository_paths(name: str, commits: Sequence[CommitInfo]) -> list[CommitInfo]:
    """``commits`` with every file path (and old path) prefixed with the repository's ``name``."""
    def moved(path: str | None) -> str | None:
        return None if path is None else f"{name}/{path}"

    return [c.model_copy(update={"files": [f.model_copy(update={"path": f"{name}/{f.path}", "old_path": moved(f.old_path)})
                                           for f in c.files]}) for c in commits]


def _failed(repo: Repository, rules: int, words: Texts) -> str:
    # The error's text may be a server's (or a git error quoting a path): inert from text rules 2 on.
    message = untrusted.text(repo.error_message or "", rules) if rules >= 2 else repo.error_message or ""
    return f"**{words.not_collected}** ({repo.status}, {repo.error_code}): {message}"


def plain_section(repo: Repository, rules: int, words: Texts) -> list[str]:
    """A project's section before layout 3: who committed, and each commit's subject."""
    lines = [f"### {repo.name}", ""]
    if not repo.succeeded:
        return [*lines, _failed(repo, rules, words), ""]
    commits = repo.commits
    if not commits:
        return [*lines, words.no_commits_in_period, ""]
    authors = sorted({c.author_name for c in commits})
    if rules >= 1:  # commit text is the author's: neutralised as in a project report (steps.untrusted)
        lines.append(words.commits_by(len(commits), ", ".join(untrusted.text(a, rules) for a in authors)))
        lines.append("")
        lines += [f"- `{c.sha[:8]}` {untrusted.text(c.subject, rules)}" for c in commits]
        return [*lines, ""]
    lines.append(words.commits_by(len(commits), ", ".join(authors)))
    lines.append("")
    lines += [f"- `{c.sha[:8]}` {c.subject}" for c in commits]
    return [*lines, ""]


def repository_section(repo: Repository, layout: Layout, rules: int, words: Texts) -> list[str]:
    """A repository's section (layout 3): who committed, its own areas and busiest files, its commits."""
    lines = [f"### {repo.name}", ""]
    if not repo.succeeded:
        return [*lines, _failed(repo, rules, words), ""]
    if not repo.commits:
        return [*lines, words.no_commits_in_period, ""]
    stats = summarize(repository_paths(repo.name, repo.commits), layout)
    people = ", ".join(untrusted.text(a.name, rules) for a in [*stats.authors, *stats.bots])
    lines += [words.made_by(stats.commits, people), ""]
    if stats.areas:
        lines += [f"#### {words.areas_table}", "", *areas_table(stats, words, rules, layout.version), ""]
    if stats.busiest_files:
        lines += [f"#### {words.busiest_table}", "", *files_table(stats, words, rules), ""]
    lines += [f"#### {words.commits_word}", ""]
    lines += [_commit_line(c, repo.forge, rules) for c in repo.commits[:LISTED]]
    if len(repo.commits) > LISTED:
        lines.append(f"- {words.more_commits(len(repo.commits) - LISTED)}")
    return [*lines, ""]


def _commit_line(commit: CommitInfo, forge: str | None, rules: int, repository: str | None = None) -> str:
    where = f"{untrusted.text(repository, rules)} " if repository else ""
    return (f"- {where}{linked_sha(commit.sha, forge)} {untrusted.text(commit.subject, rules, ForgeLinks(forge))} "
            f"({untrusted.text(commit.author_name, rules)})")


def people_sections(repos: Sequence[Repository], rules: int, words: Texts) -> list[str]:
    """``## People``: one section per author across repositories, most commits first (then name)."""
    mine: dict[str, list[tuple[Repository, CommitInfo]]] = {}
    for repo in repos:
        for commit in repo.commits:
            mine.setdefault(commit.author_email.casefold() or commit.author_name.casefold(), []).append((repo, commit))
    if not mine:
        return []
    order = sorted(mine.values(), key=lambda rows: (-len(rows), rows[0][1].author_name))
    lines = [f"## {words.people}", ""]
    for unsorted in order:
        rows = sorted(unsorted, key=lambda row: (row[1].authored_at, row[1].sha))
        counts: Mapping[str, int] = {r.name: sum(1 for other, _ in rows if other is r) for r, _ in rows}
        lines += [f"### {untrusted.text(rows[0][1].author_name, rules)}", "", words.person_line(list(counts.items())), ""]
        lines += [_commit_line(c, r.forge, rules, r.name) for r, c in rows[:LISTED]]
        if len(rows) > LISTED:
            lines.append(f"- {words.more_commits(len(rows) - LISTED)}")
        lines.append("")
    return lines


def name_missing(text: str, missing: Sequence[Repository], words: Texts) -> str:
    """``text`` with the projects not collected named first in its summary (or, without a summary, on top)."""
    if not missing:
        return text
    sentence = words.missing_sentence([f"{r.name} ({r.error_code})" for r in missing])
    heading = f"## {words.summary}\n\n"
    if heading in text:
        return text.replace(heading, f"{heading}{sentence} ", 1)
    title, sep, rest = text.partition("\n\n")
    return f"{title}{sep}{sentence}\n\n{rest}"
