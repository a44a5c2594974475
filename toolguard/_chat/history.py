"""What a chat writes into a thread: the messages the model reads, actions, audit events."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from toolguard._core.audit import AuditEvent, AuditKind, final_event, requested_event
from toolguard._core.llm import Message
from toolguard._core.records import (
    REJECTED_BY_USER_MESSAGE,
    Action,
    EditDecision,
    RejectDecision,
    RespondDecision,
    ToolCall,
    ToolResult,
    args_json,
    new_id,
    trusted,
)
from toolguard._core.results import ResultTemplates, result_text
from toolguard._enforce.judge import call_key
from toolguard._enforce.step import Step
from toolguard._policy.decisions import AnyDecision
from toolguard._policy.redact import shown_call_args
from toolguard._tools.toolset import Toolset

ENDED: dict[str, AuditKind] = {"rejected": "rejected", "responded": "responded"}
"""The final audit event of an action that ended without running (recover, close)."""


def assistant_message(text: str | None, calls: Sequence[ToolCall]) -> Message:
    """An OpenAI assistant message carrying ``calls``."""
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {
                "id": c.id,
                "type": "function",
                "function": {
                    "name": c.name,
                    "arguments": (
                        c.arguments_error if c.arguments_error is not None else args_json(c.args)
                    ),
                },
            }
            for c in calls
        ],
    }


def tool_message(result: ToolResult, templates: ResultTemplates | None = None) -> Message:
    """An OpenAI tool message for ``result`` (``status`` is kept for our own records).

    The content is what the model reads: a result that is not a plain
    success is marked with ``templates`` (default
    :class:`~toolguard.text.ResultTemplates`), so it stays recognisable once the
    ``status`` key is dropped (OpenAI's formats have none).
    """
    return {
        "role": "tool",
        "tool_call_id": result.call_id,
        "content": result_text(result, templates),
        "status": result.status,
    }


def rewrite_last_assistant(messages: list[Message], calls: Sequence[ToolCall]) -> list[Message]:
    """Make the last assistant message carry ``calls`` (edits replace proposed calls)."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "assistant":
            messages[index] = assistant_message(messages[index].get("content"), calls)
            break
    return messages


def merge_actions(actions: list[Action], updates: Sequence[Action]) -> list[Action]:
    """``actions`` with ``updates`` in place of the actions of the same id, new ones appended.

    The updated actions are nearly always the latest ones (the pending turn's,
    at the end of a thread's actions): they are looked for there first, and
    the whole list is indexed only for an id not found there, so a long
    thread does not cost a walk over all its actions per update.
    """
    merged = list(actions)
    if not updates:
        return merged
    start = max(0, len(merged) - 2 * len(updates))
    position = {merged[i].id: i for i in range(start, len(merged))}
    if start and any(a.id not in position for a in updates):
        head = {merged[i].id: i for i in range(start)}
        head.update(position)  # a repeated id keeps its last place, as above
        position = head
    for action in updates:
        if action.id in position:
            merged[position[action.id]] = action
        else:
            position[action.id] = len(merged)
            merged.append(action)
    return merged


def decided_action(
    action: Action, decision: AnyDecision, reviewer: str | None, now: datetime
) -> Action:
    """``action`` as ``decision`` settles it, by ``reviewer`` at ``now``."""
    status = {
        "approve": "approved",
        "edit": "edited",
        "reject": "rejected",
        "respond": "responded",
    }[decision.type]
    return action.model_copy(
        update={"status": status, "decision": decision, "reviewer": reviewer, "decided_at": now}
    )


def decided_event(
    thread_id: str, review_id: str, action: Action, reviewer: str | None, now: datetime
) -> AuditEvent:
    """The ``decided`` audit event of a decided ``action``."""
    decision = action.decision
    assert decision is not None  # noqa: S101 - built by decided_action
    tool, detail = action.name, None
    args: dict[str, Any] | None = action.args
    if isinstance(decision, EditDecision):
        tool, args = decision.edited_action.name, decision.edited_action.args
    elif isinstance(decision, RejectDecision):
        args, detail = None, decision.message or REJECTED_BY_USER_MESSAGE
    elif isinstance(decision, RespondDecision):
        args, detail = None, decision.message
    return trusted(
        AuditEvent,
        {
            "id": new_id(),
            "at": now,
            "kind": "decided",
            "thread_id": thread_id,
            "review_id": review_id,
            "action_id": action.id,
            "tool": tool,
            "args": dict(args) if args is not None else None,
            "actor": reviewer,
            "decision": decision.type,
            "detail": detail,
            "digest": action.digest,
            "judgement": None,
            "would": None,
            "candidate": None,
        },
    )


def with_reviewer(step: Step, reviewer: str | None) -> Step:
    """``step`` with ``reviewer`` on its decided actions that name nobody yet."""
    if reviewer is None:
        return step
    return dataclasses.replace(
        step,
        actions=[
            a.model_copy(update={"reviewer": reviewer})
            if a.decided_at is not None and a.reviewer is None
            else a
            for a in step.actions
        ],
    )


def step_events(
    thread_id: str,
    review_id: str | None,
    step: Step,
    toolset: Toolset,
    now: datetime,
    *,
    fresh: bool,
    key: bytes | None = None,
) -> list[AuditEvent]:
    """The audit events of a step; ``fresh``: the step ran the model's calls just now.

    ``key``: the secret of the ``judged`` events' digests (the runner's).
    """
    events: list[AuditEvent] = []
    calls = {c.id: c for c in step.calls} if fresh else {}
    if fresh and step.judgements:
        events += judged_events(thread_id, step, toolset, now, key=key)
    if fresh and (step.shadowed or step.candidates):
        events += watched_events(thread_id, step, toolset, now)
    for result in step.results:
        if result.outcome == "denied" and result.call_id in calls:
            # A deny rule refused the call: nobody was asked, so no action; audit it here.
            call = calls[result.call_id]
            events.append(
                AuditEvent(
                    at=now,
                    kind="denied",
                    thread_id=thread_id,
                    tool=call.name,
                    args=shown_call_args(call, toolset),
                    detail=result.content,
                )
            )
    for action in step.actions:
        if action.status == "requested":
            new_review = step.pending.review_id if step.pending else review_id
            events.append(requested_event(thread_id, new_review or "", action))
        elif action.status in (
            "executed",
            "failed",
            "rejected",
            "expired",
            "responded",
            "cancelled",
        ):  # (cancelled in a step: its caller gave up as it ran)
            # An approved or edited call a deny rule refused ends with a ``denied`` event.
            denied = action.result is not None and action.result.outcome == "denied"
            kind: AuditKind = "denied" if denied else action.status
            events.append(final_event(thread_id, review_id, action, kind, now))
    return events


def judged_events(
    thread_id: str, step: Step, toolset: Toolset, now: datetime, *, key: bytes | None = None
) -> list[AuditEvent]:
    """A ``judged`` event per verdict of a fresh step, in call order.

    A verdict that informed a review names its approval request; a call the
    judge approved on its own has ``actor`` ``"judge"``, ``decision``
    ``approve`` and the rationale as ``detail``. ``digest`` identifies the
    call (:func:`~toolguard._enforce.judge.call_key`: its name and validated
    arguments in this thread, HMAC with ``key``), so a judge in another
    process never approves the same call twice in the thread.
    """
    calls = {c.id: c for c in step.calls}
    actions = {a.call_id: a for a in step.actions}
    review_id = step.pending.review_id if step.pending is not None else None
    events = []
    for judgement in step.judgements:
        call = calls[judgement.call_id]
        action = actions.get(judgement.call_id)
        approved = judgement.auto_approved
        events.append(
            AuditEvent(
                at=now,
                kind="judged",
                thread_id=thread_id,
                review_id=review_id if action is not None else None,
                action_id=action.id if action is not None else None,
                tool=call.name,
                args=shown_call_args(call, toolset),
                actor="judge" if approved else None,
                decision="approve" if approved else None,
                detail=judgement.rationale,
                digest=call_key(call.name, validated_args(call, toolset), thread_id, key),
                judgement=judgement,
            )
        )
    return events


def watched_events(thread_id: str, step: Step, toolset: Toolset, now: datetime) -> list[AuditEvent]:
    """A ``shadow`` event per call shadow mode ran, then a ``candidate`` event per call.

    Both in call order, with the arguments as a reviewer sees them (secrets
    redacted); see :class:`~toolguard._core.audit.AuditEvent`.
    """
    calls = {c.id: c for c in step.calls}
    events = [
        AuditEvent(
            at=now,
            kind="shadow",
            thread_id=thread_id,
            tool=record.tool,
            args=shown_call_args(calls[record.call_id], toolset),
            detail=record.reason,
            would=record.would,
            judgement=record.judgement,
        )
        for record in step.shadowed
    ]
    events += [
        AuditEvent(
            at=now,
            kind="candidate",
            thread_id=thread_id,
            tool=verdict.tool,
            args=shown_call_args(calls[verdict.call_id], toolset),
            detail=verdict.reason,
            candidate=verdict,
        )
        for verdict in step.candidates
    ]
    return events


def validated_args(call: ToolCall, toolset: Toolset) -> dict[str, Any]:
    """The arguments of a judged ``call`` as its tool validates them (as the runner did).

    A call a judge saw was validated already; should its tool be gone or
    refuse them now, the arguments as proposed stand in.
    """
    tool = toolset.get(call.name)
    if tool is None:
        return dict(call.args)
    try:
        validated: dict[str, Any] = tool.validate_args(call.args)
    except Exception:  # the runner validated these already: only a fallback
        return dict(call.args)
    return validated
