"""Bad input through the real CLI: exit 2, a message naming what is wrong, nothing written (SPEC §7, §10.6).

Every case runs against a copy of one working install (a database with a
schedule and a SUCCESS run, a reports directory holding its report): a
malformed config (``--config bad.toml`` pointing at that same database and
reports directory) given to a command that writes, or a malformed argument
given to the good config. Afterwards every file of the install is
byte-identical. The cases complement ``tests/acceptance/test_cli.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.reliability.harness import daily_history, tree_digest
from tests.support import run_cli, utc

pytestmark = pytest.mark.slow

NOW = "2026-09-30T12:00:00Z"
GOOD = """\
[store]
url = "sqlite:///rf.db"

[reports]
dir = "reports"

[llm]
provider = "builtin"

[[projects]]
key = "platform"
repo = "{repo}"

[[schedules]]
name = "platform-daily"
workflow = "daily_report"
project = "platform"
cron = "30 19 * * *"
timezone = "Asia/Seoul"
"""
SCHEDULE_TAIL = 'timezone = "Asia/Seoul"\n'


def sub(old: str, new: str) -> Callable[[str], str]:
    def edit(text: str) -> str:
        assert old in text, old
        return text.replace(old, new, 1)
    return edit


def add(extra: str) -> Callable[[str], str]:
    return lambda text: text + extra


def head(extra: str) -> Callable[[str], str]:
    return lambda text: extra + text


def schedule_line(line: str) -> Callable[[str], str]:
    """One more line in the [[schedules]] entry."""
    return lambda text: text + line + "\n"


def replace_all(content: str) -> Callable[[str], str]:
    return lambda text: content


@dataclass(frozen=True)
class Case:
    edit: Callable[[str], str]
    says: tuple[str, ...]
    command: tuple[str, ...] = ("schedules", "apply")


TEAM = """
[[schedules]]
name = "{name}"
workflow = "team_weekly_report"
{project}projects = ["platform"]
cron = "0 9 * * 1"
timezone = "UTC"
"""
# The commands an operator types to change something refuse a bad file. The scheduling loops (tick, work,
# cycle, serve) leave an invalid [[schedules]] entry out and go on with the others, saying so
# (tests/acceptance/test_invalid_schedule.py); a bad file elsewhere still stops them (below).
WRITERS = [("schedules", "apply"),
           ("trigger", "platform-daily", "--date", "2026-09-29"),
           ("backfill", "platform-daily", "--from", "2026-09-20", "--to", "2026-09-25"),
           ("runs", "retry", "1", "--from-step", "SAVE_MARKDOWN")]
LONG_KEY = "k" * 65

CONFIG_CASES: dict[str, Case] = {
    # cron
    "cron with a seconds field": Case(sub('"30 19 * * *"', '"0 30 19 * * *"'), ("schedules[0].cron", "got 6")),
    "cron hour 25": Case(sub('"30 19 * * *"', '"30 25 * * *"'), ("schedules[0].cron", "hour must be 0-23")),
    "cron that never fires (Feb 31)": Case(sub('"30 19 * * *"', '"0 9 31 2 *"'), ("schedules[0].cron", "never fires")),
    "cron step of zero": Case(sub('"30 19 * * *"', '"*/0 * * * *"'), ("schedules[0].cron", "step")),
    "empty cron": Case(sub('"30 19 * * *"', '""'), ("schedules[0].cron", "empty")),
    "cron day-of-week 8": Case(sub('"30 19 * * *"', '"0 9 * * 8"'), ("schedules[0].cron", "day-of-week")),
    "@hourly on a daily workflow": Case(sub('"30 19 * * *"', '"@hourly"'), ("schedules[0].cron", "one slot per day")),
    "cron missing": Case(sub('cron = "30 19 * * *"\n', ""), ("schedules[0].cron", "required")),
    # timezones
    "timezone as an offset": Case(sub('"Asia/Seoul"', '"UTC+9"'), ("schedules[0].timezone", "UTC+9")),
    "timezone path traversal": Case(sub('"Asia/Seoul"', '"../../../etc/passwd"'),
                                    ("schedules[0].timezone", "../../../etc/passwd")),
    "timezone as an absolute path": Case(sub('"Asia/Seoul"', '"/usr/share/zoneinfo/UTC"'),
                                         ("schedules[0].timezone", "unknown timezone")),
    "timezone in lower case": Case(sub('"Asia/Seoul"', '"asia/seoul"'), ("schedules[0].timezone", "asia/seoul")),
    "timezone as a number": Case(sub('"Asia/Seoul"', "9"), ("schedules[0].timezone", "string")),
    # durations
    "grace in words": Case(schedule_line('grace = "10 minutes"'), ("schedules[0].grace", "10 minutes")),
    "negative grace": Case(schedule_line('grace = "-5m"'), ("schedules[0].grace", "-5m")),
    "catch-up window in words": Case(schedule_line('catchup_window = "7 days"'), ("schedules[0].catchup_window",)),
    "max_runtime with two dots": Case(schedule_line('max_runtime = "0.5.0h"'), ("schedules[0].max_runtime",)),
    "jitter not below grace": Case(schedule_line('jitter = "15m"'), ("schedules[0].jitter", "below grace")),
    "grace as a boolean": Case(schedule_line("grace = true"), ("schedules[0].grace", "not a duration")),
    "lease under a second": Case(head('[worker]\nlease = "500ms"\n'), ("worker.lease", "at least 1s")),
    "negative retry backoff": Case(head("[worker]\nretry_backoff = -60\n"), ("worker.retry_backoff", "negative")),
    "llm timeout in words": Case(sub('provider = "builtin"', 'provider = "builtin"\ntimeout = "soon"'),
                                 ("llm.timeout", "soon")),
    "negative notion timeout": Case(add('\n[notion]\ntimeout = "-1s"\n'), ("notion.timeout", "-1s")),
    # schedules
    "schedule name with a path": Case(sub('name = "platform-daily"', 'name = "daily/../x"'), ("schedules[0].name",)),
    "schedule project traversal": Case(sub('project = "platform"', 'project = "../x"'), ("schedules[0].project",)),
    "schedule for an undeclared project": Case(sub('project = "platform"', 'project = "ghost"'),
                                               ("schedules[0].project", "ghost")),
    "unknown workflow": Case(sub('workflow = "daily_report"', 'workflow = "yearly_report"'),
                             ("schedules[0].workflow", "yearly_report")),
    "duplicate schedule names": Case(add('\n[[schedules]]\nname = "platform-daily"\nworkflow = "echo"\n'
                                         'project = "other"\ncron = "0 9 * * *"\ntimezone = "UTC"\n'),
                                     ("schedules[1].name", "duplicate")),
    "two live schedules for one project": Case(add('\n[[schedules]]\nname = "second"\nworkflow = "daily_report"\n'
                                                   'project = "platform"\ncron = "0 9 * * *"\ntimezone = "UTC"\n'),
                                               ("schedules[1].project", "already runs")),
    "unknown overlap policy": Case(schedule_line('overlap = "QUEUE_ALL"'), ("schedules[0].overlap", "QUEUE_ALL")),
    "unknown misfire policy": Case(schedule_line('misfire = "NEVER"'), ("schedules[0].misfire", "NEVER")),
    "unknown report_on": Case(schedule_line('report_on = "tomorrow"'), ("schedules[0].report_on", "tomorrow")),
    "dst_gap skip on a daily workflow": Case(schedule_line('dst_gap = "skip"'), ("schedules[0].dst_gap", "slot")),
    "dst_fold both on a daily workflow": Case(schedule_line('dst_fold = "both"'), ("schedules[0].dst_fold", "slot")),
    # projects
    "project key ..": Case(sub('key = "platform"', 'key = ".."'), ("projects[0].key", "'..'")),
    "project key /etc": Case(sub('key = "platform"', 'key = "/etc"'), ("projects[0].key", "/etc")),
    "project key with a leading dash": Case(sub('key = "platform"', 'key = "-platform"'), ("projects[0].key",)),
    "project key with a space": Case(sub('key = "platform"', 'key = "my project"'), ("projects[0].key",)),
    "project key of 65 characters": Case(sub('key = "platform"', f'key = "{LONG_KEY}"'),
                                         ("projects[0].key", "64 characters")),
    "duplicate project key": Case(sub("[[schedules]]", '[[projects]]\nkey = "platform"\nrepo = "."\n\n[[schedules]]'),
                                  ("projects[1].key", "duplicate")),
    "no branches": Case(sub('key = "platform"\n', 'key = "platform"\nbranches = []\n'), ("projects[0].branches",)),
    # other sections
    "max_attempts 1000": Case(head("[worker]\nmax_attempts = 1000\n"), ("worker.max_attempts", "100")),
    "backfill_concurrency 0": Case(head("[worker]\nbackfill_concurrency = 0\n"), ("worker.backfill_concurrency",)),
    "temperature 5": Case(sub('provider = "builtin"', 'provider = "builtin"\ntemperature = 5'),
                          ("llm.temperature",)),
    "num_ctx 100": Case(sub('provider = "builtin"', 'provider = "builtin"\nnum_ctx = 100'), ("llm.num_ctx", "512")),
    "prompt version path traversal": Case(sub('provider = "builtin"', 'provider = "builtin"\n'
                                              'prompt_version = "../../etc/passwd"'), ("llm.prompt_version",)),
    "seed not a number": Case(sub('provider = "builtin"', 'provider = "builtin"\nseed = "abc"'), ("llm.seed", "abc")),
    "unsupported store": Case(sub('"sqlite:///rf.db"', '"mysql://user@host/db"'), ("store url", "mysql")),
    "store url that is no url": Case(sub('"sqlite:///rf.db"', '"not a url"'), ("store url", "not a url")),
    "projects as a table": Case(sub("[[projects]]", "[projects]"), ("projects", "list")),
    "misspelled notion table": Case(add('\n[notoin]\nenabled = true\n'), ("notoin", "unknown section")),
    "schedules as a string": Case(replace_all('schedules = "daily"\n\n[store]\nurl = "sqlite:///rf.db"\n'),
                                  ("schedules", "list")),
    "byte order mark": Case(head("\ufeff"), ("bad.toml", "TOML")),
    "deeply nested TOML": Case(add("\n[deep]\nx = " + "[" * 5000 + "]" * 5000 + "\n"), ("bad.toml", "nested too deeply")),
    "not UTF-8": Case(lambda text: text.replace("Asia/Seoul", "Asia/S\udce9oul"), ("bad.toml", "cannot read")),
    # issue 36: what used to load and then fail at run time (or with a traceback)
    "reports dir at the filesystem root": Case(sub('dir = "reports"', 'dir = "/"'), ("bad.toml: reports.dir", "root")),
    "reports dir outside the config's folder": Case(sub('dir = "reports"', 'dir = "../elsewhere"'),
                                                    ("bad.toml: reports.dir", "outside the config's folder")),
    "reports dir in /etc": Case(sub('dir = "reports"', 'dir = "/etc/rf-probe"'), ("bad.toml: reports.dir", "system")),
    "NUL in the reports dir": Case(sub('dir = "reports"', 'dir = "rep\\u0000orts"'), ("bad.toml: reports.dir", "NUL")),
    "NUL in a repository path": Case(sub('repo = "', 'repo = "\\u0000'), ("bad.toml: projects[0].repo", "NUL")),
    "NUL in the SQLite path": Case(sub('"sqlite:///rf.db"', '"sqlite:///r\\u0000f.db"'), ("bad.toml: store.url", "NUL")),
    "a SQLite path 2,000 folders deep": Case(sub('"sqlite:///rf.db"', '"sqlite:///' + "a/" * 2000 + 'rf.db"'),
                                             ("bad.toml: store.url", "2001 folders deep")),
    "a prompt version without prompts": Case(sub('provider = "builtin"', 'provider = "builtin"\nprompt_version = "v999"'),
                                             ("bad.toml: llm.prompt_version", "'v999'", "v1, v2, v3")),
    "an llm host that is a file URL": Case(sub('provider = "builtin"', 'provider = "builtin"\nhost = "file:///etc/passwd"'),
                                           ("bad.toml: llm.host", "http:// or https://")),
    "a notion base_url that is a file URL": Case(add('\n[notion]\nbase_url = "file:///tmp/x"\n'),
                                                 ("bad.toml: notion.base_url", "http:// or https://")),
    "a team schedule named with a dot": Case(add(TEAM.format(name="Core.Team", project='project = "core"\n')),
                                             ("bad.toml: schedules[1].name", "'Core.Team'", "report file")),
    "a team schedule name of 65 characters": Case(add(TEAM.format(name="t" * 65, project='project = "core"\n')),
                                                  ("bad.toml: schedules[1].name", "64 characters")),
    "a team schedule without project": Case(add(TEAM.format(name="core-weekly", project="")),
                                            ("bad.toml: schedules[1].project", "names its team")),
    "a team key that is no key": Case(add(TEAM.format(name="core-weekly", project='project = "Core Team"\n')),
                                      ("bad.toml: schedules[1].project", "'Core Team'")),
    "a [[teams]] entry without key": Case(add('\n[[teams]]\nprojects = ["platform"]\n'),
                                          ("bad.toml: teams[0].key", "is required")),
}


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An install with a schedule, a SUCCESS run (id 1) and its report."""
    root = tmp_path_factory.mktemp("golden")
    repo = daily_history(root, utc(2026, 9, 26), 5)
    install = root / "install"
    install.mkdir()
    config = install / "reportflow.toml"
    config.write_text(GOOD.format(repo=repo.path))
    for args in (("schedules", "apply"), ("trigger", "platform-daily", "--date", "2026-09-28"),
                 ("work", "--until-idle")):
        result = run_cli(*args, config=config, now=NOW if args[0] != "schedules" else "2026-09-27T00:00:00Z")
        assert result.returncode == 0, result.stderr
    assert list((install / "reports" / "platform").glob("*.md"))
    # A worker's last two connections can close at once, so that neither checkpoints: fold any WAL left
    # into the file, so that every copy starts clean. (A refused `tick` may open the store to look its
    # fast path's fingerprint up, and closing it checkpoints a WAL: contents equal, bytes not.)
    folded = sqlite3.connect(install / "rf.db")
    try:
        folded.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        folded.close()
    assert not (install / "rf.db-wal").exists()
    return install


@pytest.fixture
def install(golden: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "install"
    shutil.copytree(golden, copy)
    return copy


def not_config(path: Path) -> bool:
    return path.name in ("bad.toml", "etc-link")


def expect_refused(install: Path, args: tuple[str, ...], says: tuple[str, ...],
                   config: Path) -> subprocess.CompletedProcess[str]:
    before = tree_digest(install, skip=not_config)
    result = run_cli(*args, config=config, now=NOW)
    shown = f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 2, shown
    assert "Traceback" not in result.stderr, shown
    if not result.stderr.startswith("Usage:"):  # Click's own usage errors have their box; ours are one line
        assert result.stderr.strip().count("\n") == 0, shown
        # The product's own words: never a library's message or its URL (pydantic's "1 validation error for ...").
        for foreign in ("pydantic", "validation error for", "Input should", "String should", "Field required"):
            assert foreign not in result.stderr, shown
    for text in says:
        assert text in result.stderr, f"expected {text!r} in the message\n{shown}"
    assert tree_digest(install, skip=not_config) == before, "the install changed"
    return result


# Further cases of a kind the default run already refuses (another bad cron field, timezone, duration,
# project key, policy name, number...): with --long.
FURTHER = frozenset({
    "cron day-of-week 8", "timezone in lower case", "timezone as a number", "grace as a boolean",
    "catch-up window in words", "max_runtime with two dots", "project key with a space",
    "project key of 65 characters", "reports dir in /etc", "unknown misfire policy", "unknown report_on",
    "dst_fold both on a daily workflow", "a team schedule name of 65 characters", "seed not a number",
    "num_ctx 100", "store url that is no url", "negative retry backoff",
})


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.long) if n in FURTHER else n
                                  for n in sorted(CONFIG_CASES)])
def test_malformed_config_exits_2_and_writes_nothing(install: Path, name: str) -> None:
    case = CONFIG_CASES[name]
    good = (install / "reportflow.toml").read_text()
    bad = install / "bad.toml"
    text = case.edit(good)
    bad.write_bytes(text.encode("utf-8", "surrogateescape"))
    command = WRITERS[sorted(CONFIG_CASES).index(name) % len(WRITERS)]  # every writing command gets its share
    expect_refused(install, command, case.says, bad)


NOTIFY_CASES = {
    "webhook in ftp": ('[notify]\nwebhook_env = "RF_BAD_HOOK"\n', {"RF_BAD_HOOK": "ftp://hooks.example/x"},
                       ("RF_BAD_HOOK", "http:// or https://")),
    "webhook_env holding a URL": ('[notify]\nwebhook_env = "https://hooks.example/x?token=t0psecret"\n', {},
                                  ("notify.webhook_env", "NAME of an environment variable")),
    "stuck_after in words": ('[notify]\nstuck_after = "soon"\n', {}, ("notify.stuck_after", "soon")),
}


@pytest.mark.parametrize("name", sorted(NOTIFY_CASES))
def test_a_bad_notify_section_refuses_every_writer_and_writes_nothing(install: Path, name: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    section, env, says = NOTIFY_CASES[name]
    for variable, value in env.items():
        monkeypatch.setenv(variable, value)
    bad = install / "bad.toml"
    bad.write_text((install / "reportflow.toml").read_text() + "\n" + section)
    for command in (("tick",), ("work", "--until-idle"), ("reconcile",)):
        result = expect_refused(install, command, says, bad)
        assert "t0psecret" not in result.stderr + result.stdout and "hooks.example" not in result.stderr


ARG_CASES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "run id with a path": (("runs", "show", "../1"), ("'../1' is not a run id",)),
    "run id with SQL": (("runs", "show", "1;DROP TABLE runs"), ("is not a run id",)),
    "run id of 19 digits": (("runs", "show", "1234567890123456789"), ("is not a run id",)),
    "run id with a space": (("runs", "cancel", " 1"), ("is not a run id",)),
    "negative run id to approve": (("runs", "approve", "--", "-5"), ("'-5' is not a run id",)),
    "retry from a step path": (("runs", "retry", "1", "--from-step", "../../x"), ("unknown step", "../../x")),
    "retry from a lower-case step": (("runs", "retry", "1", "--from-step", "save_markdown"), ("unknown step",)),
    "trigger on February 30": (("trigger", "platform-daily", "--date", "2026-02-30"), ("2026-02-30", "not a date")),
    "trigger date with a path": (("trigger", "platform-daily", "--date", "../2026-09-29"), ("not a date",)),
    "trigger on 9999-12-31": (("trigger", "platform-daily", "--date", "9999-12-31"), ("--date", "out of range")),
    "trigger on 0001-01-01": (("trigger", "platform-daily", "--date", "0001-01-01"), ("--date", "out of range")),
    "run id in superscript digits": (("runs", "show", "²"), ("is not a run id",)),
    "run id in Arabic-Indic digits": (("runs", "show", "١"), ("is not a run id",)),
    "--now in the year 9999": (("--now", "9999-12-25T00:00:00Z", "tick"), ("9999-12-25", "out of range")),
    "trigger a future date": (("trigger", "platform-daily", "--date", "2099-01-01"), ("in the future",)),
    "trigger a schedule path": (("trigger", "../platform-daily"), ("no schedule named '../platform-daily'",)),
    "backfill with slashes": (("backfill", "platform-daily", "--from", "2026/09/01", "--to", "2026-09-30"),
                              ("--from", "not a date")),
    "backfill over 26 years": (("backfill", "platform-daily", "--from", "2000-01-01", "--to", "2026-09-30"),
                               ("at most 10 years",)),
    "backfill without --to": (("backfill", "platform-daily", "--from", "2026-09-01"), ("--to",)),
    "validate a timezone path": (("schedules", "validate", "--cron", "0 9 * * *", "--timezone", "../../etc/localtime"),
                                ("../../etc/localtime",)),
    "validate an unknown workflow": (("schedules", "validate", "--cron", "0 9 * * *", "--timezone", "UTC",
                                      "--workflow", "yearly_report"), ("yearly_report",)),
    "set a grace in words": (("schedules", "set", "platform-daily", "--grace", "forever", "--expect-version", "1"),
                             ("--grace", "forever")),
    "set a grace of a billion days": (("schedules", "set", "platform-daily", "--grace", "999999999999d",
                                       "--expect-version", "1"), ("--grace", "longer than 100 years")),
    "set an unknown timezone": (("schedules", "set", "platform-daily", "--timezone", "Mars/Base",
                                 "--expect-version", "1"), ("Mars/Base",)),
    "set a four-field cron": (("schedules", "set", "platform-daily", "--cron", "0 9 * *", "--expect-version", "1"),
                              ("cron", "got 4")),
    "set an hourly cron on a daily workflow": (("schedules", "set", "platform-daily", "--cron", "0 * * * *",
                                                "--expect-version", "1"), ("one slot per day",)),
    "set nothing": (("schedules", "set", "platform-daily", "--expect-version", "1"), ("nothing to change",)),
    "set a version that is not a number": (("schedules", "set", "platform-daily", "--cron", "0 9 * * *",
                                            "--expect-version", "abc"), ("--expect-version",)),
    "preview zero fire times": (("schedules", "preview", "platform-daily", "-n", "0"), ("-n",)),
    "preview 100000 fire times": (("schedules", "preview", "platform-daily", "-n", "100000"), ("-n",)),
    "disable without a reason": (("schedules", "disable", "platform-daily"), ("--reason",)),
    "history of a schedule named with SQL": (("schedules", "history", "'; DROP TABLE schedules; --"),
                                             ("no schedule named",)),
    "--now without an offset": (("--now", "2026-09-29T10:00:00", "tick"), ("no UTC offset",)),
    "--now anchored to a word": (("--now", "2026-09-29T10:00:00Z@soon", "tick"), ("'soon' is not a Unix time",)),
    "work --max-runs 0": (("work", "--max-runs", "0"), ("--max-runs",)),
    "runs list --limit -1": (("runs", "list", "--limit", "-1"), ("--limit",)),
    "--db of an unsupported kind": (("--db", "mysql://user@host/db", "tick"), ("only sqlite and postgresql",)),
    "init over an install with a bad timezone": (("init", "--timezone", "Mars/Base", "--force"), ("Mars/Base",)),
    "init for a missing repository": (("init", "--repo", "/no/such/repo", "--force"), ("/no/such/repo",)),
}


@pytest.mark.parametrize("name", sorted(ARG_CASES))
def test_malformed_argument_exits_2_and_writes_nothing(install: Path, name: str) -> None:
    args, says = ARG_CASES[name]
    expect_refused(install, args, says, install / "reportflow.toml")


def test_missing_config_file_exits_2_and_creates_nothing(tmp_path: Path) -> None:
    result = run_cli("schedules", "apply", config=tmp_path / "nowhere" / "reportflow.toml", cwd=tmp_path)
    assert result.returncode == 2 and "config file not found" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_misspelled_schedules_table_is_refused(install: Path) -> None:
    """Regression for a bug this suite found (fixed in 2947b71): unknown top-level tables were accepted.

    ``[[schedule]]`` (singular) left the config with no ``[[schedules]]``, so
    ``schedules apply`` exited 0 and archived every live schedule: one typo
    stopped all reports (and ``[notoin]`` silently left Notion off).
    """
    bad = install / "bad.toml"
    bad.write_text((install / "reportflow.toml").read_text().replace("[[schedules]]", "[[schedule]]"))
    expect_refused(install, ("schedules", "apply"), ("schedule", "unknown section"), bad)


def test_a_reports_dir_that_is_a_symlink_out_of_the_config_folder_is_refused(install: Path) -> None:
    (install / "etc-link").symlink_to("/etc")
    bad = install / "bad.toml"
    bad.write_text((install / "reportflow.toml").read_text().replace('dir = "reports"', 'dir = "etc-link/rf-probe"'))
    expect_refused(install, ("work", "--until-idle"), ("bad.toml: reports.dir", "/etc", "outside"), bad)


@pytest.mark.parametrize("kind", ["device", "fifo", "folder", "huge"])
def test_a_config_that_is_no_regular_file_or_is_huge_is_refused_unread(install: Path, tmp_path: Path,
                                                                       kind: str) -> None:
    """``--config /dev/zero`` read until MemoryError, a FIFO blocked for ever: both are refused at once."""
    if kind == "device":
        config = Path("/dev/zero")
    elif kind == "fifo":
        config = tmp_path / "fifo.toml"
        os.mkfifo(config)
    elif kind == "folder":
        config = tmp_path / "folder.toml"
        config.mkdir()
    else:
        config = tmp_path / "huge.toml"
        with config.open("wb") as handle:
            handle.truncate(17 * 1024 * 1024)  # sparse: 17 MiB of NULs, nothing on disk
    says = ("is at most",) if kind == "huge" else ("not a regular file",)
    for command in (("tick",), ("work", "--until-idle"), ("schedules", "apply")):
        expect_refused(install, command, (str(config), *says), config)


def test_init_with_a_long_repository_name_writes_a_config_it_accepts(tmp_path: Path) -> None:
    """Regression for a bug this suite found (fixed in 2947b71): ``init`` derived the project key from
    the folder name without the 64-character limit, wrote that config, refused it (exit 2) and left it."""
    repo = tmp_path / ("r" * 70)
    repo.mkdir()
    config = tmp_path / "reportflow.toml"
    result = run_cli("init", "--repo", str(repo), config=config, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    listed = run_cli("schedules", "list", "--json", config=config, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr  # the config it wrote is one it accepts
    assert all(len(s["project"]) <= 64 for s in json.loads(listed.stdout))
