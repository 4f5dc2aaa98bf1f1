"""The GENERATE_REPORT contract: its input and output, the writer port, the statistics.

Statistics are a pure function of the commits (``summarize``): the same
commits give the same numbers in the same order, whichever writer runs.
Files COLLECT_GIT marked ``excluded`` (generated, vendored, the project's
``exclude`` globs) count nowhere: not in files, lines, areas or the largest
change; the commits that touched them still count as commits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from steps import areas, change_kinds, subprojects
from steps.forge_model import ForgeView
from steps.git_log import CommitInfo, FileChange

WorkflowName = Literal["daily_report", "weekly_report", "monthly_report", "quarterly_report", "sprint_report"]
#: How many files the "busiest files" table lists.
BUSIEST_FILES = 10
ROOT_AREA = areas.ROOT


class Coverage(BaseModel):
    """What a report of a run pinned with an attribution holds (COLLECT_GIT's coverage fields)."""

    attribution: Literal["landed", "authored"]
    since: str
    until: str
    also_covers: list[str] = []
    covered: bool = False
    covered_by: str | None = None
    arrived_late: list[CommitInfo] = []
    rewritten: list[str] = []


class InProgress(BaseModel):
    """A branch not tracked whose commits are not on the tracked branches yet, authored or updated in the
    report's window (``steps.wip_git``): listed apart, never counted as landed."""

    branch: str
    authors: list[str]
    commits: int  # not on the tracked branches yet
    last_update: str  # its newest commit's committer time, UTC
    #: Its newest commits, newest first (``wip_git.SHAS_KEPT``).
    shas: list[str] = []


class Merge(BaseModel):
    """A first-parent merge of a weekly report's coverage and how many commits it brought (``steps.week_git``)."""

    sha: str
    author_name: str
    subject: str
    committed_at: str
    brought: int
    #: The first of the commits it brought, oldest first (``week_git.BROUGHT_KEPT``).
    brought_shas: list[str] = []


class LastWeek(BaseModel):
    """The week before a weekly report's, in figures (gathered at COLLECT_GIT, ``steps.week_facts.figures``)."""

    key: str
    commits: int
    authors: int
    #: (area, commits) of people's commits, busiest first.
    areas: list[tuple[str, int]] = []


class ReportInput(BaseModel):
    """What the step needs: pinned inputs, the window, and COLLECT_GIT's commits."""

    workflow: WorkflowName
    project: str
    business_key: str
    window_start: str
    window_end: str
    timezone: str
    commits: list[CommitInfo]
    prompt_version: str
    on_empty: Literal["skip", "report"] = "skip"
    #: BCP 47 tag of the report's language (pinned; runs pinned before it existed are English).
    language: str = "en"
    #: How commit text is neutralised (``steps.untrusted``; pinned; runs pinned before it render with 0).
    text_rules: int = 0
    #: SHAs of the window's commits git could not read (COLLECT_GIT's ``unreadable``): the report names them.
    unreadable: list[str] = []
    #: The project's forge (``https://host/owner/repo``, pinned from ``origin``): the one place a link in the
    #: model's text may point (text rules 2 on). None: no link stays.
    forge: str | None = None
    #: What the report covers (runs pinned with an attribution); None: the window, by author date.
    coverage: Coverage | None = None
    #: How statistics and the built-in writer lay the report out, pinned per run
    #: (``report_settings.LAYOUT``; runs pinned before it lay out as 1):
    #: 1: areas are top-level folders, every author alike;
    #: 2: areas below source roots (``steps.areas``), a commit's area taken from its source change,
    #:    bots apart from authors, no "most active" line on a tie, commits and ``#N`` linked to the forge;
    #: 3: a weekly has its week (day by day, against last week, merged this week: ``steps.week_facts``);
    #:    a team report a section per repository, and per person when it names authors.
    layout: int = 1
    #: The project's own bot accounts (names or e-mails) besides any ``…[bot]``.
    bots: list[str] = []
    #: The project's own first words per kind of change (layout 5, ``steps.change_kinds``).
    kinds: dict[str, list[str]] = {}
    #: A sub-project's folders (``steps.subprojects``): its areas are named below them.
    roots: list[str] = []
    #: A weekly's previous week (layout 3; None when not gathered).
    last_week: LastWeek | None = None
    #: A weekly's merges (layout 3; None when not gathered, as for a team report).
    merges: list[Merge] | None = None
    #: Work on branches not merged yet (layout 5, ``wip_branches``); None when not gathered.
    in_progress: list[InProgress] | None = None
    #: Every file path starts with its repository's name (a team report's commits, layout 3): areas stay apart.
    repository_prefixed: bool = False
    #: The forge's merged pull requests and closed issues (layout 6, ``steps.forge_markdown``); None when not
    #: gathered.
    forge_view: ForgeView | None = None

    @property
    def reported(self) -> list[CommitInfo]:
        """Every commit the report holds: the window's, then those that arrived late."""
        return [*self.commits, *(self.coverage.arrived_late if self.coverage else [])]


class ReportOutput(BaseModel):
    """GENERATE_REPORT's persisted output. ``text`` is the full Markdown body."""

    text: str
    model: str
    model_digest: str | None
    prompt_version: str
    prompt_sha256: str
    template_sha256: str
    options: dict[str, Any]
    provider: str
    trimmed: bool
    stats: dict[str, Any]
    language: str = "en"
    #: SPEC §16.1: ``{"verdict", "violations", "replaced"}``; None for prompts before v3.
    grounding: dict[str, Any] | None = None
    #: SPEC §15.5: the model was unavailable and the built-in writer wrote this report instead:
    #: ``{"code", "model", "message"}``; None when the pinned writer wrote it.
    fallback: dict[str, Any] | None = None
    #: This output replaces one written by the fallback: the report's file is overwritten in place.
    replaces_fallback: bool = False


class AuthorStats(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    email: str
    commits: int
    insertions: int
    deletions: int


class AreaStats(BaseModel):
    model_config = ConfigDict(frozen=True)
    area: str
    commits: int
    files: int
    insertions: int
    deletions: int


class FileStats(BaseModel):
    model_config = ConfigDict(frozen=True)
    path: str
    commits: int
    insertions: int
    deletions: int


class ReportStats(BaseModel):
    """Deterministic figures of a window. Lists are ordered by size, then by name. ``authors``
    and ``author_count`` are people; ``bots`` the bot accounts (layout 2; empty before)."""

    model_config = ConfigDict(frozen=True)
    commits: int
    author_count: int
    files_changed: int
    insertions: int
    deletions: int
    authors: list[AuthorStats]
    areas: list[AreaStats]
    busiest_files: list[FileStats]
    bots: list[AuthorStats] = []
    #: Commits per kind of change, in ``change_kinds.KINDS`` order (layout 5; empty before).
    kinds: dict[str, int] = {}


@dataclass(frozen=True)
class ReportMaterial:
    """Everything a writer may use besides the prompt (the builtin writer uses only this)."""

    input: ReportInput
    stats: ReportStats


@dataclass(frozen=True)
class WriterResult:
    """A narrative (Markdown sections) and the model that wrote it."""

    text: str
    model: str
    digest: str | None


class Writer(Protocol):
    """Writes the narrative sections (Summary, Changes by area, Notable commits).

    ``write`` raises ``StepError`` (``MODEL_UNAVAILABLE`` and the like) when it
    cannot. ``earlier`` is the conversation before ``prompt`` as (prompt,
    answer) pairs (a repair request follows the first answer). ``reads_prompt`` is false for a writer that works from
    ``material`` alone (then a trimmed listing does not concern its report).
    """

    provider: str
    reads_prompt: bool

    def write(self, prompt: str, *, system: str, options: Mapping[str, Any],
              material: ReportMaterial,
              earlier: Sequence[tuple[str, str]] = ()) -> WriterResult: ...


@dataclass(frozen=True)
class Layout:
    """How one report is laid out: its pinned ``layout`` and the project's bots."""

    version: int = 1
    bots: frozenset[str] = frozenset()
    #: Paths start with their repository's name: an area is ``repository/area`` (``ReportInput.repository_prefixed``).
    prefixed: bool = False
    #: The project's own first words per kind of change (``ReportInput.kinds``).
    kinds: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: A sub-project's folders (``ReportInput.roots``): areas are named below them.
    roots: tuple[str, ...] = ()

    @classmethod
    def of(cls, inp: ReportInput) -> Layout:
        return cls(inp.layout, frozenset(b.casefold() for b in inp.bots), inp.repository_prefixed,
                   tuple((kind, tuple(words)) for kind, words in sorted(inp.kinds.items())), tuple(inp.roots))

    def by_kind(self, commits: Sequence[CommitInfo]) -> dict[str, list[CommitInfo]]:
        """``commits`` grouped by kind of change (layout 5; nothing before)."""
        if self.version < KINDS_LAYOUT:
            return {}
        return change_kinds.group(commits, dict(self.kinds))

    def area(self, path: str) -> str:
        if self.prefixed:
            repository, _, rest = path.partition("/")
            return f"{repository}/{areas.area_of(rest)}"
        if self.roots:
            return areas.area_of(subprojects.root_of(path, self.roots))
        if self.version >= 2:
            return areas.area_of(path)
        return area_of(path)

    def is_bot(self, commit: CommitInfo) -> bool:
        """A ``…[bot]`` account (GitHub's apps) or one of the project's ``bots`` (layout 2); from layout 4 a
        well-known automation account too (``AUTOMATION``: ``github-actions`` commits under no ``[bot]``)."""
        if self.version < 2:
            return False
        name, email = commit.author_name.casefold(), commit.author_email.casefold()
        if self.version >= AUTOMATION_LAYOUT and (name in AUTOMATION or email in AUTOMATION):
            return True
        return name.endswith("[bot]") or "[bot]@" in email or name in self.bots or email in self.bots


#: The layout from which well-known automation accounts are bots without being named in ``bots``.
AUTOMATION_LAYOUT = 4
#: From this layout a report groups its changes by kind (``steps.change_kinds``).
KINDS_LAYOUT = 5
#: Automation accounts that commit under a plain name or address (casefolded): CI, dependency and release bots.
AUTOMATION = frozenset({
    "github-actions", "github action", "github actions", "action@github.com", "dependabot", "renovate",
    "renovate-bot", "bot@renovateapp.com", "pre-commit-ci", "pre-commit.ci", "mergify", "semantic-release-bot",
    "greenkeeper", "snyk-bot", "imgbot", "allcontributors", "weblate", "gitlab-bot", "gitlab ci"})


def area_of(path: str) -> str:
    """Layout 1: the top-level directory of a path; files at the top level share ``(root)``."""
    head, sep, _ = path.partition("/")
    return head if sep else ROOT_AREA


def counted(commit: CommitInfo) -> list[FileChange]:
    """The commit's files that count in statistics (not ``excluded``)."""
    return [f for f in commit.files if not f.excluded]


def lines(commit: CommitInfo) -> tuple[int, int]:
    """Insertions and deletions of the commit's counted files."""
    if not any(f.excluded for f in commit.files):
        return commit.insertions, commit.deletions
    files = counted(commit)
    return sum(f.insertions for f in files), sum(f.deletions for f in files)


def churn(commit: CommitInfo) -> int:
    """Lines changed in counted files: what "largest change" compares."""
    return sum(lines(commit))


def main_area(commit: CommitInfo, layout: Layout = Layout()) -> str | None:
    """The area with most changed lines among counted files (ties: more files, then name);
    None for a commit without counted files. From layout 2 only its source files compete
    when it has any (then tests, then docs): a fix with a larger test is a change to the source."""
    changes = counted(commit)
    if layout.version >= 2 and changes:
        first = min(areas.kind_of(c.path) for c in changes)
        changes = [c for c in changes if areas.kind_of(c.path) is first]  # a repository prefix is no test folder
    totals: dict[str, list[int]] = {}
    for change in changes:
        row = totals.setdefault(layout.area(change.path), [0, 0])
        row[0] += change.insertions + change.deletions
        row[1] += 1
    if not totals:
        return None
    return min(totals, key=lambda name: (-totals[name][0], -totals[name][1], name))


def summarize(commits: Sequence[CommitInfo], layout: Layout = Layout()) -> ReportStats:
    """Statistics of ``commits``: totals, per author (bots apart from layout 2), per area, busiest files."""
    authors: dict[str, list[Any]] = {}
    bots: dict[str, list[Any]] = {}
    by_area: dict[str, list[Any]] = {}
    files: dict[str, list[int]] = {}
    for commit in commits:
        key = commit.author_email.casefold() or commit.author_name.casefold()
        accounts = bots if layout.is_bot(commit) else authors
        row = accounts.setdefault(key, [commit.author_name, commit.author_email, 0, 0, 0])
        insertions, deletions = lines(commit)
        row[2] += 1
        row[3] += insertions
        row[4] += deletions
        touched: set[str] = set()
        for change in counted(commit):
            area = by_area.setdefault(layout.area(change.path), [0, set(), 0, 0])
            area[1].add(change.path)
            area[2] += change.insertions
            area[3] += change.deletions
            touched.add(layout.area(change.path))
            stats = files.setdefault(change.path, [0, 0, 0])
            stats[0] += 1
            stats[1] += change.insertions
            stats[2] += change.deletions
        for name in touched:
            by_area[name][0] += 1
    author_rows, bot_rows = _accounts(authors), _accounts(bots)
    area_rows = sorted((AreaStats(area=name, commits=r[0], files=len(r[1]), insertions=r[2],
                                  deletions=r[3]) for name, r in by_area.items()),
                       key=lambda a: (-a.commits, -(a.insertions + a.deletions), a.area))
    file_rows = sorted((FileStats(path=p, commits=r[0], insertions=r[1], deletions=r[2])
                        for p, r in files.items()),
                       key=lambda f: (-f.commits, -(f.insertions + f.deletions), f.path))
    return ReportStats(
        commits=len(commits), author_count=len(author_rows), files_changed=len(files),
        insertions=sum(lines(c)[0] for c in commits), deletions=sum(lines(c)[1] for c in commits),
        authors=author_rows, areas=area_rows, busiest_files=file_rows[:BUSIEST_FILES], bots=bot_rows,
        kinds={kind: len(members) for kind, members in layout.by_kind(commits).items()})


def _accounts(rows: dict[str, list[Any]]) -> list[AuthorStats]:
    return sorted((AuthorStats(name=r[0], email=r[1], commits=r[2], insertions=r[3], deletions=r[4])
                   for r in rows.values()),
                  key=lambda a: (-a.commits, -(a.insertions + a.deletions), a.name, a.email))


def compute_stats(commits: Sequence[CommitInfo], layout: Layout = Layout()) -> dict[str, Any]:
    """``summarize`` as plain JSON-ready data (what ReportOutput.stats persists)."""
    return summarize(commits, layout).model_dump()
