"""DST end to end: daily schedules ticked hour by hour across every 2026 transition (SPEC §2, §3).

The transitions are found by scanning zoneinfo (New York, London and Sydney
have two each in 2026; Seoul has none, so it runs as a control). For each
one, daily schedules fire at wall times inside the skipped or repeated hour,
at its edges and at ordinary times; ``engine.scheduling.tick.tick`` runs with a
ManualClock stepping hourly (every 10 minutes with ``--long``) from three days
before to three days after. Every local date then has exactly one run, at the
instant computed here without the engine (the wall time; in a gap the first
valid instant after it; in a fold its first occurrence), and the business
keys are consecutive dates.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from itertools import pairwise
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import select

from engine.core.clock import ManualClock
from engine.scheduling import definitions, tick
from engine.store.tables import runs, schedules
from tests.support import make_runtime

YEAR = 2026
ZONES = ("America/New_York", "Europe/London", "Australia/Sydney", "Asia/Seoul")
EXPECTED_COUNTS = {"America/New_York": 2, "Europe/London": 2, "Australia/Sydney": 2, "Asia/Seoul": 0}
ORDINARY = (time(0, 0), time(9, 0), time(19, 30), time(23, 59))


@dataclass(frozen=True)
class Transition:
    zone: str
    at: datetime  # the UTC instant the offset changes
    before: timedelta
    after: timedelta

    @property
    def kind(self) -> str:
        return "gap" if self.after > self.before else "fold"

    @property
    def wall_start(self) -> datetime:
        """First wall time of the skipped (gap) or repeated (fold) hour, naive local."""
        return (self.at + min(self.before, self.after)).replace(tzinfo=None) if self.kind == "fold" else \
            (self.at + self.before).replace(tzinfo=None)

    @property
    def wall_end(self) -> datetime:
        return self.wall_start + abs(self.after - self.before)

    def __str__(self) -> str:
        return f"{self.zone} {self.kind} {self.wall_start:%Y-%m-%d %H:%M}-{self.wall_end:%H:%M}"


def transitions(zone: str, year: int = YEAR) -> list[Transition]:
    """Offset changes of ``zone`` in ``year``, found by scanning hours, then minutes."""
    tz = ZoneInfo(zone)
    found = []
    at = datetime(year, 1, 1, tzinfo=UTC)
    end = datetime(year + 1, 1, 1, tzinfo=UTC)
    while at < end:
        nxt = at + timedelta(hours=1)
        before, after = at.astimezone(tz).utcoffset(), nxt.astimezone(tz).utcoffset()
        if before != after:
            minute = at
            while minute.astimezone(tz).utcoffset() == before:
                minute += timedelta(minutes=1)
            found.append(Transition(zone, minute, before, after))  # type: ignore[arg-type]
        at = nxt
    return found


CASES = [pytest.param(t, id=f"{t.zone}-{t.at.date()}") for zone in ZONES for t in transitions(zone)]
CASES.append(pytest.param(Transition("Asia/Seoul", datetime(YEAR, 3, 8, 7, tzinfo=UTC), timedelta(hours=9),
                                     timedelta(hours=9)), id="Asia/Seoul-control"))


def test_the_scanned_transitions_are_the_known_ones() -> None:
    assert {zone: len(transitions(zone)) for zone in ZONES} == EXPECTED_COUNTS
    ny = [str(t) for t in transitions("America/New_York")]
    assert ny == ["America/New_York gap 2026-03-08 02:00-03:00", "America/New_York fold 2026-11-01 01:00-02:00"]


def wall_times(tr: Transition) -> list[time]:
    """Inside the transition's hour, at its edges, just before it, and ordinary times."""
    start = tr.wall_start
    special = [start, start + timedelta(minutes=30), start + timedelta(minutes=59), tr.wall_end,
               start - timedelta(minutes=1)] if tr.before != tr.after else []
    return sorted({t.time() for t in special} | set(ORDINARY))


def expected_slot(day: date, wall: time, tz: ZoneInfo) -> datetime:
    """The one fire of a daily ``wall`` schedule on ``day``, computed without the engine."""
    naive = datetime.combine(day, wall)
    first = naive.replace(tzinfo=tz, fold=0)
    if first.astimezone(UTC).astimezone(tz).replace(tzinfo=None) == naive:
        return first.astimezone(UTC)  # exists (in a fold, fold=0 is the first occurrence)
    at = first.astimezone(UTC) - timedelta(hours=3)  # a gap: the first valid instant after it
    while at.astimezone(tz).replace(tzinfo=None) < naive:
        at += timedelta(minutes=1)
    return at


@pytest.mark.parametrize("tr", CASES)
def test_daily_schedules_get_one_run_per_local_date_across_the_transition(
        store_url: str, tmp_path: Path, tr: Transition, long_run: bool) -> None:
    tz = ZoneInfo(tr.zone)
    walls = wall_times(tr)
    specs = [dict(name=f"d{n}", workflow="daily_report", project=f"p{n}", cron=f"{w.minute} {w.hour} * * *",
                  timezone=tr.zone, misfire="CATCH_UP_ALL", overlap="ALLOW",
                  report_on="previous" if n % 2 == 0 else "current") for n, w in enumerate(walls)]
    projects = [{"key": f"p{n}", "repo": str(tmp_path)} for n in range(len(walls))]
    start = tr.at.replace(minute=7, second=0, microsecond=0) - timedelta(days=3)
    end = start + timedelta(days=6)
    step = timedelta(minutes=10 if long_run else 60)
    clock = ManualClock(start)
    rt = make_runtime(store_url, schedules=specs, clock=clock, extra={"projects": projects})
    try:
        definitions.apply(rt)
        ticks = 0
        while clock.now() < end:
            clock.advance(step)
            tick.tick(rt)
            ticks += 1
        with rt.store.read() as conn:
            names = dict(conn.execute(select(schedules.c.id, schedules.c.name)).all())
            rows = conn.execute(select(runs.c.schedule_id, runs.c.scheduled_for, runs.c.business_key,
                                       runs.c.trigger_type, runs.c.status)).all()
    finally:
        rt.store.dispose()
    assert {r.trigger_type for r in rows} == {"SCHEDULED"}
    assert not {r.status for r in rows} & {"MISSED", "SKIPPED", "MANUAL_REQUIRED"}
    by_name: dict[str, list[tuple[datetime, str]]] = {name: [] for name in names.values()}
    for r in rows:
        at = r.scheduled_for if r.scheduled_for.tzinfo else r.scheduled_for.replace(tzinfo=UTC)
        by_name[names[r.schedule_id]].append((at.astimezone(UTC), r.business_key))
    first_day, last_day = start.astimezone(tz).date() - timedelta(days=1), end.astimezone(tz).date() + timedelta(days=1)
    for n, wall in enumerate(walls):
        name, spec = f"d{n}", specs[n]
        context = f"{tr}: daily at {wall:%H:%M} ({spec['report_on']}), {ticks} ticks every {step}"
        got = sorted(by_name[name])
        days = [first_day + timedelta(days=i) for i in range((last_day - first_day).days + 1)]
        wanted = sorted(s for s in (expected_slot(d, wall, tz) for d in days) if start < s <= end)
        assert [at for at, _ in got] == wanted, f"{context}: slots {_local(got, tz)} != {_local(wanted, tz)}"
        local_dates = Counter(at.astimezone(tz).date() for at, _ in got)
        assert set(local_dates.values()) == {1}, f"{context}: {local_dates}"
        keys = [date.fromisoformat(key) for _, key in got]
        shift = timedelta(days=1) if spec["report_on"] == "previous" else timedelta(0)
        assert keys == [at.astimezone(tz).date() - shift for at, _ in got], context
        assert all(b - a == timedelta(days=1) for a, b in pairwise(keys)), f"{context}: keys {keys}"


def _local(items: list, tz: ZoneInfo) -> list[str]:  # type: ignore[type-arg]
    return [f"{(i[0] if isinstance(i, tuple) else i).astimezone(tz):%m-%d %H:%M%z}" for i in items]
