"""Bounds on the JSON a model sends and a tool returns, so no thread can be bricked."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from toolguard._core.jsonable import (
    MAX_INT_DIGITS,
    Path,
    clean_text,
    describe_path,
    scan_json,
    to_json_data,
    without_bad_numbers,
)

MAX_DEPTH: Final = 128
"""The largest depth limit :class:`Limits` accepts.

pydantic-core, which reads every stored thread back, refuses JSON nested more
than 200 levels deep, and a stored thread nests a call's arguments or a tool's
result up to 6 levels further (thread → actions → action → decision →
edited action → arguments).
"""

MAX_BYTES: Final = 64 * 1024 * 1024
"""The largest size limit :class:`Limits` accepts (64 MiB).

A thread keeps several copies of a call's arguments (history, action, audit
trail) and of a result; PostgreSQL holds at most 1 GB in one ``JSON`` value.
"""

PREVIEW_CHARS: Final = 1_000
"""How much of refused arguments the history keeps (``ToolCall.arguments_error``)."""

_KIB: Final = 1024


def _check(name: str, value: object, low: int, high: int, why: str) -> None:
    if type(value) is not int:
        msg = f"Limits.{name} must be an int, got {type(value).__name__}"
        raise TypeError(msg)
    if not low <= value <= high:
        msg = f"Limits.{name} must be between {low:,} and {high:,} ({why}), got {value:,}"
        raise ValueError(msg)


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """How deep and how large tool-call arguments and tool results may be.

    Every thread is stored as one JSON document and must load back, on every
    store. JSON nested hundreds of levels deep cannot (pydantic-core refuses
    more than 200 levels), and megabytes of arguments would be kept several
    times per turn (history, action, audit trail). So:

    * **Arguments** (from the model, or from an edit decision) deeper or
      larger than the limits never run and are never put up for review: the
      model gets an error tool result naming the limit, as for arguments
      that break the tool's schema. Arguments holding NaN, ``Infinity`` or
      ``-Infinity`` (not valid JSON numbers) or an integer of more than
      4,000 digits are refused the same way.
    * **A result** deeper or larger than the limits is recorded in a bounded
      form: ``status`` stays ``"success"`` (the tool ran), ``value`` is
      ``None``, and ``content`` holds at most ``max_result_bytes`` bytes of
      the result's text followed by a note saying it was shortened and how
      large it was. A result that cannot be converted to JSON at all is
      recorded the same way with a note only. NaN and infinities in a result
      become ``null`` (as JavaScript's ``JSON.stringify`` writes them), as do
      integers of more than 4,000 digits.

    Depth counts nested objects and arrays: ``"text"`` and ``5`` have depth
    0, ``{"to": "bob"}`` depth 1, ``{"to": ["bob"]}`` depth 2 (arguments are
    an object, so their depth is at least 1). Size is UTF-8 bytes of JSON
    text: the arguments text as the model sent it (or compact JSON of
    already-parsed arguments), the result's text as the model would read it.

    The defaults sit well inside what every store saves and loads back, and
    well above what real tools use: 32 levels of arguments and 64 of results
    (a stored thread can hold 190); 256 KiB of arguments (a long document to
    write, kept a few times per turn) and 1 MiB of result text (more than a
    model's context usually takes in).

    Pass your own to ``Runner(limits=...)`` or ``ReviewedChat(limits=...)``::

        limits = Limits(max_result_bytes=4 * 1024 * 1024)

    Attributes:
        max_args_depth: deepest nesting of a call's arguments (1 to 128).
        max_args_bytes: largest JSON text of a call's arguments (1 byte to 64 MiB).
        max_result_depth: deepest nesting of a result kept as ``value`` (1 to 128).
        max_result_bytes: largest result text kept in ``content`` (1 byte to 64 MiB).

    Raises:
        TypeError: a limit is not an ``int``.
        ValueError: a limit is outside its range.
    """

    max_args_depth: int = 32
    max_args_bytes: int = 256 * _KIB
    max_result_depth: int = 64
    max_result_bytes: int = 1024 * _KIB

    def __post_init__(self) -> None:
        """Check every limit's type and range."""
        deep = "stores cannot load back JSON nested deeper"
        big = "a thread keeps several copies of it in one JSON document"
        _check("max_args_depth", self.max_args_depth, 1, MAX_DEPTH, deep)
        _check("max_args_bytes", self.max_args_bytes, 1, MAX_BYTES, big)
        _check("max_result_depth", self.max_result_depth, 1, MAX_DEPTH, deep)
        _check("max_result_bytes", self.max_result_bytes, 1, MAX_BYTES, big)


DEFAULT_LIMITS: Final = Limits()
"""The limits a runner uses when given none."""

WIDEST_LIMITS: Final = Limits(
    max_args_depth=MAX_DEPTH,
    max_args_bytes=MAX_BYTES,
    max_result_depth=MAX_DEPTH,
    max_result_bytes=MAX_BYTES,
)
"""The widest limits allowed: what ``parse_tool_call`` enforces when given none."""


def check_limits(value: object) -> Limits:
    """``value`` when it is a :class:`Limits`; ``None`` gives the defaults; else ``TypeError``."""
    if value is None:
        return DEFAULT_LIMITS
    if not isinstance(value, Limits):
        msg = f"limits must be a toolguard.Limits, got {type(value).__name__}"
        raise TypeError(msg)
    return value


# --------------------------------------------------------------------------- arguments


def _prefix(name: str) -> str:
    return f"Invalid arguments for tool `{clean_text(name)}`: "


def args_too_deep(name: str, path: Path | None, limits: Limits) -> str:
    """The error result for arguments nested deeper than ``limits.max_args_depth``."""
    where = f"'{describe_path(path[:1])}': " if path else ""
    return (
        f"{_prefix(name)}{where}nested more than {limits.max_args_depth} levels deep"
        " (Limits.max_args_depth)"
    )


def args_too_large(name: str, size: int, limits: Limits) -> str:
    """The error result for arguments larger than ``limits.max_args_bytes``."""
    return (
        f"{_prefix(name)}{size:,} bytes of JSON, more than {limits.max_args_bytes:,}"
        " (Limits.max_args_bytes)"
    )


def text_too_large(name: str, text: str, limits: Limits) -> str | None:
    """The error result when arguments ``text`` is larger than ``limits.max_args_bytes``."""
    if len(text) * 4 <= limits.max_args_bytes:  # at most 4 bytes per character
        return None
    size = len(text.encode("utf-8", "surrogatepass"))
    return args_too_large(name, size, limits) if size > limits.max_args_bytes else None


def args_bad_number(name: str, path: Path, value: object) -> str:
    """The error result for arguments holding NaN, an infinity or a huge integer."""
    where = f"'{describe_path(path)}': "
    if type(value) is int:
        return f"{_prefix(name)}{where}integers of more than {MAX_INT_DIGITS:,} digits are refused"
    return f"{_prefix(name)}{where}NaN and Infinity are not valid JSON numbers"


def _at(value: Any, path: Path) -> Any:
    for part in path:
        value = value[part]
    return value


def preview(args: Any) -> str:
    """At most :data:`PREVIEW_CHARS` characters of refused arguments, as JSON text if possible."""
    if isinstance(args, str):
        text = args
    else:
        try:
            text = json.dumps(args, ensure_ascii=False, default=lambda v: type(v).__name__)
        except (RecursionError, ValueError, TypeError):
            text = "{…}"
    if len(text) > PREVIEW_CHARS:
        text = text[:PREVIEW_CHARS] + "…"
    result: str = clean_text(text)
    return result


def args_problem(
    name: str, args: dict[str, Any], limits: Limits, text: str | None = None
) -> tuple[dict[str, Any], str | None]:
    """Check parsed arguments against ``limits``: ``(plain JSON args, None)`` or ``({}, error)``.

    ``text`` is the JSON text the arguments were parsed from, if any (it
    allows cheap shortcuts; the caller has checked its size with
    :func:`text_too_large`, since that size is what counts). Values that are not
    plain JSON data (tuples, dates, models, lone surrogates) are converted
    with :func:`~toolguard._core.jsonable.to_json_data` once their depth is known to
    be safe; a value that cannot be converted is refused.
    """
    if text is not None and (
        len(text) <= MAX_INT_DIGITS
        and text.count("[") + text.count("{") <= limits.max_args_depth
        and "NaN" not in text
        and "Infinity" not in text
    ):
        # Too few brackets to be too deep, too short for a huge integer, no NaN.
        if text.isascii() and "\\u" not in text:
            return args, None
        cleaned: dict[str, Any] = clean_text(args)
        return cleaned, None
    scan = scan_json(args, limits.max_args_depth)
    if scan.too_deep is not None:
        return {}, args_too_deep(name, scan.too_deep, limits)
    if scan.bad_number is not None:
        return {}, args_bad_number(name, scan.bad_number, _at(args, scan.bad_number))
    if scan.foreign:
        try:
            converted = to_json_data(args)
        except Exception as exc:
            return {}, f"{_prefix(name)}cannot be read as JSON ({type(exc).__name__})"
        return args_problem(name, converted, limits)
    if text is None and scan.size_bound() > limits.max_args_bytes:
        size = len(json.dumps(args, ensure_ascii=False, separators=(",", ":")).encode())
        if size > limits.max_args_bytes:
            return {}, args_too_large(name, size, limits)
    return args, None


# --------------------------------------------------------------------------- results


def _truncated(text: str, limit: int) -> tuple[str, int, int]:
    """``(at most limit bytes of text, its full size, the size kept)``, cut on a character."""
    if len(text) * 4 <= limit:
        return text, -1, -1
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text, -1, -1
    kept = data[:limit].decode("utf-8", "ignore")
    return kept, len(data), len(kept.encode("utf-8", "surrogatepass"))


def _reason(exc: BaseException) -> str:
    """``Type: text`` of an exception, at most 200 characters; never raises."""
    try:
        text = f"{type(exc).__name__}: {exc}"
    except Exception:
        text = type(exc).__name__
    reason: str = clean_text(text)
    return reason if len(reason) <= 200 else reason[:199] + "…"


def bounded_result(value: Any, limits: Limits) -> tuple[str, Any]:
    """A tool's return value as ``(content, value)`` within ``limits``; never raises.

    See :class:`Limits` for the bounded forms.
    """
    try:
        data = to_json_data(value)
        if type(data) is str:
            content, note, kept_value = data, "", data
        else:
            try:
                # Refuses NaN, infinities and integers Python cannot write as text.
                content = json.dumps(data, ensure_ascii=False, allow_nan=False)
            except ValueError:
                content = ""
            if (
                content
                and len(content) <= MAX_INT_DIGITS
                and content.count("[") + content.count("{") <= limits.max_result_depth
            ):
                # Too few brackets to be too deep, too short for a huge integer.
                scan = None
            else:
                scan = scan_json(data, limits.max_result_depth)
                if scan.bad_number is not None:
                    data = without_bad_numbers(data)
                    scan = scan_json(data, limits.max_result_depth)
                    content = ""
                content = content or json.dumps(data, ensure_ascii=False)
            if scan is not None and scan.too_deep is not None:
                kept_value = None
                note = (
                    f"[toolguard: the result is nested more than {limits.max_result_depth}"
                    " levels deep (Limits.max_result_depth); it is kept as text only.]"
                )
            else:
                kept_value, note = data, ""
    except Exception as exc:
        reason = _reason(exc)
        kind = clean_text(type(value).__name__)
        return (
            f"[toolguard: the tool's result (type {kind}) cannot be converted"
            f" to JSON ({reason}); it is not kept.]"
        ), None
    if not note and len(content) * 4 <= limits.max_result_bytes:
        return content, kept_value  # at most 4 bytes per character: small enough
    kept, size, kept_size = _truncated(content, limits.max_result_bytes)
    if size >= 0:
        note = (
            f"[toolguard: the result is {size:,} bytes of text, more than"
            f" {limits.max_result_bytes:,} (Limits.max_result_bytes); only the first"
            f" {kept_size:,} bytes are kept.]"
        )
        return f"{kept}\n{note}", None
    if note:
        return f"{content}\n{note}", kept_value
    return content, kept_value
