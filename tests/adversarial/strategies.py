"""Hypothesis strategies for hostile input: what a model, a tool or a web client may send.

Every adversarial test draws from these, so the threat model lives in one place:

* ``deep_json`` / ``deep_object(n)``: JSON nested hundreds of levels deep;
* ``wide_object`` / ``huge_string``: very many keys, very long text;
* ``non_finite``: NaN and ±Infinity, which Python's ``json`` reads and writes
  but standard JSON does not have;
* ``surrogate_text``: text with lone surrogates (valid in JSON text, not in UTF-8);
* ``deceptive_text``: bidi controls, zero-width characters, mixed-script confusables;
* ``odd_names`` / ``odd_ids``: tool names and call ids that are empty, huge, or
  full of the characters above;
* ``hostile_json``: any JSON value mixing all of these.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

# ----------------------------------------------------------------------------- characters

BIDI_CONTROLS = (
    "\u202a",  # LEFT-TO-RIGHT EMBEDDING
    "\u202b",  # RIGHT-TO-LEFT EMBEDDING
    "\u202c",  # POP DIRECTIONAL FORMATTING
    "\u202d",  # LEFT-TO-RIGHT OVERRIDE
    "\u202e",  # RIGHT-TO-LEFT OVERRIDE
    "\u2066",  # LEFT-TO-RIGHT ISOLATE
    "\u2067",  # RIGHT-TO-LEFT ISOLATE
    "\u2068",  # FIRST STRONG ISOLATE
    "\u2069",  # POP DIRECTIONAL ISOLATE
    "\u200e",  # LEFT-TO-RIGHT MARK
    "\u200f",  # RIGHT-TO-LEFT MARK
    "\u061c",  # ARABIC LETTER MARK
)
ZERO_WIDTH = (
    "\u200b",  # ZERO WIDTH SPACE
    "\u200c",  # ZERO WIDTH NON-JOINER
    "\u200d",  # ZERO WIDTH JOINER
    "\u2060",  # WORD JOINER
    "\ufeff",  # ZERO WIDTH NO-BREAK SPACE (BOM)
    "\u00ad",  # SOFT HYPHEN
    "\u180e",  # MONGOLIAN VOWEL SEPARATOR
)
# Latin letters and look-alikes from other scripts (Cyrillic, Greek).
CONFUSABLES = {
    "a": "\u0430",  # CYRILLIC SMALL LETTER A
    "e": "\u0435",  # CYRILLIC SMALL LETTER IE
    "o": "\u043e",  # CYRILLIC SMALL LETTER O
    "p": "\u0440",  # CYRILLIC SMALL LETTER ER
    "c": "\u0441",  # CYRILLIC SMALL LETTER ES
    "x": "\u0445",  # CYRILLIC SMALL LETTER HA
    "i": "\u0456",  # CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I
    "A": "\u0391",  # GREEK CAPITAL LETTER ALPHA
    "O": "\u039f",  # GREEK CAPITAL LETTER OMICRON
}
LONE_SURROGATES = ("\ud800", "\udbff", "\udc00", "\udfff")

# ----------------------------------------------------------------------------- values


def deep_list(depth: int, leaf: Any = 1) -> Any:
    """``[[[...leaf...]]]`` nested ``depth`` levels (built without recursion)."""
    value: Any = leaf
    for _ in range(depth):
        value = [value]
    return value


def deep_object(depth: int, leaf: Any = 1, key: str = "a") -> Any:
    """``{"a": {"a": ... leaf}}`` nested ``depth`` levels."""
    value: Any = leaf
    for _ in range(depth):
        value = {key: value}
    return value


def deep_json_text(depth: int) -> str:
    """JSON text nested ``depth`` levels, alternating objects and arrays."""
    opening = "".join('{"k":' if i % 2 == 0 else "[" for i in range(depth))
    closing = "".join("}" if i % 2 == 0 else "]" for i in reversed(range(depth)))
    return opening + "0" + closing


non_finite = st.sampled_from([float("nan"), float("inf"), float("-inf")])
"""NaN, Infinity and -Infinity."""

surrogate_text = st.builds(
    lambda head, bad, tail: head + bad + tail,
    st.text(max_size=8),
    st.sampled_from(LONE_SURROGATES),
    st.text(max_size=8),
)
"""Text holding at least one lone surrogate."""


def _disguise(word: str, draw_index: int) -> str:
    letters = [i for i, ch in enumerate(word) if ch in CONFUSABLES]
    if not letters:
        return word + CONFUSABLES["a"]
    i = letters[draw_index % len(letters)]
    return word[:i] + CONFUSABLES[word[i]] + word[i + 1 :]


deceptive_text = st.one_of(
    st.builds(
        lambda head, ch, tail: head + ch + tail,
        st.sampled_from(["rm -rf /tmp/", "alice@example.com", "amount", "pay"]),
        st.sampled_from(BIDI_CONTROLS + ZERO_WIDTH),
        st.sampled_from(["", "cod.exe", "txt", "@evil.example"]),
    ),
    st.builds(
        _disguise,
        st.sampled_from(["paypal.com", "example.com", "apple", "delete", "transfer"]),
        st.integers(0, 10),
    ),
)
"""Text with a bidi control, a zero-width character or a mixed-script confusable."""

huge_string = st.integers(100_000, 300_000).map(lambda n: "x" * n)
"""A string of 100k-300k characters."""

deep_json = st.integers(100, 1_000).flatmap(
    lambda depth: st.sampled_from([deep_list(depth), deep_object(depth)])
)
"""A list or object nested 100-1,000 levels."""

wide_object = st.integers(5_000, 20_000).map(lambda n: {f"k{i}": i for i in range(n)})
"""An object with 5,000-20,000 keys."""

plain_json: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
"""Ordinary JSON data."""

hostile_leaf = st.one_of(non_finite, surrogate_text, deceptive_text, st.text(max_size=20))

hostile_json: st.SearchStrategy[Any] = st.one_of(
    plain_json,
    deep_json,
    st.recursive(
        hostile_leaf,
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.one_of(st.text(max_size=8), surrogate_text), children, max_size=4)
        ),
        max_leaves=12,
    ),
)
"""Any JSON-like value a hostile model could produce (small enough to run often)."""

odd_names = st.one_of(
    st.just(""),
    st.text(max_size=30),
    surrogate_text,
    deceptive_text,
    st.just("x" * 10_000),
    st.sampled_from(["__proto__", "constructor", "../../etc/passwd", "a" * 300, "send email"]),
)
"""Tool names a hostile model could use."""

odd_ids = st.one_of(
    st.just(""),
    st.text(max_size=40),
    surrogate_text,
    deceptive_text,
    st.just("i" * 10_000),
)
"""Call ids a hostile model could use."""

ANSI_SEQUENCES = (
    "\x1b[2J",  # clear the screen
    "\x1b[H",  # cursor home
    "\x1b[1A\x1b[2K",  # up one line, erase it: rewrite what was printed
    "\x1b[31m",  # red text
    "\x1b]0;owned\x07",  # set the window title
    "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\",  # a hyperlink
    "\x9b2J",  # C1 CONTROL SEQUENCE INTRODUCER: clear the screen
    "\r",  # back to the start of the line: overwrite it
    "\x08\x08\x08",  # backspaces
)
"""Terminal escape and control sequences a model could use on a reviewer's terminal."""

terminal_text = st.builds(
    lambda head, seq, tail: head + seq + tail,
    st.text(max_size=8),
    st.sampled_from(ANSI_SEQUENCES),
    st.text(max_size=8),
)
"""Text holding at least one terminal escape or control sequence."""

with_non_finite: st.SearchStrategy[Any] = st.recursive(
    non_finite,
    lambda children: st.one_of(
        st.tuples(st.lists(plain_json, max_size=3), children, st.integers(0, 3)).map(
            lambda t: [*t[0][: t[2]], t[1], *t[0][t[2] :]]
        ),
        st.tuples(st.dictionaries(st.text(max_size=8), plain_json, max_size=3), children).map(
            lambda t: {**t[0], "\x00hidden": t[1]}
        ),
    ),
    max_leaves=6,
)
"""JSON-like data with a NaN or an infinity somewhere inside (at any depth, among plain data)."""

finite_json: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
"""Ordinary JSON data with finite numbers only (standard JSON)."""
