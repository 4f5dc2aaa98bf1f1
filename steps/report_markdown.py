"""The deterministic parts of a report's Markdown, and the builtin writer.

Everything here is a pure function of the report input and its statistics:
the header, the statistics section, the no-activity body, the notes, and
``BuiltinWriter``'s narrative (the same sections the LLM is asked for).
Same input, same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from engine import errors
from steps.git_log import CommitInfo
from steps.report_model import (ROOT_AREA, ReportInput, ReportMaterial, ReportStats, WriterResult,
                                area_of, churn)

#: Commits listed per area, and notable commits, in the builtin narrative.
PER_AREA = 8
NOTABLE = 5
NO_FILES_AREA = "(no files)"


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise errors.step_error("CONFIG_INVALID", f"unknown timezone {name!r}") from exc


def local_span(inp: ReportInput) -> str:
    """The window in the report's timezone: ``2026-09-29 00:00 → 2026-09-30 00:00 (Asia/Seoul)``."""
    tz = zone(inp.timezone)
    start = datetime.fromisoformat(inp.window_start).astimezone(tz)
    end = datetime.fromisoformat(inp.window_end).astimezone(tz)
    return f"{start:%Y-%m-%d %H:%M} → {end:%Y-%m-%d %H:%M} ({inp.timezone})"


def local_time(iso: str, tz: ZoneInfo) -> str:
    return f"{datetime.fromisoformat(iso).astimezone(tz):%Y-%m-%d %H:%M}"


def period_word(inp: ReportInput) -> str:
    return "week" if inp.workflow == "weekly_report" else "day"


def inline(text: str) -> str:
    """One line of text safe inside a Markdown list item or table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def short(sha: str) -> str:
    return sha[:8]


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def header(inp: ReportInput, stats: ReportStats, *, writer_line: str) -> str:
    """Title and facts: period (local and UTC), activity totals, who wrote the narrative."""
    kind = "Weekly" if inp.workflow == "weekly_report" else "Daily"
    lines = [
        f"# {kind} report: {inp.project}, {inp.business_key}",
        "",
        f"- **Period:** {local_span(inp)}; UTC {inp.window_start} → {inp.window_end}",
        f"- **Activity:** {plural(stats.commits, 'commit')} by {plural(stats.author_count, 'author')}, "
        f"{plural(stats.files_changed, 'file')} changed, +{stats.insertions} / −{stats.deletions} lines",
        f"- **Written by:** {writer_line}",
    ]
    return "\n".join(lines) + "\n"


def statistics_section(stats: ReportStats) -> str:
    """``## Statistics``: computed tables, never written by a model."""
    out = ["## Statistics", "",
           "| Commits | Authors | Files changed | Insertions | Deletions |",
           "| ---: | ---: | ---: | ---: | ---: |",
           f"| {stats.commits} | {stats.author_count} | {stats.files_changed} | "
           f"+{stats.insertions} | −{stats.deletions} |", "",
           "### Authors", "", "| Author | Commits | Insertions | Deletions |",
           "| --- | ---: | ---: | ---: |"]
    out += [f"| {inline(a.name)} | {a.commits} | +{a.insertions} | −{a.deletions} |"
            for a in stats.authors]
    if stats.areas:
        out += ["", "### Areas", "", "| Area | Commits | Files | Insertions | Deletions |",
                "| --- | ---: | ---: | ---: | ---: |"]
        out += [f"| {inline(a.area)} | {a.commits} | {a.files} | +{a.insertions} | −{a.deletions} |"
                for a in stats.areas]
    if stats.busiest_files:
        out += ["", "### Busiest files", "", "| File | Commits | Insertions | Deletions |",
                "| --- | ---: | ---: | ---: |"]
        out += [f"| `{inline(f.path)}` | {f.commits} | +{f.insertions} | −{f.deletions} |"
                for f in stats.busiest_files]
    return "\n".join(out) + "\n"


def trim_note(*, listed: int, total: int, compacted: bool, num_ctx: int) -> str:
    """The report's note when the model saw less than everything (empty when it saw it all)."""
    if listed < total:
        return (f"> **Note:** the narrative was written from {listed} of {total} commits (the "
                f"largest); the rest did not fit the model's context (num_ctx={num_ctx}). "
                "The statistics cover all commits.\n")
    if compacted:
        return (f"> **Note:** commit messages and file lists were shortened to fit the model's "
                f"context (num_ctx={num_ctx}). The statistics cover all commits.\n")
    return ""


def no_activity(inp: ReportInput) -> str:
    """The whole report for a window without commits (``on_empty = "report"``)."""
    empty = ReportStats(commits=0, author_count=0, files_changed=0, insertions=0, deletions=0,
                        authors=[], areas=[], busiest_files=[])
    return (header(inp, empty, writer_line="no model (no activity)") + "\n## Summary\n\n"
            f"No commits were authored in {inp.project} during this {period_word(inp)}.\n")


def assemble(parts: Sequence[str]) -> str:
    """Join sections with one blank line between them and a single final newline."""
    return "\n".join(p.strip("\n") + "\n" for p in parts if p.strip()).rstrip("\n") + "\n"


def by_area(commits: Sequence[CommitInfo]) -> dict[str, list[CommitInfo]]:
    """Commits under every area they touch, chronological; file-less commits apart."""
    groups: dict[str, list[CommitInfo]] = {}
    for commit in commits:
        names = sorted({area_of(f.path) for f in commit.files}) or [NO_FILES_AREA]
        for name in names:
            groups.setdefault(name, []).append(commit)
    return groups


def notable(commits: Sequence[CommitInfo], count: int = NOTABLE) -> list[CommitInfo]:
    """The largest commits by lines changed (ties: earlier first, then SHA)."""
    return sorted(commits, key=lambda c: (-churn(c), c.authored_at, c.sha))[:count]


class BuiltinWriter:
    """A deterministic writer that needs no model: the narrative comes from the data."""

    provider = "builtin"
    model = "builtin"
    reads_prompt = False

    def write(self, prompt: str, *, system: str, options: Mapping[str, Any],
              material: ReportMaterial) -> WriterResult:
        """Summary, Changes by area, Notable commits, from ``material`` (prompt unused)."""
        inp, stats = material.input, material.stats
        commits = inp.commits
        sections = [self._summary(inp, stats), self._areas(stats, commits),
                    self._notable(commits)]
        return WriterResult(text=assemble(sections), model=self.model, digest=None)

    def _summary(self, inp: ReportInput, stats: ReportStats) -> str:
        text = (f"{plural(stats.commits, 'commit')} by {plural(stats.author_count, 'author')} "
                f"changed {plural(stats.files_changed, 'file')} (+{stats.insertions} / "
                f"−{stats.deletions} lines) in {inp.project} during this {period_word(inp)}.")
        if stats.areas:
            top = stats.areas[:2]
            where = " and ".join(f"`{inline(a.area)}` ({plural(a.commits, 'commit')})" for a in top)
            text += f" Most of the work was in {where}."
        if stats.authors:
            lead = stats.authors[0]
            text += (f" The most active author was {inline(lead.name)} with "
                     f"{plural(lead.commits, 'commit')}.")
        if inp.commits:
            big = notable(inp.commits, 1)[0]
            text += (f" The largest change was `{short(big.sha)}` “{inline(big.subject)}” "
                     f"(+{big.insertions} / −{big.deletions}).")
        return f"## Summary\n\n{text}\n"

    def _areas(self, stats: ReportStats, commits: Sequence[CommitInfo]) -> str:
        groups = by_area(commits)
        order = [a.area for a in stats.areas] + ([NO_FILES_AREA] if NO_FILES_AREA in groups else [])
        out = ["## Changes by area", ""]
        for name in order:
            members = groups.get(name, [])
            title = "Top-level files" if name == ROOT_AREA else (
                "Commits without file changes" if name == NO_FILES_AREA else name)
            out += [f"### {inline(title)}", ""]
            out += [f"- `{short(c.sha)}` {inline(c.subject)} ({inline(c.author_name)}, "
                    f"+{c.insertions} / −{c.deletions})" for c in members[:PER_AREA]]
            if len(members) > PER_AREA:
                out.append(f"- … and {plural(len(members) - PER_AREA, 'more commit')}")
            out.append("")
        return "\n".join(out)

    def _notable(self, commits: Sequence[CommitInfo]) -> str:
        out = ["## Notable commits", ""]
        for c in notable(commits):
            out.append(f"- `{short(c.sha)}` {inline(c.subject)} — {inline(c.author_name)}, "
                       f"{plural(len(c.files), 'file')}, +{c.insertions} / −{c.deletions}")
        return "\n".join(out) + "\n"
