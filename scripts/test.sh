#!/usr/bin/env bash
# Set up and run the tests. PostgreSQL tests run against 127.0.0.1:5432
# (REPORTFLOW_TEST_PG overrides); with CI=true they fail rather than skip if it is down.
#
#   scripts/test.sh           everything CI runs, in two steps: every test in one pytest-xdist
#                             session (reliability included, longest files first, one worker
#                             more than the cores: the real-process tests wait on each other),
#                             with mypy --strict on engine/, steps/, workflows/ and tests/ beside it at low priority, and ruff
#                             (pyflakes and import order, pyproject.toml's [tool.ruff]) first
#   scripts/test.sh --long    the same, the reliability suite with its long counts
#   scripts/test.sh --fast    the loop for daily work: unit tests and the integration tests not
#                             marked slow, in parallel (about a minute on two cores)
#   scripts/test.sh ARGS...   pytest ARGS, as given (a file, -k EXPR, -x ...)
#
# REPORTFLOW_TEST_WORKERS sets the xdist worker count (default: the cores plus one; twice the cores
# was measured no faster: 16 min 13 s against 15 min 59 s). Every step
# runs, even after a failure; the exit status is the first failing step's, pytest's 5 (nothing
# collected) included.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
py=.venv/bin/python
# Most tests run the CLI in a process of its own: hundreds of them. With PYTHONDONTWRITEBYTECODE set (some
# images set it) each would compile every engine module it imports again, about a third of its start-up;
# compiled once here, and written as the tests go, they are read instead (stale ones are recompiled).
unset PYTHONDONTWRITEBYTECODE
"$py" -m compileall -q -j 0 engine steps workflows tests >/dev/null
workers="${REPORTFLOW_TEST_WORKERS:-$(( $(nproc) + 1 ))}"
parallel=(-n "$workers" --dist load --maxschedchunk 1)  # one at a time, in collection order: the longest first

mode=all
case "${1:-}" in
  --fast) mode=fast; shift ;;
  --long) mode=long; shift ;;
  "") ;;
  *) exec "$py" -m pytest "$@" ;;
esac
[ "$#" -eq 0 ] || { echo "test: --$mode takes no further arguments (got: $*)" >&2; exit 2; }

status=0
step() {  # step NAME COMMAND...: run it, keep the first failure's exit status
  echo "test: $1" >&2
  shift
  local rc=0
  "$@" || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "test: failed with exit status $rc" >&2
    [ "$status" -ne 0 ] || status=$rc
  fi
}

if [ "$mode" = fast ]; then
  step "unit and fast integration tests" \
    "$py" -m pytest "${parallel[@]}" -m "not slow" tests/unit tests/integration
  exit "$status"
fi

long=()
[ "$mode" = long ] && long=(--long)
# mypy is a step of its own, run beside the tests at the lowest priority: it takes the CPU time
# the test processes leave idle while they wait on each other, and its report follows theirs.
step "ruff (lint and import order)" "$py" -m ruff check .
typecheck_log=$(mktemp)
trap 'rm -f "$typecheck_log"' EXIT
nice -n 19 "$py" -m mypy --strict engine steps workflows tests >"$typecheck_log" 2>&1 &
typecheck=$!
step "all tests (xdist, -n $workers)" "$py" -m pytest "${parallel[@]}" "${long[@]}" tests
typecheck_rc=0
wait "$typecheck" || typecheck_rc=$?
step "mypy --strict engine steps workflows tests" sh -c 'cat "$1"; exit "$2"' _ "$typecheck_log" "$typecheck_rc"
exit "$status"
