"""The field types and checks every section of ``reportflow.toml`` shares: keys, names, durations, paths,
the store's URL, a freshness target; ``Strict``, the base model that refuses unknown keys."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
)

from engine.config import defaults, durations

KEY_PATTERN = r"^[a-z0-9][a-z0-9_-]*$"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"

Duration = Annotated[timedelta, BeforeValidator(durations.parse)]


_FRESHNESS = re.compile(r"^\s*([0-9]{1,3}(?:\.[0-9]{1,6})?)\s*(%?)\s*(?:within\s+(.+?))?\s*$")


def parse_freshness_target(value: Any) -> tuple[float, timedelta | None]:
    """``0.95``, ``"95%"`` or ``"95% within 30m"``: the share of due periods that should be fresh, and the
    deadline that "fresh" means when the text names one."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{value!r} is not a freshness target (e.g. 0.95, \"95%\" or \"95% within 30m\")")
    within = None
    if isinstance(value, str):
        match = _FRESHNESS.match(value)
        if match is None:
            raise ValueError(f"{value!r} is not a freshness target (e.g. 0.95, \"95%\" or \"95% within 30m\")")
        share = float(match.group(1)) / (100 if match.group(2) else 1)
        if match.group(3):
            within = durations.parse(match.group(3))
    else:
        share = float(value)
    if not 0 < share <= 1:
        raise ValueError(f"{value!r}: a freshness target is a share of periods, above 0 and at most 1 (or 100%)")
    return share, within


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def optional_duration(value: Any) -> timedelta | None:
    """A duration, or None for an empty or missing value (``retain = ""`` keeps every run)."""
    return None if value in ("", None) else durations.parse(value)


OptionalDuration = Annotated[timedelta | None, BeforeValidator(optional_duration)]


def check_path(value: str) -> str:
    """A field validator for paths: no NUL, no absurd length or depth (``defaults.path_problem``)."""
    problem = defaults.path_problem(value)
    if problem is not None:
        raise ValueError(f"the path {problem}")
    return value


def check_store_url(value: str) -> str:
    """``[store] url``: a SQLite URL's file must be a usable path (what ``Store.open`` creates)."""
    file = defaults.sqlite_file(value)
    if file is not None:
        check_path(file)
    return value
