"""The hot path's shortcuts give exactly what the plain code gives.

Digests and call arguments keep their bytes, the action merge keeps its
result, and the chat's thread records are the same with or without edits.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolguard import ModelResponse, ReviewedChat, ScriptedModel, ToolCall
from toolguard._chat.history import assistant_message, merge_actions
from toolguard._core.records import args_json, call_digest
from toolguard.records import Action

ARGS = {"to": "zoë@example.com", "n": [1, 2.5, None, True], "z": {"b": 1, "a": "é\u2028"}}


def test_digests_keep_their_bytes() -> None:
    """call_digest gives the digests 0.2.0 stored (SHA-256, HMAC, a lone surrogate)."""
    assert call_digest("send_email", ARGS, thread_id="t1", review_id="r1") == (
        "5452aed1a768fbee14bd925565b99aff2405a5b49de7b15f929103f0f4da2f0a"
    )
    assert call_digest("send_email", ARGS, b"secret", thread_id="t1", review_id="r1") == (
        "b6ee73f54529b2a317f3587ada965f5db5b2669f82b37ffe40db81a8833cfdcb"
    )
    assert call_digest("x", {"s": "\ud800"}) == (
        "2e51c50b89e5bc1b96db33616b4d1e2acd8d0db5760b135a598a0cecc71f84e3"
    )


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=12,
)


@given(st.dictionaries(st.text(max_size=4), JSON, max_size=4))
def test_call_arguments_are_the_json_text_of_before(args: dict[str, Any]) -> None:
    """The arguments text sent to a model is ``json.dumps(args, ensure_ascii=False)``."""
    assert args_json(args) == json.dumps(args, ensure_ascii=False)
    message = assistant_message(None, [ToolCall(id="c1", name="f", args=args)])
    assert message["tool_calls"][0]["function"]["arguments"] == json.dumps(args, ensure_ascii=False)


def _reference_merge(actions: list[Action], updates: list[Action]) -> list[Action]:
    """The merge written plainly: index every action."""
    position = {a.id: i for i, a in enumerate(actions)}
    merged = list(actions)
    for action in updates:
        if action.id in position:
            merged[position[action.id]] = action
        else:
            position[action.id] = len(merged)
            merged.append(action)
    return merged


def _actions(prefix: str, ids: list[int]) -> list[Action]:
    return [
        Action(id=f"a{i}", call_id="c", name=f"{prefix}{n}", args={}, description="d")
        for n, i in enumerate(ids)
    ]


@given(
    st.lists(st.integers(0, 9), max_size=14),
    st.lists(st.integers(0, 14), max_size=5),
)
def test_merge_gives_what_indexing_every_action_gave(base: list[int], updates: list[int]) -> None:
    """Looking at the latest actions first changes nothing, repeated ids included."""
    actions, changed = _actions("old", base), _actions("new", updates)
    assert merge_actions(actions, changed) == _reference_merge(actions, changed)


async def test_unedited_and_edited_turns_record_the_calls_that_ran() -> None:
    """Approved as proposed, the assistant message is the pause's; edited, it shows the edit."""

    def send_email(to: str) -> str:
        """Send an email."""
        return f"sent to {to}"

    proposed = ToolCall(id="c1", name="send_email", args={"to": "a@x"})
    model = ScriptedModel(
        [
            ModelResponse(text="On it.", tool_calls=[proposed]),
            "Done.",
            ModelResponse(tool_calls=[proposed]),
            "Done again.",
        ]
    )
    chat = ReviewedChat(model, [send_email])
    turn = await chat.send_message("Mail a@x")
    paused = (await chat.get_thread(turn.thread_id)).messages[1]
    await chat.submit_review([{"type": "approve"}], turn.thread_id)
    messages = (await chat.get_thread(turn.thread_id)).messages
    assert messages[1] == paused == assistant_message("On it.", [proposed])

    await chat.send_message("Once more", turn.thread_id)
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "b@x"}}}
    await chat.submit_review([edit], turn.thread_id)
    messages = (await chat.get_thread(turn.thread_id)).messages
    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert messages[5] == assistant_message(
        None, [ToolCall(id="c1", name="send_email", args={"to": "b@x"})]
    )
    assert [m["content"] for m in messages[6:]] == ["sent to b@x", "Done again."]


# ----------------------------------------------------------------------------- the stored count


def test_a_copy_keeps_the_stored_count_as_its_own() -> None:
    """model_copy carries the chat's count of stored messages; marking a copy keeps the original."""
    from toolguard._chat.threads import mark_stored, stored_count
    from toolguard._stores.protocol import ThreadState

    state = ThreadState(thread_id="t", messages=[{"role": "user", "content": "hi"}])
    mark_stored(state)
    copied = state.model_copy(update={"version": 4})
    assert stored_count(copied) == 1
    assert copied.__pydantic_private__ == {"_stored_messages": 1}
    assert copied.__pydantic_private__ is not state.__pydantic_private__
    mark_stored(copied.model_copy(update={"messages": []}))
    assert stored_count(copied) == 1  # the copy's bookkeeping is its own
    assert copied == state.model_copy(update={"version": 4})


def test_the_stored_count_survives_a_state_without_private_storage() -> None:
    """mark_stored / stored_count also work when pydantic left __pydantic_private__ unset."""
    from toolguard._chat.threads import mark_stored, stored_count
    from toolguard._stores.protocol import ThreadState

    state = ThreadState(thread_id="t", messages=[{"role": "user", "content": "hi"}] * 2)
    object.__setattr__(state, "__pydantic_private__", None)
    assert stored_count(state) == 2  # unknown: every message counts as stored
    mark_stored(state)
    assert state.__pydantic_private__ == {"_stored_messages": 2}
    assert "_stored_messages" not in state.__dict__  # never a field of the stored JSON
    state.messages.append({"role": "user", "content": "more"})
    assert stored_count(state) == 2


async def test_a_submission_without_a_quorum_is_planned_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The chat plans a submission; the runner takes that plan unless a quorum settles."""
    from toolguard import requires_approval
    from toolguard._enforce import quorum as _quorum

    planned: list[str] = []
    real_plan = _quorum.plan

    def counting_plan(*args: Any, **kwargs: Any) -> Any:
        planned.append("plan")
        return real_plan(*args, **kwargs)

    monkeypatch.setattr(_quorum, "plan", counting_plan)

    def send_email(to: str) -> str:
        """Send an email."""
        return f"sent to {to}"

    async def cycle(tool: Any, *, store_secrets: bool = True, reviewers: int = 1) -> int:
        planned.clear()
        call = ToolCall(id="c1", name="send_email", args={"to": "a@x"})
        model = ScriptedModel([ModelResponse(tool_calls=[call]), "Done."])
        chat = ReviewedChat(model, [tool], store_secrets=store_secrets)
        turn = await chat.send_message("Mail a@x")
        for who in ["alice", "bob"][:reviewers]:
            done = await chat.submit_review([{"type": "approve"}], turn.thread_id, reviewer=who)
        assert done.reply == "Done."
        return len(planned)

    assert await cycle(requires_approval(send_email)) == 1
    # With secrets kept in memory only, the chat restores them before it plans: once too.
    assert await cycle(requires_approval(send_email), store_secrets=False) == 1
    # A quorum of two: the first approval is planned once (it only records a vote); the
    # second is planned by the chat and again by the runner, which settles it.
    assert await cycle(requires_approval(approvals=2)(send_email), reviewers=2) == 3
