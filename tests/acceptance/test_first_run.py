"""What a new user does first: the demo on this repository's history, and `init` on their own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.support import REPO_ROOT, run_cli

pytestmark = pytest.mark.slow


def test_the_demo_config_reports_on_this_repository(tmp_path: Path) -> None:
    """scripts/demo.sh without the venv set-up: a clone, the demo config, backfill, work."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO_ROOT), str(clone)], check=True)
    shutil.copy(REPO_ROOT / "demo.toml", clone / "demo.toml")
    config = clone / "demo.toml"
    first_day = subprocess.run(["git", "log", "--reverse", "--date=short", "--format=%ad"], cwd=clone,
                               capture_output=True, text=True, check=True).stdout.split()[0]
    today = datetime.now(UTC).date().isoformat()
    assert run_cli("schedules", "apply", config=config).returncode == 0
    for name in ("reportflow-daily", "reportflow-weekly"):
        result = run_cli("backfill", name, "--from", first_day, "--to", today, config=config)
        assert result.returncode == 0, result.stderr
    worked = run_cli("work", "--until-idle", config=config)
    assert worked.returncode == 0, worked.stderr
    runs = json.loads(run_cli("runs", "list", "--json", config=config).stdout)
    assert runs and {r["status"] for r in runs} == {"SUCCESS"}
    reports = sorted((clone / "reports" / "reportflow").glob("*.md"))
    assert any("-daily-summary" in p.name for p in reports)
    # A week's report comes once a whole ISO week of the history has ended (its slot is the Monday after).
    weekly_runs = [r for r in runs if r["workflow"] == "weekly_report"]
    assert bool(weekly_runs) == any("-weekly-summary" in p.name for p in reports)
    assert "# Daily report: reportflow" in next(p for p in reports if "daily" in p.name).read_text()
    # A second pass creates nothing and rewrites nothing.
    before = {p: p.read_bytes() for p in reports}
    again = run_cli("backfill", "reportflow-daily", "--from", first_day, "--to", today, "--json", config=config)
    assert json.loads(again.stdout)["created"] == []
    assert run_cli("work", "--until-idle", config=config).returncode == 0
    assert {p: p.read_bytes() for p in sorted((clone / "reports" / "reportflow").glob("*.md"))} == before


def test_init_writes_a_config_that_runs(tmp_path: Path) -> None:
    repo = tmp_path / "my-service"
    subprocess.run(["git", "clone", "-q", str(REPO_ROOT), str(repo)], check=True)
    config = tmp_path / "reportflow.toml"
    made = run_cli("init", "--repo", str(repo), "--timezone", "Asia/Seoul", config=config)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / ".reportflow" / "reportflow.db").exists()
    text = config.read_text()
    assert 'key = "my-service"' in text and 'timezone = "Asia/Seoul"' in text
    assert run_cli("init", "--repo", str(repo), config=config).returncode == 2  # never overwrites silently
    applied = run_cli("schedules", "apply", config=config)
    assert "created: my-service-daily, my-service-weekly" in applied.stdout
    listed = json.loads(run_cli("schedules", "list", "--json", config=config).stdout)
    assert [s["next_run_local"][-6:] for s in listed] == ["+09:00", "+09:00"]
    assert run_cli("trigger", "my-service-weekly", config=config).returncode == 0
    assert run_cli("work", "--until-idle", config=config).returncode == 0
    (run,) = json.loads(run_cli("runs", "list", "--json", config=config).stdout)
    assert run["status"] == "SUCCESS" and run["trigger"] == "MANUAL"


def test_init_takes_several_repositories_and_says_what_to_run_next(tmp_path: Path) -> None:
    """Issue 43, item 8: ``init`` took one ``--repo``; a second project meant editing the file by hand."""
    from tests.fakes.gitrepo import make_repo

    api, web = make_repo(tmp_path, "api"), make_repo(tmp_path / "other", "api")  # two folders named alike
    config = tmp_path / "reportflow.toml"
    made = run_cli("init", "--repo", str(api.path), "--repo", str(web.path), "--timezone", "Asia/Seoul",
                   config=config)
    assert made.returncode == 0, made.stderr
    assert "(4 schedules)" in made.stdout and "next: `reportflow schedules apply`" in made.stdout
    assert "reportflow serve" in made.stdout and "reportflow cycle" in made.stdout
    applied = run_cli("schedules", "apply", config=config)
    assert applied.returncode == 0 and "created: api-daily, api-weekly, api-2-daily, api-2-weekly" in applied.stdout
    assert "api-weekly: 1 run a week, 4 runs in" in applied.stdout  # not "1 runs/day"


def test_init_and_cycle_report_every_commit_of_the_next_day(tmp_path: Path) -> None:
    """A fresh clone, ``init``, and ``cycle`` at two slots: the second report holds what landed in between."""
    repo = tmp_path / "service"
    subprocess.run(["git", "clone", "-q", str(REPO_ROOT), str(repo)], check=True)
    last = int(subprocess.run(["git", "log", "-1", "--format=%ct"], cwd=repo, capture_output=True, text=True,
                              check=True).stdout)
    day = datetime.fromtimestamp(last, UTC).date()
    first = datetime(day.year, day.month, day.day, 19, 30, tzinfo=UTC) + timedelta(days=1)
    config = tmp_path / "reportflow.toml"
    assert run_cli("init", "--repo", str(repo), "--timezone", "UTC", config=config).returncode == 0
    assert run_cli("schedules", "apply", config=config, now=iso(first - timedelta(hours=1))).returncode == 0
    assert run_cli("cycle", config=config, now=iso(first + timedelta(seconds=30))).returncode == 0

    def commit(message: str, at: datetime, *extra: str) -> str:
        stamp = f"@{int(at.timestamp())} +0000"
        env = {**os.environ, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp, "GIT_AUTHOR_NAME": "Dev",
               "GIT_AUTHOR_EMAIL": "dev@example.com", "GIT_COMMITTER_NAME": "Dev",
               "GIT_COMMITTER_EMAIL": "dev@example.com"}
        (repo / f"{message}.txt").write_text(message)
        subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
        subprocess.run(["git", "commit", "-q", "-m", message, *extra], cwd=repo, env=env, check=True)
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True,
                              check=True).stdout.strip()

    branch = subprocess.run(["git", "rev-parse", "--abbrev-ref", "HEAD"], cwd=repo, capture_output=True,
                            text=True, check=True).stdout.strip()
    subprocess.run(["git", "checkout", "-q", "-b", "feature"], cwd=repo, check=True)
    old = commit("authored three days before its merge", first - timedelta(days=3))
    subprocess.run(["git", "checkout", "-q", branch], cwd=repo, check=True)
    morning = commit("the next morning", first + timedelta(hours=14))
    env = {**os.environ, "GIT_AUTHOR_DATE": f"@{int((first + timedelta(hours=15)).timestamp())} +0000",
           "GIT_COMMITTER_DATE": f"@{int((first + timedelta(hours=15)).timestamp())} +0000",
           "GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@example.com", "GIT_COMMITTER_NAME": "Dev",
           "GIT_COMMITTER_EMAIL": "dev@example.com"}
    subprocess.run(["git", "merge", "-q", "--no-ff", "-m", "merge feature", "feature"], cwd=repo, env=env, check=True)
    evening = commit("just before the slot", first + timedelta(hours=23, minutes=59))
    second = first + timedelta(days=1)
    assert run_cli("cycle", config=config, now=iso(second + timedelta(seconds=30))).returncode == 0
    runs = json.loads(run_cli("runs", "list", "--json", "--limit", "0", config=config,
                              now=iso(second + timedelta(minutes=1))).stdout)
    (latest,) = [r for r in runs if r["idempotency_key"] == f"daily_report:service:{second.date().isoformat()}"]
    shown = json.loads(run_cli("runs", "show", str(latest["id"]), "--json", config=config,
                               now=iso(second + timedelta(minutes=1))).stdout)
    held = [c["sha"] for c in shown["steps"][0]["output"]["commits"]]
    assert sorted(held) == sorted([old, morning, evening])
    report = (tmp_path / "reports" / "service" / f"{second.date().isoformat()}-service-daily-summary.md").read_text()
    assert "**Covers:** the commits that landed on the tracked branches during" in report


def iso(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_apply_warns_when_a_projects_repository_is_not_on_this_node(tmp_path: Path) -> None:
    """Issue 43, item 8: a typo in ``projects[].repo`` was applied without a word (the runs then wait for a node
    that has it); another node may have it, so a warning, not a refusal."""
    from tests.support import write_config

    config = write_config(tmp_path / "reportflow.toml", db_url=f"sqlite:///{tmp_path / 'rf.db'}",
                          projects=[dict(key="p", repo=str(tmp_path / "no-such-clone"), branches=["main"])],
                          schedules=[dict(name="p-daily", workflow="daily_report", project="p", cron="30 19 * * *",
                                          timezone="UTC")])
    applied = run_cli("schedules", "apply", config=config)
    assert applied.returncode == 0 and "created: p-daily" in applied.stdout
    assert "project 'p' cannot be served on this node" in applied.stderr + applied.stdout


def test_a_misspelled_schedule_name_gets_a_suggestion(tmp_path: Path) -> None:
    """Issue 43, item 8: "did you mean" for schedule names, at 3 a.m."""
    from tests.support import write_config

    config = write_config(tmp_path / "reportflow.toml", db_url=f"sqlite:///{tmp_path / 'rf.db'}",
                          schedules=[dict(name="platform-daily", workflow="echo", project="p", cron="30 19 * * *",
                                          timezone="UTC")])
    assert run_cli("schedules", "apply", config=config).returncode == 0
    wrong = run_cli("trigger", "platfrom-daily", config=config)
    assert wrong.returncode != 0 and "did you mean 'platform-daily'?" in wrong.stderr
    far = run_cli("trigger", "weekly-ops", config=config)
    assert far.returncode == wrong.returncode and "did you mean" not in far.stderr


def test_runs_list_sorts_by_creation_too(tmp_path: Path) -> None:
    """Issue 43, item 8: after a backfill of last month the new runs were buried under yesterday's."""
    from tests.support import write_config

    config = write_config(tmp_path / "reportflow.toml", db_url=f"sqlite:///{tmp_path / 'rf.db'}",
                          schedules=[dict(name="e", workflow="echo", project="p", cron="0 3 * * *", timezone="UTC")])
    now = "2026-10-10T12:00:00Z"
    assert run_cli("schedules", "apply", config=config, now=now).returncode == 0
    assert run_cli("trigger", "e", "--date", "2026-10-09", config=config, now=now).returncode == 0
    assert run_cli("backfill", "e", "--from", "2026-09-01", "--to", "2026-09-03", config=config, now=now).returncode == 0
    by_slot = [r["business_key"] for r in json.loads(run_cli("runs", "list", "--json", config=config, now=now).stdout)]
    by_made = [r["business_key"] for r in json.loads(
        run_cli("runs", "list", "--sort", "created", "--json", config=config, now=now).stdout)]
    days = [key[:10] for key in by_slot], [key[:10] for key in by_made]  # echo's periods are its slots
    assert days[0] == ["2026-10-09", "2026-09-03", "2026-09-02", "2026-09-01"]
    assert days[1] == ["2026-09-03", "2026-09-02", "2026-09-01", "2026-10-09"]
    assert run_cli("runs", "list", "--sort", "age", config=config, now=now).returncode == 2
