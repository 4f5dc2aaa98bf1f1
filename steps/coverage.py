"""Coverage: which commits a report of a schedule holds, so that each commit is in exactly one report.

A schedule's reports read one timeline per project (a *line*): at the edges of their
windows the engine keeps *marks*, the branch heads as they stood there, recorded
once (the first writer wins, under a compare-and-set on the line). A report holds
the commits reachable from the mark at its window's end and not from the mark
before it (``git rev-list UPPER --not LOWER``, what a forge's compare view shows),
nor from any earlier mark (a branch force-pushed away and back brings back commits
an earlier report held).
Consecutive reports therefore telescope: whatever their dates, however late a
commit landed, each commit reachable from the branches is in exactly one of them.

``plan`` is the rule, a pure function of the marks already recorded and the
window:

- lower bound: the latest mark before the window's end. It is usually the mark
  at the window's start (the previous report's end); when it is older, the
  periods in between had no report of their own and this one also covers them
  (*carried*); with no mark at all (the first report, a backfill of last year)
  it is the branch as it stood at the window's start (*dated*: read from the
  first-parent chain's committer dates) and is recorded.
- upper bound: the mark at the window's end when one is recorded (a retry, a
  revision); when a later mark exists and an earlier one too, a report after this
  one already holds this window's commits, so this one holds none (*covered*);
  when only later marks exist (a backfill before the first report), this report
  reaches to the first of them and also holds the periods up to it (*ahead*, its
  heads recorded at the window's end with the instant it reaches, so that a window
  in between finds itself held: *covered*); otherwise the branch as it stands at
  the window's end (*dated*), recorded.

A branch rewritten between two marks (force-pushed away and back) breaks the telescope: a
commit can be reachable from a mark, not from the next, and again from the one after. A
report whose range is not a fast-forward says so in its marks (``rewritten_after`` on a
lower mark it records, ``rewritten_before`` on an upper one), and every mark carries the
line version it was recorded at. A report planned before such a range (a backfill run
after it) leaves out what that later report holds (``Plan.later``): its range, without what
the marks that existed when it ran held.

Whatever a run pins (its bounds) it keeps: a retry reports the same commits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from engine.core.models import Mark

How = Literal["recorded", "carried", "ahead", "dated", "covered"]


@dataclass(frozen=True)
class Bound:
    """One end of a report's range: the edge's instant, how its heads were found (None: to read from git).

    ``source``: the instant of the mark whose heads it takes (``at`` itself unless carried).
    """

    at: datetime
    how: How
    heads: dict[str, str] | None
    source: datetime


@dataclass(frozen=True)
class Held:
    """What a later report whose range was not a fast-forward holds: reachable from ``upper``, from
    none of ``lower`` and ``earlier`` (the marks that existed when it ran, at or before its lower one)."""

    upper: dict[str, str]
    lower: dict[str, str]
    earlier: tuple[dict[str, str], ...]


@dataclass(frozen=True)
class Plan:
    lower: Bound
    upper: Bound
    #: Heads of every mark at or before the lower one: what earlier reports could have held. A range
    #: excludes them all, not only the lower bound's, so that a commit force-pushed away and back is
    #: not reported twice.
    earlier: tuple[dict[str, str], ...] = ()
    #: Later reports whose ranges were rewritten: what they hold, this one leaves out.
    later: tuple[Held, ...] = ()

    @property
    def since(self) -> datetime:
        """Where the report's coverage starts: the instant of the mark it starts from."""
        return self.lower.source

    @property
    def until(self) -> datetime:
        """Where the report's coverage ends: the window's end, or the later mark it was carried to."""
        return self.upper.source

    @property
    def covered(self) -> bool:
        """A later report already holds this window's commits: this one holds none."""
        return self.upper.how == "covered"

    @property
    def to_record(self) -> tuple[datetime, ...]:
        """The window edges this run marks: those read from git, and an end carried from a later mark."""
        return tuple(b.at for b in (self.lower, self.upper) if b.how in ("dated", "ahead"))

    def new_marks(self, lower: dict[str, str], upper: dict[str, str], *, version: int = 0,
                  rewritten: bool = False) -> list[Mark]:
        """The marks to record once the dated bounds were read from git (``lower``, ``upper``: the heads),
        at line ``version``; ``rewritten``: some lower head does not lead to its upper head."""
        out = []
        if self.lower.how == "dated":
            out.append(Mark(self.lower.at, mark_value(lower, version=version, rewritten_after=rewritten)))
        if self.upper.how == "dated":
            out.append(Mark(self.upper.at, mark_value(upper, version=version, rewritten_before=rewritten)))
        elif self.upper.how == "ahead":  # this report reaches the later mark: say so, windows inside are held
            out.append(Mark(self.upper.at, mark_value(upper, reaches=self.upper.source, version=version,
                                                      rewritten_before=rewritten)))
        return out


def mark_value(heads: dict[str, str], *, reaches: datetime | None = None, version: int = 0,
               rewritten_after: bool = False, rewritten_before: bool = False) -> dict[str, Any]:
    """What a mark holds: the heads at its instant, for an end carried from a later mark that mark's
    instant, the line version it was recorded at, and whether the range beside it was rewritten."""
    return {"heads": dict(heads), **({"reaches": reaches.isoformat()} if reaches is not None else {}),
            **({"version": version} if version else {}),
            **({"rewritten_after": True} if rewritten_after else {}),
            **({"rewritten_before": True} if rewritten_before else {})}


def heads_of(mark: Mark) -> dict[str, str]:
    """The branch heads a mark recorded."""
    return dict(mark.value["heads"])


def _reaches(mark: Mark) -> datetime | None:
    value = mark.value.get("reaches")
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def plan(marks: Sequence[Mark], start: datetime, end: datetime) -> Plan:
    """The bounds of a report of window [start, end) given the line's recorded marks (see the module)."""
    before = [m for m in marks if m.at < end]
    at_end = next((m for m in marks if m.at == end), None)
    later = [m for m in marks if m.at > end]
    if before:
        latest = max(before, key=lambda m: m.at)
        lower = Bound(start, "recorded" if latest.at >= start else "carried", heads_of(latest), latest.at)
    else:
        lower = Bound(start, "dated", None, start)
    earlier = tuple(heads_of(m) for m in marks if m.at <= lower.source) if before else ()
    reaches = _reaches(latest) if before else None
    if reaches is not None and reaches >= end:  # a report before this one already reaches over its window
        return Plan(lower, Bound(end, "covered", lower.heads, lower.source), earlier)
    if at_end is not None:  # a retry or a revision: the same bounds, reaching as far as the first run did
        upper = Bound(end, "recorded", heads_of(at_end), _reaches(at_end) or end)
    elif later and before:
        return Plan(lower, Bound(end, "covered", lower.heads, lower.source), earlier)
    elif later:
        first = min(later, key=lambda m: m.at)
        upper = Bound(end, "ahead", heads_of(first), first.at)
    else:
        upper = Bound(end, "dated", None, end)
    return Plan(lower, upper, earlier, _later_held(marks, upper.source))


def _version(mark: Mark) -> int:
    return int(mark.value.get("version", 0))


def _later_held(marks: Sequence[Mark], since: datetime) -> tuple[Held, ...]:
    """What the reports after ``since`` whose ranges were rewritten hold (consecutive marks bound one report)."""
    ordered = sorted(marks, key=lambda m: m.at)
    held = []
    for lo, hi in zip(ordered, ordered[1:], strict=False):
        if lo.at < since or not (lo.value.get("rewritten_after") or hi.value.get("rewritten_before")):
            continue
        ran_at = max(_version(lo), _version(hi))  # the version its report recorded the pair's second mark at
        earlier = tuple(heads_of(m) for m in ordered if m.at < lo.at and _version(m) < ran_at)
        held.append(Held(heads_of(hi), heads_of(lo), earlier))
    return tuple(held)
