#!/usr/bin/env bash
# Set up and run the whole test suite. PostgreSQL tests run against 127.0.0.1:5432
# (REPORTFLOW_TEST_PG overrides); with CI=true they fail rather than skip if it is down.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
exec .venv/bin/python -m pytest "$@"
