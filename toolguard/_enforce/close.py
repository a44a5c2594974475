"""Ending a paused turn without running it: closed (expired, cancelled) or interrupted.

These build the final :class:`~toolguard._enforce.step.Step` of the turn and
record nothing; :meth:`Runner.close <toolguard.Runner.close>` and
:meth:`Runner.interrupted <toolguard.Runner.interrupted>` also mark the turn
finished (once only).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from toolguard._core.errors import NoPendingReviewError
from toolguard._core.records import (
    NO_DECISION,
    REJECTED_BY_USER_MESSAGE,
    Action,
    PendingTurn,
    RejectDecision,
    RespondDecision,
    ResultOutcome,
    ToolCall,
    ToolResult,
)
from toolguard._enforce import quorum
from toolguard._enforce.actions import EXPIRED_BEFORE_START
from toolguard._enforce.step import Step, error_result
from toolguard._policy.decisions import parse_decision

EXPIRED = "The review of this action expired before anyone decided. It was not executed."
CANCELLED = "The review of this action was cancelled. It was not executed."
INTERRUPTED = (
    "The process stopped while this approved tool was running, so its outcome is unknown."
    " It was not run again."
)
CloseOutcome = Literal["expired", "cancelled"]


def close_turn(
    pending: PendingTurn, outcome: CloseOutcome, reason: str | None, now: datetime
) -> Step:
    """The step ending ``pending`` as ``outcome`` (see :meth:`Runner.close`); records nothing."""
    waiting = [a for a in pending.actions if a.status == "requested"]
    if not waiting:
        raise NoPendingReviewError
    text = EXPIRED if outcome == "expired" else CANCELLED
    if outcome == "cancelled" and reason:
        text = f"The review of this action was cancelled: {reason}. It was not executed."
    results = {r.call_id: r for r in pending.results}
    calls = {c.id: c for c in pending.calls}
    closed: list[Action] = []
    for action in waiting:
        result = error_result(calls[action.call_id], text, outcome)
        results[result.call_id] = result
        closed.append(
            action.model_copy(update={"status": outcome, "result": result, "finished_at": now})
        )
    for action in quorum.held_actions(pending):
        # Settled while a quorum waited: a reject keeps its result, an approval never runs.
        ended = _held_end(action, calls[action.call_id], text, outcome)
        results[ended.call_id] = ended
        status = outcome if ended.outcome == outcome else action.status
        closed.append(
            action.model_copy(update={"status": status, "result": ended, "finished_at": now})
        )
    return Step(
        calls=list(pending.calls),
        results=[results[c.id] for c in pending.calls],
        replaced_calls=list(pending.replaced_calls),
        actions=closed,
    )


def _held_end(action: Action, call: ToolCall, text: str, outcome: ResultOutcome) -> ToolResult:
    """The result of an action settled while a quorum waited, when the turn closes unrun."""
    decision = action.decision
    if isinstance(decision, RejectDecision):
        return error_result(call, decision.message or REJECTED_BY_USER_MESSAGE, "rejected")
    if isinstance(decision, RespondDecision):
        return ToolResult(
            call_id=call.id,
            name=call.name,
            status="success",
            content=decision.message,
            outcome="responded",
        )
    if decision is None:
        return error_result(call, NO_DECISION, "no_decision")
    return error_result(call, EXPIRED_BEFORE_START if outcome == "expired" else text, outcome)


def interrupted_turn(pending: PendingTurn, decisions: Sequence[Any], now: datetime) -> Step:
    """The step finishing an interrupted turn (see :meth:`Runner.interrupted`); records nothing."""
    waiting = [a for a in pending.actions if a.status == "requested"]
    parsed = [parse_decision(d) for d in list(decisions)[: len(waiting)]]
    results = {r.call_id: r for r in pending.results}
    calls = {c.id: c for c in pending.calls}
    ended: list[Action] = []
    pairs: list[tuple[Action, Any]] = [
        (action, parsed[i] if i < len(parsed) else None) for i, action in enumerate(waiting)
    ]
    pairs += [(a, a.decision) for a in quorum.held_actions(pending)]  # settled before the quorum
    for action, decision in pairs:
        call = calls[action.call_id]
        status: Any
        if decision is None:
            result, status = error_result(call, NO_DECISION, "no_decision"), "rejected"
        elif isinstance(decision, RejectDecision):
            reason = decision.message or REJECTED_BY_USER_MESSAGE
            result, status = error_result(call, reason, "rejected"), "rejected"
        elif isinstance(decision, RespondDecision):
            result = ToolResult(
                call_id=call.id,
                name=call.name,
                status="success",
                content=decision.message,
                outcome="responded",
            )
            status = "responded"
        else:
            result, status = error_result(call, INTERRUPTED, "interrupted"), "failed"
        results[result.call_id] = result
        ended.append(
            action.model_copy(
                update={
                    "status": status,
                    "decision": decision,
                    "result": result,
                    "decided_at": action.decided_at or now,
                    "finished_at": now,
                }
            )
        )
    return Step(
        calls=list(pending.calls),
        results=[results[c.id] for c in pending.calls],
        replaced_calls=list(pending.replaced_calls),
        actions=ended,
    )
