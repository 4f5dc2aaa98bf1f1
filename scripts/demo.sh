#!/usr/bin/env bash
# The main job, end to end, on the embedded defaults: SQLite, the built-in writer, Notion off.
# It reports on this repository's own git history and leaves Markdown under reports/.
# Run it again: the second time it creates no run and rewrites no file.
#
# No pipeline here has a reader that stops early (`git log | head` under pipefail kills
# the script with SIGPIPE): commands write to files or variables, which are read whole.
set -Eeuo pipefail
cd "$(dirname "$0")/.."

stage="setting up .venv"
hint="run scripts/setup.sh to see the whole error"
trap 'echo "demo.sh: failed while ${stage}: ${hint}" >&2' ERR

scripts/setup.sh
config=demo.toml
rf() { .venv/bin/reportflow --config "$config" "$@"; }
work_dir=.reportflow
mkdir -p "$work_dir"

stage="reading this repository's history"
hint="run it from a git clone of reportflow (git log must work here)"
# The root commits' author dates; the earliest is the first business date.
roots=$(git log --max-parents=0 --date=short --format=%ad HEAD)
first_day=""
for day in $roots; do
  if [ -z "$first_day" ] || [[ "$day" < "$first_day" ]]; then first_day=$day; fi
done
today=$(date -u +%F)

stage="applying the demo schedules"
hint="check $config with: .venv/bin/reportflow --config $config schedules validate"
rf schedules apply

created=0
for schedule in reportflow-daily reportflow-weekly; do
  stage="backfilling $schedule from $first_day to $today"
  hint="see the error above; .venv/bin/reportflow --config $config doctor checks the setup"
  rf backfill "$schedule" --from "$first_day" --to "$today" --json >"$work_dir/demo-backfill.json"
  n=$(.venv/bin/python -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["created"]))' \
      "$work_dir/demo-backfill.json")
  created=$((created + n))
done

stage="running the worker"
hint="the failed runs say why in: .venv/bin/reportflow --config $config runs list --status FAILED"
rf work --until-idle

stage="summarising"
hint="the runs are in the database; .venv/bin/reportflow --config $config runs list shows them"
rf runs list --limit 10
rf runs list --json --limit 0 >"$work_dir/demo-runs.json"
.venv/bin/python - "$work_dir/demo-runs.json" "$created" "$config" <<'EOF'
import collections, json, pathlib, sys

runs = json.load(open(sys.argv[1]))
created, config = int(sys.argv[2]), sys.argv[3]
by_status = collections.Counter(run["status"] for run in runs)
outcome = ", ".join(f"{count} {status}" for status, count in sorted(by_status.items()))
reports = sorted(pathlib.Path("reports").rglob("*.md"))
daily = sum("-daily-summary" in p.name for p in reports)
weekly = sum("-weekly-summary" in p.name for p in reports)
print()
print(f"This run created {created} run(s); the database holds {len(runs)}: {outcome or 'none'}.")
newest_daily = max((p for p in reports if "-daily-summary" in p.name), key=lambda p: p.name, default=None)
print(f"Reports: {daily} daily and {weekly} weekly Markdown files under reports/"
      + (f" (latest day: {newest_daily})" if newest_daily else ""))
quiet = sorted(run["business_key"] for run in runs if run["status"] == "SUCCESS"
               and not any(run["business_key"] in p.name for p in reports))
if quiet:
    print(f"No commits landed on {', '.join(quiet)}: those runs succeeded without a file (on_empty = \"skip\").")
if not weekly:
    print("No weekly report yet: a week's report is made on the Monday after it, once a whole ISO week of "
          "this repository's history has ended.")
latest = max(runs, key=lambda run: run["id"], default=None)
print("Look further:")
if latest is not None:
    print(f"  .venv/bin/reportflow --config {config} runs show {latest['id']}")
print(f"  .venv/bin/reportflow --config {config} schedules preview reportflow-daily")
print(f"  .venv/bin/reportflow --config {config} doctor")
print("Now on your repository:")
print("  .venv/bin/reportflow init --repo PATH --timezone ZONE   # writes reportflow.toml (one --repo per repository)")
print("  .venv/bin/reportflow schedules apply                    # its schedules into the database")
print("  .venv/bin/reportflow serve                              # keep it running (or put `reportflow cycle` in cron)")
EOF
