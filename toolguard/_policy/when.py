"""Judging whether a guarded call may skip approval: every doubt means "needs approval".

A ``when=`` predicate can only let a call through by returning ``False``
itself. Anything else — ``True``, ``None``, a number, an object, an exception
(from the predicate, from a comparison inside it, from a lookup) — and any
NaN or infinite number anywhere in the arguments (``nan > 1000`` is
``False``, so a predicate would wave it through) means the call needs a human.
"""

from __future__ import annotations

import cmath
import dataclasses
import inspect
import math
import numbers
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any

from pydantic import BaseModel

PLAIN_TYPES: frozenset[type] = frozenset({str, int, bool, type(None)})
"""Argument types that cannot hold a number that is not finite (checked first, in C)."""

_CONTAINERS = (dict, list, tuple, set, frozenset, deque)


def _finite(value: numbers.Number | Decimal) -> bool:
    """Whether a number is finite; a number that cannot say counts as not finite."""
    if isinstance(value, numbers.Rational):
        return True
    if isinstance(value, Decimal):
        return value.is_finite()
    try:
        if isinstance(value, complex):
            return cmath.isfinite(value)
        return math.isfinite(value)  # type: ignore[arg-type]  # numbers.Real and look-alikes
    except (TypeError, ValueError, OverflowError, ArithmeticError):
        return False


def has_non_finite(values: Iterable[Any]) -> bool:
    """True when a NaN or infinite number is anywhere in ``values``.

    Looks into dicts (keys and values), lists, tuples, sets, deques, other
    mappings, dataclass instances and pydantic models, iteratively (any
    depth, cycles visited once). Numbers are floats (and subclasses such as
    ``numpy.float64``), complex numbers, decimals and anything registered as
    a :class:`numbers.Number`. Other objects are not looked into. A value
    that raises while being looked into counts as non-finite (cannot judge).
    """
    try:
        return _scan(values)
    except Exception:
        return True


def _scan(values: Iterable[Any]) -> bool:
    stack = list(values)
    seen: set[int] = set()
    while stack:
        value = stack.pop()
        cls = type(value)
        if cls in PLAIN_TYPES:
            continue
        if cls is float:
            if value - value != 0.0:  # inf - inf and nan - nan are nan
                return True
            continue
        if isinstance(value, str | bytes | bytearray | memoryview | range):
            continue
        if isinstance(value, numbers.Number | Decimal):
            if not _finite(value):
                return True
            continue
        if isinstance(value, (*_CONTAINERS, Mapping)):
            if id(value) in seen:
                continue
            seen.add(id(value))
            if isinstance(value, Mapping):
                stack.extend(value.keys())
                stack.extend(value.values())
            else:
                stack.extend(value)
        elif isinstance(value, BaseModel) and id(value) not in seen:
            seen.add(id(value))
            stack.extend(value.__dict__.values())
            stack.extend((value.__pydantic_extra__ or {}).values())
        elif (
            dataclasses.is_dataclass(value)
            and not isinstance(value, type)
            and id(value) not in seen
        ):
            seen.add(id(value))
            stack.extend(getattr(value, f.name, None) for f in dataclasses.fields(value))
    return False


def discard(verdict: object) -> None:
    """Close a coroutine an (async) predicate returned, so it is not left un-awaited."""
    if inspect.iscoroutine(verdict):
        verdict.close()


def may_skip(when: Callable[[dict[str, Any]], object], arguments: Mapping[str, Any]) -> bool:
    """Whether ``when`` says a call with these arguments (by name) needs no approval.

    Only a predicate that returns ``False`` itself, for arguments without a
    NaN or an infinite number, lets the call skip approval.
    """
    values = arguments.values()
    if not PLAIN_TYPES.issuperset(map(type, values)) and has_non_finite(values):
        return False
    try:
        verdict = when(dict(arguments))
    except Exception:
        return False
    if verdict is False:
        return True
    discard(verdict)
    return False
