"""Docstring parsing for building LLM tool schemas from plain Python functions.

The tool description comes from the docstring's prose, and each JSON-schema property gets its
description from the docstring's parameter section. Google, NumPy and reST (Sphinx) styles are
auto-detected. Standard library only, and :func:`parse_docstring` never raises.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Final, Literal, TypeAlias

__all__ = ["DocstringStyle", "ParsedDocstring", "parse_docstring"]

DocstringStyle: TypeAlias = Literal["google", "numpy", "rest", "plain"]
_Kind: TypeAlias = Literal["params", "returns", "other", "fields"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedDocstring:
    """The parts of a docstring that matter for a tool schema."""

    summary: str = ""
    """First paragraph, its lines joined with single spaces ("" if none)."""
    description: str = ""
    """All prose before the first section (summary included), dedented, with paragraphs
    separated by a blank line ("" if none)."""
    params: dict[str, str] = field(default_factory=dict)
    """Parameter name (without ``*``/``**``) -> description, lines joined with single spaces."""
    returns: str | None = None
    """Description of the return (or yielded) value, if documented."""
    style: DocstringStyle = "plain"
    """The detected docstring style."""


# Section names, lower-cased with single spaces, shared by the Google and NumPy styles (the
# Napoleon list plus "params"). Google headers must be one of these; NumPy headers may be any
# underlined title, unknown ones being ignored.
_SECTIONS: Final[dict[str, _Kind]] = {
    **dict.fromkeys(
        (
            "args",
            "arguments",
            "parameters",
            "params",
            "keyword args",
            "keyword arguments",
            "other parameters",
        ),
        "params",
    ),
    **dict.fromkeys(("returns", "return", "yields", "yield"), "returns"),
    **dict.fromkeys(
        (
            "attention",
            "attributes",
            "caution",
            "danger",
            "error",
            "example",
            "examples",
            "hint",
            "important",
            "methods",
            "note",
            "notes",
            "raise",
            "raises",
            "receive",
            "receives",
            "references",
            "see also",
            "tip",
            "todo",
            "warn",
            "warning",
            "warnings",
            "warns",
        ),
        "other",
    ),
}

# All regexes are matched against lines that were already stripped of surrounding whitespace.
_GOOGLE_HEADER: Final = re.compile(r"([A-Za-z][A-Za-z ]*?)\s*:")
_GOOGLE_INLINE_RETURNS: Final = re.compile(r"(?:Returns?|Yields?)\s*:\s*(?P<text>\S.*)")
_GOOGLE_ENTRY: Final = re.compile(
    r"\*{0,2}(?P<name>[^\W\d]\w*)\s*(?:\((?P<type>.*?)\))?\s*:\s*(?P<desc>.*)"
)
_NUMPY_HEADER: Final = re.compile(r"[A-Za-z][A-Za-z0-9 _]*")
_NUMPY_UNDERLINE: Final = re.compile(r"-{3,}")
_NUMPY_ENTRY: Final = re.compile(
    r"(?P<names>\*{0,2}[^\W\d]\w*(?:\s*,\s*\*{0,2}[^\W\d]\w*)*)\s*(?::\s*(?P<type>.*))?"
)
_NUMPY_NAMED_RETURN: Final = re.compile(r"[^\W\d]\w*\s*:\s*(?P<type>.*)")
_REST_FIELD: Final = re.compile(
    r":(?P<field>param|parameter|arg|argument|key|keyword|type|kwtype|returns?|rtype"
    r"|raises?|except|exception|yields?|ytype|var|ivar|cvar|vartype|meta)\b"
    r"(?P<arg>[^:]*):(?P<body>.*)"
)
_REST_PARAM_FIELDS: Final = frozenset({"param", "parameter", "arg", "argument", "key", "keyword"})
_REST_RETURN_FIELDS: Final = frozenset({"returns", "return", "yields", "yield"})
# A type annotation before a colon in a Google ``Returns:`` section, e.g. ``dict[str, int]:``.
_RETURN_TYPE: Final = re.compile(r"[\w.]+(?:\[[^:]*\])?(?:\s*\|\s*[\w.]+(?:\[[^:]*\])?)*")
_MAX_RETURN_TYPE_LEN: Final = 80


@dataclass(slots=True)
class _Section:
    style: DocstringStyle
    kind: _Kind
    start: int  # index of the header line (of the first field for reST)
    indent: int  # indentation of that line
    body: int  # index of the first body line
    end: int = 0  # index one past the last body line
    inline: str = ""  # text after a Google ``Returns:`` header on the same line


class _Lines:
    """The cleaned docstring's lines, stripped, with their indentation."""

    __slots__ = ("indents", "texts")

    def __init__(self, text: str) -> None:
        raw = text.split("\n")
        self.texts = [line.strip() for line in raw]
        self.indents = [len(line) - len(line.lstrip()) for line in raw]


def parse_docstring(doc: str | None) -> ParsedDocstring:
    """Parse a Google, NumPy, reST (Sphinx) or plain docstring; never raises.

    The docstring is cleaned with :func:`inspect.cleandoc` first. The description stops at the
    first section header (or reST field); a docstring with only sections has no summary.
    """
    if not doc:
        return ParsedDocstring()
    text = inspect.cleandoc(doc.replace("\r\n", "\n").replace("\r", "\n"))
    if not text:
        return ParsedDocstring()
    lines = _Lines(text)
    sections = _split_sections(lines)
    prose_end = sections[0].start if sections else len(lines.texts)
    summary, description = _parse_prose(text.split("\n")[:prose_end])

    params: dict[str, list[str]] = {}
    returns: str | None = None
    style: DocstringStyle | None = None
    for section in sections:
        documents = section.kind in ("params", "returns")
        if section.kind == "fields":
            documents, rest_returns = _parse_rest_fields(lines, section, params)
            if returns is None:
                returns = rest_returns
        elif section.kind == "params":
            if section.style == "google":
                _parse_google_params(lines, section, params)
            else:
                _parse_numpy_params(lines, section, params)
        elif section.kind == "returns" and returns is None:
            if section.style == "google":
                returns = _parse_google_returns(lines, section)
            else:
                returns = _parse_numpy_returns(lines, section)
        if documents and style is None:
            style = section.style
    if style is None:
        style = sections[0].style if sections else "plain"
    return ParsedDocstring(
        summary=summary,
        description=description,
        params={name: " ".join(parts) for name, parts in params.items()},
        returns=returns,
        style=style,
    )


def _parse_prose(raw: list[str]) -> tuple[str, str]:
    start = 0
    while start < len(raw) and not raw[start].strip():
        start += 1  # cleandoc keeps leading lines that are whitespace but not empty
    paragraphs: list[list[str]] = []
    block: list[str] = []
    for line in inspect.cleandoc("\n".join(raw[start:])).split("\n"):
        if line.strip():
            block.append(line.rstrip())
        elif block:
            paragraphs.append(block)
            block = []
    if block:
        paragraphs.append(block)
    if not paragraphs:
        return "", ""
    summary = " ".join(line.strip() for line in paragraphs[0])
    return summary, "\n\n".join("\n".join(paragraph) for paragraph in paragraphs)


def _split_sections(lines: _Lines) -> list[_Section]:
    """Find section headers; a header inside a section must not be indented deeper than it."""
    texts, indents = lines.texts, lines.indents
    count = len(texts)
    sections: list[_Section] = []
    current: _Section | None = None
    i = 0
    while i < count:
        text = texts[i]
        if text and (current is None or indents[i] <= current.indent):
            found = _match_header(lines, i)
            continues_fields = current is not None and current.kind == "fields"
            if found is not None and not (found.kind == "fields" and continues_fields):
                if current is not None:
                    current.end = i
                sections.append(found)
                current = found
                i = found.body if found.body > i else i + 1
                continue
        i += 1
    if current is not None:
        current.end = count
    return sections


def _match_header(lines: _Lines, i: int) -> _Section | None:
    text, indent = lines.texts[i], lines.indents[i]
    if _REST_FIELD.match(text):
        return _Section(style="rest", kind="fields", start=i, indent=indent, body=i)
    match = _GOOGLE_HEADER.fullmatch(text)
    if match is not None:
        kind = _SECTIONS.get(" ".join(match.group(1).lower().split()))
        if kind is not None:
            return _Section(style="google", kind=kind, start=i, indent=indent, body=i + 1)
    # ``Returns: text`` on one line, but not as the very first line: that is a summary.
    match = _GOOGLE_INLINE_RETURNS.fullmatch(text) if i > 0 else None
    if match is not None:
        return _Section(
            style="google",
            kind="returns",
            start=i,
            indent=indent,
            body=i + 1,
            inline=match.group("text"),
        )
    if (
        i + 1 < len(lines.texts)
        and _NUMPY_UNDERLINE.fullmatch(lines.texts[i + 1])
        and _NUMPY_HEADER.fullmatch(text)
    ):
        kind = _SECTIONS.get(" ".join(text.lower().split()), "other")
        return _Section(style="numpy", kind=kind, start=i, indent=indent, body=i + 2)
    return None


def _parse_google_params(lines: _Lines, section: _Section, out: dict[str, list[str]]) -> None:
    header_indent = section.indent
    entry_indent: int | None = None
    current: list[str] | None = None
    for i in range(section.body, section.end):
        text = lines.texts[i]
        if not text:
            continue
        indent = lines.indents[i]
        if entry_indent is None:
            entry_indent = indent
        match = _GOOGLE_ENTRY.fullmatch(text) if indent <= entry_indent else None
        if indent <= header_indent and (entry_indent > header_indent or match is None):
            break  # dedented back to the header: the section is over
        if match is not None:
            desc = match.group("desc").strip()
            current = [desc] if desc else []
            name = match.group("name")
            if name.isidentifier():
                out.setdefault(name, current)
        elif indent <= entry_indent and ":" in text:
            current = None  # an entry we cannot parse, e.g. ``a.b: text``
        elif current is not None:
            current.append(text)


def _parse_google_returns(lines: _Lines, section: _Section) -> str:
    header_indent = section.indent
    parts = [section.inline] if section.inline else []
    content_indent: int | None = None
    for i in range(section.body, section.end):
        text = lines.texts[i]
        if not text:
            if content_indent is not None and content_indent <= header_indent:
                break  # unindented content runs up to the first blank line
            continue
        indent = lines.indents[i]
        if content_indent is None:
            content_indent = indent
        if indent <= header_indent and (section.inline or content_indent > header_indent):
            break
        parts.append(text)
    return _strip_return_type(" ".join(parts))


def _strip_return_type(text: str) -> str:
    """``int: The sum.`` -> ``The sum.``; a bare ``int:`` -> ``int``."""
    before, colon, after = text.partition(":")
    before = before.strip()
    if colon and len(before) <= _MAX_RETURN_TYPE_LEN and _RETURN_TYPE.fullmatch(before):
        return after.strip() or before
    return text


def _parse_numpy_params(lines: _Lines, section: _Section, out: dict[str, list[str]]) -> None:
    entry_indent: int | None = None
    current: list[str] | None = None
    for i in range(section.body, section.end):
        text = lines.texts[i]
        if not text:
            continue
        indent = lines.indents[i]
        if entry_indent is None:
            entry_indent = indent
        if indent <= entry_indent:
            match = _NUMPY_ENTRY.fullmatch(text)
            if match is None:
                current = None
                continue
            current = []
            for raw_name in match.group("names").split(","):
                name = raw_name.strip().lstrip("*")
                if name.isidentifier():
                    out.setdefault(name, current)
        elif current is not None:
            current.append(text)


def _parse_numpy_returns(lines: _Lines, section: _Section) -> str:
    entries: list[tuple[str, list[str]]] = []
    entry_indent: int | None = None
    for i in range(section.body, section.end):
        text = lines.texts[i]
        if not text:
            continue
        indent = lines.indents[i]
        if entry_indent is None:
            entry_indent = indent
        if indent <= entry_indent:
            match = _NUMPY_NAMED_RETURN.fullmatch(text)
            entries.append((match.group("type").strip() if match else text, []))
        elif entries:
            entries[-1][1].append(text)
    described = [" ".join(desc) for _, desc in entries if desc]
    # Without any description, fall back to the documented types (or prose lines).
    return " ".join(described) if described else " ".join(head for head, _ in entries if head)


def _parse_rest_fields(
    lines: _Lines, section: _Section, out: dict[str, list[str]]
) -> tuple[bool, str | None]:
    """Collect ``:param:`` fields into ``out``.

    Returns whether any parameter or return field was seen, and the return description.
    """
    documented = False
    returns: list[str] | None = None
    current: list[str] | None = None
    current_indent = 0
    for i in range(section.body, section.end):
        text = lines.texts[i]
        if not text:
            continue
        indent = lines.indents[i]
        match = _REST_FIELD.match(text)
        if match is None:
            if current is not None and indent > current_indent:
                current.append(text)
            else:
                current = None  # prose after the field list
            continue
        body = match.group("body").strip()
        current = [body] if body else []
        current_indent = indent
        field_name = match.group("field")
        if field_name in _REST_PARAM_FIELDS:
            words = match.group("arg").split()
            name = words[-1].lstrip("*") if words else ""
            if name.isidentifier():
                documented = True
                out.setdefault(name, current)
        elif field_name in _REST_RETURN_FIELDS:
            documented = True
            if returns is None:
                returns = current
    return documented, None if returns is None else " ".join(returns)
