"""The forge's view of a report's range, as COLLECT_GIT pins it: merged pull requests and closed issues.

Read once, at COLLECT_GIT (``steps.forge_read``), and stored in its output, so a retry of the later steps
writes the same titles and reviewers. Text here is what the forge said (titles are untrusted, like commit
text: ``steps.untrusted`` makes them inert where they land). A view that could not be read says why
(``ForgeMissing``): the report says so in one line and keeps git's view.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

ForgeKind = Literal["github", "gitlab", "gitea"]
#: Why a view is missing; each reason has its sentence in every language (``steps.forge_texts``).
MissingReason = Literal["no_token", "no_repository", "refused", "not_found", "unavailable", "rate_limited",
                        "too_large", "unreadable"]


class PullRequest(BaseModel):
    """A pull request (a merge request on GitLab) merged into the report's range."""

    number: int
    title: str
    author: str
    merged_at: str  # UTC ISO, as the forge said
    #: The commit of the range it landed as (its merge, squash or last rebased commit).
    sha: str
    #: Who submitted a review (not its author), in the order of their first review.
    reviewers: list[str] = []
    #: Whose last verdict was an approval.
    approvals: list[str] = []
    labels: list[str] = []
    #: Issues its description closes (``Closes #12``, ``Fixes #3``...).
    closes: list[int] = []


class ClosedIssue(BaseModel):
    """An issue (not a pull request) closed in the report's window."""

    number: int
    title: str
    author: str
    closed_at: str  # UTC ISO
    labels: list[str] = []


class ForgeMissing(BaseModel):
    """Why the forge's view is missing: a reason, and its data (a variable's name, a status, a time; no secret)."""

    reason: MissingReason
    detail: str = ""


class ForgeView(BaseModel):
    """What the forge says about a report's range; ``missing`` set when it could not be read."""

    kind: ForgeKind | None = None  # None: no forge could be told (then ``missing`` says so)
    pulls: list[PullRequest] = []
    issues: list[ClosedIssue] = []
    missing: ForgeMissing | None = None
    #: A listing stopped at its page limit: older entries may be left out (the report says so).
    truncated: bool = False

    @property
    def available(self) -> bool:
        return self.missing is None

    def numbers(self) -> set[int]:
        """Every pull request and issue number the view names: what the model may cite."""
        return ({p.number for p in self.pulls} | {n for p in self.pulls for n in p.closes}
                | {i.number for i in self.issues})
