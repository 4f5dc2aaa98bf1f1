"""docs/TUTORIAL.md, run as written: the release-notes workflow from one file, through the real CLI.

The example's ``flow.py`` and ``reportflow.toml`` are copied unchanged except
for the repository path (a scratch repository with tags on known dates). The
witnesses are outside the engine: a ``git`` wrapper that logs every git command
the workflow runs (``GIT_PYTHON_GIT_EXECUTABLE``), the webhook receiver's
record of requests, and the notes file on disk.
"""

from __future__ import annotations

import json
import shutil
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.acceptance import procs
from tests.fakes import webhook
from tests.fakes.gitrepo import make_repo
from tests.support import REPO_ROOT

pytestmark = pytest.mark.slow
EXAMPLE = REPO_ROOT / "examples" / "release_notes"
T0 = datetime(2026, 1, 14, 12, 0, tzinfo=UTC)  # a Wednesday: last week is 2026-W02 (Jan 5-11)


def tutorial_folder(tmp: Path) -> Path:
    """The example as a user would copy it, pointed at a repository with four tagged releases."""
    repo = make_repo(tmp)
    for when, tag in [("2025-12-30T10:00:00+00:00", "v0.9.0"), ("2026-01-06T10:00:00+00:00", "v1.0.0"),
                      ("2026-01-09T15:00:00+01:00", "v1.1.0"), ("2026-01-13T10:00:00+00:00", "v1.2.0")]:
        repo.commit(f"Release {tag}", at=datetime.fromisoformat(when))
        repo.git("tag", tag)
    folder = tmp / "release_notes"
    folder.mkdir()
    shutil.copy(EXAMPLE / "flow.py", folder / "flow.py")
    config = (EXAMPLE / "reportflow.toml").read_text()
    assert 'repo = "../.."' in config
    (folder / "reportflow.toml").write_text(config.replace('repo = "../.."', f'repo = "{repo.path}"'))
    return folder


def git_witness(tmp: Path) -> tuple[dict[str, str], Path]:
    """A git executable that logs its arguments, then runs the real git."""
    log = tmp / "git-commands.log"
    wrapper = tmp / "git-witness"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{shutil.which("git")}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return {"GIT_PYTHON_GIT_EXECUTABLE": str(wrapper)}, log


def collected(log: Path) -> int:
    """How many times COLLECT_TAGS listed the tags (its one git command)."""
    return sum("for-each-ref" in line for line in log.read_text().splitlines()) if log.exists() else 0


def run_json(tmp: Path, config: Path, now: str) -> dict[str, Any]:
    shown: dict[str, Any] = json.loads(procs.ok(procs.run(tmp, config, "runs", "show", "1", "--json", now=now)))
    return shown


def test_the_tutorial_pipeline_survives_a_sigkill_and_a_retry_from_a_step(tmp_path: Path) -> None:
    folder = tutorial_folder(tmp_path)
    config = folder / "reportflow.toml"
    witness_env, witness = git_witness(tmp_path)
    clock = procs.Shared(T0)
    with webhook.serve() as hook:
        env = {**witness_env, "RELEASE_WEBHOOK_URL": hook.url}

        # 1. The workflow is found in the file, with its typed steps.
        shown = json.loads(procs.ok(procs.run(tmp_path, config, "workflows", "show", "release_notes", "--json")))
        assert shown["origin"] == f"file {folder / 'flow.py'}"
        assert [(s["name"], s["output_model"]) for s in shown["steps"]] == [
            ("COLLECT_TAGS", "Tags"), ("RENDER_NOTES", "Notes"), ("POST_WEBHOOK", "Posted")]

        # 2. Schedule it, and ask for last week's notes now.
        procs.ok(procs.run(tmp_path, config, "schedules", "apply", now=clock.at()))
        assert "2026-W02" in procs.ok(procs.run(tmp_path, config, "trigger", "release-notes", "--date", "2026-01-05",
                                          now=clock.at(), env=env))

        # 3. The worker is killed while the webhook holds its POST.
        hook.hold_next()
        worker = procs.spawn(tmp_path, config, "work", "--until-idle", now=clock.at(), env=env)
        assert hook.arrived.wait(120), procs.finish(worker, timeout=5)
        procs.kill9(worker)
        hook.release()
        assert collected(witness) == 1
        notes = folder / "release-notes" / "2026-W02.md"
        assert notes.read_text() == ("# Release notes 2026-W02\n\n- **v1.0.0** (2026-01-06): Release v1.0.0\n"
                                     "- **v1.1.0** (2026-01-09): Release v1.1.0\n")
        assert run_json(tmp_path, config, clock.at())["status"] == "RUNNING"

        # 4. Past the lease, the reconciler hands the run back; a new worker resumes at POST_WEBHOOK.
        procs.ok(procs.run(tmp_path, config, "reconcile", now=clock.at(120)))
        assert run_json(tmp_path, config, clock.at(120))["status"] == "RETRY_PENDING"
        procs.ok(procs.run(tmp_path, config, "work", "--until-idle", now=clock.at(121), env=env))
        shown_run = run_json(tmp_path, config, clock.at(121))
        assert shown_run["status"] == "SUCCESS"
        assert collected(witness) == 1  # COLLECT_TAGS did not run again
        assert [(s["name"], s["attempts"]) for s in shown_run["steps"]] == [
            ("COLLECT_TAGS", 1), ("RENDER_NOTES", 1), ("POST_WEBHOOK", 2)]
        assert [t["name"] for t in shown_run["steps"][0]["output"]["tags"]] == ["v1.0.0", "v1.1.0"]
        assert [r.status for r in hook.received] == [200, 200]

        # 5. Retry from RENDER_NOTES (the webhook flaps once: retried inside the step).
        hook.fail_next(503)
        procs.ok(procs.run(tmp_path, config, "runs", "retry", "1", "--from-step", "RENDER_NOTES", now=clock.at(130)))
        procs.ok(procs.run(tmp_path, config, "work", "--until-idle", now=clock.at(131), env=env))
        final = run_json(tmp_path, config, clock.at(131))
    assert final["status"] == "SUCCESS"
    assert collected(witness) == 1  # still: the retry reused the committed, typed Tags
    assert [r.status for r in hook.received] == [200, 200, 503, 200]
    assert {r.headers["idempotency-key"] for r in hook.received} == {"release_notes:reportflow:2026-W02"}
    assert {r.body["markdown"] for r in hook.received} == {notes.read_text()}
    assert [a["outcome"] for a in final["attempts"]] == ["lost", "success", "success"]


ANNOUNCE = REPO_ROOT / "examples" / "announce"


def test_the_fan_out_tutorial_survives_a_sigkill_mid_fan_out(tmp_path: Path) -> None:
    folder = tmp_path / "announce"
    folder.mkdir()
    shutil.copy(ANNOUNCE / "flow.py", folder / "flow.py")
    shutil.copy(ANNOUNCE / "reportflow.toml", folder / "reportflow.toml")
    config = folder / "reportflow.toml"
    clock = procs.Shared(T0)
    with webhook.serve() as hook:
        env = {"ANNOUNCE_WEBHOOK_URL": hook.url}
        procs.ok(procs.run(tmp_path, config, "schedules", "apply", now=clock.at()))
        procs.ok(procs.run(tmp_path, config, "trigger", "announce", "--date", "2026-01-05", now=clock.at()))

        # The worker is killed while the first channel's POST hangs.
        hook.hold_next()
        worker = procs.spawn(tmp_path, config, "work", "--until-idle", now=clock.at(), env=env)
        assert hook.arrived.wait(120), procs.finish(worker, timeout=5)
        procs.kill9(worker)
        hook.release()
        parent = run_json(tmp_path, config, clock.at())
        assert parent["status"] == "WAITING" and parent["lease_owner"] is None
        listed = json.loads(procs.ok(procs.run(tmp_path, config, "runs", "list", "--parent", "1", "--json",
                                         now=clock.at())))
        assert sorted((r["idempotency_key"], r["status"]) for r in listed) == [
            ("announce:team:2026-01-05/design", "QUEUED"), ("announce:team:2026-01-05/ops", "RUNNING"),
            ("announce:team:2026-01-05/platform", "QUEUED")]

        # Past the lease, the reconciler hands the child back; the family completes.
        procs.ok(procs.run(tmp_path, config, "reconcile", now=clock.at(120)))
        procs.ok(procs.run(tmp_path, config, "work", "--until-idle", now=clock.at(121), env=env))
        final = run_json(tmp_path, config, clock.at(121))
    assert final["status"] == "SUCCESS"
    assert [(c["key"].rpartition("/")[2], c["status"]) for c in final["children"]] == [
        ("ops", "SUCCESS"), ("platform", "SUCCESS"), ("design", "SUCCESS")]
    assert [(s["name"], s["attempts"]) for s in final["steps"]] == [("SPLIT", 1), ("SUMMARY", 1)]
    assert (folder / "announcements" / "2026-01-05.md").read_text() == (
        "# Announcements 2026-01-05\n\n- ops: posted\n- platform: posted\n- design: posted\n")
    posts = [(r.body["channel"], r.headers["idempotency-key"]) for r in hook.received]
    assert sorted(posts) == sorted([("ops", "announce:team:2026-01-05/ops")] * 2 + [
        ("platform", "announce:team:2026-01-05/platform"), ("design", "announce:team:2026-01-05/design")])
