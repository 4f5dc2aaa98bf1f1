"""``quarterly_report``: one calendar quarter (January, April, July or October 1st 00:00 local, three months) of git
activity."""

from __future__ import annotations

from engine.core.models import PeriodKind
from workflows.report import report_workflow

WORKFLOW = report_workflow("quarterly_report", PeriodKind.QUARTER, "quarterly")
