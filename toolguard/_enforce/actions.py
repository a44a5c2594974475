"""Review requests: the ``Action`` shown for a call, and the checks before it runs.

An action binds a reviewer's decision to one call: its digest covers the
tool's name, the real arguments, the thread and the review. Before an
approved or edited call runs, :func:`unreviewed` proves it is still the call
the reviewer saw, and :func:`rule_refusal` asks the rules of this process
again.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from toolguard._core import telemetry
from toolguard._core.catalog import message
from toolguard._core.judgement import JUDGEMENT_SEPARATOR, Judgement
from toolguard._core.limits import Limits
from toolguard._core.records import (
    Action,
    PendingTurn,
    ToolCall,
    ToolResult,
    call_digest,
    new_id,
    trusted,
)
from toolguard._enforce.decide import decisions_for, unknown_tool_text
from toolguard._enforce.step import error_result
from toolguard._policy.decisions import check_allowed
from toolguard._policy.redact import REDACTED, SECRET_GONE, redact_args
from toolguard._policy.rules import denied_text, rule_for
from toolguard._tools.tool import Tool
from toolguard._tools.toolset import Toolset

TAMPERED = (
    "This call does not match the one the reviewer approved (its name or arguments changed"
    " after review). It was not executed."
)
EXPIRED_BEFORE_START = (
    "The review of this action expired before the approved call could start. It was not executed."
)


class RunnerSettings(Protocol):
    """What building and checking review requests reads from a :class:`~toolguard.Runner`."""

    @property
    def toolset(self) -> Toolset:
        """The tools, with their policies and the allow/ask/deny rules."""
        ...

    @property
    def clock(self) -> Callable[[], datetime]:
        """The time source for request times and deadlines."""
        ...

    @property
    def signing_key(self) -> bytes | None:
        """The secret of the digests (``None``: a plain SHA-256)."""
        ...

    @property
    def review_ttl(self) -> float | None:
        """Seconds a review stays open when the tool sets no ``ttl`` (``None``: no deadline)."""
        ...

    @property
    def limits(self) -> Limits:
        """How deep and large arguments and results may be."""
        ...


def review_action(
    runner: RunnerSettings,
    call: ToolCall,
    tool: Tool[Any, Any],
    thread_id: str,
    review_id: str,
    *,
    judgement: Judgement | None = None,
) -> Action:
    """The request asking a reviewer about ``call`` in review ``review_id`` of ``thread_id``.

    A judge's verdict, when one judged the call, is part of what the reviewer
    reads: its one-line summary follows the description.
    """
    now = runner.clock()
    ttl = tool.approval.ttl if tool.approval and tool.approval.ttl else runner.review_ttl
    description = tool.review_description() or message("action_description", name=call.name)
    if judgement is not None:
        description = f"{description}{JUDGEMENT_SEPARATOR}{judgement.summary()}"
    return trusted(
        Action,
        {
            "id": new_id(),
            "call_id": call.id,
            "name": call.name,
            # What the reviewer is shown: secret values replaced; the digest covers the real ones.
            "args": dict(tool.shown_args(call.args)),
            "description": description,
            "status": "requested",
            "decision": None,
            "result": None,
            "requested_at": now,
            "decided_at": None,
            "finished_at": None,
            "expires_at": now + timedelta(seconds=ttl) if ttl else None,
            "digest": call_digest(
                call.name, call.args, runner.signing_key, thread_id=thread_id, review_id=review_id
            ),
            "reviewer": None,
            # A tool without its own policy (asked by a rule or a judge): the usual decisions.
            "allowed_decisions": list(decisions_for(tool)),
            "approvals_required": tool.approvals,
            "approved_by": [],
            "judgement": judgement,
            # The caller's span, when the application traces: the call's span joins its trace.
            "trace_parent": telemetry.caller(),
        },
    )


def unreviewed(
    runner: RunnerSettings,
    action: Action,
    call: ToolCall,
    tool: Tool[Any, Any] | None,
    *,
    thread_id: str,
    review_id: str,
) -> ToolResult | None:
    """The error result when ``call`` is not the call ``action`` showed, else ``None``.

    The digest covers the real arguments; the shown ones must be the real
    ones with the secrets replaced. A call whose secret values were replaced
    by ``REDACTED`` in storage (kept in memory only, and gone) fails with
    ``SECRET_GONE``: it never runs with the placeholder.
    """
    expected = call_digest(
        action.name, call.args, runner.signing_key, thread_id=thread_id, review_id=review_id
    )
    redacted = tool.redacted if tool is not None else frozenset()
    shown = redact_args(call.args, redacted)
    if hmac.compare_digest(action.digest, expected) and (
        shown == action.args and call.name == action.name
    ):
        return None
    if redacted and any(call.args.get(n) == REDACTED for n in redacted):
        return error_result(call, SECRET_GONE, "failed")
    # The stored request no longer matches what the reviewer was shown.
    return error_result(call, TAMPERED, "tampered")


def rule_refusal(toolset: Toolset, call: ToolCall) -> ToolResult | None:
    """The error result when a ``deny`` rule of ``toolset`` matches ``call``, else ``None``."""
    rule = rule_for(toolset.rules, call.name, call.args)
    if rule is not None and rule.effect == "deny":
        return error_result(call, denied_text(call.name, rule), "denied")
    return None


def unknown_tool_result(toolset: Toolset, call: ToolCall, name: str) -> ToolResult:
    """The error result of ``call`` naming a tool ``toolset`` does not have."""
    return error_result(call, unknown_tool_text(toolset, name), "unknown_tool", name)


def allowed_decisions(toolset: Toolset, action: Action) -> tuple[str, ...]:
    """The decision types ``action`` may get: shown to the reviewer AND allowed by the tool.

    The stored list is what the payload showed; the tool's policy (code, not
    the store) must allow the type too, so a rewritten store cannot widen
    what a reviewer may do.
    """
    tool = toolset.get(action.name)
    if tool is None or tool.approval is None:
        return tuple(action.allowed_decisions)
    policy = tool.approval.allowed_decisions
    return tuple(kind for kind in action.allowed_decisions if kind in policy)


def check_decisions_allowed(
    toolset: Toolset, pending: PendingTurn, decisions: Sequence[Any]
) -> None:
    """Refuse decisions (models, in order) their waiting action does not allow.

    Raises:
        InvalidReviewDecisionError: with the catalog text naming the decision,
            the action and what it allows; nothing has run.
    """
    waiting = [a for a in pending.actions if a.status == "requested"]
    for action, decision in zip(waiting, decisions, strict=False):
        check_allowed(decision.type, (action.name, allowed_decisions(toolset, action)))
