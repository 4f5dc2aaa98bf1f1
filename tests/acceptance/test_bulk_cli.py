"""Bulk actions through the real CLI (SPEC §15.5): `runs retry --schedule`, `runs approve --schedule --all` and
`trigger --from/--to` list with --dry-run, ask unless --yes, and a declined or unanswered prompt exits 2 having
changed nothing. On SQLite: the wording and the prompts are the CLI's; the SQL of each bulk action runs on both
databases in tests/integration/test_bulk_actions.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from sqlalchemy import create_engine, func, select

from engine.store.tables import audit_events, runs
from tests.acceptance import procs
from tests.support import REPO_ROOT, write_config

NOW = "2026-09-29T10:00:00Z"


def answered(tmp: Path, config: Path, answer: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The command with ``answer`` typed at its prompt ("" is a script that gives none)."""
    return subprocess.run(procs.command(config, NOW, *args), input=answer, capture_output=True, text=True,
                          env=procs.env_for(tmp), cwd=REPO_ROOT, timeout=180)


def snapshot(url: str) -> tuple[list[tuple[int, str, int]], int]:
    """Every run's (id, status, attempts) and the number of audit events: what "changed nothing" compares."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            rows = [(r.id, r.status, r.attempt_count) for r in
                    conn.execute(select(runs.c.id, runs.c.status, runs.c.attempt_count).order_by(runs.c.id))]
            return rows, int(conn.execute(select(func.count()).select_from(audit_events)).scalar_one())
    finally:
        engine.dispose()


def listed(tmp: Path, config: Path) -> dict[str, str]:
    found = json.loads(procs.ok(procs.run(tmp, config, "runs", "list", "--json", "--limit", "0", now=NOW)))
    return {r["business_key"][:10]: r["status"] for r in found if r["revision"] == 1}


def test_runs_retry_for_a_schedule_lists_asks_and_retries_the_runs_shown(sqlite_url: str, tmp_path: Path) -> None:
    schedules = [dict(name="four", workflow="four_steps", project="p1", cron="0 9 * * *", timezone="UTC")]
    config = write_config(tmp_path / "reportflow.toml", db_url=sqlite_url, schedules=schedules, sections={
        "worker": {"max_attempts": 1},
        "testflow": {"log": str(tmp_path / "steps.log"), "fail_code": "NOTION_UNAUTHORIZED"},
        "testflow.fail": {"FOUR": 1}})
    procs.ok(procs.run(tmp_path, config, "schedules", "apply", now=NOW))
    procs.ok(procs.run(tmp_path, config, "backfill", "four", "--from", "2026-09-20", "--to", "2026-09-26", now=NOW))
    procs.ok(procs.run(tmp_path, config, "work", "--until-idle", now=NOW))  # Notion refused all week
    assert set(listed(tmp_path, config).values()) == {"PARTIAL_SUCCESS"}
    before = snapshot(sqlite_url)

    dry = procs.ok(procs.run(tmp_path, config, "runs", "retry", "--schedule", "four", "--dry-run", now=NOW))
    assert "would retry 7 run(s): FAILED, PARTIAL_SUCCESS runs of four" in dry
    assert dry.count("PARTIAL_SUCCESS NOTION_UNAUTHORIZED") == 7
    for answer in ("n\n", ""):  # a refusal, and a script that forgot --yes
        declined = answered(tmp_path, config, answer, "runs", "retry", "--schedule", "four")
        assert declined.returncode == 2, declined.stderr
        assert "retry 7 run(s)" in declined.stderr and "nothing retried: not confirmed" in declined.stderr
        assert snapshot(sqlite_url) == before
    for bad in (["--status", "SUCCESS"], ["--from", "2026-09-24", "--to", "2026-09-22"], ["--from", "Tuesday"],
                ["--from-step", "TWO"]):
        refused = procs.run(tmp_path, config, "runs", "retry", "--schedule", "four", "--yes", *bad, now=NOW)
        assert refused.returncode == 2, (bad, refused.stderr)
    assert procs.run(tmp_path, config, "runs", "retry", "1", "--schedule", "four", now=NOW).returncode == 2
    assert procs.run(tmp_path, config, "runs", "retry", "--schedule", "nope", "--yes", now=NOW).returncode == 2
    assert snapshot(sqlite_url) == before

    accepted = answered(tmp_path, config, "y\n", "runs", "retry", "--schedule", "four", "--status",
                        "FAILED,PARTIAL_SUCCESS", "--from", "2026-09-22", "--to", "2026-09-24")
    assert accepted.returncode == 0, accepted.stderr
    assert "retried 3 run(s) of four" in accepted.stdout
    rest = json.loads(procs.ok(procs.run(tmp_path, config, "runs", "retry", "--schedule", "four", "--yes", "--json",
                                   now=NOW)))
    assert (rest["done"], rest["skipped"]) == (4, 0)
    procs.ok(procs.run(tmp_path, config, "work", "--until-idle", now=NOW))
    assert set(listed(tmp_path, config).values()) == {"SUCCESS"}
    nothing = procs.ok(procs.run(tmp_path, config, "runs", "retry", "--schedule", "four", now=NOW))  # nothing to ask
    assert "would retry 0 run(s)" in nothing


def test_approve_all_and_trigger_a_range(sqlite_url: str, tmp_path: Path) -> None:
    schedules = [dict(name="m", workflow="echo", project="p", cron="0 9 * * *", timezone="UTC", misfire="MANUAL")]
    config = write_config(tmp_path / "reportflow.toml", db_url=sqlite_url, schedules=schedules)
    procs.ok(procs.run(tmp_path, config, "schedules", "apply", now="2026-09-25T10:00:00Z"))
    procs.ok(procs.run(tmp_path, config, "tick", now=NOW))  # four days down: 09-26 .. 09-29 wait for a person
    assert listed(tmp_path, config) == {f"2026-09-{d}": "MANUAL_REQUIRED" for d in (26, 27, 28, 29)}
    before = snapshot(sqlite_url)
    assert procs.run(tmp_path, config, "runs", "approve", "--schedule", "m", now=NOW).returncode == 2  # no --all
    declined = answered(tmp_path, config, "no\n", "runs", "approve", "--schedule", "m", "--all")
    assert declined.returncode == 2 and "nothing approved" in declined.stderr
    dry = json.loads(procs.ok(procs.run(tmp_path, config, "runs", "approve", "--schedule", "m", "--all", "--dry-run",
                                  "--json", now=NOW)))
    assert [r["business_key"][:10] for r in dry["runs"]] == ["2026-09-26", "2026-09-27", "2026-09-28", "2026-09-29"]
    assert snapshot(sqlite_url) == before
    accepted = answered(tmp_path, config, "y\n", "runs", "approve", "--schedule", "m", "--all")
    assert accepted.returncode == 0 and "approved 4 run(s) of m" in accepted.stdout, accepted.stderr

    trigger_dry = procs.ok(procs.run(tmp_path, config, "trigger", "m", "--from", "2026-09-23", "--to", "2026-09-30",
                               "--dry-run", now=NOW))
    assert "would trigger 7 period(s): created 3, unchanged 4" in trigger_dry and "not yet due" in trigger_dry
    after_approve = snapshot(sqlite_url)
    refused = answered(tmp_path, config, "", "trigger", "m", "--from", "2026-09-23", "--to", "2026-09-30")
    assert refused.returncode == 2 and "nothing triggered" in refused.stderr
    assert snapshot(sqlite_url) == after_approve
    procs.ok(procs.run(tmp_path, config, "trigger", "m", "--from", "2026-09-23", "--to", "2026-09-30", "--yes", now=NOW))
    procs.ok(procs.run(tmp_path, config, "work", "--until-idle", now=NOW))
    assert listed(tmp_path, config) == {f"2026-09-{d}": "SUCCESS" for d in range(23, 30)}

