"""The builtin grammar of `schedules draft` (SPEC §16.2): a table of English and Korean phrasings."""

from __future__ import annotations

import pytest

from steps import schedule_grammar

PROJECTS = ["web", "api"]

CASES = {
    "every weekday at 18:30 Seoul time, daily report for web":
        ("web-daily", "daily_report", "web", "30 18 * * 1-5", "Asia/Seoul"),
    "daily at 9:05 am UTC for api": ("api-daily", "daily_report", "api", "5 9 * * *", "UTC"),
    "every day at 6 pm Europe/Berlin, for web": ("web-daily", "daily_report", "web", "0 18 * * *",
                                                  "Europe/Berlin"),
    "on weekdays at 12:00 am in Tokyo for api": ("api-daily", "daily_report", "api", "0 0 * * 1-5",
                                                 "Asia/Tokyo"),
    "every Monday at 09:00 New York time, weekly report for web":
        ("web-weekly", "weekly_report", "web", "0 9 * * 1", "America/New_York"),
    "on Fridays at 5:30pm for api": ("api-weekly", "weekly_report", "api", "30 17 * * 5", "UTC"),
    "매일 오후 6시 30분 web 프로젝트": ("web-daily", "daily_report", "web", "30 18 * * *", "Asia/Seoul"),
    "평일 오전 9시 api 일일 보고": ("api-daily", "daily_report", "api", "0 9 * * 1-5", "Asia/Seoul"),
    "매주 월요일 오전 10시 web 주간 보고": ("web-weekly", "weekly_report", "web", "0 10 * * 1",
                                       "Asia/Seoul"),
    "매주 금요일 18시 web 프로젝트 런던 시간": ("web-weekly", "weekly_report", "web", "0 18 * * 5",
                                         "Europe/London"),
    "평일 저녁 7시 반 api 프로젝트": ("api-daily", "daily_report", "api", "30 19 * * 1-5", "Asia/Seoul"),
    "매일 12시 web 프로젝트 UTC": ("web-daily", "daily_report", "web", "0 12 * * *", "UTC"),
}


@pytest.mark.parametrize("text", CASES)
def test_a_phrasing_becomes_its_schedule(text: str) -> None:
    entry = schedule_grammar.parse(text, projects=PROJECTS).entry
    assert (entry["name"], entry["workflow"], entry["project"], entry["cron"],
            entry["timezone"]) == CASES[text]


@pytest.mark.parametrize("text", [
    "twice a day", "every other Tuesday at 10:00 for web", "at 18:30 for web",
    "every day for web", "every day at 7 for web", "매일 web 프로젝트", "every day at 25:00 for web",
    "every day at 13 pm for web",
])
def test_anything_else_needs_a_model(text: str) -> None:
    with pytest.raises(schedule_grammar.NotUnderstood):
        schedule_grammar.parse(text, projects=PROJECTS)


def test_flags_win_and_one_project_needs_no_name() -> None:
    parsed = schedule_grammar.parse("every day at 08:00", projects=["solo"])
    assert parsed.entry["project"] == "solo" and parsed.entry["name"] == "solo-daily"
    forced = schedule_grammar.parse("every Monday at 08:00 for web", projects=PROJECTS,
                                    project="api", workflow="daily_report")
    assert (forced.entry["project"], forced.entry["workflow"]) == ("api", "daily_report")
    with pytest.raises(schedule_grammar.NotUnderstood, match="pass --project"):
        schedule_grammar.parse("every day at 08:00", projects=PROJECTS)
