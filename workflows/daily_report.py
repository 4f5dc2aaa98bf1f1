"""``daily_report``: one local calendar day of git activity, as a Markdown report (and a Notion page)."""

from __future__ import annotations

from engine.core.models import PeriodKind
from workflows.report import report_workflow

WORKFLOW = report_workflow("daily_report", PeriodKind.DAY, "daily")
