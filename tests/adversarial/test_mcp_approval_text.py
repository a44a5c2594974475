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
from toolguard._mcp_proxy import _HIDDEN, approval_message, visible

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
