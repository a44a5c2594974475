"""Reading a model's tool calls: any common shape, bounded, with ids unique in the turn.

:func:`parse_tool_call` is the one reader every path uses (the runner,
``ReviewedChat``, the framework adapters, an edit's new call), so a call is
refused for the same reasons, with the same text, wherever it comes from.
"""

from __future__ import annotations

import json
import reprlib
from collections.abc import Mapping
from typing import Any

from toolguard._core.jsonable import clean_text, to_json_data
from toolguard._core.limits import (
    WIDEST_LIMITS,
    Limits,
    args_problem,
    args_too_deep,
    preview,
    text_too_large,
)
from toolguard._core.records import ToolCall, trusted


def parse_tool_call(raw: Any, index: int = 0, *, limits: Limits | None = None) -> ToolCall:
    """Read one tool call in any common shape.

    Accepts a :class:`ToolCall`; an OpenAI tool call (``{"id", "type":
    "function", "function": {"name", "arguments"}}`` as a dict or as the
    ``openai`` client's object); or a flat ``{"id", "name", "args" |
    "arguments"}`` dict. ``arguments`` may be JSON text or already parsed.
    Arguments that are not a JSON object are kept as ``arguments_error``: the
    call will not run and the model is told why.

    Arguments beyond ``limits`` (too deep, too large), or holding NaN,
    ``Infinity`` or an integer of more than 4,000 digits, are refused: the
    call gets ``args={}``, ``error`` (the text the model will read) and, in
    ``arguments_error``, at most 1,000 characters of what was sent. Such a
    call never runs and is never put up for review. Lone surrogates in the
    name, the id and the arguments become U+FFFD.

    Args:
        raw: the tool call.
        index: its position in the model's message (names an id-less call).
        limits: the bounds to enforce; ``None`` enforces the widest
            :class:`Limits` allows (the runner passes its own).

    Raises:
        ValueError: the call has no tool name.
    """
    bounds = WIDEST_LIMITS if limits is None else limits
    if isinstance(raw, ToolCall):
        if raw.error is None and raw.arguments_error is None:
            args, error = args_problem(raw.name, raw.args, bounds)
            if error is not None or args is not raw.args:
                return _checked(raw.id, raw.name, raw.args, args, error)
        if raw.name.isascii() and raw.id.isascii():
            return raw
        return raw.model_copy(update={"id": clean_text(raw.id), "name": clean_text(raw.name)})
    if isinstance(raw, Mapping):
        function = raw.get("function")
        if isinstance(function, Mapping):
            name, arguments = function.get("name"), function.get("arguments")
        else:
            name = raw.get("name")
            arguments = raw["args"] if "args" in raw else raw.get("arguments")
        call_id = raw.get("id")
    else:
        function = getattr(raw, "function", None)
        if function is not None:
            name, arguments = getattr(function, "name", None), getattr(function, "arguments", None)
        else:
            name = getattr(raw, "name", None)
            arguments = getattr(raw, "args", getattr(raw, "arguments", None))
        call_id = getattr(raw, "id", None)
    if not isinstance(name, str):
        msg = f"Tool call #{index} has no tool name: {_shown(raw)}"
        raise ValueError(msg)
    call_id = call_id if isinstance(call_id, str) and call_id else f"call_{index}"
    if arguments is None or arguments == "":
        return _checked(call_id, name, {}, {}, None)
    if isinstance(arguments, str):
        text = arguments
        too_large = (
            text_too_large(name, text, bounds) if len(text) * 4 > bounds.max_args_bytes else None
        )
        if too_large is not None:
            return _checked(call_id, name, text, {}, too_large)
        try:
            parsed = json.loads(text)
        except RecursionError:
            return _checked(call_id, name, text, {}, args_too_deep(name, None, bounds))
        except ValueError:
            return ToolCall(
                id=clean_text(call_id), name=clean_text(name), arguments_error=clean_text(text)
            )
        if type(parsed) is dict:
            args, error = args_problem(name, parsed, bounds, text)
            if error is None and call_id.isascii() and name.isascii():
                return trusted(
                    ToolCall,
                    {
                        "id": call_id,
                        "name": name,
                        "args": args,
                        "arguments_error": None,
                        "error": None,
                    },
                )
            return _checked(call_id, name, text, args, error)
        arguments = parsed
    if isinstance(arguments, Mapping):
        args, error = args_problem(name, dict(arguments), bounds)
        return _checked(call_id, name, arguments, args, error)
    try:
        shown = json.dumps(to_json_data(arguments))
    except Exception:
        shown = preview(arguments)
    return ToolCall(id=clean_text(call_id), name=clean_text(name), arguments_error=shown)


def _shown(raw: Any) -> str:
    """A short ``repr`` of anything (bounded in depth and length; never raises)."""
    try:
        return reprlib.repr(raw)
    except Exception:
        return f"<{type(raw).__name__}>"


def _checked(
    call_id: str, name: str, sent: Any, args: dict[str, Any], error: str | None
) -> ToolCall:
    """The call with clean name and id: its arguments, or refused with ``error``."""
    if error is None:
        if call_id.isascii() and name.isascii():
            return ToolCall(id=call_id, name=name, args=args)
        return ToolCall(id=clean_text(call_id), name=clean_text(name), args=args)
    return ToolCall(
        id=clean_text(call_id),
        name=clean_text(name),
        arguments_error=preview(sent),
        error=error,
    )


def unique_ids(calls: list[ToolCall]) -> list[ToolCall]:
    """Give repeated call ids a fresh suffix, so every call keeps its own result."""
    taken = {c.id for c in calls}
    seen: set[str] = set()
    out: list[ToolCall] = []
    for index, call in enumerate(calls):
        kept = call
        if call.id in seen:
            fresh, suffix = f"{call.id}_{index}", 0
            while fresh in taken:
                suffix += 1
                fresh = f"{call.id}_{index}_{suffix}"
            taken.add(fresh)
            kept = call.model_copy(update={"id": fresh})
        seen.add(kept.id)
        out.append(kept)
    return out


def check_thread_id(thread_id: object) -> None:
    """Refuse a ``thread_id`` that is not text (it is part of every action's digest).

    Raises:
        TypeError: naming the type given.
    """
    if not isinstance(thread_id, str):
        msg = f"thread_id must be text, got {type(thread_id).__name__}"
        raise TypeError(msg)
