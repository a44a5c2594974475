"""The body limits, and the checks that refuse hostile JSON before FastAPI parses a body.

:func:`body_problem` reads the body once, linearly and without recursion, for what Python's
``json`` would accept but the routes refuse (422): deep nesting, ``NaN`` and ``Infinity``,
numbers beyond a float or with too many digits, duplicate keys, bytes that are not UTF-8.
"""

import json
import math
import re
from itertools import accumulate
from typing import Any

from toolguard._http.answers import ECHO_LIMIT, shorten

DEFAULT_MAX_BODY_BYTES = 1024 * 1024
"""The largest request body the routes read (1 MiB); larger ones get a 413."""

MAX_BODY_DEPTH = 64
"""The deepest nesting of arrays and objects a request body may have; deeper ones get a 422."""

_MAX_INT_DIGITS = 4300
"""The most digits an integer in a body may have (Python's own default limit)."""


class _BodyProblemError(ValueError):
    """Why a body that Python's ``json`` would read is still refused (422)."""


_ESCAPE = re.compile(r"\\.", re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _nesting(text: str) -> int:
    """How deeply arrays and objects nest in JSON ``text`` (linear, no recursion)."""
    outside_strings = _ESCAPE.sub("", text).split('"')[::2]
    brackets = _NOT_BRACKET.sub("", "".join(outside_strings))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _no_constant(name: str) -> Any:
    msg = f"{name} is not a JSON number"
    raise _BodyProblemError(msg)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        msg = "a number is too large for a float"
        raise _BodyProblemError(msg)
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_INT_DIGITS:
        msg = f"an integer has more than {_MAX_INT_DIGITS} digits"
        raise _BodyProblemError(msg)
    return int(text)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            msg = f"duplicate key {shorten(key, ECHO_LIMIT)!r} in an object"
            raise _BodyProblemError(msg)
        result[key] = value
    return result


def body_problem(body: bytes) -> str | None:
    """Why ``body`` is refused before FastAPI reads it, or ``None`` (FastAPI's own checks follow).

    Not UTF-8, nested deeper than :data:`MAX_BODY_DEPTH`, ``NaN`` or
    ``Infinity`` (not JSON), a number beyond a float or with more than 4300
    digits, or an object with a duplicate key. JSON syntax errors are left to
    FastAPI, which answers them with its ``json_invalid`` 422.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return "the body is not valid UTF-8"
    # Starlette's parser skips a byte order mark; check the same text it will read.
    text = text.removeprefix("\ufeff")
    if _nesting(text) > MAX_BODY_DEPTH:
        return f"the JSON is nested more than {MAX_BODY_DEPTH} levels deep"
    try:
        json.loads(
            text,
            parse_constant=_no_constant,
            parse_float=_finite,
            parse_int=_bounded_int,
            object_pairs_hook=_unique_keys,
        )
    except _BodyProblemError as exc:
        return str(exc)
    except json.JSONDecodeError:
        return None
    except (ValueError, RecursionError):  # pragma: no cover - the checks above come first
        return "the JSON cannot be read"
    return None
