"""toolguard: put a human between an LLM agent and its dangerous tools.

Guard tools with :func:`requires_approval` (or a whole registry with
:func:`guard`); a guarded call does not run but raises
:class:`ApprovalRequiredError` with a ``pending_review`` payload in
LangChain's human-in-the-loop format. A person answers with decisions
(approve / edit / reject), :func:`validate_decisions` checks them and
:class:`Runner` resumes the turn, giving the model one honest result per
tool call.

:class:`ReviewedChat` runs whole conversations over a store;
``ReviewedChatUseCase`` is another name for the same class.

Every error toolguard raises derives from :class:`ToolguardError` and is
importable from here. The less common parts live in public modules:

- :mod:`toolguard.records`: the parts of a review payload and of a thread's
  state (``Action``, ``AuditEvent``, ``StandingGrant``...), their literal
  types, and ``parse_tool_call``;
- :mod:`toolguard.text`: the language of toolguard's texts, the result texts
  a model reads, and reviews rendered as plain text;
- :mod:`toolguard.classify`: the classifier's ``Classification``,
  ``READ_VERBS`` and ``split_words``;
- :mod:`toolguard.hooks`: the types of the hooks you pass to a ``Runner`` or
  a ``ReviewedChat``.
"""

from __future__ import annotations

from toolguard._chat.chat import BlockingChat, ReviewedChat, ReviewedChatUseCase
from toolguard._chat.turns import ChatTurn
from toolguard._core.errors import (
    AccessDeniedError,
    ActionRejectedError,
    AlreadyResumedError,
    ApprovalRequiredError,
    CallDeniedError,
    ConcurrentUpdateError,
    CorruptThreadError,
    InvalidReviewDecisionError,
    ModelError,
    NoPendingReviewError,
    QuorumReviewerError,
    ReviewerNotAllowedError,
    ReviewExpiredError,
    ReviewPendingError,
    ReviewStateError,
    RuleSyntaxError,
    SchemaVersionError,
    StaleReviewError,
    StepLimitError,
    ThreadBusyError,
    ToolguardError,
    UnknownGrantError,
    UnknownReviewError,
    UnknownThreadError,
    UnsupportedPolicyError,
)
from toolguard._core.limits import Limits
from toolguard._core.llm import ChatModel, Message, ModelResponse, ScriptedModel
from toolguard._core.records import (
    ALLOWED_DECISIONS,
    NO_DECISION,
    REJECTED_BY_USER_MESSAGE,
    ApproveDecision,
    Decision,
    EditDecision,
    EditedAction,
    PendingReview,
    PendingTurn,
    RejectDecision,
    RespondDecision,
    ToolCall,
    ToolResult,
)
from toolguard._enforce.judge import Judge
from toolguard._enforce.runner import Runner
from toolguard._enforce.shadow import Candidate
from toolguard._enforce.step import Step
from toolguard._policy.allow_once import allow_once
from toolguard._policy.decisions import validate_decisions
from toolguard._policy.redact import REDACTED
from toolguard._policy.rules import Rules
from toolguard._stores.memory import MemoryStore
from toolguard._stores.outbox import Webhook
from toolguard._stores.protocol import Store, ThreadState
from toolguard._stores.sqlite import SQLiteStore
from toolguard._tools.approval import ApprovalPolicy
from toolguard._tools.classify import DEFAULT_VERBS, SEED_VERBS, Classifier
from toolguard._tools.guard import requires_approval
from toolguard._tools.tool import Tool, tool
from toolguard._tools.toolset import Toolset, guard
from toolguard._version import __version__

__all__ = [
    "ALLOWED_DECISIONS",
    "DEFAULT_VERBS",
    "NO_DECISION",
    "REDACTED",
    "REJECTED_BY_USER_MESSAGE",
    "SEED_VERBS",
    "AccessDeniedError",
    "ActionRejectedError",
    "AlreadyResumedError",
    "ApprovalPolicy",
    "ApprovalRequiredError",
    "ApproveDecision",
    "BlockingChat",
    "CallDeniedError",
    "Candidate",
    "ChatModel",
    "ChatTurn",
    "Classifier",
    "ConcurrentUpdateError",
    "CorruptThreadError",
    "Decision",
    "EditDecision",
    "EditedAction",
    "InvalidReviewDecisionError",
    "Judge",
    "Limits",
    "MemoryStore",
    "Message",
    "ModelError",
    "ModelResponse",
    "NoPendingReviewError",
    "PendingReview",
    "PendingTurn",
    "QuorumReviewerError",
    "RejectDecision",
    "RespondDecision",
    "ReviewExpiredError",
    "ReviewPendingError",
    "ReviewStateError",
    "ReviewedChat",
    "ReviewedChatUseCase",
    "ReviewerNotAllowedError",
    "RuleSyntaxError",
    "Rules",
    "Runner",
    "SQLiteStore",
    "SchemaVersionError",
    "ScriptedModel",
    "StaleReviewError",
    "Step",
    "StepLimitError",
    "Store",
    "ThreadBusyError",
    "ThreadState",
    "Tool",
    "ToolCall",
    "ToolResult",
    "ToolguardError",
    "Toolset",
    "UnknownGrantError",
    "UnknownReviewError",
    "UnknownThreadError",
    "UnsupportedPolicyError",
    "Webhook",
    "__version__",
    "allow_once",
    "guard",
    "requires_approval",
    "tool",
    "validate_decisions",
]
