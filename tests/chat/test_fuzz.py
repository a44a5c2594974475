"""Fuzzing submit_review: any decisions value is applied or refused with a documented error.

A refusal (``InvalidReviewDecisionError``, with the catalog text the
specification gives for the first problem) leaves the stored thread exactly
as it was and runs nothing; a value that happens to be valid is applied.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from toolguard import (
    InvalidReviewDecisionError,
    MemoryStore,
    Message,
    ModelResponse,
    ReviewedChat,
    ToolCall,
)

ALICE = {"to": "alice@example.com", "body": "The meeting is at 10."}
REJECTED_TEXT = "User rejected this action. It was not executed."
CHOICES = "Choices: ['approve', 'edit', 'reject']"
Log = list[tuple[str, dict[str, Any]]]


# --- the agent ----------------------------------------------------------------------------------


class Agent:
    """A model that proposes the email to Alice after a user message, and says Done after tools."""

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]
    ) -> ModelResponse:
        """Propose on a user message, answer on a tool result."""
        if messages[-1]["role"] == "user":
            return ModelResponse(tool_calls=[ToolCall(id="c1", name="send_email", args=ALICE)])
        return ModelResponse(text="Done.")


def make_chat(log: Log) -> ReviewedChat:
    """A chat over send_email (guarded) and search (free) that logs every run."""

    def send_email(to: str, body: str) -> str:
        """Send an email.

        Args:
            to: the recipient's address.
            body: the text.
        """
        log.append(("send_email", {"to": to, "body": body}))
        return f"Email sent to {to}"

    def search(query: str) -> list[str]:
        """Search the documents.

        Args:
            query: words to look for.
        """
        log.append(("search", {"query": query}))
        return [f"result for {query}"]

    return ReviewedChat(Agent(), [send_email, search], store=MemoryStore(), sync_in_thread=False)


async def attempt(decisions: Any) -> tuple[Log, dict[str, Any]]:
    """Pause a fresh thread, submit ``decisions``; report what happened."""
    log: Log = []
    chat = make_chat(log)
    paused = await chat.send_message("Tell Alice the meeting is at 10.")
    assert paused.pending_review is not None
    before = (await chat.get_thread(paused.thread_id)).model_dump_json()
    try:
        turn = await chat.submit_review(decisions, paused.thread_id)
    except InvalidReviewDecisionError as exc:
        after = (await chat.get_thread(paused.thread_id)).model_dump_json()
        return log, {"refused": str(exc), "unchanged": after == before}
    state = await chat.get_thread(paused.thread_id)
    (action,) = state.actions
    assert action.result is not None
    return log, {
        "reply": turn.reply,
        "thread": state.status,
        "status": action.status,
        "result": action.result.content,
    }


# --- the specification, written out independently ----------------------------------------------


def kind_name(value: Any) -> str:
    """How the texts name a value's type."""
    return "None" if value is None else type(value).__name__


def expected_refusal(decisions: Any) -> str | None:
    """The first problem's catalog text (English), or None when the decisions are valid."""
    if not isinstance(decisions, list):
        return f"'decisions' must be a list of decision objects, got {kind_name(decisions)}"
    if len(decisions) != 1:
        return f"Expected 1 decision (one per action), got {len(decisions)}"
    (decision,) = decisions
    if not isinstance(decision, dict):
        return f"Unknown decision type None. {CHOICES}"
    kind = decision.get("type")
    if kind not in ("approve", "edit", "reject"):
        return f"Unknown decision type {kind!r}. {CHOICES}"
    if kind == "edit":
        edited = decision.get("edited_action")
        if edited is None:
            return "An 'edit' decision must include 'edited_action'"
        if not (
            isinstance(edited, dict)
            and isinstance(edited.get("name"), str)
            and isinstance(edited.get("args"), dict)
        ):
            return "'edited_action' must contain 'name' (text) and 'args' (object)"
    if kind == "reject":
        reason = decision.get("message")
        if reason is not None and not isinstance(reason, str):
            return f"The 'message' of a 'reject' decision must be text, got {kind_name(reason)}"
    return None


def check(decisions: Any, log: Log, outcome: dict[str, Any]) -> None:
    """Assert the outcome the specification gives for ``decisions``."""
    refusal = expected_refusal(decisions)
    if refusal is not None:
        assert outcome == {"refused": refusal, "unchanged": True}
        assert log == []
        return
    decision = decisions[0]
    done = {"reply": "Done.", "thread": "idle"}
    if decision["type"] == "approve":
        assert outcome == {
            **done,
            "status": "executed",
            "result": "Email sent to alice@example.com",
        }
        assert log == [("send_email", ALICE)]
    elif decision["type"] == "reject":
        reason = decision.get("message") or REJECTED_TEXT
        assert outcome == {**done, "status": "rejected", "result": reason}
        assert log == []
    else:
        edited = decision["edited_action"]
        assert {k: outcome[k] for k in done} == done
        if outcome["status"] == "executed":
            assert log == [(edited["name"], edited["args"])]
        else:
            assert outcome["status"] == "failed"
            assert log == []


# --- strategies ---------------------------------------------------------------------------------

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
ARGS = st.fixed_dictionaries(
    {}, optional={"to": st.text(max_size=12) | JSON, "body": st.text(max_size=12) | JSON}
)
EDITED = st.fixed_dictionaries(
    {},
    optional={
        "name": st.sampled_from(["send_email", "search", "no_such_tool"]) | JSON,
        "args": ARGS | JSON,
    },
)
DECISION = (
    st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(["approve", "edit", "reject", "postpone", "Approve", ""])
            | JSON,
            "edited_action": EDITED | JSON,
            "message": st.text(max_size=12) | JSON,
        },
    )
    | JSON
)
DECISIONS = st.lists(DECISION, max_size=3) | JSON


# --- tests --------------------------------------------------------------------------------------


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(DECISIONS)
@example([{"type": "approve"}])
@example([{"type": "approve", "message": 7}])
@example([{"type": "reject", "message": "Wrong recipient"}])
@example([{"type": "reject", "message": ""}])
@example([{"type": "reject", "message": 7}])
@example([{"type": "edit", "edited_action": {"name": "send_email", "args": ALICE}}])
@example([{"type": "edit", "edited_action": {"name": "send_email", "args": {"to": 1}}}])
@example([{"type": "edit", "edited_action": {"name": "search", "args": {"query": "x"}}}])
@example([{"type": "edit", "edited_action": {"name": "no_such_tool", "args": {}}}])
@example([{"type": "edit"}])
@example([{"type": "edit", "edited_action": {"name": "send_email"}}])
@example([{"type": "postpone"}])
@example([None])
@example([])
@example([{"type": "approve"}, {"type": "approve"}])
@example({"type": "approve"})
@example("approve")
@example(None)
def test_any_json_value_as_decisions(decisions: Any) -> None:
    """Any JSON value gets the documented refusal (state unchanged, nothing run) or is applied."""
    log, outcome = anyio.run(attempt, decisions)

    check(decisions, log, outcome)


@pytest.mark.parametrize(
    "decisions",
    [
        [{"type": "reject", "message": "\ud800"}],
        [{"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "\udfff"}}}],
    ],
    ids=["reject-message", "edit-args"],
)
def test_lone_surrogates_from_json_get_a_documented_outcome(decisions: Any) -> None:
    """Text with a lone surrogate (json.loads accepts it) is refused or applied, never a crash."""
    log, outcome = anyio.run(attempt, decisions)

    assert set(outcome) in ({"refused", "unchanged"}, {"reply", "thread", "status", "result"})
    if "refused" in outcome:
        assert (outcome["unchanged"], log) == (True, [])


class Opaque:
    """A Python object with no JSON form."""


@pytest.mark.parametrize("value", [b"\xff", Opaque()], ids=["bytes", "object"])
def test_python_values_in_edited_args_get_a_documented_outcome(value: Any) -> None:
    """Edited args holding a Python value without JSON form are refused or converted."""
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": value}}}

    log, outcome = anyio.run(attempt, [edit])

    assert set(outcome) in ({"refused", "unchanged"}, {"reply", "thread", "status", "result"})
    if "refused" in outcome:
        assert (outcome["unchanged"], log) == (True, [])


def test_a_mapping_is_not_a_list_of_decisions() -> None:
    """A decisions mapping (not a list) is refused with the documented text and changes nothing."""
    log, outcome = anyio.run(attempt, {"0": {"type": "approve"}})

    assert outcome == {
        "refused": "'decisions' must be a list of decision objects, got dict",
        "unchanged": True,
    }
    assert log == []


def test_a_tuple_is_accepted_as_a_list() -> None:
    """A tuple of decisions (a Python sequence) is applied like a list."""
    log, outcome = anyio.run(attempt, ({"type": "approve"},))

    assert outcome == {
        "reply": "Done.",
        "thread": "idle",
        "status": "executed",
        "result": "Email sent to alice@example.com",
    }
    assert log == [("send_email", ALICE)]
