"""The list commands at 100 columns, as a user's terminal shows them: no line wider, no name or period cut;
backfilled runs say ``backfill`` rather than a delay of days; a quiet run says ``no commits``; and
``schedules history`` shows one edit beside 65 ``run_backfill`` events grouped into one line."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

from engine.core.schedule_spec import Criticality
from tests.fakes.gitrepo import make_repo
from tests.support import run_cli, write_config

# A terminal 100 columns wide (TTY_COMPATIBLE: the pipe is laid out as a terminal would be).
WIDE = dict(COLUMNS="100", TTY_COMPATIBLE="1", NO_COLOR="1")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
NOW = "2026-12-03T00:00:00Z"


def setup(tmp_path: Path, cron: str = "30 19 * * *") -> Path:
    repo = make_repo(tmp_path)
    repo.commit("long ago", at=datetime(2025, 1, 1, tzinfo=timezone.utc))
    return write_config(tmp_path / "reportflow.toml", db_url=f"sqlite:///{tmp_path / 'rf.db'}",
                        sections={"reports": {"dir": str(tmp_path / "reports")}},
                        projects=[dict(key="platform-services", repo=str(repo.path), branches=["main"])],
                        schedules=[dict(name="platform-services-daily-report", workflow="daily_report",
                                        project="platform-services", cron=cron, timezone="America/Los_Angeles"),
                                   dict(name="platform-services-weekly-report", workflow="weekly_report",
                                        project="platform-services", cron="0 9 * * 1", timezone="Asia/Seoul")])


def lines_of(*args: str, config: Path) -> list[str]:
    result = run_cli(*args, config=config, now=NOW, env=WIDE)
    assert result.returncode == 0, result.stderr
    return ANSI.sub("", result.stdout).splitlines()


def test_the_lists_fit_100_columns_and_say_backfill_and_no_commits(tmp_path: Path) -> None:
    config = setup(tmp_path)
    assert run_cli("schedules", "apply", config=config, now=NOW).returncode == 0
    assert run_cli("backfill", "platform-services-daily-report", "--from", "2026-09-28", "--to", "2026-12-01",
                   config=config, now=NOW).returncode == 0
    assert run_cli("work", "--until-idle", config=config, now=NOW).returncode == 0

    schedules = lines_of("schedules", "list", config=config)
    assert max(map(len, schedules)) <= 100
    text = "\n".join(schedules)
    for whole in ("platform-services-daily-report", "platform-services-weekly-report", "daily_report",
                  "30 19 * * *", "America/Los_Angeles", "Asia/Seoul"):
        assert whole in text

    runs = lines_of("runs", "list", config=config)
    assert max(map(len, runs)) <= 100
    rows = [line for line in runs if "2026-11-30" in line]
    assert len(rows) == 1 and "platform-services-daily-report" in rows[0] and "backfill" in rows[0]
    assert not any(line.rstrip().endswith("d") and " d " not in line for line in rows)  # no "65.2d" delay
    assert "no commits" in "\n".join(runs)

    # An edit after 64 backfilled runs: grouped as the web page groups it, the edit on a line of its own.
    edited = setup(tmp_path, cron="0 20 * * *")
    assert run_cli("schedules", "apply", config=edited, now=NOW).returncode == 0
    history = lines_of("schedules", "history", "platform-services-daily-report", config=edited)
    assert max(map(len, history)) <= 100
    joined = "\n".join(history)
    assert re.search(r"run_backfill ×6\d", joined) and "update" in joined and "30 19 * * * -> 0 20 * * *" in joined
    assert len([line for line in history if "run_backfill" in line]) == 1


def test_notifications_fit_100_columns_and_say_when_no_target_is_configured(tmp_path: Path) -> None:
    """Issue 43, item 6: ``notifications list`` was 149 columns wide, ignored COLUMNS, and left alerts "pending"
    for ever when no target was configured, without a word."""
    from engine.core import alerts
    from engine.store import outbox
    from tests.support import make_runtime

    config = setup(tmp_path)
    assert run_cli("schedules", "apply", config=config, now=NOW).returncode == 0
    rt = make_runtime(f"sqlite:///{tmp_path / 'rf.db'}")
    with rt.store.write() as conn:
        for n in range(3):
            outbox.record_event(conn, event=alerts.AlertEvent.RUN_FAILED, dedupe_key=f"k{n}",
                                at=datetime(2026, 12, 2, 19, 30 + n, tzinfo=timezone.utc),
                                summary="platform-services-daily-report 2026-12-01: COLLECT_GIT failed with "
                                        "GIT_REPO_NOT_FOUND: no git repository at /srv/repositories/platform",
                                decision=alerts.decide_severity(alerts.AlertEvent.RUN_FAILED,
                                                                Criticality.NORMAL, 1),
                                schedule="platform-services-daily-report")
    rt.store.dispose()
    shown = lines_of("notifications", "list", config=config)
    assert max(map(len, shown)) <= 100, max(map(len, shown))
    text = "\n".join(shown)
    assert "no webhook or Apprise target is configured" in text and "not sent" in text
    assert "platform-services-daily-report" in text and "run_failed" in text
