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
    except (PydanticSerializationError, UnicodeDecodeError, ValueError):
        data = to_jsonable_python(value, fallback=repr, bytes_mode="base64")
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
