#!/usr/bin/env bash
# The main job, end to end, on the embedded defaults: SQLite, the built-in writer, Notion off.
# It reports on this repository's own git history and leaves Markdown under reports/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
rf() { .venv/bin/reportflow --config examples/demo.toml "$@"; }

first_day=$(git log --reverse --date=short --format=%ad | head -n 1)
today=$(date -u +%F)
rf schedules apply
rf backfill reportflow-daily --from "$first_day" --to "$today"
rf backfill reportflow-weekly --from "$first_day" --to "$today"
rf work --until-idle
rf runs list --limit 30
echo
echo "Reports:"
find reports -name '*.md' | sort
