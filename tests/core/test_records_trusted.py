"""Models toolguard builds from values it made valid skip validation (``trusted``).

Each such model must be exactly what validation would have built, and
every payload handed to a user must hold its own dicts and lists.
"""

from __future__ import annotations

from typing import Any

import pydantic

import toolguard
from toolguard import MemoryStore, ModelResponse, ReviewedChat, ThreadState, ToolCall
from toolguard._core.records import trusted
from toolguard.records import ActionRequest, ReviewConfig, parse_tool_call

EMAIL = {"to": "alice@example.com", "body": "Hi", "cc": {"who": ["bob@example.com"]}}


class Model:
    """Proposes send_email to a user message; answers a tool result with text."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, messages: Any, tools: Any) -> ModelResponse:
        self.calls += 1
        if messages[-1]["role"] == "tool":
            return ModelResponse(text="Done")
        return ModelResponse(
            tool_calls=[ToolCall(id=f"c{self.calls}", name="send_email", args=EMAIL)]
        )


def make_chat() -> ReviewedChat:
    @toolguard.requires_approval(ttl=60)
    async def send_email(to: str, body: str, cc: dict[str, Any]) -> dict[str, Any]:
        """Send an email.

        Args:
            to: the recipient.
            body: the text.
            cc: copies.
        """
        return {"sent": to}

    return ReviewedChat(Model(), [send_email], store=MemoryStore())


def saved(chat: ReviewedChat, thread_id: str) -> ThreadState:
    """The state the chat saved last, as it handed it over (a MemoryStore keeps it as it is)."""
    assert isinstance(chat.store, MemoryStore)
    kept = chat.store._threads[thread_id][1]
    assert isinstance(kept, ThreadState)
    return kept


def assert_as_validated(model: pydantic.BaseModel) -> None:
    """``model`` equals the same class validated from its own fields, and dumps the same."""
    again = type(model).model_validate(dict(model.__dict__))
    assert model == again
    assert model.model_dump_json() == again.model_dump_json()
    assert model.model_fields_set == set(type(model).model_fields)


async def test_every_model_a_cycle_builds_without_validation_is_as_validated() -> None:
    chat = make_chat()
    paused = await chat.send_message("Mail Alice")
    assert paused.pending_review is not None
    assert_as_validated(paused.pending_review)
    for request in paused.pending_review.action_requests:
        assert_as_validated(request)
    for config in paused.pending_review.review_configs:
        assert_as_validated(config)
    state = saved(chat, paused.thread_id)
    assert state.pending is not None
    assert_as_validated(state.pending)
    [action] = state.pending.actions
    assert_as_validated(action)
    done = await chat.submit_review([{"type": "approve"}], paused.thread_id)
    assert done.reply == "Done"
    final = saved(chat, paused.thread_id)
    assert [e.kind for e in final.audit] == ["requested", "decided", "executed"]
    for event in final.audit:
        assert_as_validated(event)
    [executed] = final.actions
    assert executed.result is not None
    assert_as_validated(executed.result)
    assert executed.result.value == {"sent": "alice@example.com"}


def test_a_parsed_openai_call_is_as_validated() -> None:
    call = parse_tool_call(
        {"id": "c1", "function": {"name": "send_email", "arguments": '{"to": "a@b.c"}'}}
    )
    assert_as_validated(call)
    assert call == ToolCall(id="c1", name="send_email", args={"to": "a@b.c"})


async def test_a_review_payload_and_the_audit_hold_their_own_arguments() -> None:
    chat = make_chat()
    paused = await chat.send_message("Mail Alice")
    assert paused.pending_review is not None
    shown = paused.pending_review.action_requests[0].args
    shown["to"] = "mallory@example.com"
    paused.pending_review.review_configs[0].allowed_decisions.clear()
    state = saved(chat, paused.thread_id)
    assert state.pending is not None
    assert state.pending.actions[0].args["to"] == "alice@example.com"
    assert state.pending.actions[0].allowed_decisions == ["approve", "edit", "reject"]
    assert state.audit[0].args is not None
    assert state.audit[0].args["to"] == "alice@example.com"
    # The reviewer approves what was stored, not the changed payload.
    done = await chat.submit_review([{"type": "approve"}], paused.thread_id)
    assert (done.reply, done.actions[0].status) == ("Done", "executed")


def test_fields_left_to_their_defaults_are_validated_and_filled() -> None:
    request = trusted(ActionRequest, {"name": "send_email", "args": {"to": "a"}})
    assert request == ActionRequest(
        name="send_email", args={"to": "a"}, description="Tool `send_email` is awaiting approval"
    )
    config = trusted(ReviewConfig, {"action_name": "send_email"})
    assert config.model_dump() == {
        "action_name": "send_email",
        "allowed_decisions": ["approve", "edit", "reject"],
    }
