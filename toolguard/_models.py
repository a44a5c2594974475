"""Wire shapes (pydantic models) and the records of a paused turn.

The review payload and the decisions follow LangChain's human-in-the-loop
format exactly, so ``PendingReview.model_dump()`` is the ``pending_review``
dict of the specification and a decision list from a LangChain front end
works unchanged.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from datetime import datetime, timezone
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolguard._messages import message

DecisionType = Literal["approve", "edit", "reject"]

ALLOWED_DECISIONS: Final[tuple[DecisionType, ...]] = ("approve", "edit", "reject")
"""The decisions a reviewer may take on every action, in this order."""

REJECTED_BY_USER_MESSAGE: Final = "User rejected this action. It was not executed."
"""What the model reads when an action is rejected without a reason."""

NO_DECISION: Final = "No decision was given for this action. It was not executed."
"""What the model reads for an action left without a decision (lenient resume only)."""


def new_id() -> str:
    """A fresh random identifier (32 hex characters, 128 random bits)."""
    return os.urandom(16).hex()


def utcnow() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(timezone.utc)


def call_digest(name: str, args: dict[str, Any], key: bytes | None = None) -> str:
    """SHA-256 (hex) of a call's name and canonical JSON arguments; HMAC-SHA-256 with ``key``."""
    canonical = json.dumps(
        {"name": name, "args": args}, ensure_ascii=False, sort_keys=True, separators=(",", ":")
    ).encode()
    if key is not None:
        return hmac.new(key, canonical, hashlib.sha256).hexdigest()
    return hashlib.sha256(canonical).hexdigest()


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


# --------------------------------------------------------------------------- payload


class ActionRequest(_Wire):
    """One tool call that waits for a human decision."""

    name: str
    """The tool's name."""
    args: dict[str, Any]
    """The arguments the model proposed, as JSON data."""
    description: str
    """Fixed text: ``Tool `NAME` is awaiting approval`` (or the tool's own override)."""


class ReviewConfig(_Wire):
    """How one action may be reviewed."""

    action_name: str
    """The tool's name, equal to the ``name`` of the matching action request."""
    allowed_decisions: list[DecisionType] = Field(default_factory=lambda: list(ALLOWED_DECISIONS))
    """Always ``["approve", "edit", "reject"]``."""


class PendingReview(_Wire):
    """The ``pending_review`` payload: the actions of one model turn that need approval.

    ``action_requests`` and ``review_configs`` are parallel lists in the order
    of the tool calls in the model's message.
    """

    action_requests: list[ActionRequest]
    """One item per tool call that needs approval."""
    review_configs: list[ReviewConfig]
    """One item per action, same order."""

    @classmethod
    def for_actions(cls, actions: list[tuple[str, dict[str, Any], str | None]]) -> PendingReview:
        """Build the payload from ``(name, json_args, description_override)`` triples."""
        return cls(
            action_requests=[
                ActionRequest(
                    name=name,
                    args=args,
                    description=description or message("action_description", name=name),
                )
                for name, args, description in actions
            ],
            review_configs=[ReviewConfig(action_name=name) for name, _, _ in actions],
        )


# --------------------------------------------------------------------------- decisions


class EditedAction(_Wire):
    """The call to run instead of the proposed one."""

    name: str
    """Tool to run; usually the original tool."""
    args: dict[str, Any]
    """ALL the arguments after the edit, not a diff."""


class ApproveDecision(_Wire):
    """Run the tool with the name and arguments the model proposed."""

    type: Literal["approve"] = "approve"
    """Always ``"approve"``."""


class EditDecision(_Wire):
    """Run ``edited_action`` instead; the model's tool call is replaced by it."""

    type: Literal["edit"] = "edit"
    """Always ``"edit"``."""
    edited_action: EditedAction
    """The replacement call."""


class RejectDecision(_Wire):
    """Do not run the tool; the model reads the reason as an error tool result."""

    type: Literal["reject"] = "reject"
    """Always ``"reject"``."""
    message: str | None = None
    """Why; missing or empty means ``REJECTED_BY_USER_MESSAGE``."""


Decision = Annotated[ApproveDecision | EditDecision | RejectDecision, Field(discriminator="type")]
"""One decision: a union discriminated on ``type``."""


# --------------------------------------------------------------------------- calls and results


class ToolCall(_Wire):
    """One tool call proposed by the model, with parsed arguments."""

    id: str
    """The model's id for the call (OpenAI ``tool_call_id``)."""
    name: str
    """The tool's name."""
    args: dict[str, Any] = Field(default_factory=dict)
    """Parsed arguments (JSON data)."""
    arguments_error: str | None = None
    """Set when the raw arguments were not a JSON object; the call then never runs.

    Also set, to at most 1,000 characters of what was sent, when ``error`` is.
    """
    error: str | None = None
    """Why the call can never run, whatever anyone decides: its arguments break the
    runner's :class:`~toolguard.Limits` or hold NaN or Infinity. The model reads it
    as the call's error result; nobody is asked to review the call."""


ResultStatus = Literal["success", "error"]


class ToolResult(_Wire):
    """The outcome of one tool call, as the model will read it."""

    call_id: str
    """The id of the tool call it answers."""
    name: str
    """The tool that was (or would have been) run."""
    status: ResultStatus
    """``"success"`` when the tool ran and returned, ``"error"`` otherwise."""
    content: str
    """The text for the model: the tool's return value as text, or the error."""
    value: Any = None
    """The return value as JSON data (``None`` for errors)."""


ActionStatus = Literal[
    "requested", "approved", "edited", "rejected", "executed", "failed", "expired", "cancelled"
]


class Action(_Wire):
    """One approval request and its lifecycle.

    ``requested`` → ``approved`` | ``edited`` → ``executed`` | ``failed``, or
    ``requested`` → ``rejected`` (also ``expired`` / ``cancelled``).
    """

    id: str
    """Unique id of this approval request."""
    call_id: str
    """The tool call it belongs to."""
    name: str
    """The tool the model proposed."""
    args: dict[str, Any]
    """The arguments the model proposed (JSON data)."""
    description: str
    """The text shown to the reviewer."""
    status: ActionStatus = "requested"
    """Where the request is in its lifecycle."""
    decision: Decision | None = None
    """The decision that answered it, once decided."""
    result: ToolResult | None = None
    """What the model read for it, once finished."""
    requested_at: datetime = Field(default_factory=utcnow)
    """When the request was made."""
    decided_at: datetime | None = None
    """When it was decided."""
    finished_at: datetime | None = None
    """When it reached a final status."""
    expires_at: datetime | None = None
    """After this moment the request can no longer be approved (``None``: no deadline)."""
    digest: str = ""
    """SHA-256 of the name and arguments shown to the reviewer; an approval covers only those."""
    reviewer: str | None = None
    """Who decided, when the decision came with a reviewer identity."""


class PendingTurn(_Wire):
    """A model turn paused for review; JSON, so it can be stored and resumed anywhere."""

    review_id: str = Field(default_factory=new_id)
    """Identifies this review; a new pause gets a new id."""
    calls: list[ToolCall]
    """Every tool call of the turn, in the model's order."""
    results: list[ToolResult] = Field(default_factory=list)
    """Results already known (calls that needed no approval, invalid calls)."""
    actions: list[Action]
    """The calls waiting for decisions, in call order."""
    replaced_calls: list[ToolCall] = Field(default_factory=list)
    """Calls already rewritten by an edit (kept across a re-review)."""

    @property
    def expires_at(self) -> datetime | None:
        """The earliest deadline of the waiting actions, or ``None`` when none has one."""
        deadlines = [a.expires_at for a in self.actions if a.status == "requested" and a.expires_at]
        return min(deadlines) if deadlines else None

    @property
    def pending_review(self) -> PendingReview:
        """The review payload for the actions still waiting."""
        waiting = [a for a in self.actions if a.status == "requested"]
        return PendingReview(
            action_requests=[
                ActionRequest(name=a.name, args=a.args, description=a.description) for a in waiting
            ],
            review_configs=[ReviewConfig(action_name=a.name) for a in waiting],
        )
