"""Make invisible and deceptive characters visible to a reviewer.

A hostile model can hide what a tool call really does from the person who
approves it: a RIGHT-TO-LEFT OVERRIDE turns ``"invoice\\u202eexe.pdf"`` into
what looks like ``invoicefdp.exe``, a zero-width space makes two names look
equal, a Cyrillic ``\\u0430`` turns ``p\\u0430ypal.com`` into another domain, and an
``ESC [`` sequence can clear or recolour a terminal. The functions here find
such characters with their location and render text with each of them
escaped as ``\\uXXXX`` (JSON's notation, so escaped JSON still parses back to
exactly the same data). The payload itself is never changed.

What is flagged (the same rules as ``toolguard/static/reveal.js``, whose
tables ``tests/page/test_reveal.py`` compares with :data:`TABLES`):

* always: control characters (C0, DEL, C1; ``\\n`` and ``\\t`` only in
  single-line text such as names and keys), bidi controls, zero-width and
  other invisible or default-ignorable characters, fillers, tag characters,
  variation selectors (except one U+FE0E/U+FE0F right after a symbol, as in
  an emoji), lone surrogates and U+FFFD (text that could not be stored as
  sent), U+FFFC (drawn blank), and the GREEK QUESTION MARK that looks like ``;``;
* always: letters, marks and digits of right-to-left scripts (Hebrew, Arabic
  and the others of :data:`TABLES` ``"rtl"``): one of them reorders the text
  after it (``DE89\u05f3 3704 0044`` is drawn with its digit groups reversed),
  so each is escaped; a run of them is one finding;
* in a word (a maximal run of Latin, Cyrillic and Greek letters) that mixes
  scripts: every letter not of the word's main script;
* a whole Cyrillic or Greek word made only of letters that look Latin, in
  text that also has Latin letters (``\\u0430\\u0440\\u0440\\u04cf\\u0435`` next to ``.com``,
  it reads ``apple``);
* in an address or path (a token with ``@``, ``/``, ``\\``, ``://`` or a dot
  between ASCII letters and digits, holding an ASCII letter): every other
  non-ASCII character.

Numbers are written as Python holds them (an ``int`` exactly, a ``float`` as
its ``repr``, which reads back to the same float); NaN and the infinities,
which JSON cannot hold, are marked like a flagged character.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "INVISIBLE",
    "TABLES",
    "WARNING_HEADER",
    "Finding",
    "Revealed",
    "Segment",
    "is_invisible",
    "reveal_action",
    "reveal_json",
    "reveal_text",
    "scan",
    "segments_text",
    "text_segments",
    "warning_lines",
    "without_invisible",
]

WARNING_HEADER = (
    "⚠ This action contains invisible or look-alike characters (shown escaped as \\uXXXX):"
)
"""The first line of the warning on an approval card."""
WARNING_LIMIT = 20
"""At most this many items are listed; the rest are counted in a last line."""
_KEY_LIMIT = 40  # code points of a key or look-alike word quoted in the warning
_PATH_LIMIT = 8  # a longer path to an argument is shortened to its first 3 and last 4 steps

# ----------------------------------------------------------------------------- tables

_ALWAYS: tuple[tuple[int, int, str], ...] = (
    (0x0000, 0x0000, "NULL"),
    (0x0001, 0x0006, "CONTROL CHARACTER"),
    (0x0007, 0x0007, "BELL"),
    (0x0008, 0x0008, "BACKSPACE"),
    (0x0009, 0x0009, "CHARACTER TABULATION"),
    (0x000A, 0x000A, "LINE FEED"),
    (0x000B, 0x000C, "CONTROL CHARACTER"),
    (0x000D, 0x000D, "CARRIAGE RETURN"),
    (0x000E, 0x001A, "CONTROL CHARACTER"),
    (0x001B, 0x001B, "ESCAPE"),
    (0x001C, 0x001F, "CONTROL CHARACTER"),
    (0x007F, 0x007F, "DELETE"),
    (0x0080, 0x0084, "CONTROL CHARACTER"),
    (0x0085, 0x0085, "NEXT LINE"),
    (0x0086, 0x009A, "CONTROL CHARACTER"),
    (0x009B, 0x009B, "CONTROL SEQUENCE INTRODUCER"),
    (0x009C, 0x009F, "CONTROL CHARACTER"),
    (0x00AD, 0x00AD, "SOFT HYPHEN"),
    (0x034F, 0x034F, "COMBINING GRAPHEME JOINER"),
    (0x037E, 0x037E, "GREEK QUESTION MARK"),
    (0x061C, 0x061C, "ARABIC LETTER MARK"),
    (0x115F, 0x115F, "HANGUL CHOSEONG FILLER"),
    (0x1160, 0x1160, "HANGUL JUNGSEONG FILLER"),
    (0x17B4, 0x17B5, "KHMER INHERENT VOWEL"),
    (0x180B, 0x180D, "MONGOLIAN FREE VARIATION SELECTOR"),
    (0x180E, 0x180E, "MONGOLIAN VOWEL SEPARATOR"),
    (0x180F, 0x180F, "MONGOLIAN FREE VARIATION SELECTOR"),
    (0x200B, 0x200B, "ZERO WIDTH SPACE"),
    (0x200C, 0x200C, "ZERO WIDTH NON-JOINER"),
    (0x200D, 0x200D, "ZERO WIDTH JOINER"),
    (0x200E, 0x200E, "LEFT-TO-RIGHT MARK"),
    (0x200F, 0x200F, "RIGHT-TO-LEFT MARK"),
    (0x2028, 0x2028, "LINE SEPARATOR"),
    (0x2029, 0x2029, "PARAGRAPH SEPARATOR"),
    (0x202A, 0x202A, "LEFT-TO-RIGHT EMBEDDING"),
    (0x202B, 0x202B, "RIGHT-TO-LEFT EMBEDDING"),
    (0x202C, 0x202C, "POP DIRECTIONAL FORMATTING"),
    (0x202D, 0x202D, "LEFT-TO-RIGHT OVERRIDE"),
    (0x202E, 0x202E, "RIGHT-TO-LEFT OVERRIDE"),
    (0x2060, 0x2060, "WORD JOINER"),
    (0x2061, 0x2061, "FUNCTION APPLICATION"),
    (0x2062, 0x2062, "INVISIBLE TIMES"),
    (0x2063, 0x2063, "INVISIBLE SEPARATOR"),
    (0x2064, 0x2064, "INVISIBLE PLUS"),
    (0x2065, 0x2065, "INVISIBLE FORMAT CHARACTER"),
    (0x2066, 0x2066, "LEFT-TO-RIGHT ISOLATE"),
    (0x2067, 0x2067, "RIGHT-TO-LEFT ISOLATE"),
    (0x2068, 0x2068, "FIRST STRONG ISOLATE"),
    (0x2069, 0x2069, "POP DIRECTIONAL ISOLATE"),
    (0x206A, 0x206F, "DEPRECATED FORMAT CHARACTER"),
    (0x2800, 0x2800, "BRAILLE PATTERN BLANK"),
    (0x3164, 0x3164, "HANGUL FILLER"),
    (0xD800, 0xDFFF, "LONE SURROGATE"),
    (0xFE00, 0xFE0F, "VARIATION SELECTOR"),
    (0xFEFF, 0xFEFF, "ZERO WIDTH NO-BREAK SPACE"),
    (0xFFA0, 0xFFA0, "HALFWIDTH HANGUL FILLER"),
    (0xFFF0, 0xFFF8, "INVISIBLE FORMAT CHARACTER"),
    (0xFFF9, 0xFFFB, "INTERLINEAR ANNOTATION CHARACTER"),
    (0xFFFC, 0xFFFC, "OBJECT REPLACEMENT CHARACTER"),
    (0xFFFD, 0xFFFD, "REPLACEMENT CHARACTER"),
    (0x1BCA0, 0x1BCA3, "SHORTHAND FORMAT CONTROL"),
    (0x1D173, 0x1D17A, "MUSICAL SYMBOL FORMAT CHARACTER"),
    (0xE0000, 0xE00FF, "TAG CHARACTER"),
    (0xE0100, 0xE01EF, "VARIATION SELECTOR"),
    (0xE01F0, 0xE0FFF, "INVISIBLE FORMAT CHARACTER"),
)

_SCRIPTS: tuple[tuple[str, tuple[tuple[int, int], ...]], ...] = (
    (
        "Latin",
        (
            (0x0041, 0x005A),
            (0x0061, 0x007A),
            (0x00C0, 0x00D6),
            (0x00D8, 0x00F6),
            (0x00F8, 0x02AF),
            (0x1D00, 0x1D25),
            (0x1E00, 0x1EFF),
            (0x2C60, 0x2C7F),
            (0xA722, 0xA7FF),
            (0xAB30, 0xAB64),
            (0xFB00, 0xFB06),
            (0xFF21, 0xFF3A),
            (0xFF41, 0xFF5A),
        ),
    ),
    (
        "Cyrillic",
        (
            (0x0400, 0x0481),
            (0x048A, 0x052F),
            (0x1C80, 0x1C88),
            (0xA640, 0xA66E),
            (0xA67F, 0xA69B),
        ),
    ),
    (
        "Greek",
        (
            (0x0370, 0x0373),
            (0x0376, 0x0377),
            (0x037B, 0x037D),
            (0x037F, 0x037F),
            (0x0386, 0x0386),
            (0x0388, 0x03FF),
            (0x1D26, 0x1D2A),
            (0x1F00, 0x1FFC),
        ),
    ),
)

_LOOKALIKES = (
    # Cyrillic letters that look like Latin ones
    "аеіјкорсухѕԁһӏԛԝүАВЕІЈКМНОРСТУХЅҮԚԜҺӀ"
    # Greek letters that look like Latin ones
    "ΑΒΕΖΗΙΚΜΝΟΡΤΥΧαικνορυ"
)

_SEPARATORS = (
    "\t\n\x0b\x0c\r \"'(),;<>[]`{|}"
    "\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)

_RTL: tuple[tuple[int, int], ...] = (
    (0x0590, 0x08FF),
    (0xFB1D, 0xFDFF),
    (0xFE70, 0xFEFE),
    (0x10800, 0x10FFF),
    (0x1E800, 0x1EFFF),
)
"""Letters, marks and digits of right-to-left scripts (Hebrew, Arabic, Syriac, Thaana, NKo,
Samaritan, Mandaic, their presentation forms, and the historic scripts of U+10800-U+10FFF and
U+1E800-U+1EFFF): one of them can reorder the text that follows it."""

TABLES: dict[str, Any] = {
    "always": [[start, end, name] for start, end, name in _ALWAYS],
    "scripts": [[name, [[a, b] for a, b in ranges]] for name, ranges in _SCRIPTS],
    "lookalikes": [ord(ch) for ch in _LOOKALIKES],
    "separators": [ord(ch) for ch in _SEPARATORS],
    "rtl": [[a, b] for a, b in _RTL],
    "warningHeader": WARNING_HEADER,
    "warningLimit": WARNING_LIMIT,
    "keyLimit": _KEY_LIMIT,
    "pathLimit": _PATH_LIMIT,
}
"""The data both implementations use, as JSON data (``toolguardReveal.TABLES`` in the page)."""

_ALWAYS_STARTS = [start for start, _, _ in _ALWAYS]
_SCRIPT_RANGES = sorted((a, b, name) for name, ranges in _SCRIPTS for a, b in ranges)
_SCRIPT_STARTS = [a for a, _, _ in _SCRIPT_RANGES]
_LOOKALIKE_SET = frozenset(ord(ch) for ch in _LOOKALIKES)
_SEPARATOR_SET = frozenset(ord(ch) for ch in _SEPARATORS)
_SCRIPT_ORDER = {name: i for i, (name, _) in enumerate(_SCRIPTS)}
_RTL_STARTS = [a for a, _ in _RTL]
_SHORT_ESCAPES = {0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

_SHOWN_FLAGS = frozenset({"GREEK QUESTION MARK", "REPLACEMENT CHARACTER", "LONE SURROGATE"})
"""Flagged characters that a page does draw (a glyph), unlike the rest of the table."""

INVISIBLE: tuple[tuple[int, int], ...] = tuple(
    (start, end) for start, end, name in _ALWAYS if name not in _SHOWN_FLAGS
)
"""Code point ranges a page draws as nothing: controls, format characters, default-ignorable
code points (zero-width, joiners, variation selectors, tags) and fillers (Hangul fillers,
the blank braille pattern). The page's own table, less the three it draws."""
_INVISIBLE_STARTS = [start for start, _ in INVISIBLE]


def is_invisible(ch: str) -> bool:
    """Whether the page draws the character ``ch`` as nothing (see :data:`INVISIBLE`)."""
    cp = ord(ch)
    i = bisect.bisect_right(_INVISIBLE_STARTS, cp) - 1
    return i >= 0 and cp <= INVISIBLE[i][1]


def without_invisible(text: str) -> str:
    """``text`` without the characters of :data:`INVISIBLE`, whitespace kept."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(ch for ch in text if ch.isspace() or not is_invisible(ch))


def _always_name(cp: int) -> str | None:
    i = bisect.bisect_right(_ALWAYS_STARTS, cp) - 1
    if i >= 0 and cp <= _ALWAYS[i][1]:
        return _ALWAYS[i][2]
    return None


def _script(cp: int) -> str | None:
    i = bisect.bisect_right(_SCRIPT_STARTS, cp) - 1
    if i >= 0 and cp <= _SCRIPT_RANGES[i][1]:
        return _SCRIPT_RANGES[i][2]
    return None


def _is_rtl(cp: int) -> bool:
    i = bisect.bisect_right(_RTL_STARTS, cp) - 1
    return i >= 0 and cp <= _RTL[i][1]


def _rtl_what(first: int, last: int, count: int) -> str:
    """What a run of right-to-left characters is (each of them gets this text)."""
    if count == 1:
        return f"right-to-left character {_u(first)}"
    return f"right-to-left text of {count} characters ({_u(first)} … {_u(last)})"


def _is_ascii_letter(cp: int) -> bool:
    return 0x41 <= cp <= 0x5A or 0x61 <= cp <= 0x7A


def _is_ascii_alnum(cp: int) -> bool:
    return _is_ascii_letter(cp) or 0x30 <= cp <= 0x39


def _code_points(text: str) -> list[int]:
    """The code points of ``text``, a valid surrogate pair read as one (as JavaScript does)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return [ord(ch) for ch in text]


def _u(cp: int) -> str:
    return f"U+{cp:04X}"


def _escape(cp: int) -> str:
    """``cp`` as a JSON escape: ``\\n`` and the like, else ``\\uXXXX`` (a pair above the BMP)."""
    short = _SHORT_ESCAPES.get(cp)
    if short is not None:
        return short
    if cp > 0xFFFF:
        cp -= 0x10000
        return f"\\u{0xD800 + (cp >> 10):04x}\\u{0xDC00 + (cp & 0x3FF):04x}"
    return f"\\u{cp:04x}"


# ----------------------------------------------------------------------------- scanning


def _scan(cps: list[int], *, single_line: bool, letters: bool) -> dict[int, str]:
    flags: dict[int, str] = {}
    for i, cp in enumerate(cps):
        name = _always_name(cp)
        if name is None or (not single_line and cp in (0x09, 0x0A)):
            continue
        if (
            cp in (0xFE0E, 0xFE0F)
            and i > 0
            and cps[i - 1] >= 0x2000
            and _always_name(cps[i - 1]) is None
        ):
            continue  # one emoji or text presentation selector after a symbol: ❤️
        flags[i] = f"{_u(cp)} {name}"
    _flag_rtl(cps, flags)
    if not letters:
        return flags
    scripts = [_script(cp) for cp in cps]
    has_latin = "Latin" in scripts
    n = len(cps)
    i = 0
    while i < n:
        if scripts[i] is None:
            i += 1
            continue
        j = i
        counts: dict[str, int] = {}
        while j < n and scripts[j] is not None:
            script = scripts[j]
            assert script is not None  # noqa: S101 - narrowed for mypy
            counts[script] = counts.get(script, 0) + 1
            j += 1
        if len(counts) > 1:
            main = min(counts, key=lambda s: (-counts[s], _SCRIPT_ORDER[s]))
            for k in range(i, j):
                if scripts[k] != main and k not in flags:
                    flags[k] = (
                        f"{scripts[k]} letter {chr(cps[k])} ({_u(cps[k])}) mixed into a {main} word"
                    )
        elif (
            has_latin
            and scripts[i] != "Latin"
            and all(cps[k] in _LOOKALIKE_SET for k in range(i, j))
        ):
            word = "".join(chr(cp) for cp in cps[i : min(j, i + _KEY_LIMIT)])
            more = "…" if j - i > _KEY_LIMIT else ""
            what = f"{scripts[i]} word {word}{more} that looks Latin"
            for k in range(i, j):
                flags.setdefault(k, what)
        i = j
    i = 0
    while i < n:
        if cps[i] in _SEPARATOR_SET:
            i += 1
            continue
        j = i
        while j < n and cps[j] not in _SEPARATOR_SET:
            j += 1
        if _is_address(cps, i, j):
            for k in range(i, j):
                cp = cps[k]
                if cp > 0x7F and k not in flags:
                    shown = f"letter {chr(cp)} ({_u(cp)})" if scripts[k] else f"character {_u(cp)}"
                    flags[k] = f"non-ASCII {shown} in an address or path"
        i = j
    return flags


def _flag_rtl(cps: list[int], flags: dict[int, str]) -> None:
    """Flag each run of right-to-left characters not flagged yet (one text for the run)."""
    n = len(cps)
    i = 0
    while i < n:
        if i in flags or not _is_rtl(cps[i]):
            i += 1
            continue
        j = i
        while j < n and j not in flags and _is_rtl(cps[j]):
            j += 1
        what = _rtl_what(cps[i], cps[j - 1], j - i)
        for k in range(i, j):
            flags[k] = what
        i = j


def _is_address(cps: list[int], start: int, end: int) -> bool:
    """A token that looks like a domain, an email address, a URL or a path."""
    if not any(_is_ascii_letter(cps[k]) for k in range(start, end)):
        return False
    for k in range(start, end):
        cp = cps[k]
        if cp in (0x40, 0x2F, 0x5C):  # @ / \
            return True
        if (
            cp == 0x2E
            and start < k < end - 1
            and _is_ascii_alnum(cps[k - 1])
            and _is_ascii_alnum(cps[k + 1])
        ):
            return True
    return False


def scan(text: str, *, single_line: bool = False, letters: bool = True) -> dict[int, str]:
    """The suspicious characters of ``text``: code point index -> what it is.

    Args:
        text: any text; a lone surrogate is a character like any other.
        single_line: ``\\n`` and ``\\t`` are suspicious too (names, keys).
        letters: also look for mixed-script words and look-alike letters;
            ``False`` for prose, where only invisible characters are flagged.

    Returns:
        For each flagged code point (indexes count code points, a valid
        surrogate pair being one), a description such as
        ``"U+202E RIGHT-TO-LEFT OVERRIDE"`` or
        ``"Cyrillic letter \\u0430 (U+0430) mixed into a Latin word"`` (with the
        letter itself).
    """
    return _scan(_code_points(text), single_line=single_line, letters=letters)


# ----------------------------------------------------------------------------- rendering

Segment = tuple[str, "str | None"]
"""A piece of rendered text and, for an escaped character, what it is (``None``: plain text)."""


def _add(out: list[Segment], text: str) -> None:
    if not text:
        return
    if out and out[-1][1] is None:
        out[-1] = (out[-1][0] + text, None)
    else:
        out.append((text, None))


def _text(out: list[Segment], cps: list[int], flags: dict[int, str], *, quoted: bool) -> None:
    plain: list[str] = []
    for i, cp in enumerate(cps):
        what = flags.get(i)
        if what is not None:
            _add(out, "".join(plain))
            plain.clear()
            out.append((_escape(cp), what))
        elif quoted and cp in (0x22, 0x5C):
            plain.append("\\" + chr(cp))
        elif quoted and cp < 0x20:
            plain.append(_escape(cp))
        else:
            plain.append(chr(cp))
    _add(out, "".join(plain))


def text_segments(text: str, *, single_line: bool = False, letters: bool = True) -> list[Segment]:
    """``text`` cut into plain pieces and escaped suspicious characters."""
    cps = _code_points(text)
    out: list[Segment] = []
    _text(out, cps, _scan(cps, single_line=single_line, letters=letters), quoted=False)
    return out


def segments_text(segments: list[Segment]) -> str:
    """The text of ``segments`` joined."""
    return "".join(text for text, _ in segments)


def reveal_text(text: str, *, single_line: bool = False, letters: bool = True) -> str:
    """``text`` with every suspicious character escaped as ``\\uXXXX`` (see :func:`scan`)."""
    return segments_text(text_segments(text, single_line=single_line, letters=letters))


@dataclass(frozen=True)
class Finding:
    """One suspicious character: what it is and where it is."""

    what: str
    """E.g. ``"U+202E RIGHT-TO-LEFT OVERRIDE"``."""
    where: str
    """E.g. ``"the tool name"``, ``"args.to"``, ``"a key in args.items[0]"``."""


def _findings(flags: dict[int, str], where: str) -> list[Finding]:
    """One finding per run of neighbouring characters flagged alike."""
    found: list[Finding] = []
    last = (-2, "")
    for i, what in sorted(flags.items()):
        if (i - 1, what) != last:
            found.append(Finding(what, where))
        last = (i, what)
    return found


def _key_label(key: str) -> str:
    if len(key) <= _KEY_LIMIT and _IDENTIFIER.match(key):
        return "." + key
    cps = _code_points(key)
    cut = cps[:_KEY_LIMIT]
    out: list[Segment] = []
    _text(out, cut, _scan(cut, single_line=True, letters=True), quoted=True)
    more = "…" if len(cps) > _KEY_LIMIT else ""
    return f'["{segments_text(out)}{more}"]'


def _where(path: list[str]) -> str:
    if len(path) > _PATH_LIMIT:
        path = [*path[:3], ".…", *path[-4:]]
    return "args" + "".join(path)


def _json_key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    return _scalar(key)


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if value in (float("inf"), float("-inf")):
            return "Infinity" if value > 0 else "-Infinity"
        return float.__repr__(value)
    return ""  # not reached: strings and containers are handled by the caller


def _put_scalar(out: list[Segment], findings: list[Finding], item: Any, path: list[str]) -> None:
    """A null, a boolean or a number; NaN and the infinities (not JSON) marked, with a finding
    (the page marks a number no float reads as it is shown too)."""
    text = _scalar(item)
    if isinstance(item, float) and not math.isfinite(item):
        what = f"{text} is not a JSON number"
        findings.append(Finding(what, _where(path)))
        out.append((text, what))
    else:
        _add(out, text)


def _json(value: Any, indent: int | None, findings: list[Finding]) -> list[Segment]:
    """Pretty JSON like ``json.dumps(value, indent=indent, ensure_ascii=False)``, escaped."""
    out: list[Segment] = []

    def string(text: str, where: str, *, key: bool) -> None:
        cps = _code_points(text)
        flags = _scan(cps, single_line=key, letters=True)
        findings.extend(_findings(flags, where))
        _add(out, '"')
        _text(out, cps, flags, quoted=True)
        _add(out, '"')

    # a frame: [items iterator, depth, closing bracket, path, first item?]
    stack: list[tuple[Iterator[tuple[Any, Any]], int, str, list[str], list[bool]]] = []

    def open_value(item: Any, depth: int, path: list[str]) -> None:
        if isinstance(item, str):
            string(item, _where(path), key=False)
        elif isinstance(item, Mapping):
            if not item:
                _add(out, "{}")
                return
            _add(out, "{")
            stack.append((iter(item.items()), depth + 1, "}", path, [True]))
        elif isinstance(item, (list, tuple)):
            if not item:
                _add(out, "[]")
                return
            _add(out, "[")
            stack.append((iter(enumerate(item)), depth + 1, "]", path, [True]))
        elif item is None or isinstance(item, (bool, int, float)):
            _put_scalar(out, findings, item, path)
        else:
            string(repr(item), _where(path), key=False)

    newline = indent is not None
    pad = " " * (indent or 0)
    open_value(value, 0, [])
    while stack:
        items, depth, closing, path, first = stack[-1]
        entry = next(items, None)
        if entry is None:
            stack.pop()
            _add(out, ("\n" + pad * (depth - 1) if newline else "") + closing)
            continue
        if newline:
            _add(out, ("\n" if first[0] else ",\n") + pad * depth)
        elif not first[0]:
            _add(out, ", ")
        first[0] = False
        if closing == "}":
            key = _json_key(entry[0])
            string(key, "a key in " + _where(path), key=True)
            _add(out, ": ")
            open_value(entry[1], depth, [*path, _key_label(key)])
        else:
            open_value(entry[1], depth, [*path, f"[{entry[0]}]"])
    return out


def reveal_json(value: Any, *, indent: int | None = 2) -> str:
    """JSON text of ``value`` (as ``json.dumps(..., ensure_ascii=False)``), suspicious characters
    escaped as ``\\uXXXX``: ``json.loads`` of the result gives ``value`` back exactly."""
    return segments_text(_json(value, indent, []))


@dataclass(frozen=True)
class Revealed:
    """An action as a reviewer should see it."""

    name: list[Segment]
    """The tool name (single line: ``\\n`` and ``\\t`` are escaped too)."""
    description: list[Segment]
    """The description (single line, like the name: a line break cannot fake a card line)."""
    args: list[Segment]
    """The arguments as JSON indented by 2."""
    findings: list[Finding]
    """Every suspicious character, in order: name, description, then the arguments."""


def reveal_action(name: str, args: Any, description: str) -> Revealed:
    """Find and escape the suspicious characters of one action (see :func:`scan`)."""
    findings: list[Finding] = []
    name_cps = _code_points(name)
    name_flags = _scan(name_cps, single_line=True, letters=True)
    findings.extend(_findings(name_flags, "the tool name"))
    desc_cps = _code_points(description)
    desc_flags = _scan(desc_cps, single_line=True, letters=True)
    findings.extend(_findings(desc_flags, "the description"))
    name_out: list[Segment] = []
    _text(name_out, name_cps, name_flags, quoted=False)
    desc_out: list[Segment] = []
    _text(desc_out, desc_cps, desc_flags, quoted=False)
    args_out = _json(args, 2, findings)
    return Revealed(name_out, desc_out, args_out, findings)


def warning_lines(findings: list[Finding], *, limit: int = WARNING_LIMIT) -> list[str]:
    """The warning of a card: a header, then ``WHAT in WHERE`` items (counted, at most ``limit``).

    Returns:
        ``[]`` when there is nothing to warn about.
    """
    if not findings:
        return []
    counts: dict[tuple[str, str], int] = {}
    for finding in findings:
        key = (finding.what, finding.where)
        counts[key] = counts.get(key, 0) + 1
    items = [
        f"{what} in {where}" + (f" ({count} times)" if count > 1 else "")
        for (what, where), count in counts.items()
    ]
    lines = [WARNING_HEADER, *items[:limit]]
    if len(items) > limit:
        lines.append(f"… and {len(items) - limit} more")
    return lines
