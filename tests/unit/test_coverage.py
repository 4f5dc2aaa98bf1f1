"""Coverage and placement (steps.coverage.settle): each commit in exactly one report of a schedule, the report of
the period in which it reached the branch, whatever order the runs execute in.

A model of git and of the engine, small enough to enumerate: a branch whose first-parent chain grows by pushes
(some carrying merged side branches, some commits dated hours before they are pushed, some force-pushes), daily
windows, and for each day a run that executes on time, late, after a backfill, or never (its slot missed), in a
random order, with some runs deciding at the same time as another (the compare-and-set loses and decides again).
Each run calls ``coverage.settle``, the function the report workflow calls, with a model ``History`` and the
earlier periods' fates as the engine would read them at that moment. The oracle is written here from the model:
a commit lands in the day it was committed when it was pushed at once, and between the day it was committed
and the day it was pushed otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.core.period_fates import Fate, PeriodFate
from engine.core.timeline_marks import Mark
from engine.plugins.contract import MemoryMarks
from steps import coverage

T0 = datetime(2026, 11, 2, tzinfo=UTC)
DAY = timedelta(days=1)
DAYS = 12
LINE = "daily:app"


@dataclass
class Branch:
    """A branch: first-parent commits (id, committer time), each with the side commits its merge brings."""

    chain: list[int] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)
    sides: dict[int, set[int]] = field(default_factory=dict)
    committed: dict[int, datetime] = field(default_factory=dict)  # a first-parent commit's committer date
    pushed: dict[int, datetime] = field(default_factory=dict)  # when each commit first reached the branch
    parents: dict[int, tuple[int, ...]] = field(default_factory=dict)  # first-parent chain up to a commit
    next_id: int = 1

    def push(self, when: datetime, dates: list[datetime], side_sizes: list[int]) -> None:
        for date, size in zip(dates, side_sizes, strict=False):
            commit = self.next_id
            self.sides[commit] = set(range(commit + 1, commit + 1 + size))
            self.next_id += 1 + size
            self.chain.append(commit)
            self.committed[commit] = min(date, when)
            self.parents.setdefault(commit, tuple(self.chain))
            for c in (commit, *self.sides[commit]):
                self.pushed.setdefault(c, when)

    def force_push(self, drop: int) -> None:
        self.dropped = list(self.chain)
        del self.chain[max(0, len(self.chain) - drop):]

    def force_back(self) -> None:
        if self.dropped:
            self.chain = self.dropped

    def reach(self, heads: dict[str, str]) -> set[int]:
        if not heads:
            return set()
        out: set[int] = set()
        for commit in self.parents[int(heads["main"])]:
            out |= {commit, *self.sides[commit]}
        return out

    def effective(self, commit: int) -> datetime:
        """When the dated branch first holds a first-parent commit: the latest committer date up to it."""
        return max(self.committed[c] for c in self.parents[commit])

    def merge_of(self, commit: int) -> int:
        return next(c for c in self.sides if commit == c or commit in self.sides[c])


class ModelHistory:
    """``coverage.History`` over the model, as ``git_history.GitHistory`` over git."""

    def __init__(self, branch: Branch) -> None:
        self.branch = branch
        self.live: dict[str, str] = {}

    def now(self) -> dict[str, str]:
        self.live = {"main": str(self.branch.chain[-1])} if self.branch.chain else {}
        return dict(self.live)

    def as_of(self, heads: dict[str, str], at: datetime, floor: dict[str, str] | None) -> dict[str, str]:
        if not heads:
            return {}
        chain = self.branch.parents[int(heads["main"])]
        low = int(floor["main"]) if floor else None
        if heads == self.live and low in chain:  # read live: the chain above the start edge, by its dates
            kept = low
            for commit in chain[chain.index(low) + 1:]:
                if self.branch.committed[commit] >= at:
                    break
                kept = commit
            return {"main": str(kept)}
        dated, latest = None, None
        for commit in chain:
            latest = self.branch.committed[commit] if latest is None else max(latest, self.branch.committed[commit])
            if latest >= at:
                break
            dated = commit
        if low is not None and low in chain and (dated is None or chain.index(low) > chain.index(dated)):
            dated = low  # never before a head recorded earlier on the same chain
        return {} if dated is None else {"main": str(dated)}

    def fast_forward(self, lower: dict[str, str], upper: dict[str, str]) -> bool:
        if not lower:
            return True
        return bool(upper) and int(lower["main"]) in self.branch.parents[int(upper["main"])]


@dataclass
class Day:
    """One day's run as the engine keeps it: created (or missed) at ``created``, run at ``runs`` (None: never)."""

    created: datetime | None
    missed: bool
    runs: datetime | None


def fates(days: dict[int, Day], day: int, at: datetime) -> list[PeriodFate]:
    """The earlier periods as ``engine.execution.period_walk`` reads them at ``at``: newest first, up to the first
    that is not NEVER."""
    out = []
    for d in range(day - 1, -2, -1):
        state = days.get(d)
        start = T0 + d * DAY
        if state is None or state.created is None or state.created > at:
            fate = Fate.OPEN
        elif state.missed and (state.runs is None or state.runs > at):
            fate = Fate.NEVER  # MISSED, not re-queued yet
        else:
            fate = Fate.OWN
        out.append(PeriodFate(f"d{d}", start, start + DAY, fate, fate.value, start + DAY))
        if fate is not Fate.NEVER:
            break
    return out


class Interleaved(MemoryMarks):
    """A mark book where another run decides and records between one run's read and its record."""

    def __init__(self) -> None:
        super().__init__()
        self.between: list[object] = []

    def record(self, line: str, version: int, marks: Sequence[Mark]) -> bool:
        while self.between:
            self.between.pop()()  # type: ignore[operator]
        return super().record(line, version, marks)


def held(branch: Branch, decision: coverage.Decision) -> set[int]:
    """What a decided report holds, as ``collect_git.collect_between`` reads it from git."""
    if decision.covered:
        return set()
    out = branch.reach(decision.upper) - branch.reach(decision.lower)
    for earlier in decision.excluded:
        out -= branch.reach(earlier)
    for other in decision.later:
        out -= (branch.reach(other.upper) - branch.reach(other.lower)
                - set().union(*(branch.reach(e) for e in other.earlier)))
    return out


pushes = st.lists(st.tuples(
    st.integers(0, DAYS * 24 - 1),  # hour of the push
    st.lists(st.integers(-40, 0), min_size=1, max_size=3),  # each commit's date, hours before the push
    st.lists(st.integers(0, 2), min_size=3, max_size=3),  # side commits each merge brings
    st.integers(0, 9),  # 9: a force-push dropping commits first; 8: a force-push back
), min_size=1, max_size=20)
# Per day: how it runs (0 on time, 1 late, 2 missed and never run, 3 missed then backfilled, 4 only backfilled),
# its delay in hours, and whether it decides at the same moment as the run before it.
plans = st.lists(st.tuples(st.integers(0, 4), st.integers(0, DAYS * 24), st.booleans()), min_size=DAYS,
                 max_size=DAYS)


def simulate(push_list: list[tuple[int, list[int], list[int], int]], day_plans: list[tuple[int, int, bool]],
             *, late_pushes: bool, rewrite: bool) -> tuple[Branch, dict[int, coverage.Decision], dict[int, set[int]]]:
    branch, book, history = Branch(), Interleaved(), None
    history = ModelHistory(branch)
    days: dict[int, Day] = {}
    events: list[tuple[datetime, int, object]] = []
    for hour, offsets, sides, force in push_list:
        events.append((T0 + timedelta(hours=hour), 0, ([o if late_pushes else 0 for o in offsets], sides,
                                                       force if rewrite and force >= 8 else 0)))
    backfill_at = T0 + (DAYS + 2) * DAY
    for day, (how, delay, together) in enumerate(day_plans):
        slot = T0 + (day + 1) * DAY
        if how == 0:
            days[day] = Day(slot, False, slot)
        elif how == 1:
            days[day] = Day(slot, False, slot + timedelta(hours=delay))
        elif how == 2:
            days[day] = Day(slot, True, None)
        elif how == 3:
            days[day] = Day(slot, True, slot + timedelta(hours=delay) if delay % 2 else backfill_at
                            + timedelta(hours=delay))
        else:
            days[day] = Day(backfill_at, False, backfill_at + timedelta(hours=delay))
        runs = days[day].runs
        if runs is not None:
            events.append((runs, 1, (day, together)))
    events.sort(key=lambda e: (e[0], e[1], str(e[2])))

    decisions: dict[int, coverage.Decision] = {}
    holds: dict[int, set[int]] = {}

    def run(day: int, at: datetime) -> None:
        decision = coverage.settle(book, LINE, T0 + day * DAY, T0 + (day + 1) * DAY,
                                   earlier_periods=lambda: fates(days, day, at), history=history, report=f"d{day}")
        decisions[day] = decision
        holds[day] = held(branch, decision)

    pending: list[tuple[int, datetime]] = []
    for when, kind, payload in events:
        if kind == 0:
            offsets, sides, force = payload  # type: ignore[misc]
            if force == 9:
                branch.force_push(2)
            elif force == 8:
                branch.force_back()
            branch.push(when, [when + timedelta(hours=h) for h in offsets], sides)
            for i, commit in enumerate(branch.chain):
                branch.parents.setdefault(commit, tuple(branch.chain[:i + 1]))
            continue
        day, together = payload  # type: ignore[misc]
        if together and pending:  # decides while the run before it is between its read and its record
            other, other_at = pending.pop()
            book.between.append(lambda d=day, w=when: run(d, w))
            run(other, other_at)
        else:
            for other, other_at in pending:
                run(other, other_at)
            pending = [(day, when)]
    for other, other_at in pending:
        run(other, other_at)
    return branch, decisions, holds


@settings(max_examples=400, deadline=None)
@example(push_list=[(10, [0], [0, 0, 0], 0), (34, [0], [0, 0, 0], 0), (58, [0], [0, 0, 0], 0)],
         day_plans=[(4, 0, False), (4, 1, False), (0, 0, False)] + [(2, 0, False)] * (DAYS - 3),
         late_pushes=False, rewrite=False)  # on-time day 2, then a backfill of days 0 and 1: one report each
@example(push_list=[(10, [0], [0, 0, 0], 0), (34, [0], [0, 0, 0], 0), (58, [0], [0, 0, 0], 0)],
         day_plans=[(4, 5, False), (4, 1, True), (1, 0, False)] + [(2, 0, False)] * (DAYS - 3),
         late_pushes=False, rewrite=False)  # trigger day 2, then day 0, then day 1: each its own
# Forced away while one run decides with the next: the next reads the edge between them empty, unflagged.
@example(push_list=[(0, [0], [0, 0, 0], 0), (121, [0], [0, 0, 0], 9), (145, [0], [0, 0, 0], 8)],
         day_plans=[(0, 0, False)] * 5 + [(0, 0, True)] + [(0, 0, False)] * (DAYS - 6), late_pushes=False,
         rewrite=True)
# Pushed two hours late, after the last report read the branch: for a report to come, not lost.
@example(push_list=[(0, [0], [0, 0, 0], 0), (265, [-2], [0, 0, 0], 0)],
         day_plans=[(0, 0, False)] * 10 + [(0, 0, True), (2, 0, False)], late_pushes=True, rewrite=False)
@given(push_list=pushes, day_plans=plans, late_pushes=st.booleans(), rewrite=st.booleans())
def test_every_commit_is_in_exactly_one_report_the_one_of_its_day(
        push_list: list[tuple[int, list[int], list[int], int]], day_plans: list[tuple[int, int, bool]],
        late_pushes: bool, rewrite: bool) -> None:
    branch, decisions, holds = simulate(push_list, day_plans, late_pushes=late_pushes, rewrite=rewrite)
    placed: dict[int, int] = {}
    for day, commits in holds.items():
        for commit in commits:
            assert commit not in placed, f"commit {commit} in the reports of day {placed[commit]} and day {day}"
            placed[commit] = day
    if rewrite and any(force >= 8 for *_, force in push_list):
        return  # a force-push away and back: once is the promise; where depends on what the live reads saw

    reported = sorted(d for d, dec in decisions.items() if not dec.covered)
    if not reported:
        return
    last = max(reported)
    first_since = min(decisions[d].since for d in reported)
    for commit in branch.pushed:
        merge = branch.merge_of(commit)
        if merge not in branch.chain:
            continue
        landed = branch.effective(merge)
        committed_day = (landed - T0) // DAY
        pushed_day = (branch.pushed[merge] - T0) // DAY
        if landed < first_since or committed_day > last or commit not in branch.reach(decisions[last].upper):
            continue  # before the first report's range, or pushed after the last report read the branch
        # The days that held or will hold it: its own, or a later report naming it as also covered.
        owner = placed.get(commit)
        assert owner is not None, f"commit {commit} (day {committed_day}..{pushed_day}) is in no report"
        covers = {owner} | {int(k[1:]) for k in decisions[owner].also_covers}
        if not late_pushes:
            assert committed_day in covers, f"commit {commit} of day {committed_day} is in day {owner}'s report"
        else:
            assert any(committed_day <= d <= pushed_day for d in covers), (commit, committed_day, pushed_day, owner)


@given(push_list=pushes, first=plans, second=plans)
@settings(max_examples=100, deadline=None)
def test_placement_does_not_depend_on_the_order_runs_execute_in(
        push_list: list[tuple[int, list[int], list[int], int]], first: list[tuple[int, int, bool]],
        second: list[tuple[int, int, bool]]) -> None:
    """Commits pushed when they are committed, every day run at some point (on time, late or by a backfill):
    two execution orders give every day the same commits."""
    def each_day_runs(plan: list[tuple[int, int, bool]]) -> list[tuple[int, int, bool]]:
        return [(how if how in (0, 1, 4) else 4, delay, together) for how, delay, together in plan]

    _, _, one = simulate(push_list, each_day_runs(first), late_pushes=False, rewrite=False)
    _, _, two = simulate(push_list, each_day_runs(second), late_pushes=False, rewrite=False)
    assert one == two


def test_a_window_after_missed_days_holds_them_and_names_them() -> None:
    marks = [Mark(T0 + DAY, coverage.mark_value({"main": "b"}))]
    missed = [PeriodFate(f"d{d}", T0 + d * DAY, T0 + (d + 1) * DAY, Fate.NEVER, "MISSED", T0 + (d + 1) * DAY)
              for d in (2, 1)]
    reported = PeriodFate("d0", T0, T0 + DAY, Fate.OWN, "SUCCESS", T0 + DAY)
    plan = coverage.plan(marks, T0 + 3 * DAY, T0 + 4 * DAY, [*missed, reported])
    assert plan.lower.at == T0 + DAY and plan.lower.heads == {"main": "b"} and plan.also_covers == ("d1", "d2")
    assert plan.inside == (T0 + 2 * DAY, T0 + 3 * DAY)


def test_a_queued_or_unmade_earlier_day_is_never_reached_over() -> None:
    for fate in (Fate.OWN, Fate.OPEN):
        earlier = [PeriodFate("d2", T0 + 2 * DAY, T0 + 3 * DAY, fate, fate.value, T0 + 3 * DAY)]
        plan = coverage.plan([Mark(T0 + DAY, coverage.mark_value({"main": "b"}))], T0 + 3 * DAY, T0 + 4 * DAY,
                             earlier)
        assert plan.lower.at == T0 + 3 * DAY and plan.lower.heads is None and plan.also_covers == ()


def test_a_backfill_before_later_marks_reads_its_edges_between_them() -> None:
    marks = [Mark(T0 + 5 * DAY, coverage.mark_value({"main": "e"}))]  # the day-4 report ran first
    plan = coverage.plan(marks, T0, T0 + DAY)
    assert plan.covered_by is None and plan.lower.heads is None and plan.upper.heads is None
    assert plan.upper.after == {"main": "e"} and plan.upper.after_at == T0 + 5 * DAY


def test_a_missed_day_run_after_a_report_reached_over_it_is_covered_by_that_report() -> None:
    marks = [Mark(T0 + 2 * DAY, coverage.inside_value("d2", T0 + DAY, T0 + 3 * DAY, ["d1"]))]
    plan = coverage.plan(marks, T0 + DAY, T0 + 2 * DAY)
    assert plan.covered_by == "d2"


def test_a_retry_finds_both_edges_recorded() -> None:
    marks = [Mark(T0, coverage.mark_value({"main": "a"})), Mark(T0 + DAY, coverage.mark_value({"main": "b"}))]
    plan = coverage.plan(marks, T0, T0 + DAY)
    assert plan.lower.heads == {"main": "a"} and plan.upper.heads == {"main": "b"}


def test_a_range_pinned_by_every_release_reads_back_the_same() -> None:
    """The range's pins have one writer (``workflows.range_pins``) and one reader (``workflows.report_pins``): what a
    run pins is what a retry reads, and runs pinned before ``covered_by`` and ``until`` existed read as they did."""
    from workflows.range_pins import RangePins
    from workflows.report_pins import ReportPins

    fresh = RangePins(upper={"main": "b" * 40}, lower={"main": "a" * 40}, since=T0, until=T0 + DAY,
                      covered_by=None, excluded=["c" * 40], also_covers=["2026-11-01"])
    assert ReportPins.model_validate(fresh.pins("b" * 40)).range == fresh
    covered = fresh.model_copy(update={"covered_by": "2026-11-03"})
    assert ReportPins.model_validate(covered.pins("b" * 40)).range == covered
    old = ReportPins.model_validate({"heads": {"main": "b" * 40}, "since_heads": {"main": "a" * 40},
                                     "since": "2026-11-02T00:00:00Z", "covered": True, "excluded_heads": [],
                                     "also_covers": []})  # before until and covered_by
    read = old.range
    assert read is not None and read.covered_by == "" and read.until is None
    assert old.range_front(read)["covered_by_later_report"] is True and "covered_by" not in old.range_front(read)
    assert ReportPins.model_validate({"heads": {"main": "b" * 40}}).range is None  # no range pinned yet
