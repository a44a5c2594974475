"""The request and response models of the routes (importable from :mod:`toolguard.http`).

Request bodies are checked for shape only (422); whether decisions answer the pending review
is the chat's business (400).
"""

from datetime import datetime, timezone
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictStr,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
)
from pydantic_core import PydanticCustomError

from toolguard._chat.turns import ChatTurn
from toolguard._core.jsonable import clean_text
from toolguard._core.records import Action, PendingReview
from toolguard._core.standing import GrantStatus, StandingGrant
from toolguard._policy.redact import REDACTED
from toolguard._stores.protocol import ThreadState, ThreadStatus

_ID_MAX_LENGTH = 128
"""The longest thread or review id a body or path may carry (ids toolguard makes have 32)."""


def _short_id(value: str) -> str:
    # Not Field(max_length=...): pydantic's length constraint refuses lone surrogates.
    if len(value) > _ID_MAX_LENGTH:
        kind, text = "string_too_long", "String should have at most {max_length} characters"
        raise PydanticCustomError(kind, text, {"max_length": _ID_MAX_LENGTH})
    return value


Id = Annotated[str, AfterValidator(_short_id)]
"""A thread or review id: text of at most 128 characters."""


# --------------------------------------------------------------------------- request bodies


class ChatRequest(BaseModel):
    """The body of ``POST /hitl/chat``."""

    message: str = Field(min_length=1)
    """The user's text."""
    thread_id: Id | None = None
    """An existing conversation; leave it out to start a new one."""


class EditedActionBody(BaseModel):
    """The call to run instead of the proposed one (the ``edited_action`` of an edit)."""

    name: StrictStr
    """The tool to run; usually the original tool."""
    args: dict[str, Any]
    """ALL the arguments after the edit, not a diff."""


class ReviewDecision(BaseModel):
    """One decision of ``POST /hitl/review``, checked for shape only.

    The type must be ``approve``, ``edit``, ``reject`` or ``respond``, and an
    ``edited_action`` given with an edit must have a string ``name`` and an
    object ``args`` (else 422). Whether an edit *has* an ``edited_action`` is
    checked afterwards by :func:`~toolguard.validate_decisions` (400), like
    the number of decisions. Fields that do not belong to the decision's type
    are ignored, whatever they hold.
    """

    type: Literal["approve", "edit", "reject", "respond"]
    """What to do with the action (``respond`` only where the review config allows it)."""
    edited_action: EditedActionBody | None = None
    """For ``edit`` (required there): the call to run instead."""
    message: str | None = None
    """For ``reject`` (optional): the reason the model reads; for ``respond``
    (required): the answer the model reads as the tool's result."""
    grant: dict[str, Any] | None = None
    """For ``approve`` (optional): a standing grant, e.g. ``{"scope": "thread",
    "match": "tool", "uses": 5, "ttl": 3600}``. Its fields, and a grant on any
    other type, are checked by :func:`~toolguard.validate_decisions` (400)."""

    @field_validator("edited_action", mode="wrap")
    @classmethod
    def _edited_action_only_for_edit(
        cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> Any:
        return handler(value) if info.data.get("type") == "edit" else None

    @field_validator("message", mode="wrap")
    @classmethod
    def _message_only_for_reject(
        cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> Any:
        return handler(value) if info.data.get("type") in ("reject", "respond") else None

    def to_wire(self) -> dict[str, Any]:
        """The decision in the wire format, with only the fields its type uses."""
        wire: dict[str, Any] = {"type": self.type}
        if self.edited_action is not None:
            # Lone surrogates (JSON text may escape them) become U+FFFD, in keys too.
            wire["edited_action"] = clean_text(self.edited_action.model_dump())
        if self.message is not None:
            wire["message"] = self.message
        if self.grant is not None:
            wire["grant"] = self.grant
        return wire


class ReviewRequest(BaseModel):
    """The body of ``POST /hitl/review``."""

    thread_id: Id
    """The conversation whose review this answers."""
    decisions: list[ReviewDecision] = Field(min_length=1)
    """One decision per action, in the order of ``action_requests``."""
    review_id: Id | None = None
    """The review these decisions answer (``review_id`` of the chat answer); recommended,
    so that a late decision never approves a newer request."""


class CancelRequest(BaseModel):
    """The body of ``POST /hitl/cancel``."""

    thread_id: Id
    """The conversation whose pending review is cancelled."""
    review_id: Id | None = None
    """The review being cancelled; recommended, as for a review."""
    reason: str | None = None
    """Why, for the model and the audit trail."""


# --------------------------------------------------------------------------- responses


class ChatResponse(BaseModel):
    """What ``POST /hitl/chat``, ``/hitl/review`` and ``/hitl/cancel`` answer.

    After a cancel, ``review_id`` names the review that was closed.
    """

    model_config = ConfigDict(frozen=True)

    thread_id: str
    """The conversation's id (new when the chat started one)."""
    reply: str | None
    """The model's final text, or ``null`` while a review is pending."""
    pending_review: PendingReview | None
    """The actions awaiting a decision, or ``null``."""
    review_id: str | None
    """The id of the pending review, or ``null``."""

    @classmethod
    def from_turn(cls, turn: ChatTurn) -> "ChatResponse":
        """The response for one turn of the chat."""
        return cls(
            thread_id=turn.thread_id,
            reply=turn.reply,
            pending_review=turn.pending_review,
            review_id=turn.review_id,
        )


class ThreadResponse(BaseModel):
    """What ``GET /hitl/threads/{thread_id}`` answers: enough to redraw a page."""

    model_config = ConfigDict(frozen=True)

    thread_id: str
    """The conversation's id."""
    status: ThreadStatus
    """``idle``, ``awaiting_review`` or ``running`` (decisions being applied)."""
    messages: list[dict[str, Any]]
    """The stored history, in OpenAI Chat Completions format."""
    pending_review: PendingReview | None
    """The actions awaiting a decision, or ``null``."""
    review_id: str | None
    """The id of the pending review, or ``null``."""
    expires_at: datetime | None
    """When the pending review expires (``null``: no deadline, or nothing pending)."""
    actions: list[Action]
    """Every approval request of the thread with its status, decision and result."""
    grants: list["GrantResponse"] = Field(default_factory=list)
    """The thread's standing grants, active or ended, oldest first, with their status."""

    @classmethod
    def from_state(
        cls,
        state: ThreadState,
        now: datetime | None = None,
        *,
        messages: list[dict[str, Any]] | None = None,
    ) -> "ThreadResponse":
        """The response for a stored thread (grant statuses at ``now``; default: the UTC time).

        ``messages``: the history to show instead of the stored one (secrets redacted).
        """
        pending = state.pending if state.status == "awaiting_review" else None
        moment = now if now is not None else datetime.now(timezone.utc)
        return cls(
            grants=[GrantResponse.from_grant(_digest_hidden(g), moment) for g in state.grants],
            thread_id=state.thread_id,
            status=state.status,
            messages=state.messages if messages is None else messages,
            pending_review=pending.pending_review if pending is not None else None,
            review_id=pending.review_id if pending is not None else None,
            expires_at=pending.expires_at if pending is not None else None,
            actions=[_digest_hidden(action) for action in state.actions],
        )


_Record = TypeVar("_Record", Action, StandingGrant)


def _holds_secret(value: Any) -> bool:
    if value == REDACTED:
        return True
    if isinstance(value, dict):
        return any(_holds_secret(item) for item in value.values())
    if isinstance(value, list):
        return any(_holds_secret(item) for item in value)
    return False


def _digest_hidden(record: _Record) -> _Record:
    """``record`` with an empty ``digest`` when its arguments hide a secret.

    The digest is a hash of the real arguments: for a call whose secret values
    are shown as ``[redacted]``, anyone reading it could test guesses of a short
    secret against it. It binds the approval inside toolguard; no client needs it.
    """
    if record.digest and _holds_secret(record.args):
        return record.model_copy(update={"digest": ""})
    return record


class GrantResponse(StandingGrant):
    """A standing grant as the thread's JSON lists it, with its status now."""

    status: GrantStatus
    """``active``, ``used_up``, ``expired`` or ``revoked``."""

    @classmethod
    def from_grant(cls, grant: StandingGrant, now: datetime) -> "GrantResponse":
        """The grant with its status at ``now``."""
        return cls(**dict(grant), status=grant.status_at(now))


ThreadResponse.model_rebuild()


class ErrorResponse(BaseModel):
    """The body of every 400, 403, 404, 409, 413, 415, 421, 500 and 502 answer."""

    detail: str
    """What went wrong; for refused decisions, the error's catalog text."""
