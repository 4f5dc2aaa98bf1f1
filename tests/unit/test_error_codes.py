"""The error-code table is data (engine/core/error_codes.py): the README shows it, the retry
classes agree with it."""

from __future__ import annotations

import re

from engine.core import error_codes, errors
from tests.support import REPO_ROOT


def test_the_readme_table_is_the_data() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    assert error_codes.markdown_table() in readme


def test_every_code_raised_anywhere_has_a_row() -> None:
    """A run can end with a code only if the table says whether it is retried and what to do."""
    pattern = re.compile(r'(?:step_error|StepError)\(\s*"([A-Z_]+)"|error_code(?:, error_message)?\s*=\s*"([A-Z_]+)"')
    raised = set()
    for package in ("engine", "steps", "workflows"):
        for path in (REPO_ROOT / package).rglob("*.py"):
            raised |= {a or b for a, b in pattern.findall(path.read_text())}
    assert {"CONFIG_INVALID", "STEP_CRASHED", "CANCELLED", "CHILDREN_FAILED"} <= raised  # the scan sees them
    assert sorted(raised - set(error_codes.BY_CODE)) == []


def test_the_retryable_codes_are_read_from_the_table() -> None:
    assert errors.step_error("MODEL_UNAVAILABLE", "down").retryable
    assert errors.step_error("STEP_CRASHED", "bug").retryable
    assert not errors.step_error("GIT_REPO_SHALLOW", "cut").retryable
    assert not errors.step_error("CONFIG_INVALID", "bad").retryable
    assert error_codes.runbook("GIT_REPO_NOT_FOUND") == ("`projects[].repo` path or branch does "
                                                         "not exist on this node")
    assert error_codes.runbook("NO_SUCH_CODE") is None and error_codes.runbook(None) is None
