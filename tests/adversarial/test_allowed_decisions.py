"""Attack class: a decision the tool does not allow (an edit of a no-edit tool, a forged respond).

A tool's ``allowed_decisions`` come from code (``requires_approval(allowed_decisions=...)``).
Neither a client sending another decision type, nor a rewritten store widening the list an
action carries, nor a testing stand-in may get a decision through that the tool does not
allow; a refused decision runs nothing and leaves the review pending.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolguard import (
    InvalidReviewDecisionError,
    MemoryStore,
    ModelResponse,
    ReviewedChat,
    Runner,
    ScriptedModel,
    ToolCall,
    requires_approval,
    validate_decisions,
)
from toolguard.testing import fixed_decisions

EDIT = {"type": "edit", "edited_action": {"name": "pay", "args": {"to": "mallory", "amount": 1}}}
TEXT = "Decision 'edit' is not allowed for action 'pay'. Allowed: ['approve', 'reject']"


def make_pay(log: list[dict[str, Any]]) -> Any:
    """A payment tool that may only be approved or rejected."""

    @requires_approval(allowed_decisions=["approve", "reject"])
    def pay(to: str, amount: int) -> str:
        """Pay someone."""
        log.append({"to": to, "amount": amount})
        return "paid"

    return pay


async def test_a_rewritten_store_cannot_widen_the_allowed_decisions() -> None:
    """An action whose stored list gained 'edit' still refuses the edit: the tool's code decides."""
    log: list[dict[str, Any]] = []
    runner = Runner([make_pay(log)])
    step = await runner.run([ToolCall(id="c1", name="pay", args={"to": "bob", "amount": 5})])
    assert step.pending is not None
    widened = step.pending.actions[0].model_copy(
        update={"allowed_decisions": ["approve", "edit", "reject"]}
    )
    forged = step.pending.model_copy(update={"actions": [widened]})
    with pytest.raises(InvalidReviewDecisionError) as caught:
        await runner.resume(forged, [EDIT])
    assert str(caught.value) == TEXT
    assert log == []


async def test_the_chat_refuses_before_claiming_the_review() -> None:
    """submit_review checks the tools' own policies before the claim: the review stays pending."""
    log: list[dict[str, Any]] = []
    store = MemoryStore()
    model = ScriptedModel(
        [ModelResponse(tool_calls=[ToolCall(id="c1", name="pay", args={"to": "bob", "amount": 5})])]
    )
    chat = ReviewedChat(model, [make_pay(log)], store=store)
    turn = await chat.send_message("pay bob")
    state = await chat.get_thread(turn.thread_id)
    assert state.pending is not None
    widened = state.pending.actions[0].model_copy(
        update={"allowed_decisions": ["approve", "edit", "reject"]}
    )
    await store.save(
        state.model_copy(
            update={"pending": state.pending.model_copy(update={"actions": [widened]})}
        ),
        expected_version=state.version,
    )
    with pytest.raises(InvalidReviewDecisionError) as caught:
        await chat.submit_review([EDIT], turn.thread_id)
    assert str(caught.value) == TEXT
    after = await chat.get_thread(turn.thread_id)
    assert (after.status, [e.kind for e in after.audit], log) == (
        "awaiting_review",
        ["requested"],
        [],
    )


def test_a_testing_stand_in_cannot_edit_a_no_edit_tool() -> None:
    """A direct call under fixed_decisions([edit]) raises; the body never runs."""
    log: list[dict[str, Any]] = []
    pay = make_pay(log)
    with fixed_decisions([EDIT]), pytest.raises(InvalidReviewDecisionError) as caught:
        pay("bob", 5)
    assert (str(caught.value), log) == (TEXT, [])


@settings(max_examples=50, deadline=None)
@given(
    kind=st.one_of(
        st.sampled_from(["edit", "respond", "Approve", "approve ", "", "reject\u200b"]),
        st.text(max_size=12),
    )
)
def test_only_the_allowed_types_pass(kind: str) -> None:
    """Any type text other than approve/reject is refused for the approve/reject-only tool."""
    review = {
        "action_requests": [{"name": "pay", "args": {}}],
        "review_configs": [{"action_name": "pay", "allowed_decisions": ["approve", "reject"]}],
    }
    decision = {"type": kind, "message": "m", "edited_action": {"name": "pay", "args": {}}}
    if kind in ("approve", "reject"):
        assert validate_decisions(review, [decision])[0].type == kind
    else:
        with pytest.raises(InvalidReviewDecisionError):
            validate_decisions(review, [decision])
