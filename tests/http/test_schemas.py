"""What ``GET /hitl/threads/{thread_id}`` shows of a call whose arguments hide a secret.

A stored action's ``digest`` is a SHA-256 of its real arguments (it binds the
approval). For a call with a ``redact=`` argument, anyone reading the digest
could test guesses of a short secret against it, so the thread view leaves
it empty there; a call without secrets keeps its digest.
"""

from __future__ import annotations

import httpx

from toolguard import (
    MemoryStore,
    ModelResponse,
    ReviewedChat,
    ScriptedModel,
    ToolCall,
    requires_approval,
)
from toolguard._core.records import call_digest
from toolguard.http import create_app

PIN = "4711"


@requires_approval(redact=["pin"])
def unlock(door: str, pin: str) -> str:
    """Unlock a door."""
    return f"{door} open"


@requires_approval
def ring(door: str) -> str:
    """Ring a door's bell."""
    return f"{door} rang"


async def test_a_secret_calls_digest_is_not_shown_and_a_plain_calls_is() -> None:
    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=[
                    ToolCall(id="c1", name="unlock", args={"door": "front", "pin": PIN}),
                    ToolCall(id="c2", name="ring", args={"door": "front"}),
                ]
            ),
            ModelResponse(text="done"),
        ]
    )
    store = MemoryStore()
    chat = ReviewedChat(model, [unlock, ring], store=store)
    turn = await chat.send_message("Let me in")
    assert turn.review_id is not None
    state = await store.load(turn.thread_id)
    assert state is not None
    stored = {action.name: action.digest for action in state.actions}
    assert stored["unlock"] == call_digest(
        "unlock",
        {"door": "front", "pin": PIN},
        await store.digest_key(),  # the store's secret: the chat has no signing_key
        thread_id=turn.thread_id,
        review_id=turn.review_id,
    )

    transport = httpx.ASGITransport(app=create_app(chat))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        answer = await client.get(f"/hitl/threads/{turn.thread_id}")

    assert answer.status_code == 200
    shown = {
        action["name"]: (action["args"], action["digest"]) for action in answer.json()["actions"]
    }
    assert shown == {
        "unlock": ({"door": "front", "pin": "[redacted]"}, ""),
        "ring": ({"door": "front"}, stored["ring"]),
    }
    assert stored["unlock"] not in answer.text
    assert PIN not in answer.text
