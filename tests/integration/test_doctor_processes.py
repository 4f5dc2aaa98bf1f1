"""What doctor says about the processes that tick and work: those seen lately by name, the rest in one line each
(a `work` from cron leaves a row per process); a scheduler retired while another ticks is no problem."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engine.read import doctor
from engine.store import instances
from tests.support import RuntimeFactory

T0 = datetime(2026, 9, 29, 12, 0, tzinfo=UTC)
SPEC = dict(name="e", workflow="echo", project="p", cron="0 * * * *", timezone="UTC")


def test_recent_processes_by_name_older_ones_counted(store_url: str, runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, apply=True)
    with rt.store.write() as conn:
        instances.beat(conn, instance_id="scheduler@old-host", role="tick", host="old-host", pid=7, projects=None,
                       now=T0 - timedelta(days=3))  # a host that ticked before serve moved
        instances.beat(conn, instance_id="serve@new-host", role="serve", host="new-host", pid=8, projects=None,
                       now=T0 - timedelta(seconds=30))
        for n in range(40):  # `work --until-idle` from cron, one process a minute, hours ago
            instances.beat(conn, instance_id=f"new-host:{1000 + n}", role="worker", host="new-host", pid=1000 + n,
                           projects=None, now=T0 - timedelta(hours=5, minutes=n))
        for n in range(3):
            instances.beat(conn, instance_id=f"new-host:{2000 + n}", role="worker", host="new-host", pid=2000 + n,
                           projects=None, now=T0 - timedelta(minutes=n + 1))
    found = [(f.check, f.message, f.problem) for f in doctor.check_scheduler(rt)]
    assert found == [
        ("scheduler", "serve on new-host (pid 8) ticked 30 s ago", False),
        ("scheduler", "1 older scheduler process, the newest seen 3 days ago", False),
        ("workers", "worker new-host:2000 last seen 60 s ago", False),
        ("workers", "worker new-host:2001 last seen 2 min ago", False),
        ("workers", "worker new-host:2002 last seen 3 min ago", False),
        ("workers", "40 older worker processes, the newest seen 5 h ago", False),
    ]


def test_a_silent_scheduler_is_one_problem_named_by_the_latest(store_url: str, runtime: RuntimeFactory) -> None:
    rt = runtime(store_url, schedules=[SPEC], at=T0, apply=True)
    with rt.store.write() as conn:
        for n, host in enumerate(("a", "b")):
            instances.beat(conn, instance_id=f"scheduler@{host}", role="tick", host=host, pid=n, projects=None,
                           now=T0 - timedelta(hours=2 + n))
    found = doctor.check_scheduler(rt)
    assert [f.problem for f in found] == [True, False]
    assert found[0].message.startswith("tick on a (pid 0) last ticked") and "still running" in found[0].message
    assert found[1].message == "1 older scheduler process, the newest seen 3 h ago"
