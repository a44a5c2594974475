"""toolguard: put a human between an LLM agent and its dangerous tools.

Guard tools with :func:`requires_approval` (or a whole registry with
:func:`guard`); a guarded call does not run but raises
:class:`ApprovalRequiredError` with a ``pending_review`` payload in
LangChain's human-in-the-loop format. A person answers with decisions
(approve / edit / reject), :func:`validate_decisions` checks them and
:class:`Runner` resumes the turn, giving the model one honest result per
tool call.
"""

from __future__ import annotations

from toolguard._chat.chat import (
    AccessHook,
    AccessOperation,
    Authorizer,
    BlockingChat,
    ChatTurn,
    ReviewedChat,
    ReviewedChatUseCase,
)
from toolguard._core.audit import AuditEvent, AuditKind
from toolguard._core.catalog import get_language, set_language
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
)
from toolguard._core.limits import Limits
from toolguard._core.llm import ChatModel, Message, ModelResponse, ScriptedModel
from toolguard._core.records import (
    ALLOWED_DECISIONS,
    DECISION_TYPES,
    NO_DECISION,
    REJECTED_BY_USER_MESSAGE,
    Action,
    ActionRequest,
    ActionStatus,
    ApproveDecision,
    Decision,
    DecisionType,
    EditDecision,
    EditedAction,
    PendingReview,
    PendingTurn,
    QuorumProgress,
    RejectDecision,
    RespondDecision,
    ResultOutcome,
    ReviewConfig,
    ToolCall,
    ToolResult,
)
from toolguard._core.results import ResultTemplates
from toolguard._core.standing import GrantTerms, StandingGrant
from toolguard._core.transcript import (
    describe_decision,
    describe_request,
    describe_result,
    render_action,
    render_history,
)
from toolguard._enforce.runner import Claims, EditPolicy, Runner, Step, parse_tool_call
from toolguard._policy.allow_once import allow_once
from toolguard._policy.decisions import validate_decisions
from toolguard._policy.redact import REDACTED
from toolguard._policy.rules import Rule, RuleDecision, Rules
from toolguard._stores.memory import MemoryStore, Store, ThreadState, ThreadStatus
from toolguard._stores.outbox import Webhook
from toolguard._stores.sqlite import SQLiteStore
from toolguard._tools.classify import (
    DEFAULT_VERBS,
    READ_VERBS,
    SEED_VERBS,
    Classification,
    Classifier,
    split_words,
)
from toolguard._tools.tool import ApprovalPolicy, Tool, requires_approval, tool
from toolguard._tools.toolset import Toolset, guard
from toolguard._version import __version__

__all__ = [
    "ALLOWED_DECISIONS",
    "DECISION_TYPES",
    "DEFAULT_VERBS",
    "NO_DECISION",
    "READ_VERBS",
    "REDACTED",
    "REJECTED_BY_USER_MESSAGE",
    "SEED_VERBS",
    "AccessDeniedError",
    "AccessHook",
    "AccessOperation",
    "Action",
    "ActionRejectedError",
    "ActionRequest",
    "ActionStatus",
    "AlreadyResumedError",
    "ApprovalPolicy",
    "ApprovalRequiredError",
    "ApproveDecision",
    "AuditEvent",
    "AuditKind",
    "Authorizer",
    "BlockingChat",
    "CallDeniedError",
    "ChatModel",
    "ChatTurn",
    "Claims",
    "Classification",
    "Classifier",
    "ConcurrentUpdateError",
    "CorruptThreadError",
    "Decision",
    "DecisionType",
    "EditDecision",
    "EditPolicy",
    "EditedAction",
    "GrantTerms",
    "InvalidReviewDecisionError",
    "Limits",
    "MemoryStore",
    "Message",
    "ModelError",
    "ModelResponse",
    "NoPendingReviewError",
    "PendingReview",
    "PendingTurn",
    "QuorumProgress",
    "QuorumReviewerError",
    "RejectDecision",
    "RespondDecision",
    "ResultOutcome",
    "ResultTemplates",
    "ReviewConfig",
    "ReviewExpiredError",
    "ReviewPendingError",
    "ReviewStateError",
    "ReviewedChat",
    "ReviewedChatUseCase",
    "ReviewerNotAllowedError",
    "Rule",
    "RuleDecision",
    "RuleSyntaxError",
    "Rules",
    "Runner",
    "SQLiteStore",
    "SchemaVersionError",
    "ScriptedModel",
    "StaleReviewError",
    "StandingGrant",
    "Step",
    "StepLimitError",
    "Store",
    "ThreadBusyError",
    "ThreadState",
    "ThreadStatus",
    "Tool",
    "ToolCall",
    "ToolResult",
    "ToolguardError",
    "Toolset",
    "UnknownGrantError",
    "UnknownReviewError",
    "UnknownThreadError",
    "Webhook",
    "__version__",
    "allow_once",
    "describe_decision",
    "describe_request",
    "describe_result",
    "get_language",
    "guard",
    "parse_tool_call",
    "render_action",
    "render_history",
    "requires_approval",
    "set_language",
    "split_words",
    "tool",
    "validate_decisions",
]
