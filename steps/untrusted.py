"""Commit subjects, author names and file names on their way into a report's Markdown.

A commit author controls these texts. From text rules 1 on (pinned per run as
``text_rules``; runs pinned before it render with rules 0, byte for byte as before):

- control and format characters (ESC, BEL, bidi overrides) are removed, line breaks
  become spaces, so ``cat`` of a report runs nothing in a terminal;
- Markdown punctuation is backslash-escaped in running text, so a subject cannot make
  a live link or image (``[x](https://evil)`` stays text, in the page and in Notion);
- a code span's fence is longer than any run of backticks inside it, so a backtick in a
  file name cannot end the span.

Why here, at rendering, and not at COLLECT_GIT's output: escaping depends on where the
text lands (running text, a code span, the model's prompt), and the stored output stays
what git said. docs/DESIGN.md "Untrusted commit text".
"""

from __future__ import annotations

import re

from engine.core import redact

_SPECIAL = re.compile(r"([\\`*_\[\]<>!|~()])")
_TICKS = re.compile(r"`+")


def _one_line(text: str, rules: int) -> str:
    clean = redact.neutralise(text) if rules >= 1 else text
    return " ".join(clean.split())


def text(value: str, rules: int) -> str:
    """``value`` as running Markdown text: one line, inert (rules >= 1), safe in a table cell."""
    line = _one_line(value, rules)
    if rules < 1:
        return line.replace("|", "\\|")
    return _SPECIAL.sub(r"\\\1", line)


def plain(value: str, rules: int) -> str:
    """``value`` for the model's prompt: one line, without control characters (rules >= 1); not escaped."""
    return _one_line(value, rules).replace("|", "\\|")


def code(value: str, rules: int) -> str:
    """``value`` as a Markdown code span that no backtick inside it can close early."""
    line = _one_line(value, rules).replace("|", "\\|")
    if rules < 1:
        return f"`{line}`"
    fence = "`" * (max((len(run) for run in _TICKS.findall(line)), default=0) + 1)
    pad = " " if line.startswith("`") or line.endswith("`") else ""
    return f"{fence}{pad}{line}{pad}{fence}"
