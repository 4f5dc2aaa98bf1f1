"""CI's witness of the README's first command, read from outside reportflow.

``snapshot OUT``: the demo left daily reports (and weekly ones once a week of history has ended); record every report's
bytes (sha256) and mtime, and the number of runs in the demo database.
``compare SNAPSHOT --setup-ms N``: a second demo created no run and rewrote no
file, and its set-up took under 3 s.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sqlite3
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / "reports"
DATABASE = ROOT / ".reportflow" / "demo.db"
SETUP_LIMIT_MS = 3000


def observe() -> dict[str, object]:
    files = {
        str(path.relative_to(ROOT)): {"sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                                      "mtime_ns": path.stat().st_mtime_ns}
        for path in sorted(REPORTS.rglob("*.md"))
    }
    with sqlite3.connect(f"file:{DATABASE}?mode=ro", uri=True) as conn:
        runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
        statuses = dict(conn.execute("SELECT status, count(*) FROM runs GROUP BY status").fetchall())
        weekly_runs = conn.execute("SELECT count(*) FROM runs WHERE workflow = 'weekly_report'").fetchone()[0]
    return {"files": files, "runs": runs, "statuses": statuses, "weekly_runs": weekly_runs}


def fail(message: str) -> None:
    print(f"ci: demo check failed: {message}", file=sys.stderr)
    sys.exit(1)


def snapshot(out: Path) -> None:
    seen = observe()
    names = list(seen["files"])  # type: ignore[arg-type]
    if not any("-daily-summary" in name for name in names):
        fail("no daily report under reports/")
    # A weekly report comes once a whole ISO week of the repository's history has ended.
    if seen["weekly_runs"] and not any("-weekly-summary" in name for name in names):  # type: ignore[index]
        fail("weekly runs were made but no weekly report is under reports/")
    if set(seen["statuses"]) - {"SUCCESS"}:  # type: ignore[arg-type]
        fail(f"not every demo run succeeded: {seen['statuses']}")
    out.write_text(json.dumps(seen, indent=1))
    print(f"ci: demo made {seen['runs']} runs and {len(names)} reports")


def compare(before_path: Path, setup_ms: int) -> None:
    before, after = json.loads(before_path.read_text()), observe()
    if after["runs"] != before["runs"]:
        fail(f"the second demo created runs: {before['runs']} -> {after['runs']}")
    if after["files"] != before["files"]:
        changed = sorted(name for name in set(before["files"]) | set(after["files"])  # type: ignore[arg-type]
                         if before["files"].get(name) != after["files"].get(name))  # type: ignore[union-attr]
        fail(f"the second demo changed reports: {', '.join(changed)}")
    if setup_ms >= SETUP_LIMIT_MS:
        fail(f"scripts/setup.sh took {setup_ms} ms with nothing to install (limit {SETUP_LIMIT_MS} ms)")
    print(f"ci: second demo created nothing, rewrote nothing; setup took {setup_ms} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("snapshot").add_argument("out", type=Path)
    cmp = sub.add_parser("compare")
    cmp.add_argument("snapshot", type=Path)
    cmp.add_argument("--setup-ms", type=int, required=True)
    args = parser.parse_args()
    if args.command == "snapshot":
        snapshot(args.out)
    else:
        compare(args.snapshot, args.setup_ms)


if __name__ == "__main__":
    main()
