"""Coverage and placement: which commits a report of a schedule holds, so that each commit is in exactly one
report, the report of the period in which it reached the branch, whatever order the runs execute in.

A schedule's reports read one timeline per project (a *line*). An *edge* is the instant between two
consecutive reports' windows; its value, a *mark*, is the branch heads as they stood there, recorded once
(the first writer wins, under a compare-and-set on the line) and never changed. A report holds the commits
reachable from the mark at its window's end and not from the mark at its start (``git rev-list UPPER --not
LOWER``, what a forge's compare view shows). Consecutive reports therefore telescope: each commit reachable
from the branches is in exactly one of them.

Placement is a function of the branch history and of the recorded facts, not of execution order:

- **An edge no run recorded** is read from the branch history: the branch as it stood at that instant
  (``History.as_of``: the first-parent chain's committer dates), dated from the next later recorded mark's
  heads when there is one (so it is an ancestor of it) and kept a descendant of the previous one. A run
  on time reads today's branch; a backfill months later reads the same edge the same way, and a later
  mark never stands in for an earlier edge.
- **A report reaches back** over earlier periods only over those that will never have a report of their
  own (``engine.core.period_fates``: left unrun, or no slot), naming them (*also covers*), and records
  its span at their edges (*inside* marks). Never over a period whose run is queued, running, retrying or
  failed (a retry holds it), nor one with no run yet (a backfill may still make one).
- **Covered**: a period left unrun and later queued (a backfill of a missed day) whose window an earlier
  decided report's span already holds; it holds nothing and names that report.

A branch rewritten between two marks (force-pushed away and back) breaks the telescope: a commit can be
reachable from a mark, not from the next, and again from the one after. A report whose range is not a
fast-forward says so in its marks (``rewritten_after``/``rewritten_before``), every mark carries the line
version it was recorded at, and then a range also excludes every earlier mark (``Decision.excluded``) and
what later reports over rewritten ranges hold (``Decision.later``).

``plan`` is the pure rule over the marks and the earlier periods' fates; ``decide`` resolves it against a
``History`` (real git in ``steps.collect_git``, a model in the tests); ``settle`` is the compare-and-set
loop the workflow runs. The property test calls ``settle`` itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Protocol

from engine.core import errors
from engine.core.period_fates import Fate, PeriodFate
from engine.core.timeline_marks import Mark, MarkLine

Heads = dict[str, str]


class History(Protocol):
    """The branch history a decision reads: git, or a model of it."""

    def now(self) -> Heads:
        """The tracked branches' heads as they stand now."""
        ...

    def as_of(self, heads: Heads, at: datetime, floor: Heads | None) -> Heads:
        """The branches whose heads are ``heads`` as they stood just before ``at`` (refs with no commit then left
        out), each kept a descendant of its ``floor`` head when that one still leads to ``heads``."""
        ...

    def fast_forward(self, lower: Heads, upper: Heads) -> bool:
        """Whether every branch's ``lower`` head leads to its ``upper`` head (False: rewritten or gone)."""
        ...


class MarkBook(Protocol):
    def read(self, line: str) -> MarkLine: ...

    def record(self, line: str, version: int, marks: Sequence[Mark]) -> bool: ...


@dataclass(frozen=True)
class Edge:
    """One end of a report's range: its instant and its recorded value (None: to read from the history,
    between ``before``, the previous recorded value, at ``before_at``, and ``after``, the next one, at ``after_at``)."""

    at: datetime
    heads: Heads | None
    before: Heads | None = None
    after: Heads | None = None
    after_at: datetime | None = None
    before_at: datetime | None = None


@dataclass(frozen=True)
class Held:
    """What a later report whose range was not a fast-forward holds: reachable from ``upper``, from
    none of ``lower`` and ``earlier`` (the marks that existed when it ran, at or before its lower one)."""

    upper: Heads
    lower: Heads
    earlier: tuple[Heads, ...]


@dataclass(frozen=True)
class Plan:
    lower: Edge
    upper: Edge
    #: Earlier periods that will never have a report of their own, held here, oldest first.
    also_covers: tuple[str, ...] = ()
    #: Their window ends inside this report's span: marked *inside* so that a run of one finds it covered.
    inside: tuple[datetime, ...] = ()
    #: The report whose span already holds this window ("" when an old mark does not say which); None: not covered.
    covered_by: str | None = None
    #: Heads of every mark at or before the lower one, excluded too (only once the line was rewritten).
    earlier: tuple[Heads, ...] = ()
    #: What later reports over rewritten ranges hold: left out.
    later: tuple[Held, ...] = ()


@dataclass(frozen=True)
class Decision:
    """A report's range, resolved: its heads, its span [since, until), and the marks it records."""

    lower: Heads
    upper: Heads
    since: datetime
    until: datetime
    also_covers: tuple[str, ...]
    covered_by: str | None
    excluded: tuple[Heads, ...]
    later: tuple[Held, ...]
    new: tuple[Mark, ...]

    @property
    def covered(self) -> bool:
        """Another report's span holds this window: this one holds nothing."""
        return self.covered_by is not None


def mark_value(heads: Heads, *, version: int = 0, rewritten_after: bool = False,
               rewritten_before: bool = False) -> dict[str, Any]:
    """What an edge's mark holds: the heads at its instant, the line version it was recorded at, and whether
    the range beside it was rewritten."""
    return {"heads": dict(heads), **({"version": version} if version else {}),
            **({"rewritten_after": True} if rewritten_after else {}),
            **({"rewritten_before": True} if rewritten_before else {})}


def inside_value(report: str, since: datetime, until: datetime, covers: Sequence[str]) -> dict[str, Any]:
    """What an edge inside a report's span holds: that report and its span (no heads: no report ends here)."""
    return {"inside": {"report": report, "since": _iso(since), "until": _iso(until), "covers": list(covers)}}


def heads_of(mark: Mark) -> Heads:
    """The branch heads a mark recorded."""
    return dict(mark.value["heads"])


def _is_edge(mark: Mark) -> bool:
    return "heads" in mark.value


def _inside(mark: Mark | None) -> dict[str, Any] | None:
    value = mark.value.get("inside") if mark is not None else None
    return value if isinstance(value, dict) else None


def _reaches(mark: Mark) -> datetime | None:
    """Where a mark recorded by an older release carried its report to (it reached a later mark)."""
    value = mark.value.get("reaches")
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def plan(marks: Sequence[Mark], start: datetime, end: datetime, earlier_periods: Sequence[PeriodFate] = (),
         ) -> Plan:
    """The bounds of a report of window [start, end) (see the module).

    ``earlier_periods``: the periods before this one, newest first, up to the first that has or may get a
    report of its own (``StepContext.earlier_periods``); empty: the report starts at its window's start.
    """
    by_at = {m.at: m for m in marks}
    edges = sorted((m for m in marks if _is_edge(m)), key=lambda m: m.at)
    at_end = _inside(by_at.get(end))
    if at_end is not None:  # an earlier decided report reached over this window
        return Plan(Edge(start, None), Edge(end, None), covered_by=str(at_end.get("report", "")))
    last = next((m for m in reversed(edges) if m.at < end), None)
    reached = _reaches(last) if last is not None else None
    if reached is not None and reached >= end:  # an older release carried a report over this window
        return Plan(Edge(start, None), Edge(end, None), covered_by="")
    lower_at, also, inside = _reach(start, end, earlier_periods)
    recorded_between = [m.at for m in edges if lower_at < m.at <= start]
    if recorded_between:  # a recorded edge bounds the reach: the periods before it are not this report's
        lower_at = recorded_between[-1]
        also = tuple(f.key for f in earlier_periods if f.fate is Fate.NEVER and f.start_at >= lower_at)[::-1]
        inside = tuple(at for at in inside if at > lower_at)
    while (span := _inside(by_at.get(lower_at))) is not None:  # a revision of a report that reached back
        lower_at = datetime.fromisoformat(str(span["since"]))
        also = (*[str(k) for k in span.get("covers", [])], *also)
    rewritten = any(m.value.get("rewritten_after") or m.value.get("rewritten_before") for m in edges)
    earlier = tuple(heads_of(m) for m in edges if m.at <= lower_at) if rewritten else ()
    return Plan(_edge(edges, lower_at), _edge(edges, end), tuple(dict.fromkeys(also)), inside,
                earlier=earlier, later=_later_held(edges, end) if rewritten else ())


def _reach(start: datetime, end: datetime, fates: Sequence[PeriodFate]
           ) -> tuple[datetime, tuple[str, ...], tuple[datetime, ...]]:
    """Where the report's range starts, the periods it reaches over (oldest first), and their edges inside it."""
    also: list[str] = []
    inside: list[datetime] = []
    lower_at = start
    for fate in fates:  # newest first
        if fate.fate is not Fate.NEVER:  # its report ends where this one starts (before the window: a gap)
            if fate.window_end is not None and fate.window_end <= lower_at:
                lower_at = fate.window_end
            break
        also.append(fate.key)
        if fate.window_end is not None:
            inside.append(fate.window_end)
        lower_at = min(lower_at, fate.start_at)
    inside = [at for at in inside if lower_at < at < end]
    return lower_at, tuple(reversed(also)), tuple(sorted(set(inside)))


def _edge(edges: Sequence[Mark], at: datetime) -> Edge:
    recorded = next((m for m in edges if m.at == at), None)
    if recorded is not None:
        return Edge(at, heads_of(recorded))
    before = next((m for m in reversed(edges) if m.at < at), None)
    after = next((m for m in edges if m.at > at), None)
    return Edge(at, None, heads_of(before) if before else None, heads_of(after) if after else None,
                after.at if after else None, before.at if before else None)


def _version(mark: Mark) -> int:
    return int(mark.value.get("version", 0))


def _later_held(edges: Sequence[Mark], since: datetime) -> tuple[Held, ...]:
    """What the reports after ``since`` whose ranges were rewritten hold (consecutive marks bound one report)."""
    held = []
    for lo, hi in zip(edges, edges[1:], strict=False):
        if lo.at < since or not (lo.value.get("rewritten_after") or hi.value.get("rewritten_before")):
            continue
        ran_at = max(_version(lo), _version(hi))  # the version its report recorded the pair's second mark at
        earlier = tuple(heads_of(m) for m in edges if m.at < lo.at and _version(m) < ran_at)
        held.append(Held(heads_of(hi), heads_of(lo), earlier))
    return tuple(held)


def decide(marks: Sequence[Mark], start: datetime, end: datetime, earlier_periods: Sequence[PeriodFate],
           history: History, *, report: str, version: int) -> Decision:
    """``plan``, with the edges nobody recorded read from ``history``, and the marks to record at ``version``."""
    p = plan(marks, start, end, earlier_periods)
    if p.covered_by is not None:
        return Decision({}, {}, start, end, (), p.covered_by, (), (), ())
    if p.upper.heads is not None:
        upper = p.upper.heads
    else:  # dated from the next later mark when there is one (an ancestor of it), else from the branch now
        base = p.upper.after if p.upper.after is not None else history.now()
        upper = history.as_of(base, end, p.upper.before)
    if p.lower.heads is not None:
        lower = p.lower.heads
    else:  # dated from the nearest later value: a recorded one inside the window, else the upper edge
        nearer = p.lower.after is not None and p.lower.after_at is not None and p.lower.after_at <= end
        lower = history.as_of(p.lower.after if nearer and p.lower.after is not None else upper, p.lower.at,
                              p.lower.before)
    new = _new_edges(p, lower, upper, history, version)
    new += [Mark(at, inside_value(report, p.lower.at, end, p.also_covers)) for at in p.inside]
    return Decision(lower, upper, p.lower.at, end, p.also_covers, None, p.earlier, p.later, tuple(new))


def _new_edges(p: Plan, lower: Heads, upper: Heads, history: History, version: int) -> list[Mark]:
    """The edges read from the history, as marks; each flagged when the range beside it, up to a recorded
    neighbour or the other new edge, is not a fast-forward (a later range then excludes every earlier mark)."""
    line: list[tuple[datetime, Heads, bool]] = []
    if p.lower.heads is None and p.lower.before is not None and p.lower.before_at is not None:
        line.append((p.lower.before_at, p.lower.before, False))
    line += [(p.lower.at, lower, p.lower.heads is None), (p.upper.at, upper, p.upper.heads is None)]
    if p.upper.heads is None and p.upper.after is not None and p.upper.after_at is not None:
        line.append((p.upper.after_at, p.upper.after, False))
    after = {at: False for at, _, _ in line}
    before = dict(after)
    for (lo_at, lo, lo_new), (hi_at, hi, hi_new) in zip(line, line[1:], strict=False):
        if (lo_new or hi_new) and not history.fast_forward(lo, hi):
            after[lo_at] = before[hi_at] = True
    return [Mark(at, mark_value(heads, version=version, rewritten_after=after[at], rewritten_before=before[at]))
            for at, heads, new in line if new]


#: Decisions retried when another run of the same line recorded marks in between.
TRIES = 8


def settle(book: MarkBook, line: str, start: datetime, end: datetime, *,
           earlier_periods: Callable[[], Sequence[PeriodFate]], history: History, report: str,
           check_fence: Callable[[], None] = lambda: None, tries: int = TRIES) -> Decision:
    """Decide a report's range and record its marks under the line's compare-and-set; decide again when another
    run recorded first. The earlier periods are read before the marks, so a period queued meanwhile shows in
    one or the other."""
    for _ in range(tries):
        fates = earlier_periods()
        current = book.read(line)
        decision = decide(current.marks, start, end, fates, history, report=report, version=current.version + 1)
        check_fence()
        if book.record(line, current.version, decision.new):
            return decision
    raise errors.step_error("COVERAGE_BUSY", f"the marks of {line} kept changing while this run decided; it retries")


def _iso(at: datetime) -> str:
    return at.astimezone(timezone.utc).isoformat()
