"""toolguard._core.reveal: which characters are flagged, how they are escaped, the card's warning.

Hand-written cases with exact expected outputs; the hostile-input properties
(Hypothesis) are in tests/adversarial/test_reveal.py, and the page's copy of
these rules (static/reveal.js) is compared with this one in test_reveal.py.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest

import toolguard
from toolguard._core.reveal import (
    TABLES,
    WARNING_HEADER,
    Finding,
    reveal_action,
    reveal_json,
    reveal_text,
    scan,
    segments_text,
    text_segments,
    warning_lines,
)

RLO = "U+202E RIGHT-TO-LEFT OVERRIDE"
ZWSP = "U+200B ZERO WIDTH SPACE"
CYR_A = "Cyrillic letter \u0430 (U+0430) mixed into a Latin word"
APPLE = "\u0430\u0440\u0440\u04cf\u0435"  # reads "apple", all Cyrillic


@pytest.mark.parametrize(
    ("text", "options", "expected"),
    [
        ("plain text, nothing to see", {}, {}),
        ("invoice\u202eexe.pdf", {}, {7: RLO}),
        ("p\u0430ypal.com", {}, {1: CYR_A}),
        ("\u03a9mega", {}, {0: "Greek letter \u03a9 (U+03A9) mixed into a Latin word"}),
        # a Latin letter inside a Cyrillic word: the minority script is flagged
        (
            "\u043f\u0440\u0438\u0432\u0435t",
            {},
            {5: "Latin letter t (U+0074) mixed into a Cyrillic word"},
        ),
        # a whole word of look-alike letters next to Latin text
        (APPLE + ".com", {}, dict.fromkeys(range(5), f"Cyrillic word {APPLE} that looks Latin")),
        # ... but not Cyrillic text on its own, or a word with other letters
        ("\u0441\u043e\u0440", {}, {}),
        ("\u043f\u0440\u0438\u0432\u0435\u0442 world", {}, {}),
        ("a\nb\tc", {}, {}),
        (
            "a\nb\tc",
            {"single_line": True},
            {1: "U+000A LINE FEED", 3: "U+0009 CHARACTER TABULATION"},
        ),
        ("\x1b[2J\x1b[31mred", {}, {0: "U+001B ESCAPE", 4: "U+001B ESCAPE"}),
        ("\x9b2J", {}, {0: "U+009B CONTROL SEQUENCE INTRODUCER"}),
        ("a\rb", {}, {1: "U+000D CARRIAGE RETURN"}),
        ("\u2764\ufe0f ok", {}, {}),  # an emoji's presentation selector is fine
        ("a\ufe0f", {}, {1: "U+FE0F VARIATION SELECTOR"}),
        ("\u2764\ufe0f\ufe0f", {}, {2: "U+FE0F VARIATION SELECTOR"}),
        ("x\U000e0041y", {}, {1: "U+E0041 TAG CHARACTER"}),
        ("\ud800!", {}, {0: "U+D800 LONE SURROGATE"}),
        ("\ud83d\ude00", {}, {}),  # a valid pair is one character, as in JavaScript
        ("bad \ufffd", {}, {4: "U+FFFD REPLACEMENT CHARACTER"}),
        ("soft\u00adhyphen", {}, {4: "U+00AD SOFT HYPHEN"}),
        ("\u3164", {}, {0: "U+3164 HANGUL FILLER"}),
        ("x = 1\u037e", {}, {5: "U+037E GREEK QUESTION MARK"}),
        (
            "jos\u00e9@example.com",
            {},
            {3: "non-ASCII letter \u00e9 (U+00E9) in an address or path"},
        ),
        (
            "https://example.com/\u2215etc",
            {},
            {20: "non-ASCII character U+2215 in an address or path"},
        ),
        ("caf\u00e9 au lait", {}, {}),
        ("p\u0430ypal\u200b", {"letters": False}, {6: ZWSP}),
    ],
)
def test_scan(text: str, options: dict[str, Any], expected: dict[int, str]) -> None:
    """Each suspicious character is found at its code point index with what it is."""
    assert scan(text, **options) == expected


def test_reveal_text_escapes_like_json() -> None:
    """Escapes are JSON's: short forms for the usual controls, surrogate pairs above the BMP."""
    assert reveal_text("invoice\u202eexe.pdf") == "invoice\\u202eexe.pdf"
    assert reveal_text("a\nb\tc\rd\x08e\x0cf\x00", single_line=True) == (
        "a\\nb\\tc\\rd\\be\\ff\\u0000"
    )
    assert reveal_text("x\U000e0041y") == "x\\udb40\\udc41y"
    assert reveal_text("\ud800") == "\\ud800"
    assert reveal_text("\ud83d\ude00") == "\U0001f600"
    assert reveal_text("line one\nline two") == "line one\nline two"
    assert reveal_text('a "quoted" \\ text') == 'a "quoted" \\ text'


def test_text_segments_mark_each_escape() -> None:
    """Plain text is merged; every escaped character is a segment of its own with what it is."""
    assert text_segments("p\u0430ypal\u200b\u200b!") == [
        ("p", None),
        ("\\u0430", CYR_A),
        ("ypal", None),
        ("\\u200b", ZWSP),
        ("\\u200b", ZWSP),
        ("!", None),
    ]


def test_reveal_json_matches_json_dumps_for_ordinary_data() -> None:
    """Without suspicious characters the text is exactly ``json.dumps(indent=2)``."""
    value = {
        "to": "bob@example.com",
        "n": [1, 2.5, True, False, None, [], {}],
        "nested": {"a": [{"b": "\u00fc\u00e9 text\nnext line"}]},
        "quote": 'say "hi" \\ bye',
    }
    assert reveal_json(value) == json.dumps(value, indent=2, ensure_ascii=False)
    assert reveal_json(value, indent=None) == json.dumps(value, ensure_ascii=False)
    assert reveal_json([]) == "[]"
    assert reveal_json("x") == '"x"'


def test_reveal_json_escapes_and_round_trips() -> None:
    """Suspicious characters in keys and values are escaped; the JSON parses back exactly."""
    value = {
        "to": "bob@p\u0430ypal.com",
        "path\u200b": ["invoice\u202eexe.pdf", {"esc": "\x1b[2J", "bad": "\ud800"}],
        "float": float("nan"),
    }
    text = reveal_json(value)
    assert text == (
        "{\n"
        '  "to": "bob@p\\u0430ypal.com",\n'
        '  "path\\u200b": [\n'
        '    "invoice\\u202eexe.pdf",\n'
        "    {\n"
        '      "esc": "\\u001b[2J",\n'
        '      "bad": "\\ud800"\n'
        "    }\n"
        "  ],\n"
        '  "float": NaN\n'
        "}"
    )
    assert text.isascii()
    back = json.loads(text)
    assert back["to"] == value["to"]
    assert back["path\u200b"] == value["path\u200b"]
    assert reveal_json(value, indent=None) == (
        '{"to": "bob@p\\u0430ypal.com", "path\\u200b": ["invoice\\u202eexe.pdf",'
        ' {"esc": "\\u001b[2J", "bad": "\\ud800"}], "float": NaN}'
    )


def test_reveal_action_and_its_warning() -> None:
    """Name, description and arguments are escaped; the warning says what and where."""
    shown = reveal_action(
        "send_ema\u0456l\n",
        {
            "to": "bob@p\u0430ypal.com",
            "k\u200b": [1, {"x": APPLE + ".com"}],
            "body": "a\u200bb\u200bc",
            "ok": "\u2764\ufe0f fine",
        },
        "Tool `send_ema\u0456l\n` is awaiting approval",
    )
    assert segments_text(shown.name) == "send_ema\\u0456l\\n"
    assert segments_text(shown.description) == "Tool `send_ema\\u0456l\\n` is awaiting approval"
    assert segments_text(shown.args) == (
        "{\n"
        '  "to": "bob@p\\u0430ypal.com",\n'
        '  "k\\u200b": [\n'
        "    1,\n"
        "    {\n"
        '      "x": "\\u0430\\u0440\\u0440\\u04cf\\u0435.com"\n'
        "    }\n"
        "  ],\n"
        '  "body": "a\\u200bb\\u200bc",\n'
        '  "ok": "\u2764\ufe0f fine"\n'
        "}"
    )
    cyr_i = "Cyrillic letter \u0456 (U+0456) mixed into a Latin word"
    assert shown.findings == [
        Finding(cyr_i, "the tool name"),
        Finding("U+000A LINE FEED", "the tool name"),
        Finding(cyr_i, "the description"),
        Finding("U+000A LINE FEED", "the description"),
        Finding(CYR_A, "args.to"),
        Finding(ZWSP, "a key in args"),
        Finding(f"Cyrillic word {APPLE} that looks Latin", 'args["k\\u200b"][1].x'),
        Finding(ZWSP, "args.body"),
        Finding(ZWSP, "args.body"),
    ]
    assert warning_lines(shown.findings) == [
        WARNING_HEADER,
        f"{cyr_i} in the tool name",
        "U+000A LINE FEED in the tool name",
        f"{cyr_i} in the description",
        "U+000A LINE FEED in the description",
        f"{CYR_A} in args.to",
        f"{ZWSP} in a key in args",
        f'Cyrillic word {APPLE} that looks Latin in args["k\\u200b"][1].x',
        f"{ZWSP} in args.body (2 times)",
    ]


def test_nothing_to_warn_about() -> None:
    """An ordinary action has no findings and no warning."""
    shown = reveal_action(
        "send_email",
        {"to": "alice@example.com", "body": "Gr\u00fc\u00dfe aus K\u00f6ln\n\u2014 Bob"},
        "Tool `send_email` is awaiting approval",
    )
    assert shown.findings == []
    assert warning_lines(shown.findings) == []


def test_warning_is_bounded_and_paths_are_short() -> None:
    """At most 20 items (the rest counted); long keys and deep paths are shortened."""
    deep: Any = "\u200b"
    for key in "ihgfedcba":
        deep = {key: deep}
    args = {**{f"k{i}": "\u200b" for i in range(22)}, "a" * 50: "\u200b", "deep": deep}
    lines = warning_lines(reveal_action("t", args, "d").findings)
    assert lines == [
        WARNING_HEADER,
        *(f"{ZWSP} in args.k{i}" for i in range(20)),
        "… and 4 more",
    ]
    rest = warning_lines(reveal_action("t", args, "d").findings, limit=30)[21:]
    assert rest == [
        f"{ZWSP} in args.k20",
        f"{ZWSP} in args.k21",
        f'{ZWSP} in args["{"a" * 40}…"]',
        f"{ZWSP} in args.deep.a.b.….f.g.h.i",
    ]


def test_tables_are_sorted_disjoint_json() -> None:
    """The shared tables are plain JSON data, sorted and without overlaps."""
    assert json.loads(json.dumps(TABLES)) == TABLES
    ranges = [(start, end) for start, end, _ in TABLES["always"]]
    assert all(start <= end for start, end in ranges)
    assert all(a[1] < b[0] for a, b in itertools.pairwise(ranges))
    spans = sorted((a, b) for _, script in TABLES["scripts"] for a, b in script)
    assert all(a[1] < b[0] for a, b in itertools.pairwise(spans))
    for start, end in ranges:  # a flagged character is never a letter of a script
        assert not any(a <= end and start <= b for a, b in spans), hex(start)
    latin = [r for name, script in TABLES["scripts"] if name == "Latin" for r in script]
    for cp in TABLES["lookalikes"]:
        assert not any(a <= cp <= b for a, b in latin), hex(cp)
        assert any(a <= cp <= b for a, b in spans), hex(cp)


STATIC = Path(toolguard.__file__).resolve().parent / "static"


@pytest.mark.parametrize("script", ["app.js", "gateway.js", "reveal.js"])
def test_page_scripts_never_turn_text_into_markup(script: str) -> None:
    """The page builds DOM nodes from text only: no HTML parsing, no eval, no inline styles."""
    text = (STATIC / script).read_text(encoding="utf-8")
    banned = [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        'setAttribute("style',
        ".style.",
        "DOMParser",
        "createContextualFragment",
    ]
    assert [word for word in banned if word in text] == []


def test_page_markup_has_no_inline_script_style_or_handlers() -> None:
    """index.html loads reveal.js, then gateway.js, then app.js, with nothing inline (a strict
    CSP holds)."""
    html = (STATIC / "index.html").read_text(encoding="utf-8")
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", html, flags=re.DOTALL)
    assert scripts == [
        (' src="/static/reveal.js" defer', ""),
        (' src="/static/gateway.js" defer', ""),
        (' src="/static/app.js" defer', ""),
        (' src="/static/stats.js" defer', ""),
    ]
    assert re.findall(r"<style|\sstyle\s*=|\son[a-z]+\s*=|javascript:", html, flags=re.I) == []
