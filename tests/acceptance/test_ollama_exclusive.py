"""At most one generation at a time per Ollama host, across worker processes."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from tests.acceptance import procs
from tests.fakes.fake_ollama import FakeOllama
from tests.fakes.gitrepo import make_repo
from tests.support import write_config

pytestmark = pytest.mark.slow
SEOUL = ZoneInfo("Asia/Seoul")


def four_days_queued(tmp_path: Path, store_url: str, llm: dict[str, object]) -> tuple[Path, str]:
    """A repository with work on four days, a daily schedule on ``llm``, and a run of each day queued; the config
    and the shared ``--now`` of every process."""
    repo = make_repo(tmp_path)
    for day in (25, 26, 27, 28):
        repo.commit(f"work on the {day}th", at=datetime(2026, 9, day, 12, 0, tzinfo=SEOUL))
    config = write_config(
        tmp_path / "reportflow.toml", db_url=store_url,
        sections={"llm": llm, "reports": {"dir": str(tmp_path / "out")}, "worker": {"poll_interval": "0.1s"}},
        projects=[dict(key="platform", repo=str(repo.path), branches=["main"])],
        schedules=[dict(name="daily", workflow="daily_report", project="platform", cron="0 3 * * *",
                        timezone="Asia/Seoul")])
    now = procs.Shared(datetime(2026, 9, 30, tzinfo=UTC)).at(0)  # one timeline for every process
    assert procs.run(tmp_path, config, "schedules", "apply", now=now).returncode == 0
    for day in (25, 26, 27, 28):
        result = procs.run(tmp_path, config, "trigger", "daily", "--date", f"2026-09-{day}", now=now)
        assert result.returncode == 0, result.stderr
    return config, now


def test_two_workers_share_one_ollama_host_one_generation_at_a_time(store_url: str, tmp_path: Path) -> None:
    fake = FakeOllama().start()
    # The first generation is held until the other worker has looked the model up (its next call is the
    # generation), then takes a second more: without the lock that second worker's request would overlap.
    fake.hold_first_generation = True
    fake.generation_delay_s = 1.0
    try:
        config, now = four_days_queued(tmp_path, store_url, {"provider": "ollama", "host": fake.url})
        workers = [procs.spawn(tmp_path, config, "work", "--until-idle", now=now) for _ in range(2)]
        for proc in workers:
            _, err = procs.finish(proc, timeout=300)
            assert proc.returncode == 0, err
        assert fake.generations == 4
        assert fake.max_active == 1
        pids = {proc.pid for proc in workers}
        windows = sorted(fake.windows, key=lambda g: g.start)
        # Both workers generated, and never two at once.
        assert {g.pid for g in windows} == pids
        assert all(a.end <= b.start for a, b in zip(windows, windows[1:], strict=False))
        # ...while the other worker was already on its way to generate: the lock, not luck, kept them apart.
        assert fake.rival_looked_up.is_set()
    finally:
        fake.stop()
    assert len(list((tmp_path / "out" / "platform").glob("*.md"))) == 4


@pytest.mark.parametrize(("nodes", "slots", "together"), [(("a", "b"), 1, 2), (("a", "a"), 1, 1), (("a", "a"), 2, 2)])
def test_a_local_model_host_is_each_nodes_own_pool_of_slots(store_url: str, tmp_path: Path, nodes: tuple[str, str],
                                                            slots: int, together: int) -> None:
    """Issue 43, item 4: nodes each using their own Ollama at 127.0.0.1 serialised each other (one lock keyed by
    the URL across every node), so a second node never sped the model step. A local address is now a pool per
    node, of ``[llm] slots`` generations: two nodes generate at once; one node, one at a time unless it has two
    slots."""
    fake = FakeOllama().start()
    # The first generation is held until the other worker has looked the model up (its next call is its
    # generation), then takes 1.5 s more: the two overlap whenever the pools let them.
    fake.hold_first_generation = True
    fake.generation_delay_s = 1.5
    try:
        assert fake.url.startswith("http://127.0.0.1:")  # one local address for every "node" of this test
        config, now = four_days_queued(tmp_path, store_url, {"provider": "ollama", "host": fake.url, "slots": slots})
        workers = [procs.spawn(tmp_path, config, "work", "--until-idle", now=now, env={"REPORTFLOW_NODE": node})
                   for node in nodes]
        for proc in workers:
            _, err = procs.finish(proc, timeout=300)
            assert proc.returncode == 0, err
        assert fake.generations == 4 and fake.max_active == together
    finally:
        fake.stop()


def test_each_node_declares_the_model_host_it_reaches(store_url: str, tmp_path: Path) -> None:
    """One shared file, each node its own Ollama: a node's ``REPORTFLOW_LLM_HOST`` is the host its workers
    generate on (and the pool they count in), over ``[llm] host`` (here an address nothing answers)."""
    fakes = [FakeOllama().start(), FakeOllama().start()]
    try:
        config, now = four_days_queued(tmp_path, store_url, {"provider": "ollama", "host": "http://127.0.0.1:9"})
        workers = [procs.spawn(tmp_path, config, "work", "--until-idle", now=now,
                               env={"REPORTFLOW_NODE": node, "REPORTFLOW_LLM_HOST": fake.url})
                   for node, fake in zip(("a", "b"), fakes, strict=True)]
        for proc in workers:
            _, err = procs.finish(proc, timeout=300)
            assert proc.returncode == 0, err
        assert sum(fake.generations for fake in fakes) == 4
        for fake, proc in zip(fakes, workers, strict=True):  # each host saw its own node's worker only
            assert {g.pid for g in fake.windows if g.pid is not None} <= {proc.pid}  # (a pid the fake could read)
        assert any(g.pid is not None for fake in fakes for g in fake.windows)
        doctor = procs.run(tmp_path, config, "doctor", now=now, env={"REPORTFLOW_LLM_HOST": fakes[0].url})
        assert f"generation pool ollama:{fakes[0].url} on " in " ".join(doctor.stdout.split()), doctor.stdout
        bad = procs.run(tmp_path, config, "work", "--until-idle", now=now, env={"REPORTFLOW_LLM_HOST": "ftp://x"})
        assert bad.returncode == 2 and "REPORTFLOW_LLM_HOST" in bad.stderr
    finally:
        for fake in fakes:
            fake.stop()
    assert len(list((tmp_path / "out" / "platform").glob("*.md"))) == 4
