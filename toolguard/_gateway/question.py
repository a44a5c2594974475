"""The approval question: how one MCP call is shown to the person asked about it.

:func:`approval_message` writes the exact tool name and its JSON arguments,
every invisible or look-alike character escaped by :func:`visible`, so that
what a reviewer reads is exactly what runs. :data:`APPROVAL_SCHEMA` is the
form of the question (elicitation, form mode).
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from typing import Any, Final

from toolguard._core.reveal import scan

__all__ = ["APPROVAL_SCHEMA", "INDENT_UP_TO", "approval_message", "visible"]

APPROVAL_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "decision": {
            "type": "string",
            "title": "Decision",
            "description": "approve runs the tool once with exactly these arguments",
            "enum": ["approve", "reject"],
        },
        "message": {
            "type": "string",
            "title": "Message",
            "description": "Optional: why you reject it (the agent reads this)",
        },
    },
    "required": ["decision"],
}
"""The form of an approval question (elicitation, form mode)."""


_HIDDEN: Final = frozenset(
    [
        *(0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x2800, 0x3164, 0xFFA0, 0xFFFD),
        *range(0x180B, 0x1810),
        *range(0xFE00, 0xFE10),
        *range(0xE0100, 0xE01F0),
    ]
)
"""Characters that print as nothing (fillers, variation selectors, ...) though Python calls them
printable."""


def _hidden(char: str) -> bool:
    """Whether ``char`` prints as nothing, moves text or is not a stable character."""
    return char != "\n" and (
        not char.isprintable()
        or ord(char) in _HIDDEN
        or unicodedata.category(char) in ("Cf", "Co", "Cn", "Cs", "Zl", "Zp")
    )


def visible(text: str) -> str:
    """``text`` with every invisible, control, bidi, odd-space or look-alike character escaped.

    Escaped as ``\\uXXXX`` (``\\UXXXXXXXX`` above the BMP). Newlines are kept; a
    backslash stays as it is. Escaped: what Python does not call printable,
    format, private-use and unassigned characters, the fillers of
    :data:`_HIDDEN`, and everything the approval page and the terminal card
    flag (:func:`toolguard._core.reveal.scan`: bidi and zero-width characters,
    letters of another script mixed into a word, a Cyrillic or Greek word that
    looks Latin, non-ASCII characters in an address or path). What a reviewer
    reads is then exactly what runs: a right-to-left override or a zero-width
    space cannot hide or reorder part of the arguments, and ``p\\u0430ypal.com``
    does not pass for ``paypal.com``.
    """
    flags = scan(text)  # indexes count code points, a valid surrogate pair being one
    out: list[str] = []
    i = point = 0
    while i < len(text):
        char = text[i]
        pair = (
            "\ud800" <= char <= "\udbff"
            and i + 1 < len(text)
            and "\udc00" <= text[i + 1] <= "\udfff"
        )
        for unit in text[i : i + 2] if pair else char:
            if point in flags or _hidden(unit):
                code = ord(unit)
                out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
            else:
                out.append(unit)
        i += 2 if pair else 1
        point += 1
    return "".join(out)


INDENT_UP_TO: Final = 4_000
"""Arguments whose compact JSON is longer than this are shown compact, not indented."""


def approval_message(name: str, args: Mapping[str, Any], description: str = "") -> str:
    """The text of an approval question: the exact tool name and its JSON arguments.

    The arguments are indented JSON (compact JSON past :data:`INDENT_UP_TO`
    characters) with keys sorted, passed through :func:`visible`.

    Raises:
        ValueError: the arguments cannot be written as JSON (e.g. nested
            deeper than Python can recurse); the caller falls back to the page.
    """
    try:
        shown = json.dumps(dict(args), ensure_ascii=False, sort_keys=True)
        if len(shown) <= INDENT_UP_TO:
            shown = json.dumps(dict(args), indent=2, ensure_ascii=False, sort_keys=True)
    except (RecursionError, TypeError, ValueError) as exc:
        msg = f"the arguments of `{visible(name)}` cannot be shown as JSON: {exc}"
        raise ValueError(msg) from None
    lines = [f"Approve the tool call `{visible(name)}`?"]
    if description:
        lines.append(f"Tool description: {visible(description)}")
    lines += ["Arguments (JSON):", visible(shown)]
    return "\n".join(lines)
