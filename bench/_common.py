"""Shared helpers for the benchmark scripts: repetition, statistics, tables, the machine.

Benchmarks are scripts, not tests. Each one repeats its measurement (``--reps``,
at least 5) and interleaves the things it compares inside every repetition, so
a noisy neighbour slows both sides of a ratio alike. Results are printed as
Markdown tables (pasted into ``docs/BENCHMARKS.md``) and saved as JSON under
``bench/out/``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))  # engine, steps, workflows and tests.* (helpers) import from here

OUT_DIR = REPO_ROOT / "bench" / "out"
BENCH_VENV = Path(os.environ.get("REPORTFLOW_BENCH_VENV", REPO_ROOT / ".venv-bench"))
PG_ADMIN_URL = os.environ.get("REPORTFLOW_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


def parser(description: str, reps: int = 5) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--reps", type=int, default=reps, help=f"repetitions (at least 5; default {reps})")
    return p


def check_reps(reps: int) -> int:
    if reps < 5:
        raise SystemExit("--reps must be at least 5: a minimum and a median of fewer say little on this machine")
    return reps


def summary(values: Sequence[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds, result) of one call."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def fmt(value: float, unit: str = "") -> str:
    if unit == "ms":
        return f"{value * 1000:.2f} ms"
    if unit == "s":
        return f"{value:.3f} s"
    if unit == "x":
        return f"{value:.2f}×"
    if unit == "%":
        return f"{value * 100:.1f}%"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


STAT_HEADERS = ["measure", "min", "median", "max", "reps"]


def stat_row(label: str, values: Sequence[float], unit: str = "") -> list[str]:
    """A table row under ``STAT_HEADERS``: label, min, median, max, reps."""
    s = summary(values)
    return [label, fmt(s["min"], unit), fmt(s["median"], unit), fmt(s["max"], unit), str(len(values))]


def machine() -> dict[str, str]:
    info = {
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "nproc": str(os.cpu_count()),
        "platform": platform.platform(),
    }
    try:
        info["git"] = subprocess.run(["git", "--version"], capture_output=True, text=True, check=False).stdout.strip()
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=REPO_ROOT, check=False).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "engine", "steps", "workflows"],
                               capture_output=True, text=True, cwd=REPO_ROOT, check=False).stdout.strip()
        info["commit"] = head + (" (engine/steps/workflows modified)" if dirty else "")
    except OSError:
        pass
    return info


def announce(name: str) -> None:
    """First line of every script's output: what ran, on which code and machine."""
    info = machine()
    load = os.getloadavg()[0]
    print(f"{name}: commit {info.get('commit', '?')}, python {info['python']}, sqlite {info['sqlite']}, "
          f"nproc {info['nproc']}, load average {load:.2f}", flush=True)
    if load > 1.0:
        print(f"WARNING: load average {load:.2f} on {info['nproc']} cores: something else is running; "
              "these numbers will be low and noisy", flush=True)


def bench_python() -> Path | None:
    """The separate venv holding the comparison frameworks (DBOS, APScheduler 3), if set up."""
    python = BENCH_VENV / "bin" / "python"
    return python if python.exists() else None


def run_comparator(script: Path, *args: str, timeout: float = 900) -> dict[str, Any]:
    """Run a comparator script in the bench venv; it prints one JSON object on its last line."""
    python = bench_python()
    if python is None:
        raise RuntimeError(f"no bench venv at {BENCH_VENV} (run bench/setup_venv.sh)")
    proc = subprocess.run([str(python), str(script), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO_ROOT, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{script.name} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def save(name: str, payload: dict[str, Any]) -> Path:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUT_DIR / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **payload}, indent=2, default=str))
    return path
