"""Errors raised by toolguard.

Every error derives from :class:`ToolguardError`; leaves also derive from the
builtin they resemble, so existing ``except`` clauses keep working::

    ToolguardError
    ├── ApprovalRequiredError           a guarded tool was called without approval
    ├── ActionRejectedError             (testing helpers) a reviewer rejected a direct call
    ├── InvalidReviewDecisionError      ValueError: decisions do not answer the review
    │   └── QuorumReviewerError         this reviewer cannot count toward the quorum
    ├── NoPendingReviewError            LookupError: nothing awaits a decision
    │   ├── StaleReviewError            the decisions answer a review that is no longer current
    │   │   └── UnknownReviewError      the review was never one of this thread's
    │   └── ReviewExpiredError          the review passed its deadline; nothing ran
    ├── ReviewerNotAllowedError         PermissionError: this reviewer may not decide here
    ├── AccessDeniedError               PermissionError: the access hook refused a read or message
    ├── ReviewPendingError              RuntimeError: decisions are still awaited
    ├── AlreadyResumedError             RuntimeError: a paused turn was already resumed or closed
    ├── ThreadBusyError                 RuntimeError: decisions are being applied right now
    ├── UnknownThreadError              LookupError: no conversation with that id
    ├── UnknownGrantError               LookupError: no active standing grant with that id
    ├── ReviewStateError                TypeError: a framework run cannot keep a review's state
    ├── UnsupportedPolicyError          TypeError: a framework integration cannot apply this setting
    ├── StepLimitError                  RuntimeError: the agent loop did not finish
    ├── ModelError                      RuntimeError: the model call failed
    ├── CallDeniedError                 PermissionError: a deny rule refused a direct call
    ├── RuleSyntaxError                 ValueError: a rule pattern cannot be read
    ├── ConcurrentUpdateError           RuntimeError: the thread was saved by someone else
    ├── CorruptThreadError              ValueError: a stored thread cannot be read back
    └── SchemaVersionError              RuntimeError: a database written by a newer toolguard

All errors pickle with their payloads, since a paused run may be resumed in
another process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolguard._core.catalog import message

if TYPE_CHECKING:
    from toolguard._core.records import PendingReview, ToolCall


class ToolguardError(Exception):
    """Root of every error raised by toolguard."""


class ApprovalRequiredError(ToolguardError):
    """A guarded tool was called, and the call needs a human's approval first.

    The tool's body did not run. ``pending_review`` is the review payload for
    this one call, in LangChain's human-in-the-loop format; ``call`` holds the
    tool name and the JSON-ready arguments (with a fresh ``id``) so that a
    loop can show it to a person and, once approved, run exactly that call
    with :func:`toolguard.allow_once`.
    """

    def __init__(self, *, pending_review: PendingReview, call: ToolCall) -> None:
        self.pending_review = pending_review
        self.call = call
        super().__init__(pending_review.action_requests[0].description)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_approval_required, (self.pending_review, self.call))


def _rebuild_approval_required(
    pending_review: PendingReview, call: ToolCall
) -> ApprovalRequiredError:
    return ApprovalRequiredError(pending_review=pending_review, call=call)


class ActionRejectedError(ToolguardError):
    """A reviewer (see :mod:`toolguard.testing`) rejected a direct call of a guarded tool."""

    def __init__(self, reason: str, *, tool_name: str) -> None:
        self.reason = reason
        self.tool_name = tool_name
        super().__init__(reason)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_rejected, (self.reason, self.tool_name))


def _rebuild_rejected(reason: str, tool_name: str) -> ActionRejectedError:
    return ActionRejectedError(reason, tool_name=tool_name)


class CallDeniedError(ToolguardError, PermissionError):
    """A deny rule refuses a direct call of a tool taken from a toolset; nothing ran.

    The text is the one a model reads for the same call on every other path.

    Attributes:
        tool_name: the tool called.
        rule: the rule that refused it, as written (``deny send_email(to="*@evil.example")``).
    """

    def __init__(self, text: str, *, tool_name: str, rule: str) -> None:
        self.tool_name = tool_name
        self.rule = rule
        super().__init__(text)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_denied, (str(self), self.tool_name, self.rule))


def _rebuild_denied(text: str, tool_name: str, rule: str) -> CallDeniedError:
    return CallDeniedError(text, tool_name=tool_name, rule=rule)


class InvalidReviewDecisionError(ToolguardError, ValueError):
    """The decisions do not answer the pending review (wrong count, type or shape).

    Nothing changed: the actions are still pending and correct decisions can
    be sent afterwards. Over HTTP this is a 400 with the text in ``detail``.
    """


class QuorumReviewerError(InvalidReviewDecisionError):
    """A reviewer cannot count toward an action's quorum (``requires_approval(approvals=N)``).

    Raised for an anonymous reviewer (``None``) approving or editing a quorum
    action, and for a reviewer who already approved it (ids compared after
    case folding and whitespace clean-up, see docs/policies.md). Nothing
    changed; over HTTP this is a 400 with the text in ``detail``.

    Attributes:
        reviewer: the reviewer as given (``None`` when anonymous).
        action_name: the tool of the action.
        required: how many approvals it needs.
    """

    def __init__(
        self, reviewer: str | None, action_name: str, required: int, given: list[str]
    ) -> None:
        self.reviewer = reviewer
        self.action_name = action_name
        self.required = required
        if reviewer is None:
            text = message("quorum_anonymous", name=action_name, required=required)
        else:
            text = message(
                "quorum_same_reviewer",
                reviewer=reviewer,
                name=action_name,
                given=len(given),
                required=required,
            )
        super().__init__(text)


class NoPendingReviewError(ToolguardError, LookupError):
    """Decisions were sent, but no action in that conversation awaits one."""

    def __init__(self, text: str | None = None) -> None:
        super().__init__(text if text is not None else message("no_pending_review"))


class StaleReviewError(NoPendingReviewError):
    """The decisions name a review that is no longer the thread's current one.

    A decision answers exactly one review: an approval meant for an earlier
    request never approves a newer one. Nothing changed. When that review
    was cancelled (by a reviewer, or because the MCP client gave up on the
    call), ``cancelled`` is true and the text says so.
    """

    def __init__(self, review_id: str, current: str | None, *, cancelled: bool = False) -> None:
        self.review_id = review_id
        self.current = current
        self.cancelled = cancelled
        key = "review_cancelled" if cancelled else "stale_review"
        super().__init__(message(key, review_id=review_id))

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_stale, (type(self), self.review_id, self.current, self.cancelled))


def _rebuild_stale(
    kind: type[StaleReviewError],
    review_id: str,
    current: str | None,
    cancelled: bool,  # noqa: FBT001
) -> StaleReviewError:
    if kind is StaleReviewError:
        return StaleReviewError(review_id, current, cancelled=cancelled)
    return kind(review_id, current)


class UnknownReviewError(StaleReviewError):
    """The decisions name a review id this thread never had (a typo, another thread's id).

    A subclass of :class:`StaleReviewError`, so code catching that still
    catches it; only the text differs. Nothing changed. Over HTTP a 400.
    """

    def __init__(self, review_id: str, current: str | None) -> None:
        super().__init__(review_id, current)
        self.args = (message("unknown_review", review_id=review_id),)


class ReviewExpiredError(NoPendingReviewError):
    """The review passed its deadline: its actions are ``expired`` and never run.

    The model is told that the actions expired, and the thread can go on
    with a new message. For a guarded function called directly, an
    ``allow_once`` that comes after the tool's ``ttl`` raises it too (its
    ``review_id`` is the id of the call that asked).
    """

    def __init__(self, review_id: str, *, text: str | None = None) -> None:
        self.review_id = review_id
        super().__init__(text or message("review_expired", review_id=review_id))

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_expired, (self.review_id, str(self)))


def _rebuild_expired(review_id: str, text: str) -> ReviewExpiredError:
    return ReviewExpiredError(review_id, text=text)


class ReviewerNotAllowedError(ToolguardError, PermissionError):
    """The authorization hook refused this reviewer for this thread; nothing changed.

    The refusal is recorded in the thread's audit trail. Over HTTP this is a 403.
    """

    def __init__(self, reviewer: str | None, thread_id: str) -> None:
        self.reviewer = reviewer
        self.thread_id = thread_id
        super().__init__(message("reviewer_refused", reviewer=reviewer, thread_id=thread_id))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.reviewer, self.thread_id))


class AccessDeniedError(ToolguardError, PermissionError):
    """The chat's ``access`` hook refused this actor an operation on a thread; nothing changed.

    ``operation`` is ``"read"`` (:meth:`~toolguard.ReviewedChat.get_thread`),
    ``"audit"`` (:meth:`~toolguard.ReviewedChat.audit_trail`) or ``"message"``
    (:meth:`~toolguard.ReviewedChat.send_message` to an existing thread). The
    refusal is recorded in the thread's audit trail. Over HTTP this is a 403.
    """

    def __init__(self, actor: str | None, thread_id: str, operation: str) -> None:
        self.actor = actor
        self.thread_id = thread_id
        self.operation = operation
        super().__init__(
            message("access_denied", actor=actor, thread_id=thread_id, operation=operation)
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.actor, self.thread_id, self.operation))


class ThreadBusyError(ToolguardError, RuntimeError):
    """Decisions are being applied in this thread right now (or the process doing it died).

    Wait and retry; after a crash, :meth:`~toolguard.ReviewedChat.recover`
    finishes the thread without running anything twice.
    """

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(message("thread_busy", thread_id=thread_id))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.thread_id,))


class ReviewPendingError(ToolguardError, RuntimeError):
    """A new user message arrived while actions still await decisions."""

    def __init__(self, text: str | None = None) -> None:
        super().__init__(text if text is not None else message("review_pending"))


class AlreadyResumedError(ToolguardError, RuntimeError):
    """This paused turn was already resumed (or closed): its tools are not run again.

    Raised by :meth:`~toolguard.Runner.resume` and :meth:`~toolguard.Runner.close`
    for a ``PendingTurn`` whose ``review_id`` this process already resumed or
    closed, and by ``resume`` when the runner's ``claims`` store says another
    process claimed it. Nothing ran.
    """

    def __init__(self, review_id: str) -> None:
        self.review_id = review_id
        super().__init__(message("already_resumed", review_id=review_id))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.review_id,))


class UnknownThreadError(ToolguardError, LookupError):
    """No conversation is stored under that thread id."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(message("unknown_thread", thread_id=thread_id))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.thread_id,))

    def __str__(self) -> str:
        # LookupError subclasses like KeyError quote their text; keep it readable.
        return str(self.args[0])


class UnknownGrantError(ToolguardError, LookupError):
    """No active standing grant has that id in that thread; nothing changed.

    ``status`` is ``None`` when the thread never had the grant, else why it
    is no longer active: ``"revoked"`` (so revoking twice names it),
    ``"used_up"`` or ``"expired"``. Over HTTP a 404.
    """

    def __init__(self, grant_id: str, thread_id: str, status: str | None = None) -> None:
        self.grant_id = grant_id
        self.thread_id = thread_id
        self.status = status
        if status is None:
            text = message("unknown_grant", grant_id=grant_id, thread_id=thread_id)
        else:
            text = message("grant_ended", grant_id=grant_id, thread_id=thread_id, status=status)
        super().__init__(text)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.grant_id, self.thread_id, self.status))

    def __str__(self) -> str:
        return str(self.args[0])


class ReviewStateError(ToolguardError, TypeError):
    """A framework run has nowhere to keep what a review needs between calls.

    Raised by the framework integrations when a quorum's votes or a
    once-only claim must be kept in the framework's run state and that state
    cannot hold them (e.g. an Agents SDK run whose context is not a dict).
    Nothing ran; the text says what to pass instead, or to use
    :class:`~toolguard.Runner` or :class:`~toolguard.ReviewedChat`, which keep
    them in toolguard's own paused turn.
    """


class UnsupportedPolicyError(ToolguardError, TypeError):
    """A framework integration was given a policy or setting its framework cannot apply.

    Raised when the integration is built (``toolset``, ``function_tools``,
    ``tools``, ``middleware``), never later: a judge (a
    :class:`~toolguard.Runner`, a :class:`~toolguard.ReviewedChat` or a
    :class:`~toolguard.Judge` given instead of tools), or rules, a classifier
    or policies given where the integration would not apply them. Nothing is
    dropped silently; the text names what to use instead.
    """


class StepLimitError(ToolguardError, RuntimeError):
    """The agent loop hit its step limit before the model answered with text."""


class ModelError(ToolguardError, RuntimeError):
    """The model could not be called or gave an unusable answer; the thread is unchanged."""


class RuleSyntaxError(ToolguardError, ValueError):
    """A rule pattern that cannot be read; the text says where and how to write it."""


class ConcurrentUpdateError(ToolguardError, RuntimeError):
    """Somebody else saved the thread since it was read (compare-and-set failed)."""


class CorruptThreadError(ToolguardError, ValueError):
    """A stored thread cannot be read back (its row was damaged or written by other code).

    Raised by a store's ``load`` — and so by every method of
    :class:`~toolguard.ReviewedChat` that loads that thread — instead of a
    parser's error. The row is left as it is, for repair. Operations over
    every stored thread (``ReviewedChat.export_audit()`` without ids,
    ``ReviewedChat.running_threads()``) skip such a thread and log a warning
    on the ``toolguard`` logger; the other threads are unaffected. Over HTTP
    this is a 500 with the text in ``detail``.

    Attributes:
        thread_id: the thread's id.
        reason: what the parser said (at most 200 characters).
    """

    def __init__(self, thread_id: str, reason: str) -> None:
        self.thread_id = thread_id
        self.reason = reason
        super().__init__(
            f"Thread {thread_id!r} is stored but cannot be read back ({reason})."
            " Its stored row was left unchanged: repair or remove it in the store."
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.thread_id, self.reason))


class SchemaVersionError(ToolguardError, RuntimeError):
    """The database was written by a newer toolguard (its schema version is unknown)."""
