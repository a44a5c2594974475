"""Tests for rendering approval requests, decisions and results as plain text."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest

from toolguard import (
    ApproveDecision,
    EditDecision,
    EditedAction,
    RejectDecision,
    Runner,
    ToolResult,
)
from toolguard.records import Action
from toolguard.text import (
    describe_decision,
    describe_request,
    describe_result,
    render_action,
    render_history,
    set_language,
)

REQUEST = 'The assistant requested to run findCalendarEvents with input: {"day": "2026-12-01"}'


def action(**update: Any) -> Action:
    """A findCalendarEvents approval request, with ``update`` applied."""
    base = Action(
        id="a1",
        call_id="c1",
        name="findCalendarEvents",
        args={"day": "2026-12-01"},
        description="Tool `findCalendarEvents` is awaiting approval",
    )
    return base.model_copy(update=update)


OK = ToolResult(
    call_id="c1",
    name="findCalendarEvents",
    status="success",
    content='{"events": []}',
    value={"events": []},
)
FAILED = ToolResult(
    call_id="c1",
    name="findCalendarEvents",
    status="error",
    content="Tool `findCalendarEvents` failed: ValueError: boom",
)

# --------------------------------------------------------------------------- describe_*


def test_describe_request() -> None:
    """A request renders as the seed's sentence with compact JSON input."""
    assert describe_request("findCalendarEvents", {"day": "2026-12-01"}) == REQUEST


def test_describe_request_without_arguments() -> None:
    """No arguments render as an empty JSON object."""
    assert (
        describe_request("listCalendars", {})
        == "The assistant requested to run listCalendars with input: {}"
    )


def test_describe_request_keeps_order_and_non_ascii() -> None:
    """Keys keep their order and non-ASCII text stays readable."""
    assert (
        describe_request("send_email", {"to": "budi@contoh.id", "body": "Rapat jam 10 ☕"})
        == 'The assistant requested to run send_email with input: {"to": "budi@contoh.id", '
        '"body": "Rapat jam 10 ☕"}'
    )


def test_describe_request_converts_python_values() -> None:
    """Dates, tuples and nested values are rendered as JSON data."""
    args = {"day": dt.date(2026, 12, 1), "ids": (1, 2), "opts": {"all": True, "max": None}}
    assert describe_request("findCalendarEvents", args) == (
        "The assistant requested to run findCalendarEvents with input: "
        '{"day": "2026-12-01", "ids": [1, 2], "opts": {"all": true, "max": null}}'
    )


def test_describe_approve() -> None:
    """An approval renders as the seed's sentence."""
    assert describe_decision(ApproveDecision()) == "The user approved the tool."


def test_describe_reject_with_reason() -> None:
    """A rejection with a reason renders the reason."""
    assert (
        describe_decision(RejectDecision(message="wrong day"))
        == "The user rejected the tool: wrong day"
    )


@pytest.mark.parametrize("reason", [None, ""])
def test_describe_reject_without_reason(reason: str | None) -> None:
    """A rejection without (or with an empty) reason renders REJECTED_BY_USER_MESSAGE."""
    assert (
        describe_decision(RejectDecision(message=reason))
        == "The user rejected the tool: User rejected this action. It was not executed."
    )


def test_describe_edit() -> None:
    """An edit renders the tool and all the arguments that will run."""
    decision = EditDecision(
        edited_action=EditedAction(name="findCalendarEvents", args={"day": "2026-12-02"})
    )
    assert describe_decision(decision) == (
        'The user edited the tool call to run findCalendarEvents with input: {"day": "2026-12-02"}'
    )


def test_describe_no_decision() -> None:
    """A missing decision renders NO_DECISION."""
    assert describe_decision(None) == (
        "The user gave no decision: No decision was given for this action. It was not executed."
    )


def test_describe_success_result() -> None:
    """A success renders the content the model read."""
    assert describe_result(OK) == 'The tool returned this result: {"events": []}'


def test_describe_error_result() -> None:
    """An error result renders as an error."""
    assert describe_result(FAILED) == (
        "The tool returned an error: Tool `findCalendarEvents` failed: ValueError: boom"
    )


def test_texts_do_not_change_with_the_language() -> None:
    """History texts are for the model and stay English under set_language("id")."""
    set_language("id")
    assert describe_request("findCalendarEvents", {"day": "2026-12-01"}) == REQUEST
    assert describe_decision(ApproveDecision()) == "The user approved the tool."


# --------------------------------------------------------------------------- render_action


def test_render_requested() -> None:
    """A request still waiting renders only its request line."""
    assert render_action(action()) == REQUEST


def test_render_approved_not_yet_run() -> None:
    """An approved request renders the request and the approval."""
    assert render_action(action(status="approved", decision=ApproveDecision())) == (
        f"{REQUEST}\nThe user approved the tool."
    )


def test_render_executed() -> None:
    """An executed request renders request, approval and result, one per line."""
    rendered = render_action(action(status="executed", decision=ApproveDecision(), result=OK))
    assert rendered == (
        f'{REQUEST}\nThe user approved the tool.\nThe tool returned this result: {{"events": []}}'
    )


def test_render_failed() -> None:
    """A failed request renders the error the model read."""
    rendered = render_action(action(status="failed", decision=ApproveDecision(), result=FAILED))
    assert rendered == (
        f"{REQUEST}\nThe user approved the tool.\n"
        "The tool returned an error: Tool `findCalendarEvents` failed: ValueError: boom"
    )


def test_render_rejected() -> None:
    """A rejected request renders request and reason, without a result line."""
    reject = RejectDecision(message="wrong day")
    result = FAILED.model_copy(update={"content": "wrong day"})
    rendered = render_action(action(status="rejected", decision=reject, result=result))
    assert rendered == f"{REQUEST}\nThe user rejected the tool: wrong day"


def test_render_rejected_for_lack_of_decision() -> None:
    """A request closed without a decision renders NO_DECISION."""
    assert render_action(action(status="rejected")) == (
        f"{REQUEST}\nThe user gave no decision: "
        "No decision was given for this action. It was not executed."
    )


def test_render_edited_and_executed() -> None:
    """An executed edit renders the edited call and its result."""
    edit = EditDecision(
        edited_action=EditedAction(name="findCalendarEvents", args={"day": "2026-12-02"})
    )
    rendered = render_action(action(status="executed", decision=edit, result=OK))
    assert rendered == (
        f"{REQUEST}\n"
        "The user edited the tool call to run findCalendarEvents with input: "
        '{"day": "2026-12-02"}\n'
        'The tool returned this result: {"events": []}'
    )


def test_render_expired() -> None:
    """An expired request says the tool was not executed."""
    assert render_action(action(status="expired")) == (
        f"{REQUEST}\nThe request expired before the user decided. The tool was not executed."
    )


def test_render_cancelled() -> None:
    """A cancelled request says the tool was not executed."""
    assert render_action(action(status="cancelled")) == (
        f"{REQUEST}\nThe request was cancelled. The tool was not executed."
    )


# --------------------------------------------------------------------------- render_history


def test_render_history_separates_actions_with_blank_lines() -> None:
    """Several requests are rendered in order, separated by one blank line."""
    first = action(status="executed", decision=ApproveDecision(), result=OK)
    second = action(
        id="a2",
        call_id="c2",
        name="deleteEvent",
        args={"id": 7},
        status="rejected",
        decision=RejectDecision(message="keep it"),
    )
    assert render_history([first, second]) == (
        f"{REQUEST}\nThe user approved the tool.\n"
        'The tool returned this result: {"events": []}\n\n'
        'The assistant requested to run deleteEvent with input: {"id": 7}\n'
        "The user rejected the tool: keep it"
    )


def test_render_history_empty() -> None:
    """No actions render as empty text."""
    assert render_history([]) == ""


def test_render_history_accepts_any_iterable() -> None:
    """A generator of actions works like a list."""
    assert render_history(a for a in [action()]) == REQUEST


async def test_render_history_of_a_real_turn() -> None:
    """The actions of a resumed runner step render their whole story."""

    def findCalendarEvents(day: str) -> dict[str, list[str]]:  # noqa: N802 - the seed's name
        """Find the events of a day."""
        return {"events": [f"standup {day}"]}

    def deleteEvent(id: int) -> str:  # noqa: N802 - the seed's name
        """Delete an event."""
        return "deleted"

    tools: dict[str, Callable[..., Any]] = {
        "findCalendarEvents": findCalendarEvents,
        "deleteEvent": deleteEvent,
    }
    runner = Runner(tools)
    # findCalendarEvents reads, so it is not guarded by the verb rule; deleteEvent is.
    step = await runner.run(
        [
            {"id": "c1", "name": "findCalendarEvents", "args": {"day": "2026-12-01"}},
            {"id": "c2", "name": "deleteEvent", "args": {"id": 7}},
            {"id": "c3", "name": "deleteEvent", "args": {"id": 8}},
        ]
    )
    assert step.pending is not None
    done = await runner.resume(
        step.pending, [{"type": "approve"}, {"type": "reject", "message": "keep it"}]
    )
    assert render_history(done.actions) == (
        'The assistant requested to run deleteEvent with input: {"id": 7}\n'
        "The user approved the tool.\n"
        "The tool returned this result: deleted\n\n"
        'The assistant requested to run deleteEvent with input: {"id": 8}\n'
        "The user rejected the tool: keep it"
    )
