"""``weekly_report``: one ISO week (Monday 00:00 to Monday 00:00 local) of git activity."""

from __future__ import annotations

from engine.core.models import PeriodKind
from workflows.report import report_workflow

WORKFLOW = report_workflow("weekly_report", PeriodKind.WEEK, "weekly")
