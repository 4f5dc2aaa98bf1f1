"""``sprint_report``: one sprint (its schedule's ``sprint``: ``length`` days from an ``anchor``) of git activity."""

from __future__ import annotations

from engine.core.models import PeriodKind
from workflows.report import report_workflow

WORKFLOW = report_workflow("sprint_report", PeriodKind.SPRINT, "sprint")
