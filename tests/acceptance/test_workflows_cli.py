"""``reportflow workflows list / show`` and ``[[workflows]]`` problems, through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import run_cli, write_config

CLASH = '''
from engine.plugins.authoring import Workflow
wf = Workflow("daily_report", period="day")

@wf.step
def only(ctx):
    return None
'''


def test_list_shows_installed_workflows_and_their_entry_points(tmp_path: Path) -> None:
    result = run_cli("workflows", "list", "--json", cwd=tmp_path)  # no config here: installed ones only
    assert result.returncode == 0, result.stderr
    listed = {w["name"]: w for w in json.loads(result.stdout)}
    daily = listed["daily_report"]
    assert daily["origin"] == "entry point daily_report = workflows.daily_report:WORKFLOW"
    assert (daily["period"], daily["payload_version"]) == ("day", 1)
    assert [(s["name"], s["output_model"]) for s in daily["steps"]] == [
        ("COLLECT_GIT", "CollectOutput"), ("GENERATE_REPORT", "ReportOutput"), ("SAVE_MARKDOWN", "SaveOutput"),
        ("UPLOAD_NOTION", "UploadOutput"), ("DELIVER", "DeliverOutput")]
    assert listed["weekly_report"]["period"] == "week"


def test_a_file_workflow_clashing_with_an_installed_one_exits_2_naming_both(tmp_path: Path) -> None:
    (tmp_path / "clash.py").write_text(CLASH)
    config = write_config(tmp_path / "reportflow.toml", db_url=f"sqlite:///{tmp_path / 'rf.db'}")
    config.write_text(config.read_text() + '\n[[workflows]]\npath = "clash.py"\n')
    for args in (("workflows", "list"), ("schedules", "apply"), ("work", "--until-idle")):
        result = run_cli(*args, config=config)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        said = "".join(result.stderr.split())  # rich wraps long lines
        assert f"file{tmp_path / 'clash.py'}" in said
        assert "entrypointdaily_report=workflows.daily_report:WORKFLOW" in said
    assert not (tmp_path / "rf.db").exists()  # nothing written


def test_show_an_unknown_workflow_exits_2(tmp_path: Path) -> None:
    result = run_cli("workflows", "show", "nope", cwd=tmp_path)
    assert result.returncode == 2
    assert "unknown workflow 'nope'" in result.stderr
