"""The deterministic parts of a report's Markdown, and the builtin writer.

Everything here is a pure function of the report input and its statistics:
the header, the statistics section, the no-activity body, the notes, and
``BuiltinWriter``'s narrative (the same sections the LLM is asked for), in
the report's language (``steps.report_texts``). Same input, same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from engine.core import errors
from steps import untrusted
from steps.forge_links import ForgeLinks
from steps.git_log import CommitInfo
from steps.report_model import (
    ROOT_AREA,
    Layout,
    ReportInput,
    ReportMaterial,
    ReportStats,
    WriterResult,
    churn,
    counted,
    lines,
    main_area,
)
from steps.report_texts import Texts, texts

#: Commits listed per area, and notable commits, in the builtin narrative.
PER_AREA = 8
NOTABLE = 5
NO_FILES_AREA = "(no files)"
EXCLUDED_AREA = "(excluded files only)"


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise errors.step_error("CONFIG_INVALID", f"unknown timezone {name!r}") from exc


def span(inp: ReportInput) -> tuple[str, str]:
    """What the report spans (UTC ISO): its coverage when it has one, else its window."""
    if inp.coverage is not None:
        return inp.coverage.since, inp.coverage.until
    return inp.window_start, inp.window_end


def local_span(inp: ReportInput) -> str:
    """The span in the report's timezone: ``2026-09-29 00:00 → 2026-09-30 00:00 (Asia/Seoul)``."""
    tz = zone(inp.timezone)
    first, last = span(inp)
    start = datetime.fromisoformat(first).astimezone(tz)
    end = datetime.fromisoformat(last).astimezone(tz)
    return f"{start:%Y-%m-%d %H:%M} → {end:%Y-%m-%d %H:%M} ({inp.timezone})"


def local_time(iso: str, tz: ZoneInfo) -> str:
    return f"{datetime.fromisoformat(iso).astimezone(tz):%Y-%m-%d %H:%M}"


def inline(text: str) -> str:
    """One line of text safe inside a Markdown list item or table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def short(sha: str) -> str:
    return sha[:8]


def commit_ref(sha: str, inp: ReportInput) -> str:
    """A commit's short SHA as code, linked to its page on the forge (layout 2, a known forge)."""
    return linked_sha(sha, inp.forge if inp.layout >= 2 else None)


def linked_sha(sha: str, forge: str | None) -> str:
    """A short SHA as code, linked to its page on ``forge`` when that is a known forge."""
    url = ForgeLinks(forge).commit(sha)
    return f"[`{short(sha)}`]({url})" if url else f"`{short(sha)}`"


def subject(commit: CommitInfo, inp: ReportInput) -> str:
    """A commit's subject as running text, its ``#N`` linked to the forge (layout 2)."""
    return untrusted.text(commit.subject, inp.text_rules, ForgeLinks(inp.forge) if inp.layout >= 2 else None)


def area_title(name: str, t: Texts, rules: int) -> str:
    """An area as the reader sees it: the catalogue's words for the root and the apart groups."""
    titles = {ROOT_AREA: t.top_level, NO_FILES_AREA: t.no_files, EXCLUDED_AREA: t.excluded_only}
    repository, _, rest = name.rpartition("/")
    if repository and rest == ROOT_AREA:  # a team report's repository/(root)
        return f"{untrusted.text(repository, rules)}: {untrusted.text(t.top_level, 0)}"
    return untrusted.text(titles[name], 0) if name in titles else untrusted.text(name, rules)


def is_weekly(inp: ReportInput) -> bool:
    return inp.workflow == "weekly_report"


#: Each report workflow's period, as its texts name it.
PERIODS = {"daily_report": "day", "weekly_report": "week", "monthly_report": "month", "quarterly_report": "quarter",
           "sprint_report": "sprint"}


def period_of(inp: ReportInput) -> str:
    """``day``, ``week``, ``month`` or ``quarter``: what the report's texts call its period."""
    return PERIODS[inp.workflow]


def header(inp: ReportInput, stats: ReportStats, *, writer_line: str) -> str:
    """Title and facts: period (local and UTC), activity totals, who wrote the narrative."""
    t = texts(inp.language)
    lines = [
        t.title(period_of(inp), inp.project, inp.business_key),
        "",
        *coverage_lines(inp),
        t.activity_line(stats.commits, stats.author_count, stats.files_changed, stats.insertions,
                        stats.deletions),
        t.written_by_line(writer_line),
    ]
    return "\n".join(lines) + "\n"


def coverage_lines(inp: ReportInput) -> list[str]:
    """The report's first facts: its span (with how commits were placed), and what else it holds or does not."""
    t = texts(inp.language)
    cover = inp.coverage
    if cover is None:
        return [t.period_line(local_span(inp), inp.window_start, inp.window_end)]
    out = [f"{t.covers_line(cover.attribution, local_span(inp), len(cover.arrived_late))}; "
           f"UTC {cover.since} → {cover.until}"]
    if cover.also_covers:
        out.append(t.also_covers_line(cover.also_covers))
    if cover.covered:
        out.append(t.covered_line(cover.covered_by))
    if cover.rewritten:
        out.append(t.rewritten_line(cover.rewritten))
    return out


def arrived_late_section(inp: ReportInput) -> str:
    """``## Arrived late``: commits authored before the window that reached the branches since the last report."""
    if inp.coverage is None or not inp.coverage.arrived_late:
        return ""
    t = texts(inp.language)
    tz = zone(inp.timezone)
    out = [f"## {t.arrived_late}", ""]
    out += [f"- {commit_ref(c.sha, inp)} {subject(c, inp)} "
            f"({untrusted.text(c.author_name, inp.text_rules)}, {local_time(c.authored_at, tz)})"
            for c in inp.coverage.arrived_late]
    return "\n".join(out) + "\n"


def statistics_section(stats: ReportStats, language: str = "en", rules: int = 0, layout: int = 1) -> str:
    """``## Statistics``: computed tables, never written by a model."""
    t = texts(language)
    out = [f"## {t.statistics}", "", t.totals_header,
           "| ---: | ---: | ---: | ---: | ---: |",
           f"| {stats.commits} | {stats.author_count} | {stats.files_changed} | "
           f"+{stats.insertions} | −{stats.deletions} |", "",
           f"### {t.authors_table}", "", t.authors_header,
           "| --- | ---: | ---: | ---: |"]
    out += [f"| {untrusted.text(a.name, rules)} | {a.commits} | +{a.insertions} | −{a.deletions} |"
            for a in stats.authors]
    if stats.bots:
        out += ["", f"### {t.bots_table}", "", t.authors_header, "| --- | ---: | ---: | ---: |"]
        out += [f"| {untrusted.text(a.name, rules)} | {a.commits} | +{a.insertions} | −{a.deletions} |"
                for a in stats.bots]
    if stats.kinds:
        out += ["", f"### {t.kinds_table}", "", *kinds_table(stats, t)]
    if stats.areas:
        out += ["", f"### {t.areas_table}", "", *areas_table(stats, t, rules, layout)]
    if stats.busiest_files:
        out += ["", f"### {t.busiest_table}", "", *files_table(stats, t, rules)]
    return "\n".join(out) + "\n"


#: Commits listed under each kind before "… and N more" (a breaking change is always listed).
PER_KIND = 5


def kinds_section(inp: ReportInput) -> str:
    """``## Changes by kind`` (layout 5): breaking changes first, each kind's commits; written by code, so no
    model moves a commit to another kind. Empty without commits or before layout 5."""
    groups = Layout.of(inp).by_kind(inp.reported)
    if not groups:
        return ""
    t = texts(inp.language)
    out = [f"## {t.kinds}", ""]
    for kind, members in groups.items():
        shown = members if kind == "breaking" else members[:PER_KIND]
        out += [f"### {t.kind_titles[kind]} ({len(members)})", ""]
        out += [f"- {commit_ref(c.sha, inp)} {subject(c, inp)}" for c in shown]
        if len(members) > len(shown):
            out.append(f"- {t.more_commits(len(members) - len(shown))}")
        out.append("")
    return "\n".join(out)


def in_progress_section(inp: ReportInput) -> str:
    """``## In progress`` (layout 5): work on branches not merged yet, never counted in the report's figures."""
    if not inp.in_progress:
        return ""
    t, tz = texts(inp.language), zone(inp.timezone)
    out = [f"## {t.in_progress}", "", t.in_progress_note, ""]
    for wip in inp.in_progress:
        refs = ", ".join(commit_ref(sha, inp) for sha in wip.shas)
        who = ", ".join(untrusted.text(name, inp.text_rules) for name in wip.authors)
        out.append(f"- {untrusted.code(wip.branch, inp.text_rules)} ({who}): "
                   f"{t.in_progress_line(wip.commits, local_time(wip.last_update, tz))}" + (f" ({refs})" if refs else ""))
    return "\n".join(out) + "\n"


def kinds_table(stats: ReportStats, t: Texts) -> list[str]:
    """The rows of the kinds table (layout 5), its header first."""
    return [t.kinds_header, "| --- | ---: |", *(f"| {t.kind_titles[k]} | {n} |" for k, n in stats.kinds.items())]


def areas_table(stats: ReportStats, t: Texts, rules: int, layout: int) -> list[str]:
    """The rows of the areas table, its header first."""
    return [t.areas_touching_header if layout >= MAINLY_LAYOUT else t.areas_header, "| --- | ---: | ---: | ---: | ---: |",
            *(f"| {area_title(a.area, t, rules) if layout >= 2 else untrusted.text(a.area, rules)} | "
              f"{a.commits} | {a.files} | +{a.insertions} | −{a.deletions} |" for a in stats.areas)]


def files_table(stats: ReportStats, t: Texts, rules: int) -> list[str]:
    """The rows of the busiest files table, its header first."""
    return [t.files_header, "| --- | ---: | ---: | ---: |",
            *(f"| {untrusted.code(f.path, rules)} | {f.commits} | +{f.insertions} | −{f.deletions} |"
              for f in stats.busiest_files)]


def trim_note(*, listed: int, total: int, compacted: bool, num_ctx: int, language: str = "en") -> str:
    """The report's note when the model saw less than everything (empty when it saw it all)."""
    if listed < total:
        return texts(language).trimmed_note(listed, total, num_ctx)
    if compacted:
        return texts(language).compacted_note(num_ctx)
    return ""


def no_activity(inp: ReportInput) -> str:
    """The whole report for a window without commits (``on_empty = "report"``)."""
    empty = ReportStats(commits=0, author_count=0, files_changed=0, insertions=0, deletions=0,
                        authors=[], areas=[], busiest_files=[])
    t = texts(inp.language)
    quiet = (t.no_activity(inp.project, period_of(inp)) if inp.coverage is None
             else t.no_activity_in_window(inp.project, inp.coverage.attribution == "landed"))
    if inp.layout >= 2:  # one line under what the report covers: nothing to sum up, no writer
        return "\n".join([t.title(period_of(inp), inp.project, inp.business_key), "", *coverage_lines(inp),
                          "", quiet]) + "\n"
    return header(inp, empty, writer_line=t.no_model) + f"\n## {t.summary}\n\n{quiet}\n"


def assemble(parts: Sequence[str]) -> str:
    """Join sections with one blank line between them and a single final newline."""
    return "\n".join(p.strip("\n") + "\n" for p in parts if p.strip()).rstrip("\n") + "\n"


def by_area(commits: Sequence[CommitInfo], layout: Layout = Layout()) -> dict[str, list[CommitInfo]]:
    """Each commit once, under its main area (``report_model.main_area``), chronological;
    commits without files, and those whose files are all excluded, apart."""
    groups: dict[str, list[CommitInfo]] = {}
    for commit in commits:
        name = main_area(commit, layout) or (EXCLUDED_AREA if commit.files else NO_FILES_AREA)
        groups.setdefault(name, []).append(commit)
    return groups


#: From this layout the summary's per-area counts and the areas table say which measure they are.
MAINLY_LAYOUT = 5


def work_areas(inp: ReportInput) -> list[tuple[str, int]]:
    """Where people's commits went (layout 2): each commit of a person once, under its main area,
    most commits first (ties: more lines, then name); bots' commits and file-less ones left out."""
    return people_areas(inp.reported, Layout.of(inp))


def people_areas(commits: Sequence[CommitInfo], layout: Layout) -> list[tuple[str, int]]:
    """``work_areas`` of any commits (a weekly's last week too)."""
    groups = by_area([c for c in commits if not layout.is_bot(c)], layout)
    named = [(name, members) for name, members in groups.items() if name not in (NO_FILES_AREA, EXCLUDED_AREA)]
    named.sort(key=lambda item: (-len(item[1]), -sum(churn(c) for c in item[1]), item[0]))
    return [(name, len(members)) for name, members in named]


def notable(commits: Sequence[CommitInfo], count: int = NOTABLE) -> list[CommitInfo]:
    """The largest commits by lines changed (ties: earlier first, then SHA)."""
    return sorted(commits, key=lambda c: (-churn(c), c.authored_at, c.sha))[:count]


class BuiltinWriter:
    """A deterministic writer that needs no model: the narrative comes from the data."""

    provider = "builtin"
    model = "builtin"
    reads_prompt = False

    def write(self, prompt: str, *, system: str, options: Mapping[str, Any],
              material: ReportMaterial,
              earlier: Sequence[tuple[str, str]] = ()) -> WriterResult:
        """Summary, Changes by area, Notable commits, from ``material`` (prompt unused),
        in the input's language."""
        inp, stats = material.input, material.stats
        t = texts(inp.language)
        sections = [self._summary(inp, stats, t), self._areas(inp, stats, t),
                    self._notable(inp, t)]
        return WriterResult(text=assemble(sections), model=self.model, digest=None)

    def _summary(self, inp: ReportInput, stats: ReportStats, t: Texts) -> str:
        rules = inp.text_rules
        parts = [t.summary_totals(inp.project, period_of(inp), stats.commits, stats.author_count,
                                  stats.files_changed, stats.insertions, stats.deletions,
                                  window=inp.coverage is not None)]
        if inp.layout >= 2:
            busiest = work_areas(inp)
            if busiest:
                parts.append(t.summary_areas([(area_title(name, t, rules), n) for name, n in busiest[:2]],
                                             mainly=inp.layout >= MAINLY_LAYOUT))
        elif stats.areas:
            parts.append(t.summary_areas([(untrusted.code(a.area, rules), a.commits) for a in stats.areas[:2]]))
        tie = inp.layout >= 2 and len(stats.authors) > 1 and stats.authors[0].commits == stats.authors[1].commits
        if stats.authors and not tie:
            lead = stats.authors[0]
            parts.append(t.summary_author(untrusted.text(lead.name, rules), lead.commits))
        if stats.bots:
            parts.append(t.summary_bots([untrusted.text(b.name, rules) for b in stats.bots],
                                        sum(b.commits for b in stats.bots)))
        if inp.reported:
            big = notable(inp.reported, 1)[0]
            parts.append(t.summary_largest(commit_ref(big.sha, inp), subject(big, inp), *lines(big)))
        return f"## {t.summary}\n\n{' '.join(parts)}\n"

    def _areas(self, inp: ReportInput, stats: ReportStats, t: Texts) -> str:
        rules = inp.text_rules
        groups = by_area(inp.reported, Layout.of(inp))
        order = [a.area for a in stats.areas] + [NO_FILES_AREA, EXCLUDED_AREA]
        out = [f"## {t.areas}", ""]
        for name in order:
            members = groups.get(name, [])
            if not members:
                continue
            out += [f"### {area_title(name, t, rules)}", ""]
            out += [f"- {commit_ref(c.sha, inp)} {subject(c, inp)} ({untrusted.text(c.author_name, rules)}, "
                    f"+{lines(c)[0]} / −{lines(c)[1]})" for c in members[:PER_AREA]]
            if len(members) > PER_AREA:
                out.append(f"- {t.more_commits(len(members) - PER_AREA)}")
            out.append("")
        return "\n".join(out)

    def _notable(self, inp: ReportInput, t: Texts) -> str:
        rules = inp.text_rules
        out = [f"## {t.notable}", ""]
        for c in notable(inp.reported):
            out.append(f"- {commit_ref(c.sha, inp)} {subject(c, inp)} — {untrusted.text(c.author_name, rules)}, "
                       f"{t.files_count(len(counted(c)))}, +{lines(c)[0]} / −{lines(c)[1]}")
        return "\n".join(out) + "\n"
