"""Regenerate docs/samples: a daily, a weekly, a monthly, a sprint, a sub-project's and a team report of this
repository, in English and Korean (the daily lists a branch in progress, made here with fixed dates).

The built-in writer writes them through the real CLI (``schedules apply``, ``trigger``, ``work``)
from a clone of this repository reset to ``SOURCE``, with the clock fixed, so the same
commit gives the same bytes whatever main holds by then. Each sample is the report's body
(the front matter names a run id and a scratch path, which say nothing to a reader).

    .venv/bin/python scripts/samples.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "samples"
#: The commit the samples are written from (main when they were last regenerated).
SOURCE = "b5432d31c98c4cd9e34705e5f8a772e6f3912301"
NOW = "2026-12-08T00:00:00Z"
DAY, WEEK_DAY = "2026-12-02", "2026-12-02"
#: (file stem, schedule, business date, the report's path under the reports directory)
SAMPLES = (
    ("daily", "reportflow-daily", DAY, f"reportflow/{DAY}-reportflow-daily-summary.md"),
    ("weekly", "reportflow-weekly", WEEK_DAY, "reportflow/2026-W49-reportflow-weekly-summary.md"),
    ("team", "core-daily", DAY, f"_team/{DAY}-core-daily-summary.md"),
    ("monthly", "reportflow-monthly", "2026-11-15", "reportflow/2026-11-reportflow-monthly-summary.md"),
    ("sprint", "reportflow-sprint", DAY, "reportflow/2026-S24-reportflow-sprint-summary.md"),
    ("subproject", "engine-daily", DAY, f"engine/{DAY}-engine-daily-summary.md"),
)

CONFIG = """\
[store]
url = "sqlite:///{work}/rf.db"

[reports]
dir = "{work}/reports"
language = "{language}"

[llm]
provider = "builtin"

[[projects]]
key = "reportflow"
repo = "{work}/reportflow"
branches = ["main"]
wip_branches = ["*"]

[[projects]]
key = "engine"
repo = "{work}/reportflow"
branches = ["main"]
paths = ["engine/"]

[[schedules]]
name = "reportflow-daily"
workflow = "daily_report"
project = "reportflow"
cron = "0 1 * * *"
timezone = "UTC"

[[schedules]]
name = "reportflow-weekly"
workflow = "weekly_report"
project = "reportflow"
cron = "0 1 * * 1"
timezone = "UTC"

[[schedules]]
name = "reportflow-sprint"
workflow = "sprint_report"
project = "reportflow"
cron = "0 1 * * 1"
timezone = "UTC"
sprint = {{ length = "14d", anchor = "2026-11-23" }}

[[schedules]]
name = "engine-daily"
workflow = "daily_report"
project = "engine"
cron = "0 1 * * *"
timezone = "UTC"

[[schedules]]
name = "reportflow-monthly"
workflow = "monthly_report"
project = "reportflow"
cron = "0 1 1 * *"
timezone = "UTC"

[[schedules]]
name = "core-daily"
workflow = "team_daily_report"
project = "core"
projects = ["reportflow"]
authors = ["Seed 8c814130 maintainers"]
cron = "0 2 * * *"
timezone = "UTC"
"""


def run(*args: str, cwd: Path | None = None) -> None:
    subprocess.run(args, cwd=cwd, check=True, capture_output=True, text=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})


def body(text: str) -> str:
    """The report without its front matter."""
    return text.split("\n---\n", 1)[1].lstrip("\n") if text.startswith("---\n") else text


def in_progress(clone: Path) -> None:
    """A branch not merged yet, one commit on the sample day, its dates and author fixed (the same SHA each time)."""
    stamp = "2026-12-02T10:00:00+00:00"
    env = {**os.environ, "GIT_AUTHOR_NAME": "Sample Author", "GIT_AUTHOR_EMAIL": "sample@example.com",
           "GIT_COMMITTER_NAME": "Sample Author", "GIT_COMMITTER_EMAIL": "sample@example.com",
           "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
    for args in (["checkout", "--quiet", "-b", "feature/retry-budget"],
                 ["commit", "--quiet", "--allow-empty", "-m", "Retry budget shared by the step's calls"],
                 ["checkout", "--quiet", "main"]):
        subprocess.run(["git", *args], cwd=clone, check=True, capture_output=True, env=env)


def generate(language: str) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        run("git", "clone", "--quiet", "--no-local", str(ROOT), str(work / "reportflow"))
        run("git", "checkout", "--quiet", "-B", "main", SOURCE, cwd=work / "reportflow")
        in_progress(work / "reportflow")
        config = work / "reportflow.toml"
        config.write_text(CONFIG.format(work=work, language=language), encoding="utf-8")
        cli = [sys.executable, "-m", "engine.cli", "--config", str(config), "--now", NOW]
        run(*cli, "schedules", "apply")
        for _stem, schedule, day, _path in SAMPLES:
            run(*cli, "trigger", schedule, "--date", day)
        run(*cli, "work", "--until-idle")
        for stem, _schedule, _day, path in SAMPLES:
            report = (work / "reports" / path).read_text(encoding="utf-8")
            (OUT / f"{stem}.{language}.md").write_text(body(report), encoding="utf-8")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for language in ("en", "ko"):
        generate(language)
    print(f"wrote {', '.join(sorted(p.name for p in OUT.glob('*.md')))} in {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    if shutil.which("git") is None:
        sys.exit("git is needed")
    main()
