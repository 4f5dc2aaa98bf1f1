"""The error-code table is data (engine/core/error_codes.py): the README shows it, the retry
classes agree with it."""

from __future__ import annotations

from engine.core import error_codes, errors
from tests.support import REPO_ROOT


def test_the_readme_table_is_the_data() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    assert error_codes.markdown_table() in readme


def test_retried_codes_are_the_retryable_ones() -> None:
    retried = {e.code for e in error_codes.CODES if e.retried == "yes"}
    assert retried == set(errors.RETRYABLE_CODES) - {"LEASE_EXPIRED"}
    assert error_codes.runbook("GIT_REPO_NOT_FOUND") == ("`projects[].repo` path or branch does "
                                                         "not exist on this node")
    assert error_codes.runbook("NO_SUCH_CODE") is None and error_codes.runbook(None) is None
