"""Coverage (steps.coverage.plan): each commit in exactly one report of a schedule, on random histories.

A model of git and of the engine, small enough to enumerate: a branch whose first-parent
chain grows by pushes (some carrying merged side branches, some commits dated days before
they land, some force-pushes), reports whose windows tile the days, and runs that execute
late, out of order, or never (an outage), each deciding its bounds with ``plan`` from the
marks recorded so far and recording the new ones, as the report workflow does. Whatever
the arrival order, the reports never share a commit, and every commit between the first
and the last mark is in one of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.core.models import Mark
from steps import coverage

T0 = datetime(2026, 11, 2, tzinfo=UTC)
DAY = timedelta(days=1)


@dataclass
class Branch:
    """A branch: first-parent commits (id, committer time), each with the side commits its merge brings."""

    chain: list[tuple[int, datetime]] = field(default_factory=list)
    dropped: list[tuple[int, datetime]] = field(default_factory=list)
    sides: dict[int, set[int]] = field(default_factory=dict)
    authored: dict[int, datetime] = field(default_factory=dict)  # every commit's author date
    next_id: int = 1

    def push(self, when: datetime, dates: list[datetime], side_sizes: list[int]) -> None:
        for date, size in zip(dates, side_sizes, strict=False):  # one merge size per commit, the rest unused
            commit = self.next_id
            self.next_id += 1
            self.sides[commit] = set(range(self.next_id, self.next_id + size))
            for index, side in enumerate(self.sides[commit]):  # a merged branch's work, authored days before
                self.authored[side] = min(date, when) - timedelta(days=index + 1)
            self.next_id += size
            self.chain.append((commit, min(date, when)))
            self.authored[commit] = min(date, when)

    def force_push(self, drop: int) -> None:
        self.dropped = list(self.chain)
        del self.chain[max(0, len(self.chain) - drop):]

    def force_back(self) -> None:
        """Push the chain as it was before the last force-push again (its commits come back)."""
        if self.dropped:
            self.chain = self.dropped

    def head(self) -> int | None:
        return self.chain[-1][0] if self.chain else None

    def dated(self, at: datetime) -> int | None:
        """As ``git_range.dated_head``: the newest commit whose running maximum date is before ``at``."""
        best, latest = None, None
        for commit, date in self.chain:
            latest = date if latest is None else max(latest, date)
            if latest >= at:
                break
            best = commit
        return best

    def reach(self, head: int | None, history: dict[int, tuple[int, ...]]) -> set[int]:
        """Every commit reachable from ``head``: its first-parent ancestors and what their merges brought."""
        if head is None:
            return set()
        out: set[int] = set()
        for commit in history[head]:
            out.add(commit)
            out |= self.sides[commit]
        return out


def run_report(branch: Branch, history: dict[int, tuple[int, ...]], marks: list[Mark],
               start: datetime, end: datetime) -> tuple[set[int], set[int]]:
    """One report run as the workflow does it: plan, read the branch for dated bounds, record, take the range.

    Returns what it holds by landing, and by author date (with the range's commits authored earlier: arrived late).
    """
    plan = coverage.plan(marks, start, end)

    def value(bound: coverage.Bound) -> dict[str, str]:
        if bound.heads is not None:
            return bound.heads
        head = branch.dated(bound.at)
        return {} if head is None else {"main": str(head)}

    lower, upper = value(plan.lower), value(plan.upper)
    # As collect_git.fast_forward: every lower head leads to its upper head.
    rewritten = bool(lower) and (not upper or int(lower["main"]) not in history[int(upper["main"])])
    version = 1 + max((int(m.value.get("version", 0)) for m in marks), default=0)
    for mark in plan.new_marks(lower, upper, version=version, rewritten=rewritten):
        if all(m.at != mark.at for m in marks):
            marks.append(mark)
    marks.sort(key=lambda m: m.at)
    if plan.covered:
        assert upper == lower
        return set(), set()

    def reach(heads: dict[str, str]) -> set[int]:
        return branch.reach(int(heads["main"]) if heads else None, history)

    held = reach(upper) - reach(lower)
    for earlier in plan.earlier:
        held -= reach(earlier)
    later = set[int]()  # what later reports over a rewritten range hold
    for other in plan.later:
        later |= reach(other.upper) - reach(other.lower) - set().union(*(reach(e) for e in other.earlier))
    held -= later
    by_date = {c for c in reach(upper) if plan.since <= branch.authored[c] < plan.until} - later
    late = {c for c in held if branch.authored[c] < plan.since}
    return held, by_date | late


pushes = st.lists(st.tuples(
    st.integers(0, 20 * 24),  # hour of the push
    st.lists(st.integers(-72, 0), min_size=1, max_size=3),  # each commit's date, hours before the push
    st.lists(st.integers(0, 3), min_size=3, max_size=3),  # side commits each merge brings
    st.integers(0, 5),  # 5: a force-push dropping commits first; 4: a force-push back (most pushes: neither)
), min_size=1, max_size=25)


@settings(max_examples=300, deadline=None)
# Forced away (hour 0) and back (hour 169) after a report held it: backfills run afterwards must not hold it again.
@example(pushes=[(0, [0], [0, 0, 0], 0), (0, [0], [0, 0, 0], 5), (169, [0], [0, 0, 0], 4)],
         run_days=[(0, 170), (5, 49), (6, 0), (7, 0)], rewrite=True)
# A commit reported, force-pushed away, and pushed back: it must not be reported again.
@example(pushes=[(1, [0], [0, 0, 0], 0), (30, [0], [0, 0, 0], 5), (54, [0], [0, 0, 0], 4)],
         run_days=[(0, 0), (1, 0), (2, 0)], rewrite=True)
# Out of order: day 2 first, then a backfill of day 0 reaching over day 1, then day 1 (held already).
@example(pushes=[(12, [0], [0, 0, 0], 0), (36, [0], [1, 0, 0], 0), (60, [0], [0, 0, 0], 0)],
         run_days=[(2, 0), (0, 49), (1, 26)], rewrite=False)
@given(pushes=pushes, run_days=st.lists(st.tuples(st.integers(0, 19), st.integers(0, 30 * 24)), max_size=40),
       rewrite=st.booleans())
def test_every_commit_is_in_exactly_one_report(pushes: list[tuple[int, list[int], list[int], int]],
                                                run_days: list[tuple[int, int]], rewrite: bool) -> None:
    """Runs of 20 daily windows execute at random hours after their window (or never, or twice)."""
    events: list[tuple[datetime, int, object]] = []
    for hour, offsets, sides, force in pushes:
        events.append((T0 + timedelta(hours=hour), 0, (offsets, sides, force if rewrite and force >= 4 else 0)))
    for day, delay in run_days:
        events.append((T0 + (day + 1) * DAY + timedelta(hours=delay), 1, day))
    events.sort(key=lambda e: (e[0], e[1]))

    branch, marks, history = Branch(), list[Mark](), dict[int, tuple[int, ...]]()
    reports: dict[int, list[tuple[set[int], set[int]]]] = {}
    for when, kind, payload in events:
        if kind == 0:
            offsets, sides, drop = payload  # type: ignore[misc]
            if drop == 5:
                branch.force_push(3)
            elif drop == 4:
                branch.force_back()
            branch.push(when, [when + timedelta(hours=h) for h in offsets], sides)
            chain = [c for c, _ in branch.chain]
            for i, commit in enumerate(chain):
                history.setdefault(commit, tuple(chain[:i + 1]))
        else:
            day = int(payload)  # type: ignore[call-overload]
            reports.setdefault(day, []).append(run_report(branch, history, marks, T0 + day * DAY, T0 + (day + 1) * DAY))

    # A run of the same window again reports what the first did (its bounds are marks), unless marks were added
    # before it since: a backfill of an earlier window after a force-push brought old commits back (docs/DESIGN.md).
    for runs in reports.values():
        assert all(r == runs[0] for r in runs[1:]) or rewrite
    for attribution in (0, 1):  # landed, then authored
        seen: dict[int, int] = {}
        for runs in reports.values():
            for commit in runs[0][attribution]:
                seen[commit] = seen.get(commit, 0) + 1
        assert [c for c, n in seen.items() if n > 1] == [], ("landed", "authored")[attribution]  # never in two
        if not rewrite and marks:
            first, last = coverage.heads_of(marks[0]), coverage.heads_of(marks[-1])
            expected = (branch.reach(int(last["main"]) if last else None, history)
                        - branch.reach(int(first["main"]) if first else None, history))
            if attribution:  # by author date: what was authored after the last edge is for a report to come
                expected = {c for c in expected if branch.authored[c] < marks[-1].at}
            assert expected <= set(seen), ("landed", "authored")[attribution]  # every commit in between is in one


def test_a_window_after_an_outage_holds_the_periods_without_a_report() -> None:
    marks = [Mark(T0, coverage.mark_value({"main": "a"})), Mark(T0 + DAY, coverage.mark_value({"main": "b"}))]
    plan = coverage.plan(marks, T0 + 3 * DAY, T0 + 4 * DAY)
    assert (plan.lower.how, plan.lower.source, plan.lower.heads) == ("carried", T0 + DAY, {"main": "b"})
    assert plan.since == T0 + DAY and plan.to_record == (T0 + 4 * DAY,)


def test_a_backfilled_window_inside_a_later_report_holds_nothing() -> None:
    marks = [Mark(T0, coverage.mark_value({"main": "a"})), Mark(T0 + 4 * DAY, coverage.mark_value({"main": "e"}))]  # the T0+3d report carried from T0
    plan = coverage.plan(marks, T0 + DAY, T0 + 2 * DAY)
    assert plan.covered and plan.upper.heads == plan.lower.heads == {"main": "a"} and plan.to_record == ()


def test_a_backfill_before_the_first_report_reaches_to_it() -> None:
    marks = [Mark(T0 + 2 * DAY, coverage.mark_value({"main": "c"}))]  # the T0+2d report ran first, before this backfill
    plan = coverage.plan(marks, T0, T0 + DAY)
    assert (plan.lower.how, plan.upper.how, plan.upper.heads) == ("dated", "ahead", {"main": "c"})
    assert plan.until == T0 + 2 * DAY and plan.to_record == (T0, T0 + DAY)


def test_the_first_report_reads_both_edges_from_the_branch() -> None:
    plan = coverage.plan([], T0, T0 + DAY)
    assert (plan.lower.how, plan.upper.how) == ("dated", "dated") and plan.to_record == (T0, T0 + DAY)


def test_a_retry_finds_both_edges_recorded() -> None:
    marks = [Mark(T0, coverage.mark_value({"main": "a"})), Mark(T0 + DAY, coverage.mark_value({"main": "b"}))]
    plan = coverage.plan(marks, T0, T0 + DAY)
    assert (plan.lower.how, plan.upper.how, plan.to_record) == ("recorded", "recorded", ())
