"""``monthly_report``: one calendar month (the 1st 00:00 to the next 1st 00:00 local) of git activity."""

from __future__ import annotations

from engine.core.models import PeriodKind
from workflows.report import report_workflow

WORKFLOW = report_workflow("monthly_report", PeriodKind.MONTH, "monthly")
