"""engine.core.cron: fire times across every 2026 DST transition, validation, consistency properties."""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core import errors
from engine.core.cron import expression, timetable, validate
from engine.core.models import PeriodKind
from engine.core.schedule_spec import DstFold, DstGap, ScheduleSpec

NOW = datetime(2026, 1, 1, tzinfo=UTC)
MICRO = timedelta(microseconds=1)

# (zone, local date, kind, first wall hour of the skipped / repeated hour)
TRANSITIONS_2026 = [
    ("America/New_York", date(2026, 3, 8), "gap", 2),
    ("America/New_York", date(2026, 11, 1), "fold", 1),
    ("Europe/London", date(2026, 3, 29), "gap", 1),
    ("Europe/London", date(2026, 10, 25), "fold", 1),
    ("Australia/Sydney", date(2026, 4, 5), "fold", 2),
    ("Australia/Sydney", date(2026, 10, 4), "gap", 2),
]
CHOICES = [(gap, fold) for gap in DstGap for fold in DstFold]


def on_date(expr: str, tz: str, day: date, gap: DstGap = DstGap.SHIFT,
            fold: DstFold = DstFold.FIRST) -> list[timetable.Fire]:
    return timetable.fires_on_local_dates(expr, tz, day, day, dst_gap=gap, dst_fold=fold)


def wall(tz: str, day: date, hour: int, minute: int = 0, fold: int = 0) -> datetime:
    """The UTC instant of a local wall time (``fold`` picks the occurrence), computed by zoneinfo alone."""
    return datetime.combine(day, time(hour, minute), tzinfo=ZoneInfo(tz)).replace(fold=fold).astimezone(UTC)


def assert_ascending(fires: list[timetable.Fire]) -> None:
    instants = [f.at for f in fires]
    assert instants == sorted(set(instants)), "fires must be strictly ascending"
    for f in fires:
        assert f.at.tzinfo is UTC and f.local.tzinfo is not None and f.local.astimezone(UTC) == f.at


def test_transition_table_is_right() -> None:
    for tz, day, kind, hour in TRANSITIONS_2026:
        first, second = wall(tz, day, hour, 30, 0), wall(tz, day, hour, 30, 1)
        assert (first < second) if kind == "fold" else (first > second), (tz, day)


# -- daily crons inside the skipped / repeated hour, every DST choice ------------------------------

@pytest.mark.parametrize(("tz", "day", "kind", "hour"), TRANSITIONS_2026)
@pytest.mark.parametrize(("gap", "fold"), CHOICES)
def test_daily_cron_inside_transition_hour(tz: str, day: date, kind: str, hour: int,
                                           gap: DstGap, fold: DstFold) -> None:
    fires = on_date(f"30 {hour} * * *", tz, day, gap, fold)
    assert_ascending(fires)
    if kind == "gap" and gap is DstGap.SKIP:
        assert fires == []
    elif kind == "gap":
        [fire] = fires
        assert fire.at == wall(tz, day, hour + 1)  # the first instant after the gap
        assert (fire.local.hour, fire.local.minute) == (hour + 1, 0)
        assert fire.moved and fire.nominal == datetime.combine(day, time(hour, 30))
        assert fire.note == f"{hour:02d}:30 does not exist on {day} (DST gap); fires at {hour + 1:02d}:00"
    else:
        first = (wall(tz, day, hour, 30, 0), False)
        second = (wall(tz, day, hour, 30, 1), True)
        expected = {DstFold.FIRST: [first], DstFold.SECOND: [second], DstFold.BOTH: [first, second]}[fold]
        assert [(f.at, f.moved) for f in fires] == expected
        assert all((f.local.hour, f.local.minute) == (hour, 30) for f in fires)
        assert all(("occurs twice" in (f.note or "")) == f.moved for f in fires)
    for neighbour in (day - timedelta(days=1), day + timedelta(days=1)):
        [fire] = on_date(f"30 {hour} * * *", tz, neighbour, gap, fold)
        assert not fire.moved and fire.note is None


@pytest.mark.parametrize(("tz", "day", "kind", "hour"), TRANSITIONS_2026)
@pytest.mark.parametrize(("gap", "fold"), CHOICES)
@pytest.mark.parametrize(("expr", "per_hour"), [("0 * * * *", 1), ("*/15 * * * *", 4)])
def test_hourly_and_quarter_hourly_across_transitions(tz: str, day: date, kind: str, hour: int, gap: DstGap,
                                                      fold: DstFold, expr: str, per_hour: int) -> None:
    fires = on_date(expr, tz, day, gap, fold)
    assert_ascending(fires)
    if kind == "gap":
        # The skipped hour's slots either vanish or merge into the slot at the gap's end.
        assert len(fires) == 23 * per_hour
        assert not any(f.moved for f in fires)
        noted = [f.at for f in fires if f.note]
        assert noted == ([wall(tz, day, hour + 1)] if gap is DstGap.SHIFT else [])
    else:
        extra = per_hour if fold is DstFold.BOTH else 0
        assert len(fires) == 24 * per_hour + extra
        moved = [f for f in fires if f.moved]
        assert len(moved) == (0 if fold is DstFold.FIRST else per_hour)
        assert all(f.local.fold == 1 and f.local.hour == hour for f in moved)
    gaps = [b.at - a.at for a, b in zip(fires, fires[1:], strict=False)]
    assert min(gaps) >= timedelta(minutes=60 // per_hour)


@pytest.mark.parametrize(("tz", "day", "kind", "hour"), [t for t in TRANSITIONS_2026 if t[2] == "gap"])
@pytest.mark.parametrize("gap", list(DstGap))
def test_gap_slots_merge_into_the_next_slot(tz: str, day: date, kind: str, hour: int, gap: DstGap) -> None:
    fires = on_date("*/15 * * * *", tz, day, gap)
    at_gap_end = [f for f in fires if f.at == wall(tz, day, hour + 1)]
    [fire] = at_gap_end
    assert not fire.moved and fire.nominal == datetime.combine(day, time(hour + 1))
    if gap is DstGap.SHIFT:
        assert fire.note == (f"{hour:02d}:00-{hour:02d}:45 do not exist on {day} (DST gap); "
                             f"the {hour + 1:02d}:00 fire stands in")
    else:
        assert fire.note is None
    assert not any(f.nominal.hour == hour for f in fires)


@pytest.mark.parametrize(("gap", "fold"), CHOICES)
@pytest.mark.parametrize(("expr", "per_day"), [("30 2 * * *", 1), ("30 1 * * *", 1), ("0 * * * *", 24),
                                               ("*/15 * * * *", 96)])
def test_seoul_has_no_transition_in_2026(expr: str, per_day: int, gap: DstGap, fold: DstFold) -> None:
    start = datetime(2026, 1, 1, tzinfo=ZoneInfo("Asia/Seoul"))
    fires = list(timetable.fires_between(expr, "Asia/Seoul", start, start.replace(year=2027) - MICRO,
                                    dst_gap=gap, dst_fold=fold))
    assert_ascending(fires)
    assert not any(f.moved or f.note for f in fires)
    counts = Counter(f.local.date() for f in fires)
    assert len(counts) == 365 and set(counts.values()) == {per_day}


# -- the acceptance cases ---------------------------------------------------------------------------

def test_acceptance_new_york_0230_fires_once_on_spring_forward() -> None:
    fires = timetable.preview("30 2 * * *", "America/New_York", datetime(2026, 3, 6, 12, tzinfo=UTC), 4)
    assert [f.local.date() for f in fires] == [date(2026, 3, d) for d in (7, 8, 9, 10)]
    march_8 = [f for f in fires if f.local.date() == date(2026, 3, 8)]
    assert len(march_8) == 1
    assert march_8[0].local.strftime("%H:%M %Z") == "03:00 EDT" and march_8[0].moved
    assert [f.moved for f in fires] == [False, True, False, False]
    [nov_1] = on_date("30 2 * * *", "America/New_York", date(2026, 11, 1))
    assert not nov_1.moved and nov_1.local.strftime("%H:%M %Z") == "02:30 EST"


def test_acceptance_new_york_0130_on_fall_back() -> None:
    [first] = on_date("30 1 * * *", "America/New_York", date(2026, 11, 1))
    assert first.at == datetime(2026, 11, 1, 5, 30, tzinfo=UTC) and first.local.strftime("%Z") == "EDT"
    both = on_date("30 1 * * *", "America/New_York", date(2026, 11, 1), fold=DstFold.BOTH)
    assert [f.at.hour for f in both] == [5, 6] and [f.moved for f in both] == [False, True]
    preview = timetable.preview("30 1 * * *", "America/New_York", datetime(2026, 10, 31, tzinfo=UTC), 3,
                           dst_fold=DstFold.BOTH)
    assert [f.local.strftime("%m-%d %H:%M %Z") for f in preview] == [
        "10-31 01:30 EDT", "11-01 01:30 EDT", "11-01 01:30 EST"]


def test_half_hour_transitions_of_lord_howe() -> None:
    tz = "Australia/Lord_Howe"  # +10:30 <-> +11: the gap and the fold last 30 minutes
    [shifted] = on_date("15 2 * * *", tz, date(2026, 10, 4))
    assert shifted.at == datetime(2026, 10, 3, 15, 30, tzinfo=UTC) and shifted.local.strftime("%H:%M") == "02:30"
    assert shifted.moved
    both = on_date("45 1 * * *", tz, date(2026, 4, 5), fold=DstFold.BOTH)
    assert [b.at - a.at for a, b in zip(both, both[1:], strict=False)] == [timedelta(minutes=30)]


def test_midnight_gap_of_santiago_keeps_one_fire_per_day() -> None:
    # Chile springs forward at 24:00: 00:00-00:59 does not exist on 2026-09-06.
    [fire] = on_date("0 0 * * *", "America/Santiago", date(2026, 9, 6))
    assert fire.moved and fire.local.strftime("%Y-%m-%d %H:%M") == "2026-09-06 01:00"


# -- croniter stays the authority on which wall times match ---------------------------------------

@pytest.mark.parametrize("expr", [
    "* * * * *", "*/7 3-5 * jan,jul mon-fri", "0 0 1-31 * 1", "0 12 13 * 5", "0 0 L * *", "0 0 * * 5#3",
    "0 0 15W * *", "0 0 * * L5", "0 0 * * 7", "0 9 29 2 *", "5-2 1 1 1 *", "0 0 1,15 * sun", "0 0 ? * ?",
])
def test_wall_times_match_croniter(expr: str) -> None:
    start, end = datetime(2025, 12, 25), datetime(2028, 3, 5)
    ours = [f.nominal for f in timetable.fires_between(expr, "UTC", start.replace(tzinfo=UTC), end.replace(tzinfo=UTC))]
    theirs = []
    it = croniter(expr, start - timedelta(minutes=1))
    while (nxt := it.get_next(datetime)) <= end:
        theirs.append(nxt)
        if len(theirs) > 2000:  # the minute cron: a prefix is enough
            ours = ours[:len(theirs)]
            break
    assert ours == theirs


def test_aliases() -> None:
    start = datetime(2026, 3, 1, tzinfo=UTC)
    assert timetable.preview("@daily", "UTC", start) == timetable.preview("0 0 * * *", "UTC", start)
    assert timetable.preview("@hourly", "UTC", start, 3)[1].at == datetime(2026, 3, 1, 2, tzinfo=UTC)


# -- bounds and the single-instant helpers -------------------------------------------------------

def test_fires_between_is_inclusive_and_next_is_strict() -> None:
    start, end = datetime(2026, 5, 1, 9, tzinfo=UTC), datetime(2026, 5, 1, 11, tzinfo=UTC)
    assert [f.at.hour for f in timetable.fires_between("0 * * * *", "UTC", start, end)] == [9, 10, 11]
    assert list(timetable.fires_between("0 * * * *", "UTC", end, start)) == []
    assert timetable.next_fire_after("0 * * * *", "UTC", start).at == start + timedelta(hours=1)
    at_start = timetable.latest_fire_at_or_before("0 * * * *", "UTC", start)
    just_before = timetable.latest_fire_at_or_before("0 * * * *", "UTC", start - MICRO)
    assert at_start is not None and at_start.at == start
    assert just_before is not None and just_before.at == start - timedelta(hours=1)


def test_latest_fire_searches_back_a_bounded_distance() -> None:
    mid_year = datetime(2026, 7, 1, tzinfo=UTC)
    latest = timetable.latest_fire_at_or_before("0 9 1 1 *", "Asia/Seoul", mid_year)
    assert latest is not None and latest.at == datetime(2026, 1, 1, 0, tzinfo=UTC)
    leap = timetable.latest_fire_at_or_before("0 0 29 2 *", "UTC", mid_year)  # 2024-02-29 is > 400 days back
    assert leap is not None and leap.at == datetime(2024, 2, 29, tzinfo=UTC)
    assert timetable.next_fire_after("0 0 29 2 *", "UTC", mid_year).at == datetime(2028, 2, 29, tzinfo=UTC)


def test_bad_input_is_refused_at_call_time() -> None:
    with pytest.raises(ValueError, match="naive"):
        timetable.next_fire_after("0 * * * *", "UTC", datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="naive"):
        timetable.fires_between("0 * * * *", "UTC", datetime(2026, 1, 1), NOW)  # not iterated: raises eagerly
    with pytest.raises(errors.InvalidInput, match="minute must be 0-59"):
        timetable.fires_between("61 * * * *", "UTC", NOW, NOW)


def test_day_specials_keep_the_dst_rules() -> None:
    # The second Sunday of March is New York's spring-forward day; croniter finds the day, we map the time.
    [fire] = on_date("30 2 * 3 0#2", "America/New_York", date(2026, 3, 8))
    assert fire.moved and fire.local.strftime("%H:%M") == "03:00"
    assert on_date("30 2 * 3 0#2", "America/New_York", date(2026, 3, 8), DstGap.SKIP) == []
    assert [f.local.day for f in timetable.preview("0 5 L * *", "Europe/London", NOW, 3)] == [31, 28, 31]


def test_a_cron_that_only_names_skipped_wall_times_never_fires() -> None:
    expr, tz = "30 2 * 3 0#2", "America/New_York"  # always inside New York's spring-forward gap
    assert timetable.preview(expr, tz, NOW, 3, dst_gap=DstGap.SKIP) == []
    with pytest.raises(errors.InvalidInput, match="never fires after"):
        timetable.next_fire_after(expr, tz, NOW, dst_gap=DstGap.SKIP)
    assert timetable.latest_fire_at_or_before(expr, tz, NOW, dst_gap=DstGap.SKIP) is None
    result = validate.check(expr, tz, now=NOW, dst_gap=DstGap.SKIP)
    assert [f for f, _ in result.problems] == ["cron"] and "never fires" in result.problems[0][1]


def test_estimate_fire_count() -> None:
    week = (NOW, NOW + timedelta(days=7))
    assert timetable.estimate_fire_count("*/5 * * * *", "Europe/London", *week) == 7 * 288 + 1
    fall = (datetime(2026, 10, 20, tzinfo=UTC), datetime(2026, 10, 28, tzinfo=UTC))
    assert timetable.estimate_fire_count("30 1 * * *", "Europe/London", *fall) == len(
        list(timetable.fires_between("30 1 * * *", "Europe/London", *fall)))
    year = timetable.estimate_fire_count("* * * * *", "Asia/Seoul", NOW, NOW + timedelta(days=365))
    assert year == 365 * 1440
    monthly = timetable.estimate_fire_count("0 3 1 * *", "UTC", NOW, NOW + timedelta(days=730))
    assert 22 <= monthly <= 26
    assert timetable.estimate_fire_count("* * * * *", "UTC", NOW, NOW - MICRO) == 0


# -- validation -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("expr", "message"), [
    ("61 * * * *", "'61 * * * *': minute must be 0-59"),
    ("0 24 * * *", "hour must be 0-23"),
    ("0 0 0 * *", "day-of-month must be 1-31"),
    ("0 0 * 13 *", "month must be 1-12"),
    ("0 0 * * 8", "day-of-week must be 0-7"),
    ("*/0 * * * *", "minute step must be at least 1"),
    ("* * *", "expected 5 fields (minute hour day-of-month month day-of-week), got 3"),
    ("0 * * * * *", "got 6; seconds and years are not supported"),
    ("H * * * *", "hashed and random values"),
    ("0 R * * *", "hour: hashed and random values"),
    ("0 0 30 2 *", "never fires"),
    ("abc * * * *", "not a valid cron expression"),
    ("0 0 * * 9#2", "not a valid cron expression"),
    ("", "empty"),
    ("@reboot", "unknown alias"),
])
def test_check_expression_messages(expr: str, message: str) -> None:
    with pytest.raises(errors.InvalidInput) as caught:
        expression.check_expression(expr)
    assert message in caught.value.message


@pytest.mark.parametrize(("name", "hint"), [
    ("Mars/Base", "use an IANA name such as Asia/Seoul"), ("", "use an IANA name such as Asia/Seoul"),
    ("localtime", "use an IANA name such as Asia/Seoul"), ("../etc/passwd", "use an IANA name such as Asia/Seoul"),
    ("America", "use an IANA name such as Asia/Seoul"),
    (" Asia/Seoul", "did you mean Asia/Seoul?"), ("Asia/Seul", "did you mean Asia/Seoul?"),  # issue 43, item 8
    ("Europe/Londn", "did you mean Europe/London?"),
])
def test_unknown_zones(name: str, hint: str) -> None:
    with pytest.raises(errors.InvalidInput) as caught:
        expression.zone(name)
    assert caught.value.message == f"unknown timezone '{name}' ({hint})"
    with pytest.raises(errors.InvalidInput, match="unknown timezone"):
        validate.check("0 * * * *", name, now=NOW)


def test_check_raises_for_syntax() -> None:
    with pytest.raises(errors.InvalidInput, match="minute"):
        validate.check("61 * * * *", "UTC", now=NOW)


def test_check_minimum_interval() -> None:
    result = validate.check("* * * * *", "UTC", now=NOW)
    assert result.problems == [("cron", "fires every 1m; the minimum interval is 5m (set allow_frequent = true)")]
    assert not result.ok and result.min_interval == timedelta(minutes=1) and result.runs_per_day == 1440
    assert validate.check("* * * * *", "UTC", now=NOW, allow_frequent=True).ok
    uneven = validate.check("0,3 9 * * *", "UTC", now=NOW)
    assert uneven.problems == [
        ("cron", "fires as little as 3m apart; the minimum interval is 5m (set allow_frequent = true)")]


def test_check_summary() -> None:
    result = validate.check("*/15 * * * *", "Asia/Seoul", now=NOW)
    assert result.ok and result.runs_per_day == 96 and result.min_interval == timedelta(minutes=15)
    yearly = validate.check("0 9 1 1 *", "UTC", now=NOW)
    assert [f.at.year for f in yearly.next_fires] == [2026, 2027, 2028, 2029, 2030] and yearly.ok
    assert [f.at for f in result.next_fires] == [NOW + timedelta(minutes=15 * k) for k in range(1, 6)]
    assert validate.check("0 9 * * 1,3", "UTC", now=NOW).runs_per_day == pytest.approx(2 / 7)


def test_check_one_slot_per_period() -> None:
    daily = validate.check("0 * * * *", "UTC", now=NOW, period=PeriodKind.DAY)
    assert daily.problems == [("cron", "fires 24 times on 2026-01-02; a daily workflow allows one slot per day")]
    weekly = validate.check("0 9 * * 1,3", "UTC", now=NOW, period=PeriodKind.WEEK, workflow="weekly_report")
    assert weekly.problems == [("cron", "fires 2 times in 2026-W02; weekly_report allows one slot per ISO week")]
    assert validate.check("0 9 * * 1", "UTC", now=NOW, period=PeriodKind.WEEK).ok
    for tz, *_ in TRANSITIONS_2026:
        for hour in (1, 2):
            assert validate.check(f"30 {hour} * * *", tz, now=NOW, period=PeriodKind.DAY).ok


def test_check_dst_choices_need_a_slot_workflow() -> None:
    skip = validate.check("30 2 * * *", "America/New_York", now=NOW, period=PeriodKind.DAY, dst_gap=DstGap.SKIP)
    assert [f for f, _ in skip.problems] == ["dst_gap"]
    both = validate.check("30 1 * * *", "America/New_York", now=NOW, period=PeriodKind.DAY, dst_fold=DstFold.BOTH)
    assert both.problems[0][0] == "dst_fold"
    assert ("cron", "fires 2 times on 2026-11-01; a daily workflow allows one slot per day") in both.problems
    assert validate.check("30 1 * * *", "America/New_York", now=NOW, period=PeriodKind.DAY,
                      dst_fold=DstFold.SECOND).ok
    assert validate.check("30 1 * * *", "America/New_York", now=NOW, dst_gap=DstGap.SKIP, dst_fold=DstFold.BOTH).ok


def test_check_jitter_below_grace() -> None:
    result = validate.check("0 9 * * *", "UTC", now=NOW, jitter=timedelta(minutes=10))
    assert result.problems == [("jitter", "jitter 10m must be below grace 10m")]


def test_check_schedule_keys_and_reference_instant() -> None:
    spec = ScheduleSpec(name="s", workflow="daily_report", project="p", cron="30 19 * * *", timezone="Asia/Seoul")
    result = validate.check_schedule(spec, PeriodKind.DAY)
    assert result.ok and result.next_fires[0].at == datetime(2026, 1, 1, 10, 30, tzinfo=UTC)
    cases: list[tuple[dict[str, Any], str, str]] = [
        (dict(cron="61 * * * *"), "cron", "'61 * * * *': minute must be 0-59"),
        (dict(timezone="Mars/Base"), "timezone", "unknown timezone 'Mars/Base'"),
        (dict(cron="0 * * * *"), "cron", "fires 24 times on 2026-01-02; daily_report allows one slot per day"),
        (dict(dst_gap=DstGap.SKIP), "dst_gap", "only for slot workflows"),
        (dict(jitter=timedelta(hours=1)), "jitter", "must be below grace"),
    ]
    for change, key, message in cases:
        bad = dataclasses.replace(spec, **change)
        with pytest.raises(errors.ConfigInvalid) as caught:
            validate.check_schedule(bad, PeriodKind.DAY)
        assert caught.value.key == key and message in caught.value.problem


# -- properties -----------------------------------------------------------------------------------

ZONES = ["America/New_York", "Europe/London", "Australia/Sydney", "Asia/Seoul", "Australia/Lord_Howe",
         "America/Santiago", "Pacific/Chatham", "America/Havana", "Asia/Tehran", "UTC"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tz=st.sampled_from(ZONES), hour=st.integers(0, 23), minute=st.integers(0, 59),
       offset_days=st.integers(0, 364), probe_s=st.integers(0, 60 * 86400))
def test_daily_cron_fires_once_per_local_date(tz: str, hour: int, minute: int, offset_days: int,
                                             probe_s: int) -> None:
    expr, zone = f"{minute} {hour} * * *", ZoneInfo(tz)
    first = date(2026, 1, 1) + timedelta(days=offset_days)
    start = datetime.combine(first, time(), tzinfo=zone).astimezone(UTC)
    end = datetime.combine(first + timedelta(days=60), time(), tzinfo=zone).astimezone(UTC)
    fires = list(timetable.fires_between(expr, tz, start, end))
    assert_ascending(fires)
    per_date = Counter(f.local.date() for f in fires)
    assert max(per_date.values()) == 1
    assert all(per_date[first + timedelta(days=k)] == 1 for k in range(1, 59))
    probe = start + timedelta(seconds=probe_s)
    following = timetable.next_fire_after(expr, tz, probe)
    assert following.at > probe
    assert following == next(timetable.fires_between(expr, tz, probe + MICRO, probe + timedelta(days=3)))
    for earlier, later in zip(fires, fires[1:], strict=False):
        assert timetable.next_fire_after(expr, tz, earlier.at) == later


@functools.cache
def transition_days(tz: str) -> list[date]:
    """Local dates of 2026 on which ``tz`` changes its UTC offset (found by zoneinfo alone)."""
    zone, days = ZoneInfo(tz), [date(2026, 1, 1) + timedelta(days=k) for k in range(366)]
    offsets = [datetime.combine(d, time(), tzinfo=zone).utcoffset() for d in days]
    return [days[k - 1] for k in range(1, len(days)) if offsets[k] != offsets[k - 1]] or [date(2026, 1, 15)]


@settings(max_examples=150, deadline=None)
@given(tz=st.sampled_from(ZONES), expr=st.sampled_from(["0 * * * *", "*/15 0-3 * * *", "*/7 * * * 0",
                                                       "30 0-3,23 * * *", "0,30 1-3 * 3,4,9,10,11 0"]),
       gap=st.sampled_from(list(DstGap)), fold=st.sampled_from(list(DstFold)),
       which=st.integers(0, 1), cut_s=st.integers(0, 4 * 86400))
def test_windows_split_anywhere_agree(tz: str, expr: str, gap: DstGap, fold: DstFold,
                                      which: int, cut_s: int) -> None:
    """Around a transition of the zone, any cut of a window loses or repeats nothing."""
    days = transition_days(tz)
    start = datetime.combine(days[which % len(days)] - timedelta(days=1), time(), tzinfo=UTC)
    end, cut = start + timedelta(days=4), start + timedelta(seconds=cut_s)
    whole = list(timetable.fires_between(expr, tz, start, end, dst_gap=gap, dst_fold=fold))
    assert_ascending(whole)
    left = list(timetable.fires_between(expr, tz, start, cut, dst_gap=gap, dst_fold=fold))
    right = list(timetable.fires_between(expr, tz, cut + MICRO, end, dst_gap=gap, dst_fold=fold))
    assert left + right == whole
    latest = timetable.latest_fire_at_or_before(expr, tz, cut, dst_gap=gap, dst_fold=fold)
    if left:
        assert latest == left[-1]
