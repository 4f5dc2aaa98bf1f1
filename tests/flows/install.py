"""Register the test workflows for subprocesses through a real entry point.

``importlib.metadata`` finds entry points in any ``*.dist-info`` folder on
``sys.path``; we write one in a temporary folder and put it on PYTHONPATH.
"""

from __future__ import annotations

from pathlib import Path

from tests.support import REPO_ROOT


def site_dir(tmp: Path) -> Path:
    site = tmp / "site"
    info = site / "reportflow_testflows-0.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: reportflow-testflows\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text(
        "[reportflow.workflows]\nfour_steps = tests.flows.testflows:FOUR_STEPS\n")
    return site


def pythonpath(tmp: Path) -> str:
    return f"{REPO_ROOT}:{site_dir(tmp)}"
