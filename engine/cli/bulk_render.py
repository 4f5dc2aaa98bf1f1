"""Rendering of the bulk actions (``runs retry --schedule``, ``runs approve --all``, ``trigger --from/--to``).

Plain lines (``output.say``), or JSON: the plan an operator confirms, and what was done.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from engine.cli import output
from engine.core import bulk

VERB = {"retry": ("would retry", "retried"), "approve": ("would approve", "approved")}
SHOWN_BEFORE_ASKING = 20  # a prompt lists this many runs; --dry-run lists them all


def _target_line(target: bulk.Target) -> str:
    error = f" {target.error_code}" if target.error_code else ""
    return f"  run {target.run_id} {target.key}: {target.status}{error}"


def plan_data(plan: bulk.BulkPlan) -> dict[str, Any]:
    """A plan as ``--dry-run --json`` prints it."""
    return {"action": plan.action, "schedule": plan.schedule, "statuses": list(plan.statuses),
            "from": None if plan.first is None else plan.first.isoformat(),
            "to": None if plan.last is None else plan.last.isoformat(), "dry_run": True,
            "runs": [asdict(t) for t in plan.targets]}


def plan(plan: bulk.BulkPlan, as_json: bool, *, limit: int | None = None) -> None:
    """Print what a bulk action would do (its dry run): a line, then the runs (the first ``limit`` of them)."""
    if as_json:
        output.json_out(plan_data(plan))
        return
    output.say(f"{VERB[plan.action][0]} {len(plan.targets)} run(s): {plan.describe()}")
    shown = plan.targets if limit is None else plan.targets[:limit]
    for target in shown:
        output.say(_target_line(target))
    if len(shown) < len(plan.targets):
        output.say(f"  ... and {len(plan.targets) - len(shown)} more (--dry-run lists them all)")


def question(plan: bulk.BulkPlan) -> str:
    """The confirmation asked before a bulk action."""
    return f"{plan.action} {len(plan.targets)} run(s) ({plan.describe()})?"


def outcomes(plan: bulk.BulkPlan, done: Sequence[bulk.BulkOutcome], as_json: bool) -> None:
    """Print what a bulk action did: a count, then a line per run skipped (each acted-on run is in the audit)."""
    acted = [o for o in done if o.action != "skipped"]
    skipped = [o for o in done if o.action == "skipped"]
    if as_json:
        output.json_out({"action": plan.action, "schedule": plan.schedule, "dry_run": False,
                  "done": len(acted), "skipped": len(skipped), "runs": [asdict(o) for o in done]})
        return
    output.say(f"{VERB[plan.action][1]} {len(acted)} run(s) of {plan.schedule}"
        + (f"; {len(skipped)} skipped" if skipped else ""))
    for outcome in acted if len(acted) <= SHOWN_BEFORE_ASKING else ():
        output.say(f"  {outcome.message}")
    for outcome in skipped:
        output.say(f"  skipped: {outcome.message}")


def trigger_range(report: Any, dry_run: bool, as_json: bool) -> None:
    """Print ``trigger --from/--to``: the count per action, then each period acted on (or would be), or JSON."""
    counts = report.counts()
    if as_json:
        output.json_out({"dry_run": dry_run, "counts": counts, "future": report.future, "no_slot": report.no_slot,
                  "periods": [{"business_key": r.business_key, "action": r.action, "run_id": r.run_id or None,
                               "status": r.status or None} for r in report.results]})
        return
    words = ", ".join(f"{action} {n}" for action, n in sorted(counts.items())) or "no period"
    output.say(f"{'would trigger' if dry_run else 'triggered'} {len(report.results)} period(s): {words}")
    for result in report.results:
        if result.action != "unchanged":
            output.say(f"  {result.message}")
    if report.future:
        output.say(f"  not yet due: {', '.join(report.future)}")
    if report.no_slot:
        output.say(f"  no slot (the cron never fires for these periods): {', '.join(report.no_slot)}")
