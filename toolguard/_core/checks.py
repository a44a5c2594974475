"""Argument checks at the public boundary: a clear error at the call, naming the argument.

Each check raises ``TypeError`` for a value of the wrong type and
``ValueError`` for a value of the right type out of range; the text names
the argument, what it must be, and what it got.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any


def kind(value: object) -> str:
    """``int 5``, ``str 'abc'``, ``None``: a short description of a bad value."""
    if value is None:
        return "None"
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def positive_int(value: object, name: str, *, none: str | None = None) -> int | None:
    """An int of at least 1 (``bool`` refused); with ``none``, ``None`` is allowed and means it."""
    if value is None and none is not None:
        return None
    alternative = f" or None for {none}" if none is not None else ""
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"{name} must be an int of at least 1{alternative}, got {kind(value)}"
        raise TypeError(msg)
    if value < 1:
        msg = f"{name} must be at least 1{alternative}, got {value}"
        raise ValueError(msg)
    return value


def positive_seconds(value: object, name: str) -> float:
    """A finite number of seconds above zero (``bool`` refused)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"{name} must be a number of seconds, got {kind(value)}"
        raise TypeError(msg)
    seconds = float(value)
    if not (seconds > 0 and math.isfinite(seconds)):
        msg = f"{name} must be a finite number of seconds above 0, got {value!r}"
        raise ValueError(msg)
    return seconds


def flag(value: object, name: str) -> bool:
    """``True`` or ``False`` itself (a string such as ``"no"`` would be true)."""
    if not isinstance(value, bool):
        msg = f"{name} must be True or False, got {kind(value)}"
        raise TypeError(msg)
    return value


def optional_text(value: object, name: str, *, empty: bool = True) -> str | None:
    """``None`` or a string (non-empty unless ``empty``)."""
    if value is None:
        return None
    if not isinstance(value, str):
        msg = f"{name} must be a string or None, got {kind(value)}"
        raise TypeError(msg)
    if not empty and not value:
        msg = f"{name} must not be empty: give a name or None"
        raise ValueError(msg)
    return value


def callable_or_none(value: object, name: str, what: str, *, none: bool = True) -> Any:
    """A callable (or ``None`` when ``none``); ``what`` says what it is called with."""
    if value is None and none:
        return None
    if not callable(value):
        alternative = " or None" if none else ""
        msg = f"{name} must be {what}{alternative}, got {kind(value)}"
        raise TypeError(msg)
    return value


def signing_key(value: object) -> bytes | None:
    """``None`` or a non-empty ``bytes`` secret."""
    if value is None:
        return None
    if not isinstance(value, bytes | bytearray):
        msg = (
            "signing_key must be bytes (a secret such as os.urandom(32)) or None,"
            f" got {type(value).__name__}"  # never echo a secret
        )
        raise TypeError(msg)
    if not value:
        msg = "signing_key must not be empty: use a secret such as os.urandom(32), or None"
        raise ValueError(msg)
    return bytes(value)


def id_list(value: object, name: str) -> list[str]:
    """A collection of string ids (a bare string is refused: it is a sequence of letters)."""
    if isinstance(value, str | bytes | bytearray):
        msg = (
            f"{name} must be a list of ids, not a single {type(value).__name__};"
            f" write {name}=[{value!r}]"
        )
        raise TypeError(msg)
    if not isinstance(value, Iterable):
        msg = f"{name} must be a list of ids, got {kind(value)}"
        raise TypeError(msg)
    ids = list(value)
    for item in ids:
        if not isinstance(item, str):
            msg = f"{name} must contain only str ids, got {kind(item)}"
            raise TypeError(msg)
    return ids
