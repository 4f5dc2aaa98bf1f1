"""``finish_run`` is a run's only end (issue 44, item 2): its status, its attempt, its alert, its parent's wait and
its schedule's next run are written together there, so no other module writes a terminal status.

Read from the code: a call of ``set_status`` with a terminal status (or a status the scan cannot read), or an
update's ``status=RunStatus.<terminal>.value``, anywhere but ``store/finish.py`` and the two store functions it
calls (``run_rows.set_status``, the guarded write, and ``claims.release_run``) fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

from engine.core.models import TERMINAL_STATUSES

ENGINE = Path(__file__).resolve().parents[2] / "engine"
TERMINAL = {status.name for status in TERMINAL_STATUSES}
# module (relative to engine/) -> why it may write a terminal status.
ALLOWED = {
    "store/finish.py": "the one end",
    "store/run_rows.py": "set_status, the guarded write finish_run calls",
    "store/claims.py": "release_run, the held run's write finish_run calls",
    "store/upstream_rows.py": "_leave writes a status it is given: QUEUED or MANUAL_REQUIRED, asserted not terminal",
    "store/backup_rows.py": "a backup's status, not a run's",
    "store/outbox.py": "an alert's delivery status, not a run's",
}


def _terminal(node: ast.AST | None) -> bool | None:
    """Whether ``node`` is ``RunStatus.<terminal>`` (or its ``.value``); None when the scan cannot tell."""
    if isinstance(node, ast.Attribute) and node.attr == "value":
        node = node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id[0].isupper():
        return node.value.id == "RunStatus" and node.attr in TERMINAL  # another enum (a step's) is no run's
    return None


def terminal_writes(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name == "set_status" and len(node.args) >= 3 and _terminal(node.args[2]) is not False:
            found.append(f"{node.lineno}: set_status")
        for keyword in node.keywords:
            if name == "values" and keyword.arg == "status" and _terminal(keyword.value) is not False:
                found.append(f"{node.lineno}: .values(status=...)")
    return sorted(found, key=lambda line: int(line.split(":")[0]))


def test_no_terminal_status_is_written_but_by_finish_run() -> None:
    offenders = [f"{path.relative_to(ENGINE)}:{line}" for path in sorted(ENGINE.rglob("*.py"))
                 if str(path.relative_to(ENGINE)) not in ALLOWED for line in terminal_writes(path)]
    assert offenders == []


def test_the_scan_sees_the_writes_it_forbids(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("run_rows.set_status(conn, 1, RunStatus.CANCELLED, completed_at=now)\n"
                   "conn.execute(update(runs).values(status=RunStatus.SKIPPED.value))\n"
                   "run_rows.set_status(conn, 1, status)\n"
                   "run_rows.set_status(conn, 1, RunStatus.WAITING)\n")
    assert terminal_writes(bad) == ["1: set_status", "2: .values(status=...)", "3: set_status"]
