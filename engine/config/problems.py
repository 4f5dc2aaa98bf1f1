"""A validation error in the operator's words: the key path as written in the file (``schedules[2].cron``)
and what is wrong with it, not pydantic's."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import (
    ValidationError,
)

from engine.core import errors, redact

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def key_path(loc: Sequence[int | str]) -> str:
    """Pydantic's ``('schedules', 0, 'cron')`` as ``schedules[0].cron``.

    The names pydantic gives the members of a union (``list[constrained-str]``,
    ``literal['*']``) are not keys of the file and are left out.
    """
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _KEY.match(part):
            out += f".{part}" if out else str(part)
    return out


def _in_own_words(error: Mapping[str, Any]) -> str:
    """A pydantic error as the product says it: never pydantic's sentence, never its URL."""
    kind = str(error.get("type", ""))
    ctx = error.get("ctx") or {}
    if kind in ("value_error", "assertion_error"):
        return str(error.get("msg", "")).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    words = {
        "missing": "is required",
        "extra_forbidden": "unknown key",
        "string_type": "must be a string (in quotes)",
        "string_pattern_mismatch": f"must match {ctx.get('pattern')}",
        "string_too_long": f"must be at most {ctx.get('max_length')} characters",
        "string_too_short": f"must be at least {ctx.get('min_length')} characters",
        "too_short": f"must have at least {ctx.get('min_length')} entries",
        "too_long": f"must have at most {ctx.get('max_length')} entries",
        "int_type": "must be a whole number", "int_parsing": "must be a whole number",
        "int_from_float": "must be a whole number",
        "float_type": "must be a number", "float_parsing": "must be a number",
        "bool_type": "must be true or false", "bool_parsing": "must be true or false",
        "greater_than": f"must be greater than {ctx.get('gt')}",
        "greater_than_equal": f"must be at least {ctx.get('ge')}",
        "less_than": f"must be less than {ctx.get('lt')}",
        "less_than_equal": f"must be at most {ctx.get('le')}",
        "literal_error": f"must be one of {ctx.get('expected')}",
        "enum": f"must be one of {ctx.get('expected')}",
        "list_type": "must be a list", "tuple_type": "must be a list", "set_type": "must be a list",
        "dict_type": "must be a table", "model_type": "must be a table", "model_attributes_type": "must be a table",
    }
    return words.get(kind, "is not a valid value")


def problem_from_validation(exc: ValidationError, file: str | None, prefix: Sequence[int | str] = ()) -> errors.ConfigInvalid:
    """The first pydantic error as a ConfigInvalid naming the key path and the bad value, in the product's words."""
    found = exc.errors()
    # A misspelled key shows as the key it should have been "required" and itself "unknown": name the typo.
    first = next((e for e in found if e["type"] == "extra_forbidden"), found[0]) \
        if any(e["type"] == "missing" for e in found) else found[0]
    message = _in_own_words(first)
    if first["type"] == "extra_forbidden":
        missing = [str(e["loc"][-1]) for e in found if e["type"] == "missing" and e["loc"][:-1] == first["loc"][:-1]]
        close = difflib.get_close_matches(str(first["loc"][-1]), missing, n=1, cutoff=0.7)
        message = f"unknown key (did you mean '{close[0]}'?)" if close else "unknown key"
    elif any(isinstance(part, str) and part.endswith("_env") for part in first["loc"]):  # ``to_env[0]`` too
        message = "must be the NAME of an environment variable, not its value"  # the value may be a secret URL
    elif "input" in first and not isinstance(first["input"], dict | list):
        message = f"{redact.echoed(first['input'])}: {message}"
    return errors.ConfigInvalid(message, file=file, key=key_path([*prefix, *first["loc"]]) or None)
