#!/usr/bin/env bash
# The comparison frameworks live in their own venv (never in the project's dependencies):
# DBOS Transact for bench_steps.py, APScheduler 3 for bench_tick.py.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${REPORTFLOW_BENCH_VENV:-.venv-bench}"
PYTHON="${PYTHON:-python3.11}"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install --quiet "dbos==3.4.0" "apscheduler>=3.10,<4"
"$VENV/bin/python" -c "import dbos, apscheduler; print('bench venv ready:', apscheduler.__version__)"
