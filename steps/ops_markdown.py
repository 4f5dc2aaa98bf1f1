"""The ops report's Markdown (SPEC §16.3), written deterministically from persisted facts.

Same facts, same bytes: per schedule the runs by status, success rate and
last success; failed and partial runs grouped by error code with the runbook
line of ``engine.core.error_codes``; slots not run and why; stuck and stalled
runs; schedule changes with runs/day before → after; backfills; holidays and
maintenance windows. Facts persisted before stuck runs, too-old ranges, holidays and
windows were read lack those keys, and render as they did then, so a retry of such a
run writes the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.core import error_codes
from steps import untrusted


def _waited(seconds: int) -> str:
    """``1h 05m``, ``12m``, ``40s``: a wait as a person reads it."""
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m" if minutes else f"{secs}s"


def _operator_text(value: str, rules: int) -> str:
    """Who made a change, a pause's reason: whatever ``$USER`` or an operator held, so text from outside
    (rules 2 on)."""
    return untrusted.text(value, rules) if rules >= untrusted.LINK_RULES else value


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def render(facts: Mapping[str, Any], *, weekly: bool, business_key: str,
           summary: str | None = None, written_by: str = "builtin", note: str = "", rules: int = 0) -> str:
    """The whole report body for ``facts`` (``engine.store.ops_facts`` shape); ``summary``
    is a checked narrative put first (SPEC §16.3), ``note`` the line saying it was replaced.
    ``rules``: the run's text rules; from 2 on the summary and the audit actors (``$USER``, any
    text) are inert (``steps.untrusted``)."""
    if summary and rules >= untrusted.LINK_RULES:
        summary = untrusted.narrative(summary, rules)
    out = [f"# {'Weekly' if weekly else 'Daily'} operations report: {business_key}", "",
           f"- **Period (UTC):** {facts['start']} → {facts['end']}",
           f"- **Facts read at:** {facts['as_of']}", f"- **Written by:** {written_by}", ""]
    if note:
        out += [note, ""]
    if summary:
        out += ["## Summary", "", summary, ""]
    out += ["## Schedules", ""]
    rows = facts["schedules"]
    if rows:
        out += ["| schedule | workflow | project | runs | outcomes | success rate | freshness | last success |",
                "| --- | --- | --- | ---: | --- | ---: | ---: | --- |"]
        for row in rows:
            outcomes = ", ".join(f"{status} {n}" for status, n in row["by_status"].items())
            out.append(f"| {row['schedule']} | {row['workflow']} | {row['project']} | {row['runs']} | "
                       f"{outcomes} | {_rate(row['success_rate'])} | {_rate(row.get('freshness'))} | "
                       f"{row['last_success'] or '—'} |")
    else:
        out.append("No run had a slot in this period.")
    out += ["", "## Failures by error code", ""]
    if facts["failures"]:
        out += ["| schedule | code | count | first | last | runs | what to do |",
                "| --- | --- | ---: | --- | --- | --- | --- |"]
        for group in facts["failures"]:
            runs = ", ".join(str(r) for r in group["runs"])
            out.append(f"| {group['schedule']} | `{group['error_code']}` | {group['count']} | "
                       f"{group['first']} | {group['last']} | {runs} | "
                       f"{error_codes.runbook(group['error_code']) or 'see `reportflow runs show`'} |")
    else:
        out.append("No run failed.")
    out += ["", "## Slots not run", ""]
    unrun = [f"- {u['schedule']}: {u['count']} {u['status']} ({u['reason']}): {', '.join(u['keys'])}"
             for u in facts.get("unrun", [])]
    unrun += [f"- {t['schedule']}: about {t['estimated_slots']} slot(s) from {t['from']} to {t['to']} older "
              "than the catch-up window (too_old): never run" for t in facts.get("too_old", [])]
    out += unrun or ["None."]
    if "stuck" in facts:
        out += ["", "## Stuck runs", ""]
        out += [f"- run {s['run']} ({s['schedule']}): {s['status']}, unclaimed since {s['since']}"
                + (f": {s['reason']}" if s["reason"] else "") for s in facts["stuck"]] or ["None."]
    if "upstream_waits" in facts:
        out += ["", "## Waited on an upstream", ""]
        out += [f"- run {w['run']} ({w['schedule']} {w['business_key']}): waited {_waited(w['waited_s'])}, "
                f"{w['outcome']}" for w in facts["upstream_waits"]] or ["None."]
    out += ["", "## Stalled runs", ""]
    out += [f"- run {s['run']} ({s['schedule']}): RUNNING since {s['since']}, past its max_runtime"
            for s in facts["stalled"]] or ["None."]
    out += ["", "## Schedule changes", ""]
    out += [f"- {c['at']} {_operator_text(c['actor'], rules)} changed {c['schedule']}: `{c['cron'][0]}` → `{c['cron'][1]}`, "
            f"{c['runs_per_day'][0]:g} → {c['runs_per_day'][1]:g} runs/day"
            + (" (**high risk**: more than 10×)" if c["risk"] == "high" else "")
            for c in facts.get("changes", [])] or ["None."]
    if "holidays" in facts:
        out += ["", "## Holidays", ""]
        out += [f"- {h['schedule']}: {h['date']} {h['name']} (its slots are not run; the next report covers them)"
                for h in facts["holidays"]] or ["None."]
    if "maintenance" in facts:
        out += ["", "## Maintenance windows", ""]
        out += [f"- {w['start']} → {w['end']} "
                + ("all schedules" if w["schedules"] == "all" else ", ".join(w["schedules"]))
                + f"{' (paused)' if w['paused'] else ''}: {_operator_text(w['reason'], rules)}"
                for w in facts["maintenance"]] or ["None."]
    out += ["", "## Backfills", ""]
    out.append(f"{len(facts['backfills'])} backfill run(s)"
               + (f": {', '.join(str(r) for r in facts['backfills'])}." if facts["backfills"] else "."))
    return "\n".join(out) + "\n"
