"""Severity (SPEC §15.1 table), the run of unsuccessful periods, the sender's backoff, the payload."""

from __future__ import annotations

import ast
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.core import alerts
from engine.core.alerts import Severity as S
from engine.core.schedule_spec import Criticality as C

NOW = datetime(2026, 9, 29, 9, 0, tzinfo=UTC)
PERIOD = sorted(alerts.PERIOD_EVENTS)
HEALTH = sorted(alerts.HEALTH_EVENTS)


def expected(event: str, criticality: C, c: int) -> tuple[S, bool]:
    """The §15.1 table, written out row by row."""
    if event in alerts.HEALTH_EVENTS:
        return (S.CRITICAL if criticality in (C.CRITICAL, C.HIGH) else S.WARNING), True
    table = {
        C.CRITICAL: (S.WARNING if c == 1 else S.CRITICAL, True),
        C.HIGH: (S.WARNING if c <= 2 else S.CRITICAL, True),
        C.NORMAL: (S.WARNING, True),
        C.LOW: (S.INFO, False) if c < 3 else (S.WARNING, True),
    }
    return table[criticality]


@given(event=st.sampled_from(PERIOD + HEALTH), criticality=st.sampled_from(list(C)), c=st.integers(1, 50))
def test_severity_follows_the_table(event: alerts.AlertEvent, criticality: C, c: int) -> None:
    decision = alerts.decide_severity(event, criticality, c)
    assert (decision.severity, decision.notify) == expected(event, criticality, c)


@pytest.mark.parametrize(("criticality", "c", "severity"), [
    (C.CRITICAL, 1, S.WARNING), (C.CRITICAL, 2, S.CRITICAL), (C.HIGH, 2, S.WARNING), (C.HIGH, 3, S.CRITICAL),
    (C.NORMAL, 1, S.WARNING), (C.NORMAL, 9, S.WARNING), (C.LOW, 2, S.INFO), (C.LOW, 3, S.WARNING)])
def test_the_table_edges(criticality: C, c: int, severity: S) -> None:
    assert alerts.decide_severity(alerts.AlertEvent.RUN_FAILED, criticality, c).severity is severity


def test_recovered_is_info_and_an_unknown_event_is_refused() -> None:
    E = alerts.AlertEvent
    assert alerts.decide_severity(E.RECOVERED, C.CRITICAL, 5) == alerts.SeverityDecision(S.INFO, True)
    assert alerts.decide_severity(E.PRUNE_HELD, C.LOW, 1).notify
    with pytest.raises(ValueError, match="unknown event"):
        alerts.decide_severity("run_exploded", C.NORMAL, 1)  # type: ignore[arg-type]  # a name no event has


def test_a_child_run_raises_nothing_and_only_period_events_grow_with_the_periods_before() -> None:
    E = alerts.AlertEvent
    assert alerts.decide_run_severity(E.RUN_FAILED, child=True, criticality=C.CRITICAL, consecutive=5) is None
    assert alerts.decide_run_severity(E.RUN_FAILED, child=False, criticality=C.CRITICAL, consecutive=2) == (
        alerts.SeverityDecision(S.CRITICAL, True))
    assert alerts.counts_periods(E.RUN_FAILED) and alerts.counts_periods(E.UPSTREAM_LATE)
    assert not alerts.counts_periods(E.STALLED) and not alerts.counts_periods(E.RECOVERED)


def test_consecutive_counts_this_period_and_stops_at_a_success() -> None:
    assert alerts.count_unsuccessful([]) == 1
    assert alerts.count_unsuccessful(["FAILED", "MISSED", "SUCCESS", "FAILED"]) == 3
    assert alerts.count_unsuccessful(["SUCCESS", "FAILED"]) == 1
    assert alerts.count_unsuccessful(["PARTIAL_SUCCESS", "MANUAL_REQUIRED"]) == 3


@given(st.integers(1, 10_000))
def test_retry_delay_doubles_and_never_exceeds_15_minutes(attempts: int) -> None:
    delay = alerts.decide_alert_retry_at(attempts, NOW) - NOW
    assert timedelta(seconds=30) <= delay <= timedelta(minutes=15)
    assert alerts.decide_alert_retry_at(attempts + 1, NOW) - NOW >= delay


def test_payload_carries_what_applies_and_the_apprise_title() -> None:
    alert = alerts.Alert(id="run_failed/run/7", event="run_failed", severity=S.WARNING, at=NOW, summary="run 7 failed",
                         status=alerts.EventStatus.PENDING, schedule="daily", run_id=7, key="k:7",
                         business_key="2026-09-28", details={"error_code": "X", "id": "not this"})
    assert alerts.payload(alert) == {"id": "run_failed/run/7", "event": "run_failed", "severity": "warning",
                                     "at": "2026-09-29T09:00:00Z", "summary": "run 7 failed", "schedule": "daily",
                                     "run_id": 7, "key": "k:7", "business_key": "2026-09-28", "error_code": "X"}
    assert alerts.title(alert) == "reportflow: run_failed daily"
    assert alerts.body_text(alert) == "run 7 failed\nk:7"


# The functions that take an alert event, and where it sits among their positional arguments.
_EVENT_ARGUMENT = {"record_event": None, "record_run_event": 2, "record_schedule_event": 2, "decide_severity": 0,
                   "period_dedupe_key": 0, "run_dedupe_key": 0}


def _events_the_engine_records() -> list[tuple[str, ast.expr]]:
    found = []
    for path in sorted((Path(__file__).resolve().parents[2] / "engine").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name)):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            if name not in _EVENT_ARGUMENT:
                continue
            position = _EVENT_ARGUMENT[name]
            args = [k.value for k in node.keywords if k.arg == "event"]
            if position is not None and len(node.args) > position:
                args.append(node.args[position])
            found += [(f"{path.name}:{node.lineno}", arg) for arg in args]
    return found


def test_every_event_the_engine_records_is_a_member_of_alert_event() -> None:
    recorded = _events_the_engine_records()
    assert len(recorded) >= 20  # the scan sees the call sites (tick, worker, reconciler, alerts, prune, config)
    bare = [where for where, arg in recorded if isinstance(arg, ast.Constant)]
    assert bare == [], "an alert event spelled as a bare string"
    named = {arg.attr for _, arg in recorded
             if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Attribute) and arg.value.attr == "AlertEvent"}
    # freshness_low, backup_failed, run_failed and run_partial reach the outbox through a name (EVENT,
    # run_end.ALERT_OF_STATUS), typed by mypy
    assert named <= set(alerts.AlertEvent.__members__) and len(named) >= 8


@pytest.mark.parametrize("event", list(alerts.AlertEvent))
def test_every_alert_event_has_its_row_in_the_severity_table(event: alerts.AlertEvent) -> None:
    groups = [alerts.PERIOD_EVENTS, alerts.HEALTH_EVENTS, alerts.SLO_EVENTS,
              {alerts.AlertEvent.RECOVERED, alerts.AlertEvent.PROVIDER_UP},
              {alerts.AlertEvent.PRUNE_HELD, alerts.AlertEvent.PROVIDER_DOWN}, {alerts.AlertEvent.BACKUP_FAILED}]
    assert sum(event in group for group in groups) == 1  # exactly one rule decides its severity
    for criticality in C:
        assert alerts.decide_severity(event, criticality, 1).severity in S
