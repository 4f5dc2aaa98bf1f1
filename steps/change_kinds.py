"""What kind of change each commit is: breaking, features, fixes, performance, docs, tests, build/CI, other.

A commit written as a Conventional Commit (``feat(api)!: …``, ``fix: …``, a ``BREAKING CHANGE:`` footer) is
read by its type. Any other commit by a documented heuristic, first match wins:

1. ``BREAKING`` in its subject or a ``BREAKING CHANGE:`` footer: **breaking**;
2. the subject's first word (case-insensitive, trailing ``:`` or ``s`` ignored) among a kind's words
   (``KEYWORDS``, plus the project's ``kinds = { fixes = ["hotfix"] }``): that kind;
3. every file it changed under docs (``docs/``, ``*.md``, ``*.rst``, ``*.txt``): **docs**; under tests
   (``tests/``, ``test/``, ``test_*``, ``*_test.*``): **tests**; build or CI files (``.github/``,
   ``.gitlab-ci.yml``, ``Dockerfile``, ``Makefile``, lock files, ``pyproject.toml``…): **build**;
4. else **other**.

Pure and deterministic: the same commit and rules give the same kind; the report's "Changes by kind" is
written from it by code, never by the model, so no model can move a commit to another kind.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase

from steps.git_log import CommitInfo

#: The kinds, in the order a report lists them: breaking changes first.
KINDS = ("breaking", "features", "fixes", "performance", "docs", "tests", "build", "other")
_CONVENTIONAL = re.compile(r"^(?P<type>[A-Za-z]+)(?:\([^()\n]{0,80}\))?(?P<bang>!)?: \S")
_BREAKING_FOOTER = re.compile(r"^BREAKING[ -]CHANGE: ", re.MULTILINE)
#: Conventional Commit types and the kind each one is.
TYPES = {"feat": "features", "feature": "features", "fix": "fixes", "perf": "performance", "docs": "docs",
         "doc": "docs", "test": "tests", "tests": "tests", "build": "build", "ci": "build"}
#: A subject's first word and the kind it names (the heuristic's step 2).
KEYWORDS = {
    "features": ("add", "implement", "introduce", "support", "new", "feature", "allow", "enable"),
    "fixes": ("fix", "bugfix", "hotfix", "bug", "repair", "correct", "resolve"),
    "performance": ("perf", "speed", "optimise", "optimize", "faster"),
    "docs": ("doc", "docs", "document", "readme"),
    "tests": ("test", "tests"),
    "build": ("build", "ci", "bump", "deps"),
}
_DOCS = ("docs/*", "doc/*", "*.md", "*.rst", "*.txt", "*.adoc")
_TESTS = ("tests/*", "test/*", "*/tests/*", "*/test/*", "test_*", "*/test_*", "*_test.*", "*.test.*", "*.spec.*")
_BUILD = (".github/*", ".gitlab-ci.yml", ".ci/*", "*Dockerfile", "Makefile", "*.lock", "pyproject.toml",
          "setup.py", "setup.cfg", "requirements*.txt", "package.json", "package-lock.json", ".circleci/*")


def conventional(subject: str) -> str | None:
    """The Conventional Commit type of ``subject`` (lower case), or None for a subject not written so."""
    match = _CONVENTIONAL.match(subject)
    return match.group("type").lower() if match else None


def kind_of(commit: CommitInfo, extra: Mapping[str, Sequence[str]] | None = None) -> str:
    """The kind of ``commit``; ``extra``: the project's own first words per kind (``kinds``)."""
    subject = commit.subject
    match = _CONVENTIONAL.match(subject)
    if match is not None and match.group("bang") or _BREAKING_FOOTER.search(commit.body):
        return "breaking"
    if match is not None and match.group("type").lower() in TYPES:
        return TYPES[match.group("type").lower()]
    if match is None and "BREAKING" in subject:
        return "breaking"
    first = re.split(r"[\s:(]", subject.strip(), maxsplit=1)[0].casefold().rstrip(":")
    for kind in KINDS:
        words = (*KEYWORDS.get(kind, ()), *(w.casefold() for w in (extra or {}).get(kind, ())))
        if first in words or (first.endswith(("s", "ed")) and first.removesuffix("ed").removesuffix("s") in words):
            return kind
    paths = [change.path for change in commit.files]
    for kind, patterns in (("docs", _DOCS), ("tests", _TESTS), ("build", _BUILD)):
        if paths and all(any(fnmatchcase(path, pattern) for pattern in patterns) for path in paths):
            return kind
    return "other"


def group(commits: Sequence[CommitInfo], extra: Mapping[str, Sequence[str]] | None = None) -> dict[str, list[CommitInfo]]:
    """The commits by kind, in ``KINDS`` order, each kind's in the order given; kinds without commits left out."""
    found: dict[str, list[CommitInfo]] = {kind: [] for kind in KINDS}
    for commit in commits:
        found[kind_of(commit, extra)].append(commit)
    return {kind: members for kind, members in found.items() if members}


def check_rules(value: Mapping[str, Sequence[str]]) -> Mapping[str, Sequence[str]]:
    """A project's ``kinds``: each key a kind of ``KINDS`` (but ``breaking`` and ``other``), each value words."""
    for kind, words in value.items():
        if kind not in KINDS or kind in ("breaking", "other"):
            raise ValueError(f"{kind!r} is not a kind words can name: use one of "
                             f"{', '.join(k for k in KINDS if k not in ('breaking', 'other'))}")
        if any(not isinstance(w, str) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]{0,39}", w) for w in words):
            raise ValueError(f"kinds.{kind}: each entry is one word (a subject's first word), e.g. \"hotfix\"")
    return value
