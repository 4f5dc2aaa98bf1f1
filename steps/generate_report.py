"""GENERATE_REPORT: statistics, the prompt from a versioned template, the narrative.

Contract (SPEC §6):

- The report Markdown is a deterministic header, a note when the model saw a
  trimmed commit list, the writer's narrative (Summary, Changes by area,
  Notable commits) and a computed ``## Statistics`` section. No wall-clock
  value appears in it.
- The prompt comes from ``steps/prompts/{workflow}.{prompt_version}.md``
  (``<!-- system -->`` and ``<!-- user -->`` parts, ``string.Template``
  placeholders, in both parts). An unknown version is ``CONFIG_INVALID``.
- The report is in ``language`` (``steps.report_texts``): the fixed parts
  here, and from ``v2`` on the prompt asks the model for that language and
  its section headings (``v1`` is English only).
- The commit listing is held to ``budget_for(num_ctx)`` characters: first
  messages are shortened, then the smallest commits are left out; both are
  said in the prompt and in the report, never silently.
- A window without commits gives a short no-activity report and calls no
  model (``model = "none"``, empty ``prompt_sha256``).
- Commits git could not read (``unreadable``) are named in a note, never silently.
- The forge's view (layout 6, ``steps.forge_markdown``): its pull requests and closed issues follow the
  commits in the prompt, and the model may cite ``#N`` only from them and the commits; the report names them
  (``## Merged``, ``## Reviews``, ``## Issues closed``), or says in one line that the forge was not read.
- The model's text is untrusted (text rules 2 on, ``steps.untrusted.narrative``): control and
  bidi characters removed, every link out of the project's forge shown as text, and such a
  link is a grounding violation (repair, then the builtin writer's section).

Writers: ``BuiltinWriter`` (deterministic, no model) and ``OllamaWriter``.
"""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from engine.core import errors, redact
from steps import forge_markdown, grounding, merged, untrusted, week_facts
from steps.git_log import CommitInfo
from steps.ollama_writer import OllamaWriter
from steps.report_markdown import (
    BuiltinWriter,
    arrived_late_section,
    assemble,
    header,
    in_progress_section,
    inline,
    kinds_section,
    local_span,
    local_time,
    no_activity,
    short,
    span,
    statistics_section,
    trim_note,
    zone,
)
from steps.report_model import (
    Layout,
    ReportInput,
    ReportMaterial,
    ReportOutput,
    ReportStats,
    Writer,
    WriterResult,
    churn,
    compute_stats,
    counted,
    lines,
    summarize,
)
from steps.report_texts import texts

__all__ = ["BuiltinWriter", "OllamaWriter", "ReportInput", "ReportOutput", "Writer",
           "WriterResult", "budget_for", "compute_stats", "generate", "load_template",
           "render_prompt"]

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
WORKFLOWS = ("daily_report", "weekly_report", "monthly_report", "quarterly_report", "sprint_report")
_VERSION = re.compile(r"^v[0-9]+$")

#: Prompt sizing: characters per token (conservative for English and code), the
#: share of the context kept for the answer, and tokens for instructions + statistics.
CHARS_PER_TOKEN = 3
ANSWER_SHARE = 4
FIXED_TOKENS = 700
MIN_BUDGET_CHARS = 600
#: Limits of one commit's entry in the listing, full and shortened.
FULL_FILES, SHORT_FILES = 8, 3
BODY_LINES, BODY_CHARS = 6, 600


@dataclass(frozen=True)
class PromptTemplate:
    """A versioned template: its two parts and the sha256 of the file."""

    workflow: str
    version: str
    system: string.Template
    user: string.Template
    sha256: str
    #: The repair request (``<!-- repair -->`` part, v3 on): its presence turns grounding on.
    repair: string.Template | None = None


@dataclass(frozen=True)
class Listing:
    """The commit listing given to the model and what it left out."""

    text: str
    listed: int
    total: int
    compacted: bool

    @property
    def trimmed(self) -> bool:
        return self.compacted or self.listed < self.total


def budget_for(num_ctx: int) -> int:
    """Characters allowed for the commit listing with a context of ``num_ctx`` tokens.

    A quarter of the context (at least 256 tokens) is kept for the answer and
    ``FIXED_TOKENS`` for the instructions and statistics; the rest, at
    ``CHARS_PER_TOKEN``, is the listing's (never below ``MIN_BUDGET_CHARS``).
    """
    answer = max(256, num_ctx // ANSWER_SHARE)
    return max(MIN_BUDGET_CHARS, (num_ctx - answer - FIXED_TOKENS) * CHARS_PER_TOKEN)


def load_template(workflow: str, version: str) -> PromptTemplate:
    """The template file for ``(workflow, version)``; CONFIG_INVALID if there is none."""
    if workflow not in WORKFLOWS or not _VERSION.match(version):
        raise errors.step_error("CONFIG_INVALID",
                                f"no prompt template for workflow {workflow!r} version {version!r}")
    path = PROMPTS_DIR / f"{workflow}.{version}.md"
    try:
        raw = path.read_bytes()
    except OSError as exc:
        known = sorted(p.name for p in PROMPTS_DIR.glob(f"{workflow}.v*.md"))
        raise errors.step_error(
            "CONFIG_INVALID", f"prompt version {version!r} of {workflow} does not exist "
            f"(no {path.name}; available: {', '.join(known) or 'none'})") from exc
    text = raw.decode("utf-8")
    match = re.fullmatch(r"\s*<!-- system -->\n(.*?)\n<!-- user -->\n(.*?)"
                         r"(?:\n<!-- repair -->\n(.*))?", text, re.DOTALL)
    if match is None:
        raise errors.step_error("CONFIG_INVALID",
                                f"prompt template {path.name} lacks its system/user markers")
    repair = match.group(3)
    return PromptTemplate(workflow, version, string.Template(match.group(1).strip()),
                          string.Template(match.group(2).strip() + "\n"),
                          hashlib.sha256(raw).hexdigest(),
                          string.Template(repair.strip() + "\n") if repair is not None else None)


def stats_text(stats: ReportStats, rules: int = 0) -> str:
    """The statistics as the prompt states them (bounded lists)."""
    lines = [f"- {stats.commits} commits by {stats.author_count} authors; {stats.files_changed} "
             f"files changed; +{stats.insertions} / -{stats.deletions} lines"]
    if stats.authors:
        lines.append("- Authors: " + "; ".join(
            f"{untrusted.plain(a.name, rules)} ({a.commits} commits, +{a.insertions}/-{a.deletions})"
            for a in stats.authors[:10]))
    if stats.kinds:  # grouped by code (steps.change_kinds): the report lists them so, whatever the model writes
        lines.append("- Kinds of change: " + "; ".join(f"{kind} {n}" for kind, n in stats.kinds.items()))
    if stats.areas:
        lines.append("- Areas: " + "; ".join(
            f"{untrusted.plain(a.area, rules)} ({a.commits} commits, {a.files} files, +{a.insertions}/-{a.deletions})"
            for a in stats.areas[:12]))
    if stats.busiest_files:
        lines.append("- Busiest files: " + "; ".join(
            f"{untrusted.plain(f.path, rules)} ({f.commits} commits)" for f in stats.busiest_files))
    return "\n".join(lines)


def _entry(commit: CommitInfo, tz: ZoneInfo, *, full: bool, rules: int = 0) -> str:
    paths = [f.path for f in counted(commit)]
    limit = FULL_FILES if full else SHORT_FILES
    shown = ", ".join(untrusted.plain(p, rules) for p in paths[:limit])
    if len(paths) > limit:
        shown += f", +{len(paths) - limit} more"
    left_out = len(commit.files) - len(paths)
    if left_out:  # generated, vendored or excluded: not counted, so not shown either
        shown += f"{', ' if shown else ''}+{left_out} generated/vendored/excluded"
    insertions, deletions = lines(commit)
    line = (f"- `{short(commit.sha)}` {local_time(commit.authored_at, tz)} · "
            f"{untrusted.plain(commit.author_name, rules)} · {untrusted.plain(commit.subject, rules)} "
            f"(+{insertions}/-{deletions})" + (f" [{shown}]" if shown else ""))
    if full and commit.body:
        body = "\n".join(commit.body.splitlines()[:BODY_LINES])[:BODY_CHARS]
        if rules >= 1:
            body = redact.neutralise(body, keep_newlines=True)
        line += "\n" + "\n".join(f"    {row}".rstrip() for row in body.splitlines())
    return line


def build_listing(commits: Sequence[CommitInfo], tz: ZoneInfo, budget_chars: int, rules: int = 0) -> Listing:
    """The listing within ``budget_chars``: full entries, else shortened, else the largest."""
    total = len(commits)
    full = [_entry(c, tz, full=True, rules=rules) for c in commits]
    if sum(len(e) + 1 for e in full) <= budget_chars:
        return Listing("\n".join(full), total, total, compacted=False)
    brief = [_entry(c, tz, full=False, rules=rules) for c in commits]
    if sum(len(e) + 1 for e in brief) <= budget_chars:
        return Listing("\n".join(brief), total, total, compacted=True)
    order = sorted(range(total), key=lambda i: (-churn(commits[i]), commits[i].authored_at,
                                                commits[i].sha))
    chosen: set[int] = set()
    used = 0
    for index in order:
        size = len(brief[index]) + 1
        if used + size <= budget_chars:
            chosen.add(index)
            used += size
    return Listing("\n".join(brief[i] for i in sorted(chosen)), len(chosen), total, compacted=True)


def _prompt_note(listing: Listing) -> str:
    if listing.listed < listing.total:
        left = listing.total - listing.listed
        return (f"NOTE: only {listing.listed} of {listing.total} commits are listed (the largest "
                f"by lines changed); the other {left} were left out to fit the context window. "
                "The statistics cover all commits; do not guess what the missing commits did.")
    if listing.compacted:
        return ("NOTE: commit messages and file lists were shortened to fit the context window; "
                "the statistics are complete.")
    return ""


def _language_fields(language: str) -> dict[str, str]:
    """The placeholders that carry the report's language into a template (v2 and later)."""
    t = texts(language)
    return {"language": t.language, "language_name": t.name, "heading_summary": t.summary,
            "heading_areas": t.areas, "heading_notable": t.notable}


def _system(template: PromptTemplate, language: str) -> str:
    try:
        return template.system.substitute(_language_fields(language))
    except (KeyError, ValueError) as exc:
        raise errors.step_error("CONFIG_INVALID", f"prompt template {template.workflow}."
                                f"{template.version}.md has a bad placeholder: {exc}") from exc


def _render(inp: ReportInput, stats: ReportStats, template: PromptTemplate,
            budget_chars: int) -> tuple[str, Listing]:
    listing = build_listing(inp.reported, zone(inp.timezone), budget_chars, inp.text_rules)
    summary = (f"all {listing.total}" if listing.listed == listing.total
               else f"{listing.listed} of {listing.total} listed")
    try:
        prompt = template.user.substitute(
            project=inp.project, business_key=inp.business_key, window_local=local_span(inp),
            window_start=span(inp)[0], window_end=span(inp)[1], timezone=inp.timezone,
            coverage=coverage_text(inp),
            commit_count=listing.total, listing_summary=summary, stats=stats_text(stats, inp.text_rules),
            commits=listing.text or "(none listed)", trim_note=_prompt_note(listing),
            **_language_fields(inp.language))
    except (KeyError, ValueError) as exc:
        raise errors.step_error("CONFIG_INVALID", f"prompt template {template.workflow}."
                                f"{template.version}.md has a bad placeholder: {exc}") from exc
    forge = forge_markdown.prompt_block(inp)  # layout 6: what the model may cite of the forge
    return prompt.rstrip("\n") + "\n" + (f"\n{forge}" if forge else ""), listing


def coverage_text(inp: ReportInput) -> str:
    """What the report holds, for the prompt (v4 and later): the model must not call a window a day."""
    cover = inp.coverage
    if cover is None:
        return f"the commits authored during {local_span(inp)}."
    late = len(cover.arrived_late)
    text = (f"the commits that landed on the tracked branches during {local_span(inp)}"
            if cover.attribution == "landed" else
            f"the commits authored during {local_span(inp)}"
            + (f", and {late} authored earlier that arrived since the last report" if late else ""))
    if cover.also_covers:
        text += f"; it also covers {', '.join(cover.also_covers)}, which had no report of their own"
    return text + ". Say \"in this window\", not \"today\" or \"this week\", when the window is not exactly that."


def render_prompt(inp: ReportInput, stats: ReportStats | Mapping[str, Any], *,
                  budget_chars: int) -> tuple[str, bool]:
    """The user prompt for ``inp`` and whether its commit listing was trimmed."""
    template = load_template(inp.workflow, inp.prompt_version)
    parsed = stats if isinstance(stats, ReportStats) else ReportStats.model_validate(stats)
    prompt, listing = _render(inp, parsed, template, budget_chars)
    return prompt, listing.trimmed


def repair_prompt(template: PromptTemplate, language: str,
                  violations: Sequence[grounding.Violation]) -> str:
    """The repair request of ``template`` listing ``violations``, one bullet each."""
    assert template.repair is not None
    listed = "\n".join(f"- {v.line()}" for v in violations)
    try:
        return template.repair.substitute(violations=listed, **_language_fields(language))
    except (KeyError, ValueError) as exc:
        raise errors.step_error("CONFIG_INVALID", f"prompt template {template.workflow}."
                                f"{template.version}.md has a bad placeholder: {exc}") from exc


def facts_of(inp: ReportInput) -> grounding.Facts:
    """What the narrative of ``inp`` may cite and must contain (SPEC §16.1)."""
    t = texts(inp.language)
    verbatim = [inp.project]
    for commit in inp.reported:
        verbatim += [commit.subject, commit.author_name, *(f.path for f in commit.files)]
        verbatim += [Layout.of(inp).area(f.path) for f in commit.files]
    view = forge_markdown.view_of(inp)
    if view is not None:
        verbatim += [text for p in view.pulls for text in (p.title, p.author, *p.reviewers, *p.labels)]
        verbatim += [text for i in view.issues for text in (i.title, i.author)]
    return grounding.Facts(commits=tuple(c.sha for c in inp.reported),
                           headings=(t.summary, t.areas, t.notable), language=inp.language,
                           verbatim=tuple(dict.fromkeys(inline(v) for v in verbatim)),
                           links=inp.text_rules >= untrusted.LINK_RULES, forge=inp.forge,
                           numbers=forge_markdown.citable(inp), merge_requests=view is not None and view.kind == "gitlab")


def _grounded(inp: ReportInput, stats: ReportStats, template: PromptTemplate, writer: Writer,
              first: str, *, prompt: str, system: str,
              options: Mapping[str, Any]) -> grounding.Grounded:
    """The narrative after the check, one repair, and the builtin fallback (SPEC §16.1)."""
    material = ReportMaterial(input=inp, stats=stats)
    if not writer.reads_prompt:  # the builtin writer's text holds by construction
        return grounding.Grounded(first, "ok")

    def repair(violations: tuple[grounding.Violation, ...]) -> str:
        again = writer.write(repair_prompt(template, inp.language, violations), system=system,
                             options=options, material=material, earlier=((prompt, first),))
        return model_text(again.text, inp.text_rules)

    builtin = BuiltinWriter().write(prompt, system=system, options=options, material=material)
    return grounding.ground(first, facts_of(inp), repair=repair, builtin=builtin.text)


def model_text(text: str, rules: int) -> str:
    """A model's answer as the report takes it: LF line ends, trimmed, and from text rules 2 on
    without control or bidi characters (its links are made inert after the grounding check)."""
    clean = text.replace("\r\n", "\n").strip()
    return redact.neutralise(clean, keep_newlines=True) if rules >= untrusted.LINK_RULES else clean


def prompt_digest(system: str, prompt: str) -> str:
    """sha256 of exactly what the model is sent: system text, a blank line, the prompt."""
    return hashlib.sha256(f"{system}\n\n{prompt}".encode()).hexdigest()


def generate(inp: ReportInput, writer: Writer, *, num_ctx: int,
             options: Mapping[str, Any], fallback_for: str | None = None) -> ReportOutput:
    """Write the report for ``inp`` with ``writer`` (see the module contract).

    ``options`` (temperature, seed...) are passed to the writer with
    ``num_ctx`` added, and recorded. Raises ``StepError`` from the writer
    (``MODEL_UNAVAILABLE``...) or ``CONFIG_INVALID`` for a bad template.
    ``fallback_for`` names the model ``writer`` stands in for (``ollama `llama3.1:8b```):
    the "Written by" line then says the report is a fallback, to be written again.
    """
    template = load_template(inp.workflow, inp.prompt_version)
    t = texts(inp.language)
    stats = summarize(inp.reported, Layout.of(inp))
    opts = dict(sorted({**options, "num_ctx": num_ctx}.items()))
    left_out = t.unreadable_note(inp.unreadable) if inp.unreadable else ""
    if not inp.reported:
        text = assemble([no_activity(inp), week_facts.quiet_line(inp), left_out, in_progress_section(inp)])
        return ReportOutput(text=text, model="none", model_digest=None,
                            prompt_version=inp.prompt_version, prompt_sha256="",
                            template_sha256=template.sha256, options=opts,
                            provider=writer.provider, trimmed=False, stats=stats.model_dump(),
                            language=inp.language)
    prompt, listing = _render(inp, stats, template, budget_for(num_ctx))
    system = _system(template, inp.language)
    result = writer.write(prompt, system=system, options=opts,
                          material=ReportMaterial(input=inp, stats=stats))
    narrative = model_text(result.text, inp.text_rules)
    if not narrative:
        raise errors.step_error("MODEL_UNAVAILABLE",
                                f"{writer.provider} model {result.model!r} returned an empty report")
    checked: dict[str, Any] | None = None
    fallback_note = ""
    if template.repair is not None:  # prompts before v3 saved the answer as it was, and still do
        result_text = _grounded(inp, stats, template, writer, narrative, prompt=prompt,
                                system=system, options=opts)
        narrative = result_text.text
        checked = dict(grounding.record(result_text))
        if result_text.replaced:
            fallback_note = t.grounding_note(result_text.replaced)
    # What a foreign link the check let through (a prompt before v3 has none) would leave live. The
    # built-in writer's text is inert by construction (``untrusted.text``), and from text rules 3 it
    # is left as written: escaping it again would put back the backslashes rules 3 took out.
    if writer.reads_prompt or inp.text_rules < untrusted.PLAIN_RULES:
        narrative = untrusted.narrative(narrative, inp.text_rules, inp.forge)
    # A writer that reads the commits itself (builtin) never sees the trimmed listing.
    trimmed = listing.trimmed and writer.reads_prompt
    by = f"{writer.provider} `{result.model}`"
    if result.digest:
        by += f" (digest `{result.digest[:12]}`)"
    by += f", {t.prompt_word} {inp.workflow} {inp.prompt_version}"
    if fallback_for is not None:
        by += f"; {t.fallback_by(fallback_for)}"
    note = trim_note(listed=listing.listed, total=listing.total, compacted=listing.compacted,
                     num_ctx=num_ctx, language=inp.language) if trimmed else ""
    text = assemble([header(inp, stats, writer_line=by), note, left_out, forge_markdown.notes(inp), fallback_note,
                     narrative, kinds_section(inp), week_facts.section(inp), week_facts.weeks_section(inp),
                     merged.daily_section(inp), forge_markdown.reviews_section(inp),
                     forge_markdown.issues_section(inp), in_progress_section(inp), arrived_late_section(inp),
                     statistics_section(stats, inp.language, inp.text_rules, inp.layout)])
    return ReportOutput(text=text, model=result.model, model_digest=result.digest,
                        prompt_version=inp.prompt_version,
                        prompt_sha256=prompt_digest(system, prompt),
                        template_sha256=template.sha256, options=opts, provider=writer.provider,
                        trimmed=trimmed, stats=stats.model_dump(), language=inp.language,
                        grounding=checked)
