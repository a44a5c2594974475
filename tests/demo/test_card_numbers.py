"""The terminal card shows what runs, as the approval page does: integers with every digit,
NaN and the infinities marked, a number JSON cannot hold refused in an edit, a right-to-left
letter escaped (it would reorder the digits after it) and U+FFFC marked.
"""

from __future__ import annotations

import io

from toolguard._cli.terminal import Terminal, ask_decisions, prose, render_card
from toolguard._core.records import ActionRequest, PendingReview, ReviewConfig
from toolguard._core.reveal import WARNING_HEADER

BIG = 9007199254740993  # 2**53 + 1
HUGE = 10**400
USER = 12345678901234567891


def request(args: dict[str, object], name: str = "pay") -> ActionRequest:
    return ActionRequest(name=name, args=args, description=f"Tool `{name}` is awaiting approval")


def test_big_integers_are_shown_with_every_digit_and_unmarked() -> None:
    assert render_card(request({"user_id": BIG, "amount": HUGE})).splitlines() == [
        "== Approval 1/1: pay ==",
        "Tool `pay` is awaiting approval",
        "Arguments:",
        "{",
        f'  "user_id": {BIG},',
        f'  "amount": {"1" + "0" * 400}',
        "}",
    ]


def test_nan_and_the_infinities_are_marked_and_listed() -> None:
    card = render_card(
        request({"a": float("inf"), "b": [float("-inf"), float("nan")], "c": 0.1}),
        mark=lambda text: f"[{text}]",
    )
    assert card.splitlines() == [
        "== Approval 1/1: pay ==",
        "Tool `pay` is awaiting approval",
        WARNING_HEADER,
        "  - Infinity is not a JSON number in args.a",
        "  - -Infinity is not a JSON number in args.b[0]",
        "  - NaN is not a JSON number in args.b[1]",
        "Arguments:",
        "{",
        '  "a": [Infinity],',
        '  "b": [',
        "    [-Infinity],",
        "    [NaN]",
        "  ],",
        '  "c": 0.1',
        "}",
    ]


def test_a_right_to_left_letter_and_the_object_replacement_character_are_escaped() -> None:
    card = render_card(
        request({"iban": "DE89\u05f3 3704 0044 0532 0130 00", "note": "\ufffc"}, "transfer"),
        mark=lambda text: f"[{text}]",
    )
    assert card.splitlines() == [
        "== Approval 1/1: transfer ==",
        "Tool `transfer` is awaiting approval",
        WARNING_HEADER,
        "  - right-to-left character U+05F3 in args.iban",
        "  - U+FFFC OBJECT REPLACEMENT CHARACTER in args.note",
        "Arguments:",
        "{",
        '  "iban": "DE89[\\u05f3] 3704 0044 0532 0130 00",',
        '  "note": "[\\ufffc]"',
        "}",
    ]
    assert prose("Sent to DE89\u05f3 3704.") == "Sent to DE89\\u05f3 3704."
    assert prose("\u05e9\u05dc\u05d5\u05dd") == "\\u05e9\\u05dc\\u05d5\\u05dd"


def test_an_edit_keeps_every_digit_and_a_number_json_cannot_hold_is_asked_again() -> None:
    review = PendingReview(
        action_requests=[request({"user_id": USER})],
        review_configs=[ReviewConfig(action_name="pay")],
    )
    out = io.StringIO()
    answers = io.StringIO(
        'e\n{"user_id": 1e400}\n{"user_id": NaN}\n{"user_id": ' + str(USER + 1) + "}\n"
    )
    decisions = ask_decisions(Terminal(out, answers=answers), review)
    assert decisions == [
        {"type": "edit", "edited_action": {"name": "pay", "args": {"user_id": USER + 1}}}
    ]
    lines = out.getvalue().splitlines()
    assert lines[lines.index("> e") + 1 :] == [
        (
            "Type ALL the arguments as one line of JSON (an empty line goes back)."
            f' Now: {{"user_id": {USER}}}'
        ),
        '> {"user_id": 1e400}',
        "Invalid JSON: the number 1e400 is beyond a 64-bit float. Try again.",
        '> {"user_id": NaN}',
        "Invalid JSON: NaN is not a JSON number. Try again.",
        f'> {{"user_id": {USER + 1}}}',
    ]
