"""Attack: deceive the reviewer about what will run.

A hostile model (or MCP server, or tool result) puts bidi controls, zero-width
characters, look-alike letters, control characters or ANSI escape sequences in
tool names, argument keys and values or its replies, so that the approval card
shows something other than what will run — or so that the reviewer's terminal
is cleared, recoloured or retitled. Whatever it sends, the terminal card shows
every such character escaped (``\\uXXXX``) and lists it in a warning, nothing
reaches the terminal as a control character, and the escaped JSON parses back
to exactly the arguments (an edit keeps them). The page's copy of the rules is
attacked in tests/page/test_reveal.py.
"""

from __future__ import annotations

import io
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.adversarial.strategies import (
    BIDI_CONTROLS,
    CONFUSABLES,
    ZERO_WIDTH,
    deceptive_text,
    odd_names,
    plain_json,
    surrogate_text,
    terminal_text,
)
from tests.helpers import nothing_hidden
from toolguard import (
    ModelResponse,
    PendingReview,
    ReviewedChat,
    ScriptedModel,
    ToolCall,
    requires_approval,
)
from toolguard._cli.demo import run_demo
from toolguard._cli.terminal import Terminal, ask_decisions, render_card, render_outcome
from toolguard._core.records import Action, ReviewConfig, ToolResult
from toolguard._core.reveal import WARNING_HEADER, reveal_json, reveal_text, scan
from toolguard.records import ActionRequest

HIDDEN = set(BIDI_CONTROLS + ZERO_WIDTH + tuple(CONFUSABLES.values()))
ANSI = "\x1b[2J\x1b[H\x1b]0;owned\x07\x1b[31m"
"""Clear the screen, move home, set the window title, turn text red."""
ANSI_SHOWN = "\\u001b[2J\\u001b[H\\u001b]0;owned\\u0007\\u001b[31m"

hostile_text = st.one_of(st.text(max_size=30), surrogate_text, deceptive_text, terminal_text)
hostile_args: st.SearchStrategy[Any] = st.recursive(
    hostile_text | st.integers() | st.booleans() | st.none(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(hostile_text, children, max_size=4)
    ),
    max_leaves=12,
)


def request(name: str, args: dict[str, Any], description: str | None = None) -> ActionRequest:
    """An action request as the runtime builds it."""
    text = f"Tool `{name}` is awaiting approval" if description is None else description
    return ActionRequest(name=name, args=args, description=text)


# ----------------------------------------------------------------------------- the rules


@given(deceptive_text)
def test_deceptive_text_is_flagged_and_shown_escaped(text: str) -> None:
    """Every bidi control, zero-width character and mixed-in confusable is flagged and escaped."""
    assert scan(text) != {}
    shown = reveal_text(text)
    assert not HIDDEN & set(shown), shown
    assert nothing_hidden(shown)


@given(st.one_of(st.text(), surrogate_text, deceptive_text, terminal_text))
def test_revealed_names_hide_nothing(text: str) -> None:
    """A name rendered single-line has no control, bidi or invisible character left, not even
    a line feed, and can always be written as UTF-8."""
    shown = reveal_text(text, single_line=True)
    assert nothing_hidden(shown)
    assert "\n" not in shown


@given(hostile_args)
def test_revealed_json_hides_nothing_and_parses_back_exactly(args: Any) -> None:
    """Escaped JSON still means exactly the same data, for any hostile value."""
    for indent in (2, None):
        text = reveal_json(args, indent=indent)
        assert nothing_hidden(text)
        assert json.loads(text) == args


@given(plain_json)
def test_ordinary_json_is_shown_as_before(value: Any) -> None:
    """Data without a suspicious string renders exactly as ``json.dumps`` did."""
    shown = reveal_json(value)
    if all(not scan(s, single_line=True) for s in _strings(value)):
        assert shown == json.dumps(value, indent=2, ensure_ascii=False)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


# ----------------------------------------------------------------------------- the card


@settings(max_examples=60)
@given(odd_names, st.dictionaries(hostile_text, hostile_args, max_size=4))
def test_card_never_writes_a_hidden_character(name: str, args: dict[str, Any]) -> None:
    """Whatever the name and arguments, the card is plain visible text and its JSON is exact."""
    card = render_card(request(name, args))
    assert nothing_hidden(card)
    json_part = card[card.index("\nArguments:\n") + len("\nArguments:\n") :]
    assert json.loads(json_part) == args


@given(terminal_text)
def test_terminal_sequences_are_shown_not_run(text: str) -> None:
    """No ESC, CSI, CR or backspace reaches the terminal, even in prose (line feeds aside)."""
    for shown in (reveal_text(text, letters=False), reveal_text(text, single_line=True)):
        assert not set(shown) & {"\x1b", "\x9b", "\r", "\x08", "\x07"}
        assert nothing_hidden(shown)


def test_card_escapes_ansi_and_bidi_and_warns() -> None:
    """ANSI sequences are shown, never run; a warning lists what hides where."""
    card = render_card(
        request(
            f"send_ema\u0456l{ANSI}",
            {"to": "bob@p\u0430ypal.com", "file": "invoice\u202eexe.pdf", "note\u200b": ANSI},
            description=f"Sends mail{ANSI}",
        ),
        index=1,
        total=2,
    )
    assert card == "\n".join(
        [
            f"== Approval 1/2: send_ema\\u0456l{ANSI_SHOWN} ==",
            f"Sends mail{ANSI_SHOWN}",
            WARNING_HEADER,
            "  - Cyrillic letter \u0456 (U+0456) mixed into a Latin word in the tool name",
            "  - U+001B ESCAPE in the tool name (4 times)",
            "  - U+0007 BELL in the tool name",
            "  - U+001B ESCAPE in the description (4 times)",
            "  - U+0007 BELL in the description",
            "  - Cyrillic letter \u0430 (U+0430) mixed into a Latin word in args.to",
            "  - U+202E RIGHT-TO-LEFT OVERRIDE in args.file",
            "  - U+200B ZERO WIDTH SPACE in a key in args",
            '  - U+001B ESCAPE in args["note\\u200b"] (4 times)',
            '  - U+0007 BELL in args["note\\u200b"]',
            "Arguments:",
            "{",
            '  "to": "bob@p\\u0430ypal.com",',
            '  "file": "invoice\\u202eexe.pdf",',
            f'  "note\\u200b": "{ANSI_SHOWN}"',
            "}",
        ]
    )


def test_escapes_stand_out_on_a_colour_terminal() -> None:
    """With colours on, each escaped character is in reverse video; the rest is plain."""
    review = PendingReview(
        action_requests=[request("send_email", {"to": "bob@p\u0430ypal.com"})],
        review_configs=[ReviewConfig(action_name="send_email")],
    )
    out = io.StringIO()
    assert ask_decisions(Terminal(out, answers=io.StringIO("a\n"), color=True), review) == [
        {"type": "approve"}
    ]
    assert out.getvalue() == "\n".join(
        [
            "\x1b[1m== Approval 1/1: send_email ==",
            "Tool `send_email` is awaiting approval",
            WARNING_HEADER,
            "  - Cyrillic letter \u0430 (U+0430) mixed into a Latin word in args.to",
            "Arguments:",
            "{",
            '  "to": "bob@p\x1b[7m\\u0430\x1b[27mypal.com"',
            "}\x1b[0m",
            "> a",
            "",
        ]
    )


def test_newlines_in_a_name_cannot_fake_card_lines() -> None:
    """A name with line breaks stays on its lines (header and description): no fake card."""
    name = "add_task\n== Approval 1/1: read_email ==\nArguments:\n{}"
    shown = "add_task\\n== Approval 1/1: read_email ==\\nArguments:\\n{}"
    assert render_card(request(name, {})) == "\n".join(
        [
            f"== Approval 1/1: {shown} ==",
            f"Tool `{shown}` is awaiting approval",
            WARNING_HEADER,
            "  - U+000A LINE FEED in the tool name (3 times)",
            "  - U+000A LINE FEED in the description (3 times)",
            "Arguments:",
            "{}",
        ]
    )


def test_outcome_lines_escape_what_the_tool_returned() -> None:
    """A tool result or name cannot clear the screen either; its line breaks stay readable."""
    action = Action(
        id="a1",
        call_id="call_1",
        name="add_task\x1b[2J",
        args={},
        description="Tool `add_task` is awaiting approval",
        status="executed",
        result=ToolResult(
            call_id="call_1", name="add_task", status="success", content=f"ok{ANSI}\nline 2\r"
        ),
    )
    assert render_outcome(action) == (f"[executed] add_task\\u001b[2J: ok{ANSI_SHOWN}\nline 2\\r")


def test_edit_from_the_shown_json_keeps_every_character() -> None:
    """Copying the escaped arguments of an edit prompt sends exactly the original arguments."""
    args = {
        "to": "bob@p\u0430ypal.com",
        "file\u200b": "invoice\u202eexe.pdf",
        "note": ["\ufffd", ANSI, "\U000e0041"],
    }
    review = PendingReview(
        action_requests=[request("send_email", args)],
        review_configs=[ReviewConfig(action_name="send_email")],
    )
    shown = reveal_json(args, indent=None)
    out = io.StringIO()
    term = Terminal(out, answers=io.StringIO(f"e\n{shown}\n"))
    decisions = ask_decisions(term, review)
    assert decisions == [{"type": "edit", "edited_action": {"name": "send_email", "args": args}}]
    transcript = out.getvalue()
    assert (
        f"Type ALL the arguments as one line of JSON (an empty line goes back). Now: {shown}\n"
    ) in transcript
    assert nothing_hidden(transcript)


def test_demo_session_never_passes_control_characters_to_the_terminal() -> None:
    """Replies, cards and outcomes of a hostile model reach the terminal escaped."""
    done: list[dict[str, Any]] = []

    @requires_approval
    def send_note(to: str, text: str) -> str:
        """Send a note.

        Args:
            to: who gets it.
            text: what it says.
        """
        done.append({"to": to, "text": text})
        return f"sent{ANSI}"

    args = {"to": "b\u043eb", "text": f"hi{ANSI}"}
    model = ScriptedModel(
        [
            ModelResponse(
                text=f"On it{ANSI}", tool_calls=[ToolCall(id="c1", name="send_note", args=args)]
            ),
            ModelResponse(text=f"Done{ANSI}\u202e"),
        ]
    )
    out = io.StringIO()
    code = run_demo(
        ReviewedChat(model, [send_note]),
        Terminal(out, answers=io.StringIO("send it\na\n")),
        store_line="Store: in memory",
    )
    assert code == 0
    assert done == [args]  # what ran is exactly what the model sent
    transcript = out.getvalue()
    assert nothing_hidden(transcript)
    lines = transcript.splitlines()
    assert f"assistant: On it{ANSI_SHOWN}" in lines
    assert f"[executed] send_note: sent{ANSI_SHOWN}" in lines
    assert f"assistant: Done{ANSI_SHOWN}\\u202e" in lines
    assert "  - Cyrillic letter \u043e (U+043E) mixed into a Latin word in args.to" in lines
    assert '  "to": "b\\u043eb",' in lines
