"""Attack: make the reviewer's edit run something other than what they saw or typed.

A hostile model puts bidi controls, zero-width characters, look-alike letters and
terminal escape sequences in argument names and values, hoping that the field-by-field
edit of the terminal card shows them disguised, or that keeping a field (Enter) sends
a changed value. Whatever it sends, every field is shown escaped, nothing reaches the
terminal as a control character, and keeping every field sends exactly the proposed
arguments; what the reviewer types for a text field is sent exactly as typed.
"""

from __future__ import annotations

import io
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.adversarial.strategies import deceptive_text, plain_json, terminal_text
from tests.helpers import nothing_hidden
from toolguard import Tool
from toolguard._cli.terminal import Terminal, ask_decisions
from toolguard._core.records import ActionRequest, PendingReview, ReviewConfig

ANY_OBJECT = Tool.from_schema("t", "Takes anything.", {"type": "object"}, lambda **_: "ok")
TEXT_FIELD = Tool.from_schema(
    "t",
    "Takes a note.",
    {"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]},
    lambda **_: "ok",
)
hostile_key = st.one_of(deceptive_text, terminal_text, st.text(min_size=1, max_size=8))
hostile_value = st.one_of(deceptive_text, terminal_text, plain_json)


def run_edit(tool: Tool[..., Any], args: dict[str, Any], answers: str) -> tuple[Any, str]:
    """The decisions of a one-action review edited with ``answers``, and the transcript."""
    review = PendingReview(
        action_requests=[ActionRequest(name="t", args=args, description="d")],
        review_configs=[ReviewConfig(action_name="t")],
    )
    out = io.StringIO()
    decisions = ask_decisions(Terminal(out, answers=io.StringIO(answers)), review, {"t": tool})
    return decisions, out.getvalue()


@settings(max_examples=60, deadline=None)
@given(args=st.dictionaries(hostile_key, hostile_value, max_size=5))
def test_keeping_every_field_sends_exactly_the_proposed_arguments(args: dict[str, Any]) -> None:
    """Enter on every field, then send: the decision carries the model's arguments unchanged."""
    answers = "e\n" + "\n" * len(args) + "s\n"
    decisions, transcript = run_edit(ANY_OBJECT, args, answers)
    assert decisions == [{"type": "edit", "edited_action": {"name": "t", "args": args}}]
    assert nothing_hidden(transcript)


@settings(max_examples=60, deadline=None)
@given(proposed=hostile_value, typed=st.one_of(deceptive_text, st.text(min_size=1, max_size=20)))
def test_a_typed_text_value_is_sent_as_typed(proposed: Any, typed: str) -> None:
    """A text field takes the reviewer's line exactly (a quoted line as a JSON string)."""
    typed = typed.replace("\r", "").replace("\n", "").replace("\x85", "")
    typed = (
        typed.replace("\u2028", "").replace("\u2029", "").replace("\x0b", "").replace("\x0c", "")
    )
    typed = typed.replace("\x1c", "").replace("\x1d", "").replace("\x1e", "")
    if not typed or typed.startswith('"') or typed == "null":
        typed = f"x{typed}"
    decisions, transcript = run_edit(TEXT_FIELD, {"note": proposed}, f"e\n{typed}\ns\n")
    assert decisions == [{"type": "edit", "edited_action": {"name": "t", "args": {"note": typed}}}]
    assert nothing_hidden(transcript.replace(typed, ""))
