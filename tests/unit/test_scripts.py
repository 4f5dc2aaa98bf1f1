"""The README's commands stay safe to run: no pipeline whose reader stops early under pipefail."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support import REPO_ROOT

# Readers that may exit before the writer is done: the writer then dies of SIGPIPE,
# and `set -o pipefail` turns that into a silent exit of the whole script.
EARLY_READERS = re.compile(r"\|\s*(head|grep\s+-[a-zA-Z]*[qml]|sed\s+-n\s+['\"]?\d+q|awk\s+.*exit)\b")


def shell_scripts() -> list[Path]:
    return sorted([*REPO_ROOT.glob("scripts/*.sh"), REPO_ROOT / ".ci" / "run"])


def test_no_script_pipes_into_a_reader_that_stops_early() -> None:
    offenders = [f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}"
                 for path in shell_scripts()
                 for number, line in enumerate(path.read_text().splitlines(), 1)
                 if not line.lstrip().startswith("#") and EARLY_READERS.search(line)]
    assert offenders == []


def test_the_guard_catches_the_pattern_that_broke_the_demo() -> None:
    assert EARLY_READERS.search("first_day=$(git log --reverse --format=%ad | head -n 1)")
    assert EARLY_READERS.search("git log | grep -q fix")
    assert not EARLY_READERS.search("tail -n 20 \"$log\" >&2")
