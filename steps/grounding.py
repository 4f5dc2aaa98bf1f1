"""The grounding check: what a model wrote, held against the run's own facts (SPEC §16.1).

Pure functions, no model and no clock: ``check(text, facts)`` lists the
violations of a narrative, ``ground(...)`` runs the whole policy (check, one
repair, then the builtin writer's section for every section still failing)
with the repair passed in as a callable.

The rules:

- the sections the prompt version asks for (``facts.headings``) are
  present as ``## `` headings, in that order, with nothing before the first
  and no other ``## `` heading;
- every commit id cited (a word of 7–40 hexadecimal characters with at least
  one letter a–f, in backticks or not) is a prefix of one of ``facts.commits``;
- for ``ko``, Hangul is at least ``HANGUL_SHARE`` of the letters of a
  section's prose: headings, code spans and the verbatim data (commit
  subjects, names, paths, the project) left out. Other languages are not
  measured;
- with ``facts.numbers`` (a report with the forge's view, layout 6), every ``#N`` cited (on GitLab every
  ``!N`` too) is a pull request or issue of the run: one the forge listed, or one its commits name;
- with ``facts.links`` (text rules 2 on), the text links nowhere but into
  ``facts.forge``: a link, image, autolink, raw ``<a>``/``<img>``, bare URL
  or address elsewhere is a violation (``steps.untrusted.foreign_links``),
  so a commit message that steers the model into a phishing link gets the
  repair, then the builtin writer's section.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from steps import untrusted
from steps.forge_links import REFERENCE
from steps.report_texts import primary

Verdict = Literal["ok", "repaired", "fallback"]
Kind = Literal["missing_section", "out_of_order", "preamble", "extra_heading", "unknown_commit", "unknown_fact",
               "unknown_reference", "language", "foreign_link"]

#: Share of Hangul among the letters of a Korean section's prose.
HANGUL_SHARE = 0.3
#: A cited commit id: 7–40 hex characters as a whole word (letters and digits on neither side),
#: not a piece of a path (no ``/`` beside it, no ``.ext`` after it).
_HEX_WORD = re.compile(r"(?<![0-9A-Za-z_/])[0-9A-Fa-f]{7,40}(?![0-9A-Za-z_/])(?!\.[A-Za-z])")
_HEADING = re.compile(r"^##[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_CODE = re.compile(r"`[^`\n]*`")
#: A GitLab merge request cited as ``!14`` (not inside a word, a path, or after ``!``/``]``).
_MERGE_REQUEST = re.compile(r"(?<![\w/&#!\]])!(?P<number>[1-9][0-9]{0,8})\b")
_HANGUL = re.compile(r"[\u1100-\u11ff\u3130-\u318f\uac00-\ud7a3]")


@dataclass(frozen=True)
class Facts:
    """What a narrative may say: the run's commits, the sections asked for, the language."""

    commits: tuple[str, ...]
    headings: tuple[str, ...]
    language: str
    #: Text quoted verbatim from the data (subjects, names, paths): not prose of any language.
    verbatim: tuple[str, ...] = ()
    #: Whether a link out of ``forge`` is a violation (runs pinned to text rules 2 or later).
    links: bool = False
    #: The project's own forge (``https://host/owner/repo``), the one place a link may point; None: nowhere.
    forge: str | None = None
    #: The pull request and issue numbers the text may cite (``#N``); None: numbers are not checked.
    numbers: frozenset[int] | None = None
    #: GitLab: a merge request is cited as ``!N``, checked against ``numbers`` too.
    merge_requests: bool = False


@dataclass(frozen=True)
class Violation:
    """One broken rule; ``section`` is the heading it concerns (None: the text as a whole)."""

    kind: Kind
    section: str | None
    detail: str

    def line(self) -> str:
        """The violation as the repair prompt and ``runs show`` state it."""
        where = f"section \"{self.section}\": " if self.section else ""
        return f"{where}{self.detail}"


@dataclass(frozen=True)
class Grounded:
    """The narrative that may be saved, its verdict, and what was wrong on the way."""

    text: str
    verdict: Verdict
    violations: tuple[Violation, ...] = ()
    #: Sections replaced by the builtin writer's text (verdict ``fallback``).
    replaced: tuple[str, ...] = field(default=())


def cited_ids(text: str) -> list[str]:
    """The words of ``text`` that cite a commit: 7–40 hex characters with a letter a–f."""
    return [w for w in _HEX_WORD.findall(text) if re.search(r"[A-Fa-f]", w)]


def sections(text: str) -> tuple[str, list[tuple[str, str]]]:
    """``(preamble, [(heading, body)])`` of a Markdown text split at its ``## `` headings."""
    marks = list(_HEADING.finditer(text))
    if not marks:
        return text, []
    out = []
    for index, mark in enumerate(marks):
        end = marks[index + 1].start() if index + 1 < len(marks) else len(text)
        out.append((mark.group(1).strip(), text[mark.end():end]))
    return text[:marks[0].start()], out


def _prose(body: str, verbatim: Sequence[str]) -> str:
    """A section's own words: no headings, code spans or data quoted verbatim."""
    kept = "\n".join(line for line in body.splitlines() if not line.lstrip().startswith("#"))
    kept = _CODE.sub(" ", kept)
    for item in sorted((v for v in verbatim if v.strip()), key=len, reverse=True):
        kept = kept.replace(item, " ")
    return kept


def hangul_share(body: str, verbatim: Sequence[str] = ()) -> float | None:
    """Share of Hangul among the letters of ``body``'s prose; None when it has no letters."""
    letters = [c for c in _prose(body, verbatim) if c.isalpha()]
    if not letters:
        return None
    return sum(1 for c in letters if _HANGUL.match(c)) / len(letters)


def cited_numbers(text: str, merge_requests: bool = False) -> list[tuple[str, int]]:
    """The pull requests and issues ``text`` cites, as written and by number: every ``#N`` (and ``!N`` with
    ``merge_requests``), each once."""
    found = [(m.group(), int(m["number"])) for m in REFERENCE.finditer(text)]
    if merge_requests:
        found += [(m.group(), int(m["number"])) for m in _MERGE_REQUEST.finditer(text)]
    return list(dict.fromkeys(found))


def link_violations(section: str | None, body: str, forge: str | None) -> list[Violation]:
    """One ``foreign_link`` violation per link in ``body`` that points out of ``forge``."""
    return [Violation("foreign_link", section, f"links to {target[:120]}, which is not the project's own "
                      "forge: write it as plain text, without a link") for target in untrusted.foreign_links(body, forge)]


def _body_violations(heading: str, body: str, facts: Facts) -> list[Violation]:
    found: list[Violation] = []
    if facts.links:
        found += link_violations(heading or None, body, facts.forge)
    known = [c.lower() for c in facts.commits]
    for word in cited_ids(body):
        if not any(c.startswith(word.lower()) for c in known):
            found.append(Violation("unknown_commit", heading or None,
                                   f"cites commit {word}, which is not among the run's commits"))
    if facts.numbers is not None:
        found += [Violation("unknown_reference", heading or None,
                            f"cites {written}, which is not among the run's pull requests and issues: cite only "
                            "those listed") for written, n in cited_numbers(body, facts.merge_requests)
                  if n not in facts.numbers]
    if primary(facts.language) == "ko":
        share = hangul_share(body, facts.verbatim)
        if share is not None and share < HANGUL_SHARE:
            found.append(Violation("language", heading, f"is not in Korean (Hangul is {share:.0%} "
                                   f"of its letters, at least {HANGUL_SHARE:.0%} needed)"))
    return found


def check(text: str, facts: Facts) -> tuple[Violation, ...]:
    """Every way ``text`` breaks the rules of the module contract (empty: it holds)."""
    preamble, parts = sections(text)
    found: list[Violation] = []
    if preamble.strip():
        found.append(Violation("preamble", None, "has text before the first section heading"))
        found += [v for v in _body_violations("", preamble, facts)
                  if v.kind in ("unknown_commit", "unknown_reference", "foreign_link")]
    wanted = list(facts.headings)
    seen = [h for h, _ in parts]
    for heading in wanted:
        if heading not in seen:
            found.append(Violation("missing_section", heading, "is missing (expected the heading "
                                   f"\"## {heading}\")"))
    present = [h for h in seen if h in wanted]
    if present != [h for h in wanted if h in present] or len(set(present)) != len(present):
        found.append(Violation("out_of_order", None, "sections are not in the order "
                               + " → ".join(wanted) + " (or one is repeated)"))
    owner = None
    for heading, body in parts:
        if heading in wanted:
            owner = heading
            found += _body_violations(heading, body, facts)
        else:
            found.append(Violation("extra_heading", owner,
                                   f"has a heading that was not asked for: \"## {heading}\""))
            found += [Violation(v.kind, owner, v.detail) for v in _body_violations(heading, body, facts)]
    return tuple(found)


def _failing(violations: Sequence[Violation], headings: Sequence[str]) -> set[str]:
    """Sections to replace: those named by a violation; all of them for a text-wide one
    other than a preamble (dropped), the order (the merge puts sections in order) or a link
    outside every wanted section (dropped with the text around it)."""
    failing = {v.section for v in violations if v.section}
    if any(v.section is None and v.kind not in ("preamble", "out_of_order", "foreign_link") for v in violations):
        return set(headings)
    return {h for h in failing if h in headings}


def merge(text: str, builtin: str, violations: Sequence[Violation], headings: Sequence[str]) -> \
        tuple[str, tuple[str, ...]]:
    """The wanted sections in order: the model's where they hold, the builtin's where not;
    the replaced headings."""
    _, model_parts = sections(text)
    _, builtin_parts = sections(builtin)
    mine = {h: b for h, b in model_parts if h in headings} if len(
        {h for h, _ in model_parts}) == len(model_parts) else {}
    theirs = dict(builtin_parts)
    failing = _failing(violations, headings) | {h for h in headings if h not in mine}
    out: list[str] = []
    replaced: list[str] = []
    for heading in headings:
        if heading in failing:
            replaced.append(heading)
            body = theirs.get(heading, "")
        else:
            body = mine[heading]
        body = body.strip("\n")
        out.append(f"## {heading}\n\n{body}\n" if body.strip() else f"## {heading}\n")
    return "\n".join(out), tuple(replaced)


def ground(text: str, facts: Facts, *, repair: Callable[[tuple[Violation, ...]], str],
           builtin: str) -> Grounded:
    """Check ``text``; if it fails, ask ``repair(violations)`` once and check that; if the
    repair fails too, replace its failing sections with ``builtin``'s."""
    first = check(text, facts)
    if not first:
        return Grounded(text, "ok")
    second_text = repair(first)
    second = check(second_text, facts)
    if not second:
        return Grounded(second_text, "repaired", first)
    merged, replaced = merge(second_text, builtin, second, facts.headings)
    return Grounded(merged, "fallback", first + second, replaced)


def record(grounded: Grounded) -> Mapping[str, object]:
    """The step output's ``grounding``: verdict, violations (one line each), replaced sections."""
    return {"verdict": grounded.verdict,
            "violations": [v.line() for v in grounded.violations],
            "replaced": list(grounded.replaced)}
