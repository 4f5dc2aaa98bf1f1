"""Coverage: the replay of a real history, and what COLLECT_GIT costs by landing against ``git log``.

1. ``tests.reliability.replay``: this repository's history stretched into two months, daily,
   weekly and team schedules, late pushes, a force-push and back, outages of 3 and 11 days,
   a cron edit; on SQLite and PostgreSQL. Printed: per schedule and project, the commits in
   0, 1 and 2+ reports, and the share placed in the report whose span holds their landing.
2. On the 20,000-commit repository of ``bench_collect`` (``tests.fakes.gitrepo.build_large_repo``),
   a report by landing of one recent day and one mid-history day: ``collect_git.heads_at`` for
   both edges plus ``collect_git.collect_between`` (what a run does when no mark exists yet),
   against ``git log --numstat --no-merges UPPER --not LOWER``, side by side, the order
   alternating, ``--reps`` times.

Usage: ``.venv/bin/python bench/bench_replay.py [--reps 5]``
"""

from __future__ import annotations

import subprocess
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

import _common as c
import sqlalchemy as sa

from steps import collect_git
from tests.fakes.gitrepo import build_large_repo, git_env
from tests.reliability import replay


def replay_rows() -> tuple[list[list[str]], list[str]]:
    rows, notes = [], []
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp:
        root = Path(tmp)
        admin = sa.create_engine(c.PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
        name = f"rf_bench_replay_{uuid.uuid4().hex[:8]}"
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        pg_url = c.PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
        try:
            from engine.store import database

            engine = database.create_db_engine(pg_url)
            database.upgrade(engine)
            engine.dispose()
            for label, url, where in (("SQLite", f"sqlite:///{root / 'sqlite' / 'replay.db'}", root / "sqlite"),
                                      ("PostgreSQL", pg_url, root / "pg")):
                where.mkdir()
                result = replay.replay(url, where, seed=20260929)
                rows += [[label, *count.row()] for count in result.counts]
                notes.append(f"{label}: {result.cycles} cycles, {result.runs} runs, {result.seconds:.1f} s; "
                             f"COLLECT_GIT {result.collect_s:.2f} s in all against git log {result.git_log_s:.2f} s "
                             f"over the same ranges ({result.collect_s / max(result.git_log_s, 1e-9):.2f}x)")
        finally:
            admin.dispose()
            with sa.create_engine(c.PG_ADMIN_URL, isolation_level="AUTOCOMMIT").connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    return rows, notes


def cost_rows(reps: int) -> list[list[str]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-replay-git-") as tmp:
        large = build_large_repo(Path(tmp))
        heads = {"main": subprocess.run(["git", "rev-parse", "main"], cwd=large.repo.path, env=git_env(),
                                        capture_output=True, text=True, check=True).stdout.strip()}
        last_day = large.authored_at(large.commits - 1).replace(hour=0, minute=0, second=0, microsecond=0)
        middle = large.authored_at(large.commits // 2).replace(hour=0, minute=0, second=0, microsecond=0)
        for label, start in (("recent day", last_day), ("mid-history day", middle)):
            end = start + timedelta(days=1)
            ours, theirs, held = [], [], 0
            for rep in range(c.check_reps(reps)):
                def engine() -> int:
                    lower = collect_git.heads_at(large.repo.path, heads, start)
                    upper = collect_git.heads_at(large.repo.path, heads, end)
                    out = collect_git.collect_between(large.repo.path, ["main"], upper, lower, attribution="landed",
                                                      since=start, window_start=start, window_end=end)
                    return len(out.commits)

                def plain() -> int:
                    lower = collect_git.heads_at(large.repo.path, heads, start)["main"]
                    upper = collect_git.heads_at(large.repo.path, heads, end)["main"]
                    out = subprocess.run(["git", "log", "--numstat", "--no-merges", upper, "--not", lower, "--"],
                                         cwd=large.repo.path, env=git_env(), capture_output=True, check=True).stdout
                    return out.count(b"\ncommit ") + out.startswith(b"commit ")

                pair = [(ours, engine), (theirs, plain)]
                for bucket, fn in (pair if rep % 2 == 0 else pair[::-1]):
                    began = time.perf_counter()
                    held = fn()
                    bucket.append(time.perf_counter() - began)
            ratio = [a / b for a, b in zip(ours, theirs, strict=True)]
            rows.append([label, str(held), c.fmt(min(ours), "s"), c.fmt(min(theirs), "s"),
                         f"{sorted(ratio)[len(ratio) // 2]:.2f}x"])
    return rows


def main() -> None:
    args = c.parser(__doc__.splitlines()[0]).parse_args()
    c.announce("bench_replay")
    rows, notes = replay_rows()
    print(c.table(["database", "schedule", "project", "commits", "in none", "in one", "in 2+",
                   "placed when landed"], rows))
    for note in notes:
        print(f"- {note}")
    print()
    costs = cost_rows(args.reps)
    print(c.table(["window (20,000 commits)", "commits", "COLLECT_GIT by landing (best)", "git log (best)",
                   "median ratio"], costs))
    c.save("bench_replay", {"replay": rows, "notes": notes, "cost": costs, "machine": c.machine()})


if __name__ == "__main__":
    main()
