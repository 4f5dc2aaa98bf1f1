"""Child runs (SPEC §17) with real processes on SQLite and PostgreSQL: SIGKILL at every point of the
fan-out and the fan-in, racing ticks, two workers sharing one parent's children, the CLI's views."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from engine.store.tables import runs
from tests.acceptance import procs
from tests.flows import family
from tests.flows.install import site_dir
from tests.support import connected, write_config

pytestmark = pytest.mark.slow
T0 = datetime(2026, 9, 29, 9, 0, tzinfo=UTC)


def family_config(tmp: Path, url: str, **flow: object) -> Path:
    family.site_dir(site_dir(tmp))  # beside the test workflows that procs registers
    sections: dict[str, dict[str, Any]] = {
        "worker": {"lease": "60s", "retry_backoff": "1s", "poll_interval": "0.2s"},
        "familyflow": {"log": str(tmp / "family.log"), "gate": str(tmp / "gate"), "items": ["a", "b", "c", "d"], **flow}}
    schedule = dict(name="fan", workflow="fan_parent", project="p1", cron="0 * * * *", timezone="UTC",
                    misfire="RUN_ONCE", overlap="SKIP_NEW")
    return write_config(tmp / "reportflow.toml", db_url=url, sections=sections, schedules=[schedule])


def log_lines(tmp: Path) -> list[list[str]]:
    path = tmp / "family.log"
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def rows(url: str) -> list[dict[str, object]]:
    with connected(url) as conn:
        return [dict(r._mapping) for r in conn.execute(select(runs).order_by(runs.c.id))]


def assert_family_done(url: str, tmp: Path) -> None:
    found = rows(url)
    (parent,) = [r for r in found if r["parent_id"] is None]
    children = [r for r in found if r["parent_id"] == parent["id"]]
    assert parent["status"] == "SUCCESS", parent
    assert sorted(str(r["idempotency_key"]) for r in children) == [
        f"{parent['idempotency_key']}/{name}" for name in "abcd"]
    assert {r["status"] for r in children} == {"SUCCESS"}
    successes = Counter(line[2] for line in log_lines(tmp) if line[0] == "work")
    assert set(successes) == set("abcd")


# A kill mid child and mid fan-in by default; mid fan-out (the parent's own step) with --long.
@pytest.mark.parametrize("point", [pytest.param("fan_out", marks=pytest.mark.long), "child", "fan_in"])
def test_sigkill_at_each_point_of_a_fan_out_and_the_family_still_completes(store_url: str, tmp_path: Path,
                                                                           point: str) -> None:
    flows: dict[str, dict[str, Any]] = {"fan_out": {"block_split": True}, "child": {"block_child": "b"},
                                        "fan_in": {"block_join": True}}
    flow = flows[point]
    config = family_config(tmp_path, store_url, **flow)
    clock = procs.Shared(T0)
    procs.ok(procs.run(tmp_path, config, "schedules", "apply", now=clock.at(-3600)))
    procs.ok(procs.run(tmp_path, config, "tick", now=clock.at(60)))
    worker = procs.spawn(tmp_path, config, "work", "--until-idle", "--worker-id", "doomed", now=clock.at(60))
    witnesses: dict[str, Callable[[list[str]], bool]] = {
        "fan_out": lambda line: line[0] == "split", "child": lambda line: line[:1] + line[2:3] == ["work", "b"],
        "fan_in": lambda line: line[0] == "join"}
    witness = witnesses[point]
    procs.wait_for(lambda: any(witness(line) for line in log_lines(tmp_path)), what=f"the worker to reach {point}")
    procs.kill9(worker)
    if point == "fan_out":  # the boundary never committed: no child exists, none is half made
        assert [r["parent_id"] for r in rows(store_url)] == [None]
    procs.ok(procs.run(tmp_path, config, "reconcile", now=clock.at(200)))  # the lease has run out
    procs.ok(procs.run(tmp_path, config, "work", "--until-idle", now=clock.at(201)))
    assert_family_done(store_url, tmp_path)
    lines = log_lines(tmp_path)
    assert sum(1 for line in lines if line[0] == "split") == (2 if point == "fan_out" else 1)
    assert sum(1 for line in lines if line[0] == "join") == (2 if point == "fan_in" else 1)
    work = Counter(line[2] for line in lines if line[0] == "work")
    assert work == Counter({"a": 1, "b": 2 if point == "child" else 1, "c": 1, "d": 1})


def test_racing_ticks_and_two_workers_make_one_family_each_child_run_once(store_url: str, tmp_path: Path) -> None:
    config = family_config(tmp_path, store_url)
    clock = procs.Shared(T0)
    procs.ok(procs.run(tmp_path, config, "schedules", "apply", now=clock.at(-3600)))
    ticks = [procs.spawn(tmp_path, config, "tick", now=clock.at(60)) for _ in range(4)]
    for proc in ticks:
        _, err = procs.finish(proc, timeout=300)
        assert proc.returncode == 0, err
    assert len(rows(store_url)) == 1
    workers = [procs.spawn(tmp_path, config, "work", "--until-idle", "--worker-id", f"w{i}", now=clock.at(61))
               for i in range(2)]
    for proc in workers:
        _, err = procs.finish(proc, timeout=300)
        assert proc.returncode == 0, err
    procs.ok(procs.run(tmp_path, config, "work", "--until-idle", now=clock.at(62)))  # whatever the first two left
    assert_family_done(store_url, tmp_path)
    assert Counter(line[2] for line in log_lines(tmp_path) if line[0] == "work") == Counter("abcd")


def test_runs_show_and_list_name_children_and_parent(sqlite_url: str, tmp_path: Path) -> None:
    config = family_config(tmp_path, sqlite_url, fail=["c"])
    clock = procs.Shared(T0)
    procs.ok(procs.run(tmp_path, config, "schedules", "apply", now=clock.at(-3600)))
    procs.ok(procs.run(tmp_path, config, "tick", now=clock.at(60)))
    procs.ok(procs.run(tmp_path, config, "work", "--until-idle", now=clock.at(61)))
    (parent,) = [r for r in rows(sqlite_url) if r["parent_id"] is None]
    shown = procs.run(tmp_path, config, "runs", "show", str(parent["id"]), "--json", now=clock.at(62))
    procs.ok(shown)
    detail = json.loads(shown.stdout)
    assert detail["status"] == "PARTIAL_SUCCESS" and detail["parent"] is None
    assert [(c["key"].rpartition("/")[2], c["project"], c["status"]) for c in detail["children"]] == [
        ("a", "p1", "SUCCESS"), ("b", "p1", "SUCCESS"), ("c", "p1", "FAILED"), ("d", "p1", "SUCCESS")]
    child = json.loads(procs.run(tmp_path, config, "runs", "show", str(detail["children"][2]["id"]), "--json",
                                 now=clock.at(62)).stdout)
    assert child["parent"] == parent["id"] and child["children"] == [] and child["error_code"] == "GIT_REPO_NOT_FOUND"
    listed = procs.run(tmp_path, config, "runs", "list", "--parent", str(parent["id"]), "--json", now=clock.at(62))
    procs.ok(listed)
    assert sorted(r["id"] for r in json.loads(listed.stdout)) == [c["id"] for c in detail["children"]]
    table = procs.run(tmp_path, config, "runs", "show", str(parent["id"]), now=clock.at(62))
    procs.ok(table)
    assert "child runs" in table.stdout and "GIT_REPO_NOT_FOUND" in table.stdout
