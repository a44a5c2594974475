"""Tests for toolguard.testing: stand-in reviewers for direct calls and for the Runner."""

from __future__ import annotations

from typing import Any

import pytest

from toolguard import (
    ActionRejectedError,
    ApprovalRequiredError,
    ApproveDecision,
    EditDecision,
    EditedAction,
    InvalidReviewDecisionError,
    RejectDecision,
    Runner,
    ToolCall,
    ToolResult,
    requires_approval,
)
from toolguard._policy.stand_in import get_stand_in, set_stand_in
from toolguard.testing import ReviewLog, auto_approve, auto_reject, fixed_decisions

SENT: list[tuple[str, str]] = []


@requires_approval
def send_email(to: str, body: str = "") -> str:
    """Send an email."""
    SENT.append((to, body))
    return f"sent to {to}"


@requires_approval
async def delete_file(path: str) -> str:
    """Delete a file."""
    SENT.append(("delete", path))
    return f"deleted {path}"


def search_mail(query: str) -> list[str]:
    """Search the mailbox."""
    return [query]


@pytest.fixture(autouse=True)
def _clear_sent() -> None:
    """Start every test with no recorded side effects (conftest resets toolguard's state)."""
    SENT.clear()


def calls_of(log: ReviewLog) -> list[tuple[str, dict[str, Any]]]:
    """The (name, args) pairs of a review log, ignoring the fresh ids."""
    return [(c.name, c.args) for c in log.calls]


def runner() -> Runner:
    """A runner over send_email (guarded), delete_file (guarded) and search_mail."""
    return Runner([send_email, delete_file, search_mail])


# --------------------------------------------------------------------------- auto_approve


def test_without_helper_a_direct_call_needs_approval() -> None:
    """Outside any helper a guarded direct call raises ApprovalRequiredError and does not run."""
    with pytest.raises(ApprovalRequiredError):
        send_email("a@x")
    assert SENT == []


def test_auto_approve_runs_direct_calls() -> None:
    """Inside auto_approve a guarded function runs and the log lists the call and decision."""
    with auto_approve() as log:
        assert send_email("a@x", body="hi") == "sent to a@x"
        assert send_email(to="b@x") == "sent to b@x"
    assert SENT == [("a@x", "hi"), ("b@x", "")]
    assert calls_of(log) == [
        ("send_email", {"to": "a@x", "body": "hi"}),
        ("send_email", {"to": "b@x"}),
    ]
    assert log.decisions == [ApproveDecision(), ApproveDecision()]


async def test_auto_approve_runs_async_direct_calls() -> None:
    """Inside auto_approve a guarded async function runs when awaited."""
    with auto_approve() as log:
        assert await delete_file("docs/old.txt") == "deleted docs/old.txt"
    assert SENT == [("delete", "docs/old.txt")]
    assert calls_of(log) == [("delete_file", {"path": "docs/old.txt"})]


async def test_auto_approve_runner_never_pauses() -> None:
    """Inside auto_approve the Runner runs every guarded call and returns a complete step."""
    with auto_approve() as log:
        step = await runner().run(
            [
                {"id": "c1", "name": "send_email", "args": {"to": "a@x"}},
                {"id": "c2", "name": "search_mail", "args": {"query": "q"}},
                {"id": "c3", "name": "delete_file", "args": {"path": "docs/old.txt"}},
            ]
        )
    assert step.pending is None
    assert step.results == [
        ToolResult(
            call_id="c1",
            name="send_email",
            status="success",
            content="sent to a@x",
            value="sent to a@x",
        ),
        ToolResult(
            call_id="c2", name="search_mail", status="success", content='["q"]', value=["q"]
        ),
        ToolResult(
            call_id="c3",
            name="delete_file",
            status="success",
            content="deleted docs/old.txt",
            value="deleted docs/old.txt",
        ),
    ]
    assert calls_of(log) == [
        ("send_email", {"to": "a@x"}),
        ("delete_file", {"path": "docs/old.txt"}),
    ]
    assert [c.id for c in log.calls] == ["c1", "c3"]
    assert [a.status for a in step.actions] == ["executed", "executed"]
    assert sorted(SENT) == [("a@x", ""), ("delete", "docs/old.txt")]  # the two ran concurrently


def test_auto_approve_with_run_sync() -> None:
    """The stand-in also applies to Runner.run_sync."""
    with auto_approve():
        step = runner().run_sync([{"id": "c1", "name": "send_email", "args": {"to": "a@x"}}])
    assert step.pending is None
    assert [r.content for r in step.results] == ["sent to a@x"]


# --------------------------------------------------------------------------- auto_reject


def test_auto_reject_direct_call_raises() -> None:
    """Inside auto_reject("no") a direct call raises ActionRejectedError("no") and does not run."""
    with auto_reject("no") as log, pytest.raises(ActionRejectedError) as info:
        send_email("a@x")
    assert str(info.value) == "no"
    assert info.value.reason == "no"
    assert info.value.tool_name == "send_email"
    assert SENT == []
    assert calls_of(log) == [("send_email", {"to": "a@x"})]
    assert log.decisions == [RejectDecision(message="no")]


async def test_auto_reject_async_direct_call_raises() -> None:
    """Inside auto_reject an awaited async guarded call raises ActionRejectedError."""
    with auto_reject("not now"), pytest.raises(ActionRejectedError) as info:
        await delete_file("docs/old.txt")
    assert str(info.value) == "not now"
    assert SENT == []


def test_auto_reject_without_message_uses_the_constant() -> None:
    """auto_reject() without a reason raises with REJECTED_BY_USER_MESSAGE."""
    with auto_reject(), pytest.raises(ActionRejectedError) as info:
        send_email("a@x")
    assert str(info.value) == "User rejected this action. It was not executed."


async def test_auto_reject_runner_gives_error_results() -> None:
    """Inside auto_reject the Runner completes with error results for guarded calls only."""
    with auto_reject("no"):
        step = await runner().run(
            [
                {"id": "c1", "name": "send_email", "args": {"to": "a@x"}},
                {"id": "c2", "name": "search_mail", "args": {"query": "q"}},
            ]
        )
    assert step.pending is None
    assert step.results == [
        ToolResult(
            call_id="c1", name="send_email", status="error", content="no", outcome="rejected"
        ),
        ToolResult(
            call_id="c2", name="search_mail", status="success", content='["q"]', value=["q"]
        ),
    ]
    assert [a.status for a in step.actions] == ["rejected"]
    assert SENT == []


# --------------------------------------------------------------------------- fixed_decisions


def test_fixed_decisions_in_order() -> None:
    """fixed_decisions applies its decisions in order; an edit changes a direct call's args."""
    decisions = [
        {"type": "approve"},
        {
            "type": "edit",
            "edited_action": {"name": "send_email", "args": {"to": "c@x", "body": "edited"}},
        },
        RejectDecision(message="stop"),
    ]
    with fixed_decisions(decisions) as log:
        assert send_email("a@x") == "sent to a@x"
        assert send_email("b@x", body="orig") == "sent to c@x"
        with pytest.raises(ActionRejectedError) as info:
            send_email("d@x")
    assert str(info.value) == "stop"
    assert SENT == [("a@x", ""), ("c@x", "edited")]
    assert calls_of(log) == [
        ("send_email", {"to": "a@x"}),
        ("send_email", {"to": "b@x", "body": "orig"}),
        ("send_email", {"to": "d@x"}),
    ]
    assert log.decisions == [
        ApproveDecision(),
        EditDecision(
            edited_action=EditedAction(name="send_email", args={"to": "c@x", "body": "edited"})
        ),
        RejectDecision(message="stop"),
    ]


def test_fixed_decisions_exhausted_raises_assertion_error() -> None:
    """A call beyond the given decisions raises AssertionError with the exact text."""
    with fixed_decisions([{"type": "approve"}]):
        send_email("a@x")
        with pytest.raises(AssertionError) as info:
            send_email("b@x", body="hi")
    assert str(info.value) == (
        "fixed_decisions got 1 decision, but another call needs approval:"
        " send_email({'to': 'b@x', 'body': 'hi'})"
    )
    assert SENT == [("a@x", "")]


def test_fixed_decisions_empty_list() -> None:
    """fixed_decisions([]) fails at the first call that needs approval."""
    with fixed_decisions([]), pytest.raises(AssertionError) as info:
        send_email("a@x")
    assert str(info.value) == (
        "fixed_decisions got 0 decisions, but another call needs approval:"
        " send_email({'to': 'a@x'})"
    )


def test_fixed_decisions_checks_decisions_up_front() -> None:
    """A malformed decision is refused when the block starts, and no stand-in is left behind."""
    with pytest.raises(InvalidReviewDecisionError) as info, fixed_decisions([{"type": "maybe"}]):
        pass  # pragma: no cover - never entered
    assert (
        str(info.value) == "Unknown decision type 'maybe'. Choices: ['approve', 'edit', 'reject']"
    )
    assert get_stand_in() is None


async def test_fixed_decisions_in_the_runner() -> None:
    """The Runner takes fixed decisions in call order, across a re-review after an edit."""
    with fixed_decisions(
        [
            {"type": "reject", "message": "wrong address"},
            {
                "type": "edit",
                "edited_action": {"name": "delete_file", "args": {"path": "docs/new.txt"}},
            },
        ]
    ) as log:
        step = await runner().run(
            [
                {"id": "c1", "name": "send_email", "args": {"to": "a@x"}},
                {"id": "c2", "name": "delete_file", "args": {"path": "docs/old.txt"}},
            ]
        )
    assert step.pending is None
    assert step.results == [
        ToolResult(
            call_id="c1",
            name="send_email",
            status="error",
            content="wrong address",
            outcome="rejected",
        ),
        ToolResult(
            call_id="c2",
            name="delete_file",
            status="success",
            content="deleted docs/new.txt",
            value="deleted docs/new.txt",
        ),
    ]
    assert step.calls[1] == ToolCall(id="c2", name="delete_file", args={"path": "docs/new.txt"})
    assert calls_of(log) == [
        ("send_email", {"to": "a@x"}),
        ("delete_file", {"path": "docs/old.txt"}),
    ]
    assert SENT == [("delete", "docs/new.txt")]


async def test_fixed_decisions_exhausted_in_the_runner() -> None:
    """The Runner lets the AssertionError out when the decisions run out."""
    with fixed_decisions([{"type": "approve"}]), pytest.raises(AssertionError) as info:
        await runner().run(
            [
                {"id": "c1", "name": "send_email", "args": {"to": "a@x"}},
                {"id": "c2", "name": "send_email", "args": {"to": "b@x"}},
            ]
        )
    assert str(info.value) == (
        "fixed_decisions got 1 decision, but another call needs approval: send_email({'to': 'b@x'})"
    )
    assert SENT == []


# --------------------------------------------------------------------------- nesting and restore


def test_previous_stand_in_is_restored_after_nested_blocks() -> None:
    """An inner helper wins inside its block and the outer one is back after it."""
    with auto_approve() as outer:
        send_email("a@x")
        with auto_reject("inner") as inner, pytest.raises(ActionRejectedError):
            send_email("b@x")
        send_email("c@x")
    assert calls_of(outer) == [("send_email", {"to": "a@x"}), ("send_email", {"to": "c@x"})]
    assert calls_of(inner) == [("send_email", {"to": "b@x"})]
    assert SENT == [("a@x", ""), ("c@x", "")]
    assert get_stand_in() is None
    with pytest.raises(ApprovalRequiredError):
        send_email("d@x")


def test_stand_in_is_removed_when_the_block_raises() -> None:
    """An exception inside the block still restores the previous (absent) stand-in."""
    with pytest.raises(RuntimeError, match="boom"), auto_approve():
        raise RuntimeError("boom")
    assert get_stand_in() is None


def test_helper_restores_a_custom_previous_stand_in() -> None:
    """A stand-in installed before the block is put back afterwards."""

    def mine(_call: ToolCall) -> RejectDecision:
        return RejectDecision(message="mine")

    set_stand_in(mine)
    with auto_approve():
        assert send_email("a@x") == "sent to a@x"
    assert get_stand_in() is mine


# --------------------------------------------------------------------------- decorators


@auto_approve()
def _approved_send() -> str:
    return send_email("a@x")


@auto_reject("decorated")
def _rejected_send() -> str:
    return send_email("a@x")


@fixed_decisions([{"type": "reject", "message": "first"}])
def _one_fixed_decision() -> str:
    try:
        return send_email("a@x")
    except ActionRejectedError as exc:
        return f"rejected: {exc}"


def test_auto_approve_as_decorator() -> None:
    """@auto_approve() makes the decorated function's guarded calls run, and only there."""
    assert _approved_send() == "sent to a@x"
    assert get_stand_in() is None
    with pytest.raises(ApprovalRequiredError):
        send_email("b@x")


def test_auto_reject_as_decorator() -> None:
    """@auto_reject("decorated") rejects the decorated function's guarded calls."""
    with pytest.raises(ActionRejectedError, match="decorated"):
        _rejected_send()
    assert get_stand_in() is None


def test_fixed_decisions_as_decorator_starts_fresh_each_call() -> None:
    """@fixed_decisions([...]) gives each call of the decorated function the full list again."""
    assert _one_fixed_decision() == "rejected: first"
    assert _one_fixed_decision() == "rejected: first"
    assert SENT == []


async def test_auto_approve_as_decorator_of_async_function() -> None:
    """@auto_approve() on an async function keeps the stand-in active while it is awaited."""

    @auto_approve()
    async def body() -> str:
        return send_email("a@x")

    assert await body() == "sent to a@x"
