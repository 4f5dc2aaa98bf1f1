#!/usr/bin/env bash
# Every benchmark, one after the other (they must not share the 2 cores), output kept in bench/out/.
# Needs: the project venv (.venv), PostgreSQL at 127.0.0.1:5432 for bench_workers.py
# (REPORTFLOW_BENCH_PG overrides the admin URL), and bench/setup_venv.sh for the comparisons.
# About 35 minutes. Extra arguments (e.g. --reps 7) are passed to every script.
# Before each script it waits (up to 30 min) for the 1-minute load average to drop below 1:
# a test suite running beside a benchmark halves its numbers.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
mkdir -p bench/out
[ -x .venv-bench/bin/python ] || bash bench/setup_venv.sh

wait_quiet() {
    for i in $(seq 1 180); do
        load=$(cut -d' ' -f1 /proc/loadavg)
        if awk -v l="$load" 'BEGIN { exit !(l < 1.0) }'; then return 0; fi
        [ "$i" = 1 ] && echo "waiting for the machine to be quiet (load average $load)"
        sleep 10
    done
    echo "still busy after 30 minutes: running anyway"
}

for bench in steps concurrency until_idle tick downtime collect replay workers serve cli_start; do
    wait_quiet
    echo "=== bench_${bench}.py $* ($(date -u +%H:%M:%SZ))"
    "$PY" "bench/bench_${bench}.py" "$@" 2>&1 | tee "bench/out/bench_${bench}.txt"
done
