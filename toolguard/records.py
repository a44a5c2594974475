"""The records inside a review payload and a thread's state, and the literal types of their fields.

The records you handle most (``PendingReview``, the decisions, ``ToolCall``,
``ToolResult``, ``ThreadState``...) are importable from ``toolguard`` itself.
This module holds their parts:

- the two halves of a review payload: :class:`ActionRequest` (one tool call
  that waits) and :class:`ReviewConfig` (how it may be reviewed), with
  :class:`QuorumProgress` when several reviewers must approve;
- a thread's history: :class:`Action` (one approval request and its
  lifecycle, ``ActionStatus``), :class:`AuditEvent` (one entry of the audit
  trail, ``AuditKind``), :class:`StandingGrant` and the :class:`GrantTerms` a
  reviewer grants with an approve; ``ThreadStatus``, ``ResultOutcome``;
- the decision types: ``DecisionType`` and ``DECISION_TYPES`` (every type a
  tool may allow, ``respond`` included);
- what ``Rules.decide`` and ``Rules.explain`` answer: :class:`RuleDecision`,
  naming the :class:`Rule` that decided;
- what shadow mode and a candidate policy record: :class:`Shadowed` (a
  call that ran at once, ``would`` ask or deny) and :class:`CandidateVerdict`;
- :func:`parse_tool_call`, which reads one tool call in any common shape (an
  OpenAI tool call, a flat ``{"id", "name", "args"}`` dict) into a
  :class:`~toolguard.ToolCall`.
"""

from __future__ import annotations

from toolguard._core.audit import AuditEvent, AuditKind
from toolguard._core.judgement import Judgement, JudgeOutcome, Risk
from toolguard._core.records import (
    DECISION_TYPES,
    Action,
    ActionRequest,
    ActionStatus,
    DecisionType,
    QuorumProgress,
    ResultOutcome,
    ReviewConfig,
)
from toolguard._core.shadowing import CandidateVerdict, Shadowed
from toolguard._core.standing import GrantTerms, StandingGrant
from toolguard._enforce.calls import parse_tool_call
from toolguard._policy.rules import Rule, RuleDecision
from toolguard._stores.protocol import ThreadStatus

__all__ = [
    "DECISION_TYPES",
    "Action",
    "ActionRequest",
    "ActionStatus",
    "AuditEvent",
    "AuditKind",
    "CandidateVerdict",
    "DecisionType",
    "GrantTerms",
    "JudgeOutcome",
    "Judgement",
    "QuorumProgress",
    "ResultOutcome",
    "ReviewConfig",
    "Risk",
    "Rule",
    "RuleDecision",
    "Shadowed",
    "StandingGrant",
    "ThreadStatus",
    "parse_tool_call",
]
