"""Webhooks of a judge's verdicts: each ``judged`` audit event is POSTed as ``review.judged``."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from tests.helpers import WEBHOOK_SECRET, Receiver, receiver
from toolguard import (
    Judge,
    ModelResponse,
    ReviewedChat,
    ScriptedModel,
    ToolCall,
    Webhook,
    requires_approval,
)

__all__ = ["receiver"]  # a fixture, used by name

START = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
ARGS = {"to": "alice@example.com", "password": "hunter2"}
SHOWN = {"to": "alice@example.com", "password": "[redacted]"}
ALLOW = {
    "risk": "low",
    "user_authorized": True,
    "outcome": "allow",
    "rationale": "The user asked to log in as Alice.",
}


@requires_approval(redact=["password"])
def log_in(to: str, password: str) -> str:
    """Log in to the mail server.

    Args:
        to: the account.
        password: its password.
    """
    return f"logged in as {to}"


def make_chat(url: str, *, auto_approve: bool) -> ReviewedChat:
    model = ScriptedModel(
        [ModelResponse(tool_calls=[ToolCall(id="c1", name="log_in", args=ARGS)]), "Done."]
    )
    judge = Judge(ScriptedModel([json.dumps(ALLOW)]), auto_approve=auto_approve)
    return ReviewedChat(
        model,
        [log_in],
        clock=lambda: START,
        notify=Webhook(url, secret=WEBHOOK_SECRET),
        judge=judge,
    )


def judgement(latency_ms: float, *, auto_approved: bool) -> dict[str, Any]:
    return {
        "call_id": "c1",
        "tool": "log_in",
        **ALLOW,
        "model": "ScriptedModel",
        "latency_ms": latency_ms,
        "decided": True,
        "auto_approved": auto_approved,
    }


async def test_a_verdict_that_informs_a_review_comes_before_the_request(
    receiver: Receiver,
) -> None:
    chat = make_chat(receiver.url, auto_approve=False)
    turn = await chat.send_message("log in as alice")
    assert turn.pending_review is not None
    assert await chat.deliver_notifications() == 2
    assert all(r["signed"] for r in receiver.received)
    judged, requested = receiver.accepted
    [action] = turn.actions
    assert judged == {
        "id": judged["id"],
        "event": "review.judged",
        "created_at": "2026-01-02T03:04:05+00:00",
        "thread_id": turn.thread_id,
        "review_id": turn.review_id,
        "action_id": action.id,
        "tool": "log_in",
        "args": SHOWN,  # as the reviewer sees them: the secret stays out of the webhook
        "judgement": judgement(judged["judgement"]["latency_ms"], auto_approved=False),
    }
    assert requested["event"] == "review.requested"
    assert "hunter2" not in json.dumps(receiver.accepted)


async def test_an_auto_approved_call_sends_its_verdict_and_no_review(receiver: Receiver) -> None:
    chat = make_chat(receiver.url, auto_approve=True)
    turn = await chat.send_message("log in as alice")
    assert (turn.pending_review, turn.reply) == (None, "Done.")
    assert await chat.deliver_notifications() == 1
    [judged] = receiver.accepted
    assert judged == {
        "id": judged["id"],
        "event": "review.judged",
        "created_at": "2026-01-02T03:04:05+00:00",
        "thread_id": turn.thread_id,
        "review_id": None,
        "action_id": None,
        "tool": "log_in",
        "args": SHOWN,
        "judgement": judgement(judged["judgement"]["latency_ms"], auto_approved=True),
    }
    [event] = await chat.audit_trail(turn.thread_id)
    assert judged["id"] != event.id  # a delivery has its own id, as the other events
    assert (await chat.get_thread(turn.thread_id)).outbox == []
