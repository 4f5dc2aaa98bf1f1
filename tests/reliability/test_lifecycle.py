"""Data lifecycle: ``prune``, ``[store] retain`` in ``serve``, ``db backup`` and a restore drill.

Every command is the real CLI in a subprocess on a shared ``--now T@E``
clock. What counts is what a user sees afterwards: the rows left, the audit
summary, what a later backfill would create, the files and Notion pages.
"""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, func, select

from engine.store.tables import artifacts, attempts, audit_events, runs, steps
from tests.acceptance import procs
from tests.fakes.fake_notion import FakeNotion
from tests.reliability.harness import daily_history, daily_schedule, page_key, poll, report_config, sqlite_runs
from tests.support import REPO_ROOT, utc, write_config

pytestmark = pytest.mark.slow

APPLIED = utc(2026, 3, 1)
ECHO_DAILY = dict(name="e-daily", workflow="echo", project="p1", cron="0 9 * * *", timezone="Asia/Seoul",
                  misfire="CATCH_UP_ALL", overlap="ALLOW", catchup_window="30d")


def _cli(tmp: Path, config: Path, *args: str, now: str, ok: bool = True) -> Any:
    done = procs.run(tmp, config, *args, now=now)
    if ok:
        assert done.returncode == 0, f"{args} exited {done.returncode}: {done.stdout}{done.stderr[-3000:]}"
    return done


def _json(done: Any) -> Any:
    return json.loads(done.stdout)


def _counts(url: str) -> dict[str, int]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            found = {t.name: int(conn.execute(select(func.count()).select_from(t)).scalar() or 0)
                     for t in (runs, steps, attempts, artifacts)}
            for child in (steps, attempts, artifacts):
                orphans = conn.execute(select(func.count()).select_from(child)
                                       .where(child.c.run_id.not_in(select(runs.c.id)))).scalar()
                found[f"orphan_{child.name}"] = int(orphans or 0)
            return found
    finally:
        engine.dispose()


def _prune_events(url: str) -> list[dict[str, Any]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [dict(r.after) for r in conn.execute(select(audit_events.c.after)
                                                        .where(audit_events.c.action == "runs_pruned"))]
    finally:
        engine.dispose()


def test_prune_shows_the_count_and_asks_and_only_yes_removes(sqlite_url: str, tmp_path: Path) -> None:
    config = write_config(tmp_path / "reportflow.toml", db_url=sqlite_url, schedules=[ECHO_DAILY])
    now = (APPLIED + timedelta(days=6, hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    _cli(tmp_path, config, "schedules", "apply", now="2026-02-28T23:00:00Z")
    _cli(tmp_path, config, "tick", now=now)
    _cli(tmp_path, config, "work", "--until-idle", now=now)
    before = _counts(sqlite_url)

    def prune(answer: str) -> Any:
        return subprocess.run(procs.command(config, now, "prune", "--before", "2026-03-05"), input=answer,
                              capture_output=True, text=True, env=procs.env_for(tmp_path, None),
                              cwd=REPO_ROOT, timeout=180)

    for answer in ("n\n", ""):  # a refusal, and a script that forgot --yes (no answer at all)
        declined = prune(answer)
        assert declined.returncode == 2, declined.stderr
        assert "remove 4 finished runs" in declined.stderr and "nothing removed" in declined.stderr
        assert _counts(sqlite_url) == before
    accepted = prune("y\n")
    assert accepted.returncode == 0, accepted.stderr
    assert "removed 4 finished runs" in accepted.stdout
    assert _counts(sqlite_url)["runs"] == before["runs"] - 4


def test_prune_removes_finished_old_runs_only_and_backfill_does_not_redo_them(store_url: str, tmp_path: Path) -> None:
    config = write_config(tmp_path / "reportflow.toml", db_url=store_url, schedules=[ECHO_DAILY],
                          sections={"worker": {"poll_interval": "0.2s"}})
    clock = procs.Shared(APPLIED + timedelta(days=20, hours=1))  # 2026-03-21T01:00Z: 21 daily slots are due
    _cli(tmp_path, config, "schedules", "apply", now="2026-02-28T23:00:00Z")
    _cli(tmp_path, config, "tick", now=clock.at())
    listed = {r["business_key"][:10]: r for r in _json(_cli(tmp_path, config, "runs", "list", "--json",
                                                            "--limit", "0", now=clock.at()))}
    assert len(listed) == 21, sorted(listed)
    for day in ("2026-03-03", "2026-03-04"):
        _cli(tmp_path, config, "runs", "cancel", str(listed[day]["id"]), now=clock.at())
    _cli(tmp_path, config, "work", "--until-idle", now=clock.at())
    # An old run an operator sent back: unfinished, so no prune may touch it.
    _cli(tmp_path, config, "runs", "retry", str(listed["2026-03-05"]["id"]), "--from-step", "ECHO", now=clock.at())
    before = _counts(store_url)

    bad = _cli(tmp_path, config, "prune", "--before", "2026-04-01", "--yes", now=clock.at(), ok=False)
    assert bad.returncode == 2 and "in the future" in bad.stderr, bad.stderr
    dry = _json(_cli(tmp_path, config, "prune", "--before", "2026-03-15", "--dry-run", "--json", now=clock.at()))
    assert dry["removed"] == 13 and dry["counts"] == {"CANCELLED": 2, "SUCCESS": 11}, dry
    assert _counts(store_url) == before, "a dry run changed the database"

    done = _json(_cli(tmp_path, config, "prune", "--before", "2026-03-15", "--yes", "--json", now=clock.at()))
    assert done["removed"] == 13 and done["counts"] == {"CANCELLED": 2, "SUCCESS": 11}, done
    after = _counts(store_url)
    assert after["runs"] == 21 - 13
    assert after["orphan_steps"] == after["orphan_attempts"] == after["orphan_artifacts"] == 0
    assert after["steps"] == before["steps"] - 11 and after["attempts"] < before["attempts"]  # cancelled runs had no steps
    left = {r["business_key"][:10]: r["status"] for r in _json(_cli(tmp_path, config, "runs", "list", "--json",
                                                                     "--limit", "0", now=clock.at()))}
    assert left["2026-03-05"] == "QUEUED", "the unfinished old run was pruned"
    assert sorted(k for k in left if k != "2026-03-05") == [f"2026-03-{d}" for d in range(15, 22)]
    events = _prune_events(store_url)
    assert sum(sum(e["counts"].values()) for e in events) == 13
    assert min(e["first"] for e in events) == "2026-03-01" and max(e["last"] for e in events) == "2026-03-14"

    again = _json(_cli(tmp_path, config, "prune", "--before", "2026-03-15", "--yes", "--json", now=clock.at()))
    assert again["removed"] == 0, again

    # A backfill over the pruned days makes nothing (no report twice); asked to, it does.
    report = _json(_cli(tmp_path, config, "backfill", "e-daily", "--from", "2026-03-01", "--to", "2026-03-20",
                        "--json", now=clock.at()))
    assert report["created"] == [] and len(report["pruned"]) == 13, report
    assert _counts(store_url)["runs"] == 8
    redo = _json(_cli(tmp_path, config, "backfill", "e-daily", "--from", "2026-03-01", "--to", "2026-03-20",
                      "--include-pruned", "--dry-run", "--json", now=clock.at()))
    assert len(redo["created"]) == 13 and redo["pruned"] == [], redo


def test_serve_applies_retain_once_it_starts(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'rf.db'}"
    config = write_config(tmp_path / "reportflow.toml", schedules=[ECHO_DAILY],
                          sections={"store": {"url": url, "retain": "10d"}, "worker": {"poll_interval": "0.2s"}})
    clock = procs.Shared(APPLIED + timedelta(days=20, hours=1))
    _cli(tmp_path, config, "schedules", "apply", now="2026-02-28T23:00:00Z")
    _cli(tmp_path, config, "tick", now=clock.at())
    _cli(tmp_path, config, "work", "--until-idle", now=clock.at())
    serve = procs.spawn(tmp_path, config, "serve", now=clock.at())
    try:
        poll(lambda: bool(_prune_events(url)), 60, "serve to prune by [store] retain")
    finally:
        serve.send_signal(signal.SIGTERM)
        _, log = procs.finish(serve, timeout=60)
    assert serve.returncode == 143, log[-3000:]  # stopped by SIGTERM (128 + 15)
    left = sorted(r.business_key[:10] for r in sqlite_runs(tmp_path / "rf.db").values())
    # Today is 2026-03-21 (UTC), retain 10d: periods before 2026-03-11 went.
    assert left == [f"2026-03-{d}" for d in range(11, 22)], left


def test_db_backup_refuses_postgres_with_the_pg_dump_equivalent(pg_url: str, tmp_path: Path) -> None:
    config = write_config(tmp_path / "reportflow.toml", db_url=pg_url, schedules=[ECHO_DAILY])
    done = _cli(tmp_path, config, "db", "backup", str(tmp_path / "copy.db"), now="2026-03-01T00:00:00Z", ok=False)
    assert done.returncode == 2, done.stderr
    assert "pg_dump -Fc" in done.stderr and "pg_restore" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "copy.db").exists()


def _big_install(tmp: Path) -> Path:
    """An install whose database holds 300 MiB (a copy takes a noticeable moment: a signal lands inside it)."""
    config = write_config(tmp / "reportflow.toml", db_url="sqlite:///rf.db", schedules=[ECHO_DAILY])
    _cli(tmp, config, "schedules", "apply", now="2026-03-01T00:00:00Z")
    db = sqlite3.connect(tmp / "rf.db")
    try:
        db.execute("CREATE TABLE ballast (x BLOB)")
        for _ in range(30):
            db.execute("INSERT INTO ballast VALUES (zeroblob(10 * 1024 * 1024))")
        db.commit()
    finally:
        db.close()
    return config


def _partials(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".partial" in p.name)


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_a_backup_stopped_midway_leaves_no_partial_copy(tmp_path: Path, how: signal.Signals) -> None:
    """Issue 36, item 19: ``kill -9`` during ``db backup`` left a partial copy of hundreds of MB until the
    same destination was tried again. SIGTERM and Ctrl-C now remove it on the way out; after a SIGKILL,
    the next backup into that folder removes it, whatever its destination."""
    config = _big_install(tmp_path)
    out = tmp_path / "backups"
    out.mkdir()
    proc = procs.spawn(tmp_path, config, "db", "backup", str(out / "first.db"), now="2026-03-01T00:00:00Z")
    procs.wait_for(lambda: bool(_partials(out)) or proc.poll() is not None, 60, "the partial copy")
    assert proc.poll() is None, "the copy ended before the signal could land inside it"
    proc.send_signal(how)
    procs.finish(proc, timeout=60)
    assert not (out / "first.db").exists()
    if how is signal.SIGKILL:
        assert ".first.db.partial" in _partials(out)  # nobody was left to remove it (nor its journal)...
        _cli(tmp_path, config, "db", "backup", str(out / "second.db"), now="2026-03-01T00:00:00Z")
        assert (out / "second.db").exists()  # ...the next try does
    else:
        assert proc.returncode != 0
    assert _partials(out) == []


def test_a_backup_leaves_a_partial_copy_another_backup_is_writing(tmp_path: Path) -> None:
    """The stale-partial sweep takes only copies nobody holds: a live one keeps its lock."""
    import fcntl

    from engine.store import backup

    folder = tmp_path / "out"
    folder.mkdir()
    live = folder / ".live.db.partial"
    stale = folder / ".stale.db.partial"
    other = folder / ".notes.partial"
    live.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    stale.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    (folder / ".stale.db.partial-journal").write_bytes(b"j")
    other.write_text("not a database")
    with live.open("rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        assert backup.remove_stale_partials(folder) == [stale]
    assert sorted(p.name for p in folder.iterdir()) == [".live.db.partial", ".notes.partial"]


# --- restore drill ---------------------------------------------------------------------------------

PROJECT = "drill"
TOKEN_ENV = "RF_DRILL_NOTION_TOKEN"
DAYS = 5  # periods 2026-02-28 (no commits: no report, on_empty = skip) to 2026-03-05


def test_backup_mid_load_restores_and_work_continues_without_duplicates(tmp_path: Path) -> None:
    repo = daily_history(tmp_path, utc(2026, 3, 1), DAYS + 1)
    reports = tmp_path / "shared-reports"
    with FakeNotion(token="secret_drill_token") as notion:
        def make(folder: Path) -> Path:
            folder.mkdir(exist_ok=True)
            return report_config(folder, db_url="sqlite:///rf.db", repo=repo.path, project=PROJECT,
                                 reports_dir=str(reports),
                                 schedules=[daily_schedule("drill-daily", PROJECT, catchup_window="30d")],
                                 worker={"lease": "30s"},
                                 notion={"enabled": True, "token_env": TOKEN_ENV,
                                         "database_id": notion.database_id, "base_url": notion.url})

        env = {TOKEN_ENV: notion.token}
        live, restored = tmp_path / "live", tmp_path / "restored"
        config = make(live)
        clock = procs.Shared(utc(2026, 3, 1, 9) + timedelta(days=DAYS, minutes=30))
        assert procs.run(live, config, "schedules", "apply", now="2026-03-01T08:00:00Z", env=env).returncode == 0
        assert procs.run(live, config, "tick", now=clock.at(), env=env).returncode == 0
        assert len(sqlite_runs(live / "rf.db")) == DAYS + 1

        # Mid-load by construction: after two pages, uploads wait at Notion (outside any transaction)
        # until the backup is taken, so both workers hold a RUNNING run while it is copied.
        notion.hold_creates_after(2)
        workers = [procs.spawn(live, config, "work", "--until-idle", now=clock.at(), env=env) for _ in range(2)]
        try:
            poll(lambda: notion.held == 2, 120, "both workers to wait at the Notion upload")
            backup = _cli_env(live, config, env, "db", "backup", str(tmp_path / "backup.db"), now=clock.at())
            assert "backed up" in backup.stdout
        finally:
            notion.release_creates()
            outs = [procs.finish(w, timeout=300) for w in workers]
        assert all(w.returncode == 0 for w in workers), [log[-2000:] for _, log in outs]
        at_backup = sqlite_runs(tmp_path / "backup.db")
        unfinished = [k for k, r in at_backup.items() if r.status != "SUCCESS"]
        assert unfinished, "the backup was not taken mid-load: every run had already finished"
        check = sqlite3.connect(tmp_path / "backup.db")
        try:
            assert check.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        finally:
            check.close()
        assert all(r.status == "SUCCESS" for r in sqlite_runs(live / "rf.db").values())
        pages_before = len(notion.pages)

        # The live install is gone; restore the backup into a new folder (the reports and Notion survive).
        config2 = make(restored)
        shutil.copy(tmp_path / "backup.db", restored / "rf.db")
        doctor = procs.run(restored, config2, "doctor", "--json", now=clock.at(30), env=env)
        problems = [f for f in json.loads(doctor.stdout) if f.get("problem")]
        assert all(f["check"] in ("runs", "notion") or "stalled" in f["message"] for f in problems), problems
        later = clock.at(300)  # past the 30 s lease of the runs the backup caught RUNNING
        assert procs.run(restored, config2, "reconcile", now=later, env=env).returncode == 0
        resumed = procs.run(restored, config2, "work", "--until-idle", now=later, env=env)
        assert resumed.returncode == 0, resumed.stderr[-3000:]

        final = sqlite_runs(restored / "rf.db")
        assert sorted(final) == sorted(at_backup) and all(r.status == "SUCCESS" for r in final.values()), \
            {k: r.status for k, r in final.items()}
        # Every commit in exactly one report; a period whose commits a neighbour's report took (workers ran the
        # periods out of order and one reached back over it, saying "Also covers") has no file of its own.
        held = _held_commits(restored / "rf.db")
        every = [sha for shas in held.values() for sha in shas]
        reported = sorted(held)
        last_day = reported[-1].rsplit(":", 1)[1]  # commits of the days after the last period are for a later one
        due = {sha for sha, day in (line.split() for line in repo.git("log", "--format=%H %cs").splitlines())
               if day <= last_day}
        assert len(every) == len(set(every)) and set(every) == due, held
        files = sorted(p.name for p in (reports / PROJECT).iterdir())
        assert files == [f"{k.rsplit(':', 1)[1]}-{PROJECT}-daily-summary.md" for k in reported], files
        keys = Counter(page_key(p) for p in notion.pages.values() if not p.get("in_trash") and not p.get("archived"))
        assert sorted(keys) == reported and set(keys.values()) == {1}, keys
        assert len(notion.pages) == len(reported), f"a page was made twice across the restore ({pages_before} before)"
        final_doctor = procs.run(restored, config2, "doctor", now=later, env=env)
        assert final_doctor.returncode == 0, final_doctor.stdout[-3000:]


def _held_commits(db: Path) -> dict[str, list[str]]:
    """The SHAs each run's COLLECT_GIT holds (with those that arrived late), for the runs that hold any."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        rows = conn.execute("SELECT r.idempotency_key, s.output FROM runs r JOIN steps s ON s.run_id = r.id "
                            "WHERE s.name = 'COLLECT_GIT' AND s.output IS NOT NULL").fetchall()
    finally:
        conn.close()
    held = {}
    for key, output in rows:
        data = json.loads(output)
        shas = [c["sha"] for c in [*data["commits"], *data.get("arrived_late", [])]]
        if shas:
            held[key] = shas
    return held


def _cli_env(tmp: Path, config: Path, env: dict[str, str], *args: str, now: str) -> Any:
    done = procs.run(tmp, config, *args, now=now, env=env)
    assert done.returncode == 0, f"{args} exited {done.returncode}: {done.stdout}{done.stderr[-3000:]}"
    return done


def test_a_backup_is_fsynced_before_its_rename_and_its_folder_after(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.store import backup, database

    engine = database.create_db_engine(f"sqlite:///{tmp_path / 'live.db'}")
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (x)")
    synced: list[tuple[str, bool]] = []
    real_fsync = backup._fsync

    def watching(path: Path) -> None:
        synced.append((path.name, (tmp_path / "copy.db").exists()))
        real_fsync(path)

    monkeypatch.setattr(backup, "_fsync", watching)
    try:
        backup.backup_sqlite(engine, tmp_path / "copy.db")
    finally:
        engine.dispose()
    assert synced == [(".copy.db.partial", False), (tmp_path.name, True)]
