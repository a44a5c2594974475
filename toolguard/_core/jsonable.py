"""Turning Python values into JSON data for payloads and tool results."""

from __future__ import annotations

import json
from typing import Any

from pydantic_core import PydanticSerializationError, to_jsonable_python


def to_json_data(value: Any) -> Any:
    """Convert ``value`` to plain JSON data (dict, list, str, int, float, bool, None).

    Datetimes, dates and times become ISO 8601 text, decimals and UUIDs text,
    enums their value, sets and tuples lists, pydantic models and dataclasses
    dicts. Bytes become UTF-8 text when they decode, base64 otherwise. Any
    other object falls back to its ``repr`` so a payload can always be built.
    """
    try:
        data = to_jsonable_python(value, fallback=repr)
    except (PydanticSerializationError, ValueError) as first:
        # Lone surrogates in dict keys, or bytes that are not UTF-8, can be mended;
        # anything else (a cycle, too deep) raises the first error.
        try:
            value = clean_text(value)
        except RecursionError:
            raise first from None
        try:
            data = to_jsonable_python(value, fallback=repr)
        except (PydanticSerializationError, ValueError):
            try:
                data = to_jsonable_python(value, fallback=repr, bytes_mode="base64")
            except (PydanticSerializationError, ValueError):
                raise first from None
    return clean_text(data)


def clean_text(value: Any) -> Any:
    """Replace lone surrogates (text JSON allows but UTF-8 cannot hold) with U+FFFD.

    Walks dicts and lists; other values come back unchanged. Without this, a
    ``"\\ud800"`` in a decision or a model's arguments could not be stored.
    """
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return value
    if isinstance(value, dict):
        return {clean_text(k): clean_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_text(v) for v in value]
    return value


def dumps(value: Any) -> str:
    """Compact, deterministic JSON text of ``value`` (keys sorted, UTF-8 kept)."""
    return json.dumps(
        to_json_data(value), ensure_ascii=False, sort_keys=True, separators=(",", ":")
    )


MAX_INT_DIGITS = 4_000
"""Integers of more digits are refused in arguments and dropped from results.

Python's ``json`` cannot write an integer of more than 4,300 digits (its
``int``/``str`` conversion limit), and pydantic-core cannot read one back,
so a stored thread holding one could never be loaded.
"""

_BIG_INT = 10**MAX_INT_DIGITS
_PLAIN = (bool, type(None))

Path = tuple[str | int, ...]
"""Where a value sits inside JSON data: dict keys and list indices, outermost first."""


class JSONScan:
    """What :func:`scan_json` found (the first problem only; the walk stops there).

    Attributes:
        too_deep: the path of a container nested deeper than the limit, or ``None``.
        bad_number: the path of a NaN, an infinity or an integer of more than
            :data:`MAX_INT_DIGITS` digits, or ``None``.
        foreign: something :func:`to_json_data` must still convert (a value
            that is not plain JSON data, a non-text key, a lone surrogate).
        chars: the total length of all strings and keys seen (for a size estimate).
        items: how many values and keys were seen.
    """

    __slots__ = ("bad_number", "chars", "foreign", "items", "too_deep")

    def __init__(self) -> None:
        self.too_deep: Path | None = None
        self.bad_number: Path | None = None
        self.foreign = False
        self.chars = 0
        self.items = 0

    @property
    def ok(self) -> bool:
        """No depth or number problem was found."""
        return self.too_deep is None and self.bad_number is None

    def size_bound(self) -> int:
        """An upper bound of the compact JSON text's size in UTF-8 bytes (plain data only)."""
        # A character takes at most 6 bytes (an escape like \u0000); every other token
        # (number, literal, quotes, separators, brackets) at most 28.
        return 6 * self.chars + 28 * (self.items + 1)


def _has_surrogate(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return True
    return False


def scan_json(value: Any, max_depth: int) -> JSONScan:
    """Walk ``value`` without recursion: depth, non-standard numbers, values still to convert.

    The depth of a scalar is 0, of ``[]`` or ``{"a": 1}`` 1, of ``{"a": [1]}`` 2.
    A walk over data nested thousands of levels deep stops at ``max_depth``
    instead of exhausting the stack.
    """
    scan = JSONScan()
    kind = type(value)
    if kind is not dict and kind is not list:
        stack: list[tuple[Any, int, Path]] = [([value], 0, ())]
    else:
        stack = [(value, 1, ())]
    while stack:
        node, depth, path = stack.pop()
        if depth > max_depth:
            scan.too_deep = path
            return scan
        is_dict = type(node) is dict
        scan.items += len(node)
        for key, item in node.items() if is_dict else enumerate(node):
            if is_dict:
                if type(key) is not str:
                    scan.foreign = True
                else:
                    scan.chars += len(key)
                    if not key.isascii() and _has_surrogate(key):
                        scan.foreign = True
            kind = type(item)
            if kind is str:
                scan.chars += len(item)
                if not item.isascii() and _has_surrogate(item):
                    scan.foreign = True
            elif kind is dict or kind is list:
                stack.append((item, depth + 1, (*path, key) if depth else path))
            elif kind is float:
                if item - item != 0.0:  # NaN or an infinity
                    scan.bad_number = (*path, key) if depth else path
                    return scan
            elif kind is int:
                if not -_BIG_INT < item < _BIG_INT:
                    scan.bad_number = (*path, key) if depth else path
                    return scan
            elif kind not in _PLAIN:
                scan.foreign = True
    return scan


def describe_path(path: Path) -> str:
    """A path as the schema errors write it (``items.2.price``), at most 200 characters."""
    text = ".".join(str(clean_text(part)) for part in path) or "(arguments)"
    return text if len(text) <= 200 else text[:199] + "…"


def without_bad_numbers(value: Any) -> Any:
    """A copy of JSON data with NaN, infinities and huge integers replaced by ``None``.

    Iterative, so it works at any depth ``scan_json`` allowed.
    """

    def fix(item: Any) -> Any:
        kind = type(item)
        if kind is float and item - item != 0.0:
            return None
        if kind is int and not -_BIG_INT < item < _BIG_INT:
            return None
        return item

    if type(value) is not dict and type(value) is not list:
        return fix(value)
    root: Any = {} if type(value) is dict else []
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        for key, item in source.items() if type(source) is dict else enumerate(source):
            kind = type(item)
            if kind is dict or kind is list:
                kept: Any = {} if kind is dict else []
                stack.append((item, kept))
            else:
                kept = fix(item)
            if type(target) is dict:
                target[key] = kept
            else:
                target.append(kept)
    return root
