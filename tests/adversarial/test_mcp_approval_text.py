"""Hiding part of an MCP tool call from the person asked to approve it.

Threat model: a model (or an MCP client relaying it) puts bidi controls,
zero-width or other invisible characters, lone surrogates, NaN or absurd
nesting into the tool name or arguments of a call the gateway
(``toolguard mcp-proxy``) asks a user to approve by elicitation. Whatever
comes, the approval text either shows every character of the call — the
invisible ones escaped as ``\\uXXXX``, nothing hidden, nothing reordered —
or cannot be built (``ValueError``), and then nobody is asked by
elicitation: only the approval page may decide.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.adversarial import strategies as hs
from toolguard._gateway.question import _HIDDEN, approval_message, visible

_ESCAPE = re.compile(r"\\u([0-9a-f]{4})|\\U([0-9a-f]{8})")


def _shown(char: str) -> bool:
    """A character a reader actually sees (or a newline)."""
    return char == "\n" or (
        char.isprintable()
        and ord(char) not in _HIDDEN
        and unicodedata.category(char) not in ("Cf", "Co", "Cn", "Cs", "Zl", "Zp")
    )


def _unescape(text: str) -> str:
    return _ESCAPE.sub(lambda m: chr(int(m.group(1) or m.group(2), 16)), text)


@settings(max_examples=100, deadline=None)
@given(name=hs.odd_names, value=hs.hostile_json)
def test_the_approval_text_hides_nothing(name: str, value: Any) -> None:
    error = ""
    try:
        text = approval_message(name, {"value": value}, "desc\u202e")
    except ValueError as exc:
        error, text = str(exc), ""
    if error:
        assert error.startswith(f"the arguments of `{visible(name)}` cannot be shown as JSON: ")
        return
    assert all(_shown(char) for char in text)
    for char in (*hs.BIDI_CONTROLS, *hs.ZERO_WIDTH, *hs.LONE_SURROGATES):
        assert char not in text


@settings(max_examples=300, deadline=None)
@given(st.text().filter(lambda t: "\\" not in t))
def test_visible_text_is_exactly_the_original(text: str) -> None:
    shown = visible(text)
    assert all(_shown(char) for char in shown)
    assert _unescape(shown) == text


def test_known_disguises_are_spelled_out() -> None:
    assert visible("invoice\u202efdp.exe") == "invoice\\u202efdp.exe"
    assert visible("rm -rf /tmp/\u200b") == "rm -rf /tmp/\\u200b"
    assert visible("a\u3164b\ufe0f\U000e0041") == "a\\u3164b\\ufe0f\\U000e0041"
    assert visible("line\r\nnext\tx") == "line\\u000d\nnext\\u0009x"


def _escaped(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


_SAMPLE = [
    *range(0x10000),
    *range(0x1BCA0, 0x1BCA4),
    *range(0x1D173, 0x1D17B),
    *range(0xE0000, 0xE1000),
    *(0x1F600, 0x1F9D1, 0xF0000, 0x10FFFD, 0x10FFFF, 0x30000, 0xEFFFF),
]


def test_visible_escapes_at_least_what_its_own_rules_did() -> None:
    """Every character the gateway's own rules escaped is still escaped, alone or in a word."""
    hidden = [chr(code) for code in _SAMPLE if not _shown(chr(code))]
    assert len(hidden) > 10_000  # controls, format, private use, unassigned, surrogates, fillers
    # one text ("a" + the character + "b", separated by spaces): no words, no addresses to join
    assert visible(" ".join(f"a{char}b" for char in hidden)) == " ".join(
        f"a{_escaped(char)}b" for char in hidden
    )


def test_visible_flags_what_the_page_and_the_card_flag() -> None:
    """The shared rules of the reveal module: look-alike letters, odd characters in addresses."""
    assert visible('"to": "bob@p\u0430ypal.com"') == '"to": "bob@p\\u0430ypal.com"'
    assert visible("\u0430\u0440\u0440\u04cf\u0435.com") == (
        "\\u0430\\u0440\\u0440\\u04cf\\u0435.com"
    )
    assert visible("rm -rf /tmp\u037e ls") == "rm -rf /tmp\\u037e ls"
    assert visible("/srv/caf\u00e9/menu") == "/srv/caf\\u00e9/menu"
    # prose in one script is left alone, and so is an emoji with its presentation selector
    assert visible("Привет, мир ❤ café") == "Привет, мир ❤ café"
    assert approval_message("send_email", {"to": "ceo@\u0440aypal.com"}).splitlines() == [
        "Approve the tool call `send_email`?",
        "Arguments (JSON):",
        "{",
        '  "to": "ceo@\\u0440aypal.com"',
        "}",
    ]
