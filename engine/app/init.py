"""``reportflow init``: a starter configuration a new user can run as is."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from pathlib import Path

from engine.config import config_file
from engine.core import errors
from engine.core.cron import expression
from engine.plugins.workflow_registry import load_registry

TEMPLATE = """\
# reportflow configuration. Relative paths resolve against this file's folder.
# Reference: README.md ("Configuration").

[store]
url = "sqlite:///.reportflow/reportflow.db"   # REPORTFLOW_DB overrides; postgresql+psycopg://... for many nodes
# serve and cycle copy the database at each slot, verify the copy and keep the newest 7:
# backup = {{ cron = "0 3 * * *", dir = "backups", keep = 7 }}

# [limits]
# warn_runs_per_day = 48      # a schedule busier than this is shown with a warning
# max_runs_per_day = 1440     # and busier than this is refused
# max_running = 4             # at most this many runs at once, across every process on this database
# [limits.workflows]
# daily_report = 2            # and at most this many of one workflow

[worker]
lease = "60s"
max_attempts = 3
retry_backoff = "1m"

[reports]
dir = "reports"
on_existing = "version"
language = "en"               # or "ko": the report's headings and sentences, and the prompt

[llm]
provider = "builtin"          # or "ollama" (then: ollama pull llama3.1:8b)
model = "llama3.1:8b"
host = "http://127.0.0.1:11434"
prompt_version = "v4"         # the model's answer is checked, repaired once, else replaced (README "AI, checked")
fallback = "builtin"          # model down: the built-in report on time, written again by the model once it answers

[notion]
enabled = false
token_env = "NOTION_TOKEN"    # the NAME of the variable holding the token
database_id = ""

# Each report's short form to a chat or a mailbox, once per report and target (README "Chat and e-mail"):
# [[deliveries]]
# project = "myproject"       # or team = "core", or schedule = "myproject-daily"
# to_env = ["SLACK_REPORTS_URL"]   # the NAMES of variables each holding one Apprise URL (slack://, mailto://...)
"""

#: One repository's project and its daily and weekly schedules (``init --repo`` may be given several times).
PROJECT_TEMPLATE = """
[[projects]]
key = "{key}"
repo = "{repo}"
branches = ["HEAD"]
on_empty = "skip"
# Commits by accounts named here (names or e-mails) are counted apart from people's, beside
# every "...[bot]" and well-known automation (github-actions, renovate, dependabot).
bots = []
# A subject's first words that name a kind of change, beside Conventional Commits and the
# built-in words, e.g. {{ fixes = ["hotpatch"] }}.
kinds = {{}}

# Every commit is in exactly one report of each schedule: "landed" places a commit in the
# report after it reached the branch (a branch merged on Tuesday is in Tuesday's report,
# whenever it was written), and a report after a slot that did not run (the machine was
# off) also covers the periods before it, and says so.
[[schedules]]
name = "{key}-daily"
workflow = "daily_report"
project = "{key}"
cron = "30 19 * * *"
timezone = "{timezone}"
report_on = "interval"        # the 19:30 run covers yesterday 19:30 to today 19:30
attribution = "landed"
misfire = "CATCH_UP_ALL"
overlap = "QUEUE_NEW"

[[schedules]]
name = "{key}-weekly"
workflow = "weekly_report"
project = "{key}"
cron = "0 9 * * 1"
timezone = "{timezone}"
report_on = "previous"        # Monday 09:00 covers last ISO week
attribution = "landed"
misfire = "RUN_ONCE"          # after a long outage, one run: it covers the weeks missed too
"""


MAX_KEY = 48  # leaves room for "-weekly" in schedule names, under the 64-character key limit


def project_key(repo: Path) -> str:
    """The project key ``init`` derives from a repository's folder name (lower case, safe characters)."""
    name = re.sub(r"[^a-z0-9_-]+", "-", repo.resolve().name.lower()).strip("-_")
    return name[:MAX_KEY].rstrip("-_") or "project"


def write_starter(path: Path, *, repos: Sequence[Path], timezone: str, force: bool) -> Path:
    """Write the starter config, a project and its two schedules per repository; refuses to overwrite unless
    ``force``."""
    expression.zone(timezone)
    for repo in repos:
        if not repo.exists():
            raise errors.InvalidInput(f"--repo {repo}: no such folder")
    if path.exists() and not force:
        raise errors.InvalidInput(f"{path} already exists (use --force to overwrite)")
    base = path.resolve().parent
    text, keys = TEMPLATE, set[str]()
    for repo in dict.fromkeys(r.resolve() for r in repos):
        try:
            repo_text = str(repo.relative_to(base)) or "."
        except ValueError:
            repo_text = str(repo)
        key = project_key(repo)
        key = next(f"{key}-{n}" for n in range(2, len(keys) + 3) if f"{key}-{n}" not in keys) if key in keys else key
        keys.add(key)
        text += PROJECT_TEMPLATE.format(key=key, repo=repo_text.replace("\\", "\\\\").replace('"', '\\"'),
                                        timezone=timezone)
    # Validate what we are about to write: init never leaves behind a config it would refuse.
    config_file.build_config(tomllib.loads(text), path=path, registry=load_registry())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
