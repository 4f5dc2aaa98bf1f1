"""A weekly report's week (layout 3): day by day, against last week, merged this week; a longer report's weeks
(layout 5: week by week).

Pure functions of the report input: the commits per local day of the ISO week, the week's
figures beside last week's (``ReportInput.last_week``, gathered at COLLECT_GIT by
``steps.week_git``), and the first-parent merges of the coverage with the commits each
brought. The words come from ``steps.report_texts``; same input, same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from steps import merged
from steps.git_log import CommitInfo
from steps.report_markdown import area_title, is_weekly, people_areas, zone
from steps.report_model import LastWeek, Layout, ReportInput, summarize
from steps.report_texts import Texts, texts

#: The week's layout: a weekly pinned with an earlier layout has no week section.
WEEK_LAYOUT = 3
#: From this layout a month, a quarter or a sprint has its weeks, as a weekly has its days.
WEEKS_LAYOUT = 5
#: Areas compared with last week (the busiest of either week).
AREAS_COMPARED = 6


def applies(inp: ReportInput) -> bool:
    return is_weekly(inp) and inp.layout >= WEEK_LAYOUT


def figures(key: str, commits: Sequence[CommitInfo], layout: Layout) -> LastWeek:
    """A week's figures: its commits, its people (bots apart), and where their commits went."""
    return LastWeek(key=key, commits=len(commits), authors=summarize(commits, layout).author_count,
                    areas=people_areas(commits, layout))


def day_counts(inp: ReportInput) -> tuple[list[int], int]:
    """Commits per local day of the report's week, Monday first (by author date), and how many
    the report holds that were authored outside it (landed this week, written earlier)."""
    tz = zone(inp.timezone)
    monday = datetime.fromisoformat(inp.window_start).astimezone(tz).date()
    counts, outside = [0] * 7, 0
    for commit in inp.reported:
        day = (datetime.fromisoformat(commit.authored_at).astimezone(tz).date() - monday).days
        if 0 <= day < 7:
            counts[day] += 1
        else:
            outside += 1
    return counts, outside


def week_counts(inp: ReportInput) -> tuple[list[tuple[str, int]], int]:
    """A longer report's commits per ISO week its window touches (by author date, local), oldest first, and how
    many it holds that were authored outside the window (landed in it, written earlier)."""
    tz = zone(inp.timezone)
    start = datetime.fromisoformat(inp.window_start).astimezone(tz).date()
    end = datetime.fromisoformat(inp.window_end).astimezone(tz).date()
    weeks: dict[str, int] = {}
    day = start - timedelta(days=start.weekday())
    while day < end:
        year, week, _ = day.isocalendar()
        weeks[f"W{week:02d}" if year == start.year else f"{year}-W{week:02d}"] = 0
        day += timedelta(days=7)
    outside = 0
    for commit in inp.reported:
        authored = datetime.fromisoformat(commit.authored_at).astimezone(tz).date()
        year, week, _ = authored.isocalendar()
        label = f"W{week:02d}" if year == start.year else f"{year}-W{week:02d}"
        if start <= authored < end and label in weeks:
            weeks[label] += 1
        else:
            outside += 1
    return list(weeks.items()), outside


def weeks_section(inp: ReportInput) -> str:
    """``## Week by week`` of a month, quarter or sprint (layout 5), as a weekly has its days."""
    if inp.layout < WEEKS_LAYOUT or inp.workflow not in ("monthly_report", "quarterly_report", "sprint_report"):
        return ""
    weeks, outside = week_counts(inp)
    t = texts(inp.language)
    return "\n".join([f"## {t.week_by_week}", "", t.week_by_week_line(weeks, outside)]) + "\n"


def section(inp: ReportInput) -> str:
    """``## This week`` (empty unless ``applies``)."""
    if not applies(inp):
        return ""
    t = texts(inp.language)
    counts, outside = day_counts(inp)
    out = [f"## {t.this_week}", "", t.day_by_day_line(counts, outside)]
    if inp.last_week is not None:
        out += ["", *_against(inp, inp.last_week, t)]
    if inp.merges is None:
        return "\n".join(out) + "\n"
    out += ["", f"### {t.merged_this_week}", "", *merged.listing(inp, t)]
    return "\n".join(out) + "\n"


def _against(inp: ReportInput, last: LastWeek, t: Texts) -> list[str]:
    layout = Layout.of(inp)
    this = figures(inp.business_key, inp.reported, layout)
    out = [t.against_header(last.key), "| --- | ---: | ---: | ---: |",
           f"| {t.commits_word} | {this.commits} | {last.commits} | {_delta(this.commits, last.commits)} |",
           f"| {t.authors_word} | {this.authors} | {last.authors} | {_delta(this.authors, last.authors)} |"]
    now, before = dict(this.areas), dict(last.areas)
    names = list(dict.fromkeys([n for n, _ in this.areas[:AREAS_COMPARED]] + [n for n, _ in last.areas[:AREAS_COMPARED]]))
    for name in names[:AREAS_COMPARED * 2]:
        a, b = now.get(name, 0), before.get(name, 0)
        out.append(f"| {t.area_word}: {area_title(name, t, inp.text_rules)} | {a} | {b} | {_delta(a, b)} |")
    return out


def _delta(now: int, before: int) -> str:
    return "0" if now == before else f"{now - before:+d}"


def quiet_line(inp: ReportInput) -> str:
    """What a quiet weekly adds to its one line: last week's figures (empty when there are none)."""
    if not applies(inp) or inp.last_week is None:
        return ""
    return texts(inp.language).quiet_week_against(inp.last_week.key, inp.last_week.commits, inp.last_week.authors)
