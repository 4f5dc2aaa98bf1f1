"""One exception hierarchy; each class carries its error code and CLI exit code.

Exit codes (SPEC §8): 1 failed at run time, 2 invalid input (nothing written),
3 conflict (stale version, illegal transition).
"""

from __future__ import annotations

from engine.core import error_codes, redact


class ReportflowError(Exception):
    """The root of every engine error; its message never carries a URL's password (``redact``)."""

    code: str = "ERROR"
    exit_code: int = 1
    #: The message is made one inert line (``redact.neutralise``): text a server or a model sent.
    inert_message: bool = False

    def __init__(self, message: str) -> None:
        # Masked and clipped here, so no stored error_message or log line carries megabytes of it.
        message = redact.error_text(message, inert=self.inert_message)
        super().__init__(message)
        self.message = message


class InvalidInput(ReportflowError):
    code = "INVALID_INPUT"
    exit_code = 2


class ConfigInvalid(InvalidInput):
    """A configuration problem, located by file and key path."""

    code = "CONFIG_INVALID"

    def __init__(self, problem: str, *, file: str | None = None, key: str | None = None) -> None:
        self.file = file
        self.key = key
        self.problem = problem
        where = ": ".join(part for part in (file, key) if part)
        super().__init__(f"{where}: {problem}" if where else problem)


class NotFound(InvalidInput):
    code = "NOT_FOUND"


class Conflict(ReportflowError):
    code = "CONFLICT"
    exit_code = 3


class StaleVersion(Conflict):
    code = "STALE_VERSION"


class InvalidTransition(Conflict):
    code = "INVALID_TRANSITION"

    def __init__(self, entity: str, current: str, target: str, detail: str = "") -> None:
        self.current = current
        self.target = target
        suffix = f" ({detail})" if detail else ""
        super().__init__(f"{entity}: cannot go from {current} to {target}{suffix}")


class LeaseLost(Conflict):
    """The run's lease (fencing token) passed to another worker: stop, write nothing."""

    code = "LEASE_LOST"

    def __init__(self, run_id: int, token: int) -> None:
        self.run_id = run_id
        self.token = token
        super().__init__(f"run {run_id}: lease with token {token} is no longer held")


class Interrupted(ReportflowError):
    """SIGTERM came while a step waited (``ctx.sleep``): the run is handed back to resume at that step."""

    code = "INTERRUPTED"


class SchemaMismatch(ReportflowError):
    code = "SCHEMA_UNKNOWN"


class StepError(ReportflowError):
    """A classified step failure. ``retryable`` decides between RETRY_PENDING and FAILED.

    ``retry_after_s`` carries a server's Retry-After (or a wait too long to
    spend inside the step); it becomes the run's ``not_before``.
    """

    retryable: bool = False
    # Stored as the run's error_message and sent in alerts: one inert line, whatever a server said.
    inert_message = True

    def __init__(self, code: str, message: str, *, retryable: bool | None = None,
                 retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.code = code
        if retryable is not None:
            self.retryable = retryable
        self.retry_after_s = retry_after_s


#: Read from the error table (``core.error_codes``), the one place a code's class is written.
RETRYABLE_CODES = error_codes.RETRYABLE


def step_error(code: str, message: str, *, retry_after_s: float | None = None) -> StepError:
    """Build a StepError whose retryability follows the code's class (SPEC §4)."""
    return StepError(code, message, retryable=code in RETRYABLE_CODES, retry_after_s=retry_after_s)


class NeedsConfirmation(InvalidInput):
    """A high-risk change (runs per day up more than 10x) that was not confirmed with --yes."""

    code = "NEEDS_CONFIRMATION"


def first_line(exc: BaseException) -> str:
    """The driver's first line of a database error (no SQL, no parameters, no traceback)."""
    text = str(getattr(exc, "orig", None) or exc).strip()
    return redact.error_text((text.splitlines() or [type(exc).__name__])[0])
