"""Which report the run page shows: the newest version first, the earlier ones marked superseded.

A retry whose report differs saves it beside the first (``-v2.md``), so a run can hold
several Markdown artifacts. The newest (the last recorded, as ``doctor`` counts it) is the
report; when its file cannot be shown the run's latest generated text (the database copy)
stands in, with the reason. Earlier files are shown only when they are still what the run
wrote, like the newest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from engine.core import errors
from engine.core.models import Run
from engine.runtime import Runtime
from engine.web import markdown


@dataclass(frozen=True)
class Version:
    """One saved version of a run's report: where it is, and its HTML or why it is not shown."""

    source: str
    html: Markup | None
    problem: str | None = None


@dataclass(frozen=True)
class RunReport:
    """The run page's report: the current version (None: the run has no report text) and the superseded ones."""

    current: Version | None
    superseded: tuple[Version, ...] = ()


def report_of(rt: Runtime, run: Run) -> RunReport:
    """The newest report of ``run`` first, then every earlier saved version, newest first."""
    root = None
    try:
        workflow = rt.workflow(run.workflow)
        root = workflow.files_root(rt.settings(workflow.name))
    except errors.ReportflowError:
        pass
    forge = run.pinned.get("forge")
    forge = forge if isinstance(forge, str) else None  # the one place a link in the report may point
    files = [a for a in run.artifacts if a.kind == "markdown"][::-1]  # recorded in order: newest first
    versions = []
    for artifact in files:
        found = markdown.read_local_report(artifact.location, root, artifact.sha256)
        html = markdown.to_html(found.text, forge) if found.text is not None else None
        versions.append(Version(artifact.location, html, found.problem))
    newest = versions[0] if versions else None
    if newest is None or newest.html is None:
        text, step = _generated_text(run)
        if text is not None:
            problem = newest.problem if newest is not None else None
            newest = Version(f"{step} output (database)", markdown.to_html(text, forge), problem)
    return RunReport(newest, tuple(versions[1:]))


def _generated_text(run: Run) -> tuple[str | None, str | None]:
    """The report text the run's steps produced last (kept in the database), and the step's name."""
    found: tuple[str | None, str | None] = (None, None)
    for step in run.steps:
        output: dict[str, Any] = step.output or {}
        if isinstance(output.get("text"), str):
            found = (output["text"], step.name)
    return found
