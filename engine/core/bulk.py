"""Bulk operator actions (SPEC §15.5): which runs ``runs retry --schedule`` and ``runs approve --all`` act on. Pure.

A bulk action acts on the **latest revision** of each period of one schedule (an
older revision is history: once ``--force-new`` made r2, r1 is never retried), whose
status is one of those asked for, and whose business period meets the date range.
The store lists the candidates (``store.bulk_rows``); ``choose`` decides.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date

from engine.core import errors, inputs, retention
from engine.core.models import AWAITING_OPERATOR_STATUSES, FAILURE_STATUSES, RETRYABLE_STATUSES, Run, RunStatus
from engine.core.schedule_spec import Sprint

# What ``runs retry`` accepts (SPEC §12), in the order forms list them, and what ``runs retry --schedule``
# takes without ``--status``; what ``runs approve`` takes.
DEFAULT_RETRY = tuple(sorted(FAILURE_STATUSES))  # FAILED, then PARTIAL_SUCCESS
RETRYABLE = DEFAULT_RETRY + tuple(s for s in RunStatus if s in RETRYABLE_STATUSES and s not in DEFAULT_RETRY)
APPROVABLE = tuple(s for s in RunStatus if s in AWAITING_OPERATOR_STATUSES)


@dataclass(frozen=True)
class Target:
    """One run a bulk action would act on, as the operator is shown it."""

    run_id: int
    key: str
    business_key: str
    status: str
    error_code: str | None


@dataclass(frozen=True)
class BulkPlan:
    """What a bulk action would do: its verb, the schedule, the filters and the runs, oldest period first."""

    action: str  # "retry" | "approve"
    schedule: str
    statuses: tuple[str, ...]
    first: date | None
    last: date | None
    targets: tuple[Target, ...]

    def describe(self) -> str:
        """The selection in words, for a prompt or a page: ``FAILED, PARTIAL_SUCCESS runs of S from D to D``."""
        span = ""
        if self.first is not None and self.last is not None:
            span = f" from {self.first} to {self.last}"
        elif self.first is not None:
            span = f" from {self.first}"
        elif self.last is not None:
            span = f" up to {self.last}"
        return f"{', '.join(self.statuses)} runs of {self.schedule}{span}"


@dataclass(frozen=True)
class BulkOutcome:
    """One target after the action: what happened to it (``retried``, ``approved``, ``skipped``) and why."""

    run_id: int
    key: str
    action: str
    message: str


def parse_statuses(values: Iterable[str], allowed: Sequence[RunStatus]) -> tuple[RunStatus, ...]:
    """``FAILED,PARTIAL_SUCCESS`` (comma-separated, any case, repeatable) as statuses; others are InvalidInput."""
    chosen: list[RunStatus] = []
    for value in values:
        for part in value.split(","):
            name = part.strip().upper()
            if not name:
                continue
            if name not in {s.value for s in allowed}:
                raise errors.InvalidInput(f"--status {part.strip()!r}: a bulk action takes "
                                          f"{', '.join(s.value for s in allowed)}")
            if RunStatus(name) not in chosen:
                chosen.append(RunStatus(name))
    return tuple(chosen)


def check_range(first: date | None, last: date | None) -> None:
    """``--to`` before ``--from`` is InvalidInput."""
    if first is not None and last is not None and last < first:
        raise errors.InvalidInput(f"--to {last} is before --from {first}")


def in_range(business_key: str, timezone: str, first: date | None, last: date | None,
             sprint: Sprint | None = None) -> bool:
    """Whether the period of ``business_key`` shares a business date with [first, last] (open ends allowed)."""
    if first is None and last is None:
        return True
    try:
        start, end = retention.period_dates(business_key, timezone, sprint)
    except ValueError:
        return False  # a key of unknown shape is never acted on by a range
    return (first is None or end >= first) and (last is None or start <= last)


def choose(candidates: Sequence[Run], *, statuses: Sequence[RunStatus], timezone: str, first: date | None,
           last: date | None, sprint: Sprint | None = None) -> list[Run]:
    """The latest revision of each period among ``candidates`` (every revision of the schedule's periods that
    the store found), kept when its status is in ``statuses`` and its period meets the range; oldest first."""
    latest: dict[str, Run] = {}
    for run in candidates:
        held = latest.get(run.business_key)
        if held is None or run.revision > held.revision:
            latest[run.business_key] = run
    chosen = [run for run in latest.values()
              if run.status in statuses and in_range(run.business_key, timezone, first, last, sprint)]
    return sorted(chosen, key=lambda run: (run.scheduled_for, run.id))


def target_of(run: Run) -> Target:
    """The run as a bulk plan lists it."""
    return Target(run.id, run.idempotency_key, run.business_key, run.status.value, run.error_code)


#: At most this many runs in one selection a page submits (a bulk plan lists fewer).
MAX_SELECTED = 100_000


def encode_selection(run_ids: Iterable[int]) -> str:
    """Run ids as one compact form value, consecutive ids as ranges: ``"12-400,402"`` (a form field per run
    hit the form parser's limit of 1,000 fields)."""
    ordered = sorted(set(run_ids))
    spans: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        spans.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(spans)


def decode_selection(text: str) -> set[int]:
    """``encode_selection``'s value back; ``InvalidInput`` for anything else or more than ``MAX_SELECTED``."""
    out: set[int] = set()
    for span in text.split(",") if text else []:
        first, _, last = span.partition("-")
        low, high = inputs.run_id(first), inputs.run_id(last) if last else inputs.run_id(first)
        if high < low or len(out) + (high - low + 1) > MAX_SELECTED:
            raise errors.InvalidInput(f"'{span[:40]}' is not a selection of at most {MAX_SELECTED:,} runs")
        out.update(range(low, high + 1))
    return out
