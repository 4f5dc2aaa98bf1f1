"""The merges a report's commits came by: each first-parent merge of the coverage, its subject (where a forge
names the pull request: ``Merge pull request #14 from bob/feature``) and the commits it brought.

A weekly lists them in its week (``steps.week_facts``, layout 3); a daily under its own heading from layout 5,
when there were any. From layout 6, with the forge's view, the pull requests come first, named by the forge
(``steps.forge_markdown``: title, author, reviewers), each with the merge it came by; the merges no pull request
names follow as before. Gathered at COLLECT_GIT (``steps.week_git.merges``); pure here, same input, same bytes.
"""

from __future__ import annotations

from steps import forge_markdown, untrusted
from steps.report_markdown import commit_ref, is_weekly
from steps.report_model import ReportInput
from steps.report_texts import Texts, texts

#: Merges listed, oldest first, before "… and N more merges".
MERGES_LISTED = 15
#: From this layout a daily (a monthly, a quarterly) gathers its merges and names them (its pull requests) as a
#: weekly does.
DAILY_LAYOUT = 5
#: The reports that list their merges under a heading of their own (a weekly lists them in its week).
LISTED_APART = ("daily_report", "monthly_report", "quarterly_report", "sprint_report")


def gathered_for(workflow: str, layout: int) -> bool:
    """Whether COLLECT_GIT gathers the merges of a report of ``workflow`` pinned with ``layout``."""
    return (workflow == "weekly_report" and layout >= 3) or (workflow in LISTED_APART and layout >= DAILY_LAYOUT)


def listing(inp: ReportInput, t: Texts) -> list[str]:
    """The pull requests (layout 6, with the forge's view) and the merges no pull request names, as list items
    (``No merges.`` when none)."""
    merges = inp.merges or []
    pulls = forge_markdown.landed(inp)
    if not merges and not pulls:
        return [t.no_merges]
    out = forge_markdown.pull_items(inp, t, merges)
    named = {pull.sha for pull in pulls}
    merges = [merge for merge in merges if merge.sha not in named]
    for merge in merges[:MERGES_LISTED]:
        brought = [commit_ref(sha, inp) for sha in merge.brought_shas[:5]]
        out.append(f"- {commit_ref(merge.sha, inp)} {untrusted.text(merge.subject, inp.text_rules)} "
                   f"({untrusted.text(merge.author_name, inp.text_rules)}): {t.brought(merge.brought, brought)}")
    if len(merges) > MERGES_LISTED:
        out.append(f"- {t.more_merges(len(merges) - MERGES_LISTED)}")
    return out


def daily_section(inp: ReportInput) -> str:
    """A daily's (a monthly's, a quarterly's) ``## Merged`` (layout 5; empty when nothing was merged or the merges
    were not gathered)."""
    if is_weekly(inp) or inp.layout < DAILY_LAYOUT or not (inp.merges or forge_markdown.landed(inp)):
        return ""
    t = texts(inp.language)
    return "\n".join([f"## {t.merged_heading}", "", *listing(inp, t)]) + "\n"
