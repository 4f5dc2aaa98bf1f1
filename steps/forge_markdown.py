"""The forge's view in a report (layout 6): pull requests in the merges' listing, ``## Reviews`` per person,
``## Issues closed``, the one line when the forge was not read, the block the model is given, and the numbers
it may cite.

Pure functions of the report input, as ``steps.merged``: same input, same bytes. Titles, names and labels are
the forge's text, made inert exactly like commit text (``steps.untrusted.text``, the run's pinned rules); a
``#N`` in a title links to the project's forge as in a commit subject. Nothing here shows before layout 6 or
without a view (``ReportInput.forge_view``), so runs pinned earlier render as they did.
"""

from __future__ import annotations

from collections.abc import Sequence

from steps import untrusted
from steps.forge_links import REFERENCE, ForgeLinks
from steps.forge_model import ForgeView, PullRequest
from steps.forge_texts import forge_texts
from steps.report_markdown import commit_ref, local_time, zone
from steps.report_model import Merge, ReportInput
from steps.report_texts import Texts

#: The layout from which a report gathers and shows the forge's view.
FORGE_LAYOUT = 6
#: Pull requests the prompt lists (the report lists every one).
PROMPT_PULLS, PROMPT_ISSUES = 40, 40


def view_of(inp: ReportInput) -> ForgeView | None:
    """The forge's view this report shows: from layout 6, when COLLECT_GIT gathered one."""
    return inp.forge_view if inp.layout >= FORGE_LAYOUT else None


def landed(inp: ReportInput) -> list[PullRequest]:
    """The pull requests of the report's range (none when the view is missing or not gathered)."""
    view = view_of(inp)
    return list(view.pulls) if view is not None else []


def _links(inp: ReportInput) -> ForgeLinks:
    return ForgeLinks(inp.forge)


def pull_ref(number: int, inp: ReportInput) -> str:
    """``#14`` (GitLab: ``!14``), linked to its page on the project's forge when one is known."""
    view = view_of(inp)
    mark = f"{'!' if view is not None and view.kind == 'gitlab' else '#'}{number}"
    url = _links(inp).pull(number)
    return f"[{mark}]({url})" if url else mark


def issue_ref(number: int, inp: ReportInput) -> str:
    url = _links(inp).reference(number)
    return f"[#{number}]({url})" if url else f"#{number}"


def _names(names: Sequence[str], rules: int) -> list[str]:
    return [untrusted.text(name, rules) for name in names]


def pull_items(inp: ReportInput, t: Texts, merges: Sequence[Merge]) -> list[str]:
    """The pull requests as list items of the merges' listing, each with the merge it came by (and what that
    brought) when it was one; a squash or rebase names the commit it landed as."""
    ft, rules = forge_texts(inp.language), inp.text_rules
    by_sha = {m.sha: m for m in merges}
    out = []
    for pull in landed(inp):
        parts = [ft.by(untrusted.text(pull.author, rules)), ft.reviewed_by(_names(pull.reviewers, rules))]
        if pull.approvals:
            parts.append(ft.approved_by(_names(pull.approvals, rules)))
        if pull.labels:
            parts.append(ft.labels(_names(pull.labels, rules)))
        if pull.closes:
            parts.append(ft.closes([issue_ref(n, inp) for n in pull.closes]))
        line = (f"- {pull_ref(pull.number, inp)} {untrusted.text(pull.title, rules, _links(inp))} "
                f"({'; '.join(parts)}), {commit_ref(pull.sha, inp)}")
        merge = by_sha.get(pull.sha)
        if merge is not None:
            brought = [commit_ref(sha, inp) for sha in merge.brought_shas[:5]]
            line += f": {t.brought(merge.brought, brought)}"
        out.append(line)
    return out


def reviews_section(inp: ReportInput) -> str:
    """``## Reviews``: per person, the merged pull requests they reviewed and approved (empty without any)."""
    pulls = landed(inp)
    view = view_of(inp)
    if not pulls or view is None:
        return ""
    ft = forge_texts(inp.language)
    reviewed: dict[str, list[PullRequest]] = {}
    for pull in pulls:
        for name in pull.reviewers:
            reviewed.setdefault(name, []).append(pull)
    lines = []
    for name in sorted(reviewed, key=lambda who: (-len(reviewed[who]), who.casefold(), who)):
        mine = reviewed[name]
        lines.append("- " + ft.reviewer_line(view.kind, untrusted.text(name, inp.text_rules),
                                             [pull_ref(p.number, inp) for p in mine],
                                             sum(1 for p in mine if name in p.approvals)))
    return "\n".join([f"## {ft.reviews}", "", *(lines or [ft.no_reviews(view.kind)])]) + "\n"


def issues_section(inp: ReportInput) -> str:
    """``## Issues closed``: the issues closed in the report's window (empty without any)."""
    view = view_of(inp)
    if view is None or not view.issues:
        return ""
    ft, rules, tz = forge_texts(inp.language), inp.text_rules, zone(inp.timezone)
    lines = ["- " + ft.issue_line(issue_ref(i.number, inp), untrusted.text(i.title, rules, _links(inp)),
                                  untrusted.text(i.author, rules), local_time(i.closed_at, tz)) for i in view.issues]
    return "\n".join([f"## {ft.issues_closed}", "", *lines]) + "\n"


def notes(inp: ReportInput) -> str:
    """The report's line when the forge was not read, or when its listings were cut (empty otherwise)."""
    view = view_of(inp)
    if view is None:
        return ""
    ft = forge_texts(inp.language)
    if view.missing is not None:
        return ft.missing_note(ft.reason(view.missing.reason, untrusted.text(view.missing.detail, inp.text_rules)))
    return ft.truncated_note if view.truncated else ""


def prompt_block(inp: ReportInput) -> str:
    """What the model is told of the forge (after the commits): the pull requests and issues it may cite, or that
    there are none to cite. Empty before layout 6 or without a view."""
    view = view_of(inp)
    if view is None:
        return ""
    rules = inp.text_rules
    mark = "!" if view.kind == "gitlab" else "#"
    if view.missing is not None:
        return ("Forge: not read. Name pull requests and issues only as the commit messages above do; "
                "cite no other number.\n")
    lines = ["Pull requests merged in this report (from the forge; cite pull requests and issues only by the "
             "numbers given here or in the commit messages):"]
    for pull in view.pulls[:PROMPT_PULLS]:
        facts = [f"by {untrusted.plain(pull.author, rules)}",
                 "reviewed by " + (", ".join(untrusted.plain(r, rules) for r in pull.reviewers) or "nobody")]
        if pull.approvals:
            facts.append("approved by " + ", ".join(untrusted.plain(a, rules) for a in pull.approvals))
        if pull.labels:
            facts.append("labels " + ", ".join(untrusted.plain(label, rules) for label in pull.labels))
        if pull.closes:
            facts.append("closes " + ", ".join(f"#{n}" for n in pull.closes))
        lines.append(f"- {mark}{pull.number} \"{untrusted.plain(pull.title, rules)}\" ({'; '.join(facts)}), "
                     f"merged as `{pull.sha[:8]}`")
    if not view.pulls:
        lines.append("(none)")
    if view.issues:
        lines.append("Issues closed in the window:")
        lines += [f"- #{i.number} \"{untrusted.plain(i.title, rules)}\" (by {untrusted.plain(i.author, rules)})"
                  for i in view.issues[:PROMPT_ISSUES]]
    return "\n".join(lines) + "\n"


def citable(inp: ReportInput) -> frozenset[int] | None:
    """The numbers the model may cite as ``#N`` (GitLab merge requests as ``!N`` too): the view's, and those the
    report's commits, merges and pull request titles name; None (nothing checked) without a view."""
    view = view_of(inp)
    if view is None:
        return None
    texts = [*(c.subject for c in inp.reported), *(c.body for c in inp.reported if c.body),
             *(m.subject for m in inp.merges or []), *(p.title for p in view.pulls), *(i.title for i in view.issues)]
    named = {int(m["number"]) for text in texts for m in REFERENCE.finditer(text)}
    return frozenset(view.numbers() | named)
