"""Rendering approval requests, decisions and results as plain text for a model.

Some agent loops keep a text transcript instead of structured tool messages
(or summarise old turns). These helpers render each step of a review in
one fixed wording, e.g.
``The assistant requested to run findCalendarEvents with input: {...}``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from toolguard._core.checks import kind
from toolguard._core.jsonable import to_json_data
from toolguard._core.records import (
    NO_DECISION,
    REJECTED_BY_USER_MESSAGE,
    Action,
    ApproveDecision,
    EditDecision,
    RejectDecision,
    RespondDecision,
    ToolResult,
)


def _json(value: Any) -> str:
    return json.dumps(to_json_data(value), ensure_ascii=False)


def describe_request(name: str, args: Mapping[str, Any]) -> str:
    """``The assistant requested to run NAME with input: {...}``."""
    given: tuple[object, object] = (name, args)  # checked at run time for untyped callers
    if not isinstance(given[0], str) or not isinstance(given[1], Mapping):
        msg = (
            "describe_request(name, args) takes a tool name (str) and its arguments (a dict),"
            f" got {kind(name)} and {kind(args)}"
        )
        raise TypeError(msg)
    return f"The assistant requested to run {name} with input: {_json(dict(args))}"


def describe_decision(
    decision: ApproveDecision | EditDecision | RejectDecision | RespondDecision | None,
) -> str:
    """``The user approved the tool.``, ``The user rejected the tool: <reason>``, or an edit."""
    if isinstance(decision, RespondDecision):
        return f"The user answered in place of the tool: {decision.message}"
    if decision is None:
        return f"The user gave no decision: {NO_DECISION}"
    if isinstance(decision, ApproveDecision):
        return "The user approved the tool."
    if isinstance(decision, EditDecision):
        edited = decision.edited_action
        return (
            f"The user edited the tool call to run {edited.name} with input: {_json(edited.args)}"
        )
    given: object = decision  # checked at run time for untyped callers
    if not isinstance(given, RejectDecision):
        msg = f"describe_decision() takes a decision model or None, got {kind(given)}"
        raise TypeError(msg)
    return f"The user rejected the tool: {decision.message or REJECTED_BY_USER_MESSAGE}"


def describe_result(result: ToolResult) -> str:
    """``The tool returned this result: {...}``, or the error the model read."""
    given: object = result  # checked at run time for untyped callers
    if not isinstance(given, ToolResult):
        msg = f"describe_result() takes a ToolResult, got {kind(given)}"
        raise TypeError(msg)
    if result.status == "success":
        return f"The tool returned this result: {result.content}"
    return f"The tool returned an error: {result.content}"


def render_action(action: Action) -> str:
    """Every known line of one approval request, one per line."""
    given: object = action  # checked at run time for untyped callers
    if not isinstance(given, Action):
        msg = f"render_action() takes an Action (e.g. from ThreadState.actions), got {kind(given)}"
        raise TypeError(msg)
    lines = [describe_request(action.name, action.args)]
    if action.status == "expired":
        lines.append("The request expired before the user decided. The tool was not executed.")
    elif action.status == "cancelled":
        lines.append("The request was cancelled. The tool was not executed.")
    elif action.status != "requested":
        lines.append(describe_decision(action.decision))
    if action.result is not None and action.status in ("executed", "failed"):
        lines.append(describe_result(action.result))
    return "\n".join(lines)


def render_history(actions: Iterable[Action]) -> str:
    """Render several approval requests, separated by blank lines."""
    given: object = actions  # checked at run time for untyped callers
    if not isinstance(given, Iterable) or isinstance(given, str | Mapping | Action):
        msg = f"render_history() takes a list of Action, got {kind(given)}"
        raise TypeError(msg)
    return "\n\n".join(render_action(a) for a in actions)
