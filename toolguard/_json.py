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
        return to_jsonable_python(value, fallback=repr)
    except (PydanticSerializationError, UnicodeDecodeError, ValueError):
        return to_jsonable_python(value, fallback=repr, bytes_mode="base64")


def dumps(value: Any) -> str:
    """Compact, deterministic JSON text of ``value`` (keys sorted, UTF-8 kept)."""
    return json.dumps(
        to_json_data(value), ensure_ascii=False, sort_keys=True, separators=(",", ":")
    )


def result_text(value: Any) -> str:
    """The text a model reads for a tool's return value: text as is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(to_json_data(value), ensure_ascii=False)
