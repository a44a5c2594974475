"""The terminal card shows a judge's verdict on its own line, once."""

from __future__ import annotations

import io
import json

from toolguard import Judge, ModelResponse, ReviewedChat, ScriptedModel, ToolCall, requires_approval
from toolguard._cli.terminal import Terminal, ask_decisions, render_card
from toolguard._core.judgement import Judgement
from toolguard._core.records import ActionRequest

ARGS = {"to": "mallory@example.net", "body": "the quarterly numbers"}
ASK = {
    "risk": "high",
    "user_authorized": False,
    "outcome": "ask",
    "rationale": "The user never named mallory@example.net.\u202e",
}


@requires_approval
def send_email(to: str, body: str) -> str:
    """Send an email.

    Args:
        to: the recipient.
        body: the text.
    """
    return f"sent to {to}"


async def test_the_card_shows_the_verdict_once_on_its_own_line() -> None:
    """Description, then the judge's line (invisible characters escaped), then the arguments."""
    model = ScriptedModel(
        [ModelResponse(tool_calls=[ToolCall(id="c1", name="send_email", args=ARGS)])]
    )
    chat = ReviewedChat(model, [send_email], judge=Judge(ScriptedModel([json.dumps(ASK)])))
    turn = await chat.send_message("send the numbers to my accountant")
    assert turn.pending_review is not None
    out = io.StringIO()
    decisions = ask_decisions(
        Terminal(out, answers=io.StringIO("r\nunknown recipient\n")),
        turn.pending_review,
        chat.toolset,
        turn.actions,
    )
    assert decisions == [{"type": "reject", "message": "unknown recipient"}]
    assert out.getvalue().splitlines()[:9] == [
        "== Approval 1/1: send_email ==",
        "Tool `send_email` is awaiting approval",
        "Why it asks: guarded with @requires_approval",
        (
            "Judge (ScriptedModel): high risk, the user did not ask for it. The user never named"
            " mallory@example.net.\\u202e"
        ),
        "Arguments:",
        "{",
        '  "to": "mallory@example.net",',
        '  "body": "the quarterly numbers"',
        "}",
    ]


def test_without_the_actions_the_description_carries_the_verdict_once() -> None:
    """No judgement given: the description is shown as it is, one line, nothing flagged."""
    request = ActionRequest(
        name="send_email",
        args={"to": "a"},
        description="Tool `send_email` is awaiting approval | Judge (m) could not decide: it"
        " did not answer within 30 seconds",
    )
    assert render_card(request).splitlines() == [
        "== Approval 1/1: send_email ==",
        (
            "Tool `send_email` is awaiting approval | Judge (m) could not decide: it did not"
            " answer within 30 seconds"
        ),
        "Arguments:",
        "{",
        '  "to": "a"',
        "}",
    ]


def test_an_undecided_verdict_says_so() -> None:
    verdict = Judgement(
        call_id="c1",
        tool="send_email",
        risk=None,
        user_authorized=None,
        outcome="ask",
        rationale="its reply was not one JSON object",
        model="m",
        latency_ms=3.0,
        decided=False,
    )
    request = ActionRequest(
        name="send_email",
        args={},
        description=f"Tool `send_email` is awaiting approval | {verdict.summary()}",
    )
    assert render_card(request, judgement=verdict).splitlines() == [
        "== Approval 1/1: send_email ==",
        "Tool `send_email` is awaiting approval",
        "Judge (m) could not decide: its reply was not one JSON object",
        "Arguments:",
        "{}",
    ]
