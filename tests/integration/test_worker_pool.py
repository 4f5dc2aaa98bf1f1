"""Several runs in flight in one process (``WorkerPool``) and group commit, on SQLite and PostgreSQL.

Witnesses are the steps' own records (in-process counters kept by the test
workflow), never the engine's timings; no test depends on speed.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, update

from engine.core import errors
from engine.core.clock import ManualClock
from engine.core.models import PeriodKind, RunStatus
from engine.core.run_end import RunOutcome
from engine.execution.group_commit import GroupCommitter
from engine.execution.pool import WorkerPool
from engine.operations import actions
from engine.plugins.contract import StepContext, StepFn, StepResult, StepSpec, WorkflowDef
from engine.runtime import Runtime
from engine.scheduling import definitions
from engine.store import run_rows
from engine.store.handle import Store
from engine.store.tables import rate_limits, runs, steps
from tests.support import ManualRuntime, RuntimeFactory, make_runtime

T0 = datetime(2026, 9, 29, 5, 1, tzinfo=UTC)


class Witness:
    """What the steps saw: executions per (run, step) and how many ran at once, per group."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.executions: Counter[tuple[int, str]] = Counter()
        self.in_flight: Counter[str] = Counter()
        self.most: Counter[str] = Counter()
        self.hooks: dict[str, object] = {}

    def enter(self, groups: list[str]) -> None:
        with self.lock:
            for group in groups:
                self.in_flight[group] += 1
                self.most[group] = max(self.most[group], self.in_flight[group])

    def leave(self, groups: list[str]) -> None:
        with self.lock:
            for group in groups:
                self.in_flight[group] -= 1


def witnessed(witness: Witness, name: str, wait_s: float = 0.0) -> StepFn:
    def step(ctx: StepContext) -> StepResult:
        groups = ["all", f"key:{ctx.project}:{ctx.business_key}"] + (["backfill"] if ctx.project == "bf" else [])
        witness.enter(groups)
        try:
            with witness.lock:
                witness.executions[(ctx.run_id, name)] += 1
            hook = witness.hooks.get(name)
            if callable(hook):
                hook(ctx)
            if wait_s:
                threading.Event().wait(wait_s)  # the step's "I/O": gives the other threads time to overlap
            return StepResult(output={"step": name})
        finally:
            witness.leave(groups)

    return step


def flow(witness: Witness, names: tuple[str, ...], wait_s: float = 0.0) -> WorkflowDef:
    return WorkflowDef(name="pooled", period=PeriodKind.SLOT,
                       steps=tuple(StepSpec(n, witnessed(witness, n, wait_s)) for n in names))


def schedule(name: str, project: str) -> dict[str, object]:
    return dict(name=name, workflow="pooled", project=project, cron="0 * * * *", timezone="UTC",
                misfire="CATCH_UP_ALL", overlap="ALLOW")


def pooled(runtime: RuntimeFactory, url: str, workflow: WorkflowDef, specs: list[dict[str, object]],
           **worker: object) -> ManualRuntime:
    """``specs`` of ``workflow`` (the only one installed) applied at ``T0``, with a 60 s lease and ``worker``."""
    return runtime(url, schedules=specs, at=T0, workflows={"pooled": workflow}, installed=False,
                   config={"worker": {"lease": "60s", **worker}}, apply=True)


def statuses(rt: Runtime) -> Counter[str]:
    with rt.store.read() as conn:
        return Counter(conn.execute(select(runs.c.status)).scalars())


def test_limits_hold_with_eight_runs_in_flight(store_url: str, runtime: RuntimeFactory) -> None:
    witness = Witness()
    rt = pooled(runtime, store_url, flow(witness, ("ONE", "TWO"), wait_s=0.01),
                [schedule("keyed", "k"), schedule("bf", "bf")], concurrency=8, backfill_concurrency=2)
    first = actions.trigger(rt, "keyed")
    # One base key, two revisions queued at once (a third would wait for the second to start: one pending
    # revision per period).
    revision = actions.trigger(rt, "keyed", force_new=True)
    backfill = actions.backfill(rt, "bf", first=date(2026, 9, 28), last=date(2026, 9, 28))
    assert len(backfill.created) == 24 and first.run_id is not None and revision.action == "revision"
    pool = WorkerPool(rt, "pool")
    try:
        outcomes = pool.work(until_idle=True)
    finally:
        pool.close()
    assert len(outcomes) == 26 and {o.status for o in outcomes} == {RunStatus.SUCCESS}
    assert statuses(rt) == {"SUCCESS": 26}
    assert set(witness.executions.values()) == {1} and len(witness.executions) == 26 * 2  # each step once
    keyed = [g for g in witness.most if g.startswith("key:k:")]
    assert len(keyed) == 1 and witness.most[keyed[0]] == 1  # the 2 revisions never overlapped
    assert witness.most["backfill"] == 2  # backfill_concurrency, reached and never passed
    assert witness.most["all"] >= 3  # several runs really were in flight at once


def test_a_fence_failing_inside_a_batch_drops_that_boundary_alone(store_url: str, runtime: RuntimeFactory) -> None:
    """Two boundaries in one transaction: one fails its guard and is rolled back; the other commits."""
    rt = pooled(runtime, store_url, flow(Witness(), ("ONE",)), [])
    committer = GroupCommitter(rt.store.engine, timedelta(seconds=60))
    committer.busy()
    committer.busy()  # the leader waits for both (the window is far longer than this test)
    both_inside = threading.Barrier(2)
    seen: dict[str, object] = {}

    def boundary(name: str, fail: bool) -> None:
        both_inside.wait()
        try:
            with committer.write() as conn:
                conn.execute(rate_limits.insert().values(name=name, next_at=T0))
                if fail:
                    raise errors.LeaseLost(1, 7)
            with rt.store.read() as other:  # write() returned: the row is committed, seen by another connection
                seen[name] = other.execute(select(rate_limits.c.name).where(rate_limits.c.name == name)).scalar()
        except errors.LeaseLost as exc:
            seen[name] = exc
        finally:
            committer.idle()

    threads = [threading.Thread(target=boundary, args=("kept", False)),
               threading.Thread(target=boundary, args=("fenced", True))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    committer.close()
    assert seen["kept"] == "kept"
    assert isinstance(seen["fenced"], errors.LeaseLost)
    assert committer.sizes == {2: 1}  # one COMMIT for both boundaries
    with rt.store.read() as conn:
        assert list(conn.execute(select(rate_limits.c.name)).scalars()) == ["kept"]


def test_a_run_whose_lease_was_taken_mid_step_gets_lease_lost_and_its_batch_mate_commits(
        store_url: str, runtime: RuntimeFactory) -> None:
    witness = Witness()
    rt = pooled(runtime, store_url, flow(witness, ("ONE", "TWO")), [schedule("a", "pa"), schedule("b", "pb")],
                concurrency=2)
    victim = actions.trigger(rt, "a").run_id
    other = actions.trigger(rt, "b").run_id

    def wait_for_both() -> None:  # from here on a leader waits for both boundaries, however slow the machine
        assert pool.committer is not None
        pool.committer.window_s = 60.0

    both_done = threading.Barrier(2, action=wait_for_both)

    def one(ctx: StepContext) -> None:
        if ctx.run_id == victim:  # another worker takes the run over while this step runs
            with rt.store.write() as conn:
                conn.execute(update(runs).where(runs.c.id == victim).values(fence=runs.c.fence + 1))
        both_done.wait(timeout=60)

    witness.hooks["ONE"] = one
    pool = WorkerPool(rt, "pool")
    assert pool.committer is not None
    try:
        outcomes = {o.run_id: o for o in pool.work(until_idle=True)}
    finally:
        pool.close()
    assert outcomes[victim].status is RunStatus.RUNNING and outcomes[victim].error_code == "LEASE_LOST"
    assert outcomes[other].status is RunStatus.SUCCESS
    assert max(pool.committer.sizes) >= 2, pool.committer.sizes  # the two ONE boundaries shared a COMMIT
    with rt.store.read() as conn:
        victim_steps = dict(conn.execute(select(steps.c.name, steps.c.status).where(steps.c.run_id == victim)).all())
        assert run_rows.get_run(conn, other).status is RunStatus.SUCCESS
    assert victim_steps == {"ONE": "RUNNING", "TWO": "PENDING"}  # nothing recorded under the lost token
    assert witness.executions[(victim, "TWO")] == 0 and witness.executions[(other, "TWO")] == 1


@pytest.mark.parametrize("group_commit", ["2ms", "0s"])
def test_every_step_runs_once_with_concurrency_four(store_url: str, group_commit: str, runtime: RuntimeFactory) -> None:
    witness = Witness()
    rt = pooled(runtime, store_url, flow(witness, ("ONE", "TWO", "THREE", "FOUR")),
                [schedule(f"s{i}", f"p{i}") for i in range(10)], concurrency=4, group_commit=group_commit)
    ids = [actions.trigger(rt, f"s{i}").run_id for i in range(10)]
    ids += [actions.trigger(rt, f"s{i}", day=date(2026, 9, 28)).run_id for i in range(10)]
    pool = WorkerPool(rt, "pool")
    try:
        done = pool.work(until_idle=True)
    finally:
        pool.close()
    assert sorted(o.run_id for o in done) == sorted(ids) and len(set(ids)) == 20
    assert statuses(rt) == {"SUCCESS": 20}
    assert set(witness.executions.values()) == {1} and len(witness.executions) == 80
    assert (pool.committer is None) == (group_commit == "0s")


def test_max_runs_is_exact_across_threads(sqlite_url: str, runtime: RuntimeFactory) -> None:
    rt = pooled(runtime, sqlite_url, flow(Witness(), ("ONE",)), [schedule(f"s{i}", f"p{i}") for i in range(8)],
                concurrency=4)
    for i in range(8):
        actions.trigger(rt, f"s{i}")
    pool = WorkerPool(rt, "pool")
    try:
        assert len(pool.work(until_idle=True, max_runs=5)) == 5
    finally:
        pool.close()
    assert statuses(rt) == {"SUCCESS": 5, "QUEUED": 3}


def test_group_commit_window_is_bounded_in_config(tmp_path: Path) -> None:
    with pytest.raises(errors.ConfigInvalid, match="group_commit"):
        make_runtime(f"sqlite:///{tmp_path / 'rf.db'}", extra={"worker": {"group_commit": "1s"}})


def test_every_run_in_flight_keeps_its_lease_alive(sqlite_url: str, tmp_path: Path) -> None:
    """Real time: a 1 s lease, three runs blocked in TWO at once; each lease is renewed past its first expiry."""
    from engine.core.clock import SystemClock
    from engine.execution import reconciler
    from engine.plugins.workflow_registry import load_registry
    from tests.flows.testflows import FOUR_STEPS

    log, gate = tmp_path / "steps.log", tmp_path / "gate"
    specs = [dict(name=f"f{i}", workflow="four_steps", project=f"p{i}", cron="0 * * * *", timezone="UTC")
             for i in range(3)]
    rt = make_runtime(sqlite_url, schedules=specs, clock=SystemClock(),
                      registry={**load_registry(), "four_steps": FOUR_STEPS},
                      extra={"testflow": {"log": str(log), "gate": str(gate), "block_on": ["TWO"]},
                             "worker": {"lease": "1s", "concurrency": 3}})
    definitions.apply(rt)
    for i in range(3):
        actions.trigger(rt, f"f{i}")
    pool = WorkerPool(rt, "pool")
    result: dict[str, list[RunOutcome]] = {}
    thread = threading.Thread(target=lambda: result.update(done=pool.work(until_idle=True)))
    thread.start()
    waiter = threading.Event()
    try:
        for _ in range(3000):  # up to ~30 s for three runs to be inside TWO
            if log.exists() and sum(" TWO " in line and line.startswith("start") for line in
                                    log.read_text().splitlines()) == 3:
                break
            waiter.wait(0.01)
        with rt.store.read() as conn:
            first = {r.id: r.lease_until for r in run_rows.list_runs(conn)}
        assert len(first) == 3 and all(first.values())

        def renewed() -> bool:
            with rt.store.read() as conn:
                now = {r.id: r.lease_until for r in run_rows.list_runs(conn)}
            return all(now[i] is not None and now[i] > first[i] + timedelta(seconds=1) for i in first)  # type: ignore[operator]

        for _ in range(1000):
            if renewed():
                break
            waiter.wait(0.01)
        assert renewed()
        assert rt.clock.now() > max(at for at in first.values() if at is not None)  # only the heartbeats keep them
        assert reconciler.sweep(rt).recovered == []
    finally:
        gate.touch()
        thread.join(timeout=60)
        pool.close()
    assert {o.status for o in result["done"]} == {RunStatus.SUCCESS}
    assert len(result["done"]) == 3


def test_an_inline_step_runs_on_the_worker_thread_and_its_timeout_still_holds(store_url: str,
                                                                              runtime: RuntimeFactory) -> None:
    seen: dict[str, object] = {}

    def quick(ctx: StepContext) -> StepResult:
        seen["thread"] = threading.current_thread()
        return StepResult(output={"ok": True})

    def slow(ctx: StepContext) -> StepResult:
        rt.clock.advance(timedelta(seconds=11))  # an overrun of its 10 s timeout
        return StepResult(output={"late": True})

    workflow = WorkflowDef(name="pooled", period=PeriodKind.SLOT,
                           steps=(StepSpec("QUICK", quick, inline=True), StepSpec("SLOW", slow, timeout_s=10,
                                                                                    inline=True)))
    rt = pooled(runtime, store_url, workflow, [schedule("s", "p")])
    run_id = actions.trigger(rt, "s").run_id
    pool = WorkerPool(rt, "pool")
    try:
        (outcome,) = pool.work(max_runs=1)
    finally:
        pool.close()
    assert seen["thread"] is threading.current_thread()  # no hand-off to a step thread
    assert outcome.run_id == run_id and outcome.status is RunStatus.RETRY_PENDING
    assert outcome.error_code == "STEP_TIMEOUT"
    with rt.store.read() as conn:
        outputs = dict(conn.execute(select(steps.c.name, steps.c.output).where(steps.c.run_id == run_id)).all())
    assert outputs == {"QUICK": {"ok": True}, "SLOW": None}  # the overrun's result was dropped


def test_a_pending_run_is_promoted_when_its_predecessor_finishes(store_url: str, runtime: RuntimeFactory) -> None:
    """QUEUE_NEW: the tick makes the older slot QUEUED and the newer PENDING; the worker's release promotes it."""
    witness = Witness()
    spec = schedule("s", "p") | {"overlap": "QUEUE_NEW"}
    rt = pooled(runtime, store_url, flow(witness, ("ONE",)), [spec])
    rt.clock.set(T0 + timedelta(hours=2))  # two hourly slots due at once
    from engine.scheduling import tick

    tick.tick(rt)
    assert statuses(rt) == {"QUEUED": 1, "PENDING": 1}
    pool = WorkerPool(rt, "pool")
    try:
        done = pool.work(until_idle=True)
    finally:
        pool.close()
    assert [o.status for o in done] == [RunStatus.SUCCESS, RunStatus.SUCCESS]
    assert statuses(rt) == {"SUCCESS": 2}


def test_serve_runs_as_many_runs_at_once_as_configured(sqlite_url: str, runtime: RuntimeFactory) -> None:
    """Each step waits for a second run to be inside a step too: only two runs in flight get past it."""
    from engine.app import serve

    together = threading.Barrier(2)

    def pair(ctx: StepContext) -> StepResult:
        together.wait(timeout=30)  # a broken barrier fails the step, and the assertions below
        return StepResult(output={"paired": True})

    workflow = WorkflowDef(name="pooled", period=PeriodKind.SLOT, steps=(StepSpec("PAIR", pair),))
    rt = pooled(runtime, sqlite_url, workflow, [schedule("a", "pa"), schedule("b", "pb")], concurrency=2)
    rt.clock.set(T0 + timedelta(minutes=59))  # the 06:00 slot of both schedules is due
    stop = threading.Event()
    thread = threading.Thread(target=serve.serve, args=(rt,), kwargs={"stop": stop})
    thread.start()
    waiter = threading.Event()
    try:
        for _ in range(3000):  # up to ~30 s
            if statuses(rt).get("SUCCESS", 0) == 2:
                break
            waiter.wait(0.01)
    finally:
        stop.set()
        thread.join(timeout=60)
    assert statuses(rt) == {"SUCCESS": 2}


@contextmanager
def serving(rt: Runtime) -> Iterator[None]:
    """``serve`` in a thread for the block; stopped as by SIGTERM, and joined, at its end."""
    from engine.app import serve

    stop = threading.Event()
    thread = threading.Thread(target=serve.serve, args=(rt,), kwargs={"stop": stop, "worker_id": "srv"})
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=60)


@pytest.mark.parametrize("concurrency", [1, 3])
def test_serve_starts_runs_while_its_tick_is_still_creating_others(store_url: str, concurrency: int,
                                                                   runtime: RuntimeFactory) -> None:
    """24 schedules fall due at once; pinning the last one waits until a run has executed a step.

    That can only happen if serve's worker threads claim the runs the tick has committed
    while the tick is still preparing the others (a serve that ran its tick to the end
    before claiming would wait on itself until the pin gives up).
    """
    projects = [f"p{i:02d}" for i in range(24)]
    first_step = threading.Event()
    all_done = threading.Event()
    rows_at_first_step: list[int] = []
    pin_waited: list[bool] = []
    executed = Counter[int]()
    lock = threading.Lock()
    stores: list[Store] = []  # the runtime's store, once it exists

    def pin(settings: object, project: str) -> dict[str, object]:
        if project == projects[-1]:
            pin_waited.append(first_step.wait(timeout=30))
        return {}

    def step(ctx: StepContext) -> StepResult:
        with lock:
            if not first_step.is_set():
                with stores[0].read() as conn:
                    rows_at_first_step.append(len(conn.execute(select(runs.c.id)).all()))
                first_step.set()
            executed[ctx.run_id] += 1
            if len(executed) == len(projects):
                all_done.set()
        return StepResult(output={"ok": True})

    workflow = WorkflowDef(name="pooled", period=PeriodKind.SLOT, steps=(StepSpec("ONE", step),), pin=pin)
    rt = pooled(runtime, store_url, workflow, [schedule(f"s{p}", p) for p in projects], concurrency=concurrency)
    stores.append(rt.store)
    rt.clock.set(T0 + timedelta(minutes=59))  # the 06:00 slot of every schedule is due
    with serving(rt):
        finished = all_done.wait(timeout=60)
    assert pin_waited == [True]  # a step ran before the tick had pinned its last schedule
    assert rows_at_first_step[0] < len(projects)  # ... when not every run of the burst existed yet
    assert finished and statuses(rt) == {"SUCCESS": len(projects)}
    assert set(executed.values()) == {1}


def test_serve_starts_a_run_its_tick_creates_without_waiting_for_the_poll_interval(sqlite_url: str) -> None:
    """With an hour between polls, an idle worker thread still takes the slot's run at once:
    the tick's commit wakes it."""
    from engine.core.clock import SystemClock

    ran = threading.Event()

    def step(ctx: StepContext) -> StepResult:
        ran.set()
        return StepResult(output={"ok": True})

    workflow = WorkflowDef(name="pooled", period=PeriodKind.SLOT, steps=(StepSpec("ONE", step),))
    slot = datetime(2026, 9, 29, 6, 0, tzinfo=UTC)
    spec = schedule("every_minute", "p") | {"cron": "* * * * *", "allow_frequent": True}
    applied = make_runtime(sqlite_url, schedules=[spec], clock=ManualClock(slot - timedelta(seconds=30)),
                           registry={"pooled": workflow})
    definitions.apply(applied)  # next_run_at: the 06:00 slot
    # serve's clock reaches the slot one real second after it starts: its threads are idle by then.
    clock = SystemClock(offset=slot - timedelta(seconds=1) - datetime.now(UTC))
    rt = make_runtime(sqlite_url, schedules=[spec], clock=clock, registry={"pooled": workflow},
                      extra={"worker": {"poll_interval": "1h", "concurrency": 2}})
    with serving(rt):
        woke = ran.wait(timeout=30)
    assert woke  # not an hour later
    with rt.store.read() as conn:
        done = conn.execute(select(runs.c.status, runs.c.scheduled_for)).all()
    assert [tuple(row) for row in done] == [("SUCCESS", slot)]
