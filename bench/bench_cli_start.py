"""Process start of the command line: ``--version``, ``--help`` and a ``tick`` with nothing due.

Setup (not timed): a temporary folder with a starter ``reportflow.toml`` (three
schedules: ``daily_report``, ``weekly_report``, an hourly ``echo``), applied,
one tick and one ``work --until-idle`` run so nothing is due afterwards.

Per repetition, in turn (so a busy neighbour slows every command alike), each
a fresh process of this venv's Python, wall time from spawn to exit:

* the config gets one more comment line (not timed): a new config, not yet validated;
* ``python -c "import sqlalchemy"`` (the yardstick of SPEC §11);
* ``reportflow --version``, ``reportflow --help``;
* floors: ``python -c "import sqlalchemy, pydantic, typer, croniter"`` (what the
  full path of a tick cannot avoid: the store, the validated config, the command
  parser, cron);
* ``reportflow tick``, the first after the config changed: the full path
  (validates the config, records its fingerprint, ticks);
* ``reportflow tick`` again: the steady state of a cron line, the config known
  valid, nothing due (``engine.cli.fast_tick``);
* ``reportflow cycle`` with nothing to do (its fast path) and ``reportflow work --until-idle``
  with nothing to claim: CPU time (user + sys) against ``import sqlalchemy``'s, SPEC §11's
  targets 1.3x and 1.5x.

Setup checks, once, that the second tick takes the fast path and the first does not.
Reported: min/median/max per command, and the ratio of medians to the
yardstick; plus the CPU seconds (user + sys of the children) that one minute of
the cron line ``tick && reconcile && work --until-idle`` burns with nothing to do.
Target (SPEC §11): each of ``--version``, ``--help`` and a nothing-due tick ≤ 1.3× ``import sqlalchemy``.
"""

from __future__ import annotations

import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as c

PYTHON = sys.executable
REPORTFLOW = str(Path(PYTHON).with_name("reportflow"))

EXTRA_SCHEDULE = """
[[schedules]]
name = "echo-hourly"
workflow = "echo"
project = "repo"
cron = "0 * * * *"
timezone = "UTC"
"""


def setup(folder: Path) -> dict[str, str]:
    subprocess.run(["git", "init", "-q", "repo"], cwd=folder, check=True)
    env = {**os.environ, "REPORTFLOW_CONFIG": str(folder / "reportflow.toml")}
    env.pop("REPORTFLOW_NOW", None)
    env.pop("REPORTFLOW_DB", None)
    # An installed reportflow runs from cached bytecode, as sqlalchemy does: a shell that sets
    # PYTHONDONTWRITEBYTECODE would otherwise charge every engine module's compilation to each start.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([REPORTFLOW, "init", "--repo", "repo"], cwd=folder, env=env, check=True, capture_output=True)
    with (folder / "reportflow.toml").open("a") as fh:
        fh.write(EXTRA_SCHEDULE)
    for args in (["schedules", "apply"], ["tick"], ["work", "--until-idle"]):
        subprocess.run([REPORTFLOW, *args], cwd=folder, env=env, check=True, capture_output=True)
    change_config(folder, "setup")
    assert took_full_path(folder, env), "a tick after a config change must validate it"
    assert not took_full_path(folder, env), "a nothing-due tick of a validated config must take the fast path"
    return env


def change_config(folder: Path, tag: str) -> None:
    """One more comment line: new bytes, so a new fingerprint that no tick has validated yet."""
    with (folder / "reportflow.toml").open("a") as fh:
        fh.write(f"# {tag}\n")


def took_full_path(folder: Path, env: dict[str, str]) -> bool:
    """Run the ``reportflow tick`` console script (same ``sys.path``), and say whether it validated the config."""
    proc = subprocess.run([PYTHON, "-X", "importtime", REPORTFLOW, "tick"], cwd=folder, env=env, capture_output=True,
                          text=True, check=True)
    return re.search(r"\|\s+engine\.config\.settings$", proc.stderr, re.MULTILINE) is not None


def run(argv: list[str], folder: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, child CPU seconds) of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.decode()[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    args = c.parser(__doc__.splitlines()[0], reps=30).parse_args()
    reps = c.check_reps(args.reps)
    c.announce("bench_cli_start")
    # In this order in each repetition, right after the config changed (the first tick's inputs
    # are then at least the four commands before it old: old enough to be recorded).
    commands: dict[str, list[str]] = {
        'python -c "import sqlalchemy"': [PYTHON, "-c", "import sqlalchemy"],
        "reportflow --version": [REPORTFLOW, "--version"],
        "reportflow --help": [REPORTFLOW, "--help"],
        'floor: python -c "import sqlalchemy, pydantic, typer, croniter"':
            [PYTHON, "-c", "import sqlalchemy, pydantic, typer, croniter"],
        "reportflow tick, first after a config change (full path)": [REPORTFLOW, "tick"],
        "reportflow tick, nothing due, config validated before (fast path)": [REPORTFLOW, "tick"],
        "reportflow cycle, nothing to do (fast path)": [REPORTFLOW, "cycle"],
        "reportflow work --until-idle, nothing to claim": [REPORTFLOW, "work", "--until-idle"],
    }
    cron_line = [["tick"], ["reconcile"], ["work", "--until-idle"]]
    with tempfile.TemporaryDirectory(prefix="rf-bench-start-") as tmp:
        folder = Path(tmp)
        env = setup(folder)
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        cron_cpu: list[float] = []
        cron_wall: list[float] = []
        for warm in range(2):  # warm the page cache and write the bytecode (__pycache__)
            change_config(folder, f"warm-up {warm}")
            for argv in commands.values():
                run(argv, folder, env)
        for rep in range(reps):
            change_config(folder, f"repetition {rep}")
            for name, argv in commands.items():
                wall_s, cpu_s = run(argv, folder, env)
                walls[name].append(wall_s)
                cpus[name].append(cpu_s)
            cpu = wall = 0.0
            for extra in cron_line:
                w, u = run([REPORTFLOW, *extra], folder, env)
                wall, cpu = wall + w, cpu + u
            cron_cpu.append(cpu)
            cron_wall.append(wall)
    base = statistics.median(walls['python -c "import sqlalchemy"'])
    rows = [c.stat_row(name, values, "ms") + [c.fmt(statistics.median(values) / base, "x")]
            for name, values in walls.items()]
    print()
    print(c.table(c.STAT_HEADERS + ["÷ import sqlalchemy (medians)"], rows))
    cpu_base = statistics.median(cpus['python -c "import sqlalchemy"'])
    print()
    print(c.table(["CPU (user + sys), median", "s", "÷ import sqlalchemy"], [
        [name, c.fmt(statistics.median(values), "s"), c.fmt(statistics.median(values) / cpu_base, "x")]
        for name, values in cpus.items()]))
    print()
    print(c.table(c.STAT_HEADERS, [
        c.stat_row("cron line `tick && reconcile && work --until-idle`, wall", cron_wall, "s"),
        c.stat_row("the same, CPU seconds (user + sys) per minute of cron", cron_cpu, "s"),
    ]))
    c.save("cli_start", {"reps": reps, "walls": walls, "cpus": cpus, "cron_cpu": cron_cpu, "cron_wall": cron_wall})


if __name__ == "__main__":
    main()
