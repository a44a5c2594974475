"""Wire shapes (pydantic models) and the records of a paused turn.

The review payload and the decisions follow LangChain's human-in-the-loop
format exactly, so ``PendingReview.model_dump()`` is LangChain's
``pending_review`` dict and a decision list from a LangChain front end works
unchanged.
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from decimal import Decimal
from typing import Annotated, Any, Final, Literal, TypeVar, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic_core import to_jsonable_python

from toolguard._core.catalog import message
from toolguard._core.judgement import Judgement
from toolguard._core.standing import GrantTerms

args_json: Final = json.JSONEncoder(ensure_ascii=False).encode
"""``json.dumps(value, ensure_ascii=False)``, without building an encoder per call."""

_canonical_json: Final = json.JSONEncoder(
    ensure_ascii=False, sort_keys=True, separators=(",", ":")
).encode

DecisionType = Literal["approve", "edit", "reject", "respond"]
"""A decision's ``type``, as in LangChain (``respond``: the reviewer answers for the tool)."""

ALLOWED_DECISIONS: Final[tuple[DecisionType, ...]] = ("approve", "edit", "reject")
"""The decisions a reviewer may take on every action by default, in this order."""

DECISION_TYPES: Final[tuple[DecisionType, ...]] = ("approve", "edit", "reject", "respond")
"""Every decision type a tool may allow (``requires_approval(allowed_decisions=...)``)."""

REJECTED_BY_USER_MESSAGE: Final = "User rejected this action. It was not executed."
"""What the model reads when an action is rejected without a reason."""

NO_DECISION: Final = "No decision was given for this action. It was not executed."
"""What the model reads for an action left without a decision (lenient resume only)."""


_M = TypeVar("_M", bound=BaseModel)

_new_object: Final = object.__new__
_set_slot: Final = object.__setattr__


def _slot_setter(name: str) -> Callable[[Any, Any], None]:
    """A fast setter of a ``BaseModel`` slot: its descriptor, else ``object.__setattr__``."""
    setter = getattr(BaseModel.__dict__.get(name), "__set__", None)
    if setter is not None:
        return cast("Callable[[Any, Any], None]", setter)
    return lambda model, value: _set_slot(model, name, value)  # pragma: no cover - other pydantic


_set_dict: Final = _slot_setter("__dict__")
_set_extra: Final = _slot_setter("__pydantic_extra__")
_set_fields_set: Final = _slot_setter("__pydantic_fields_set__")
_set_private: Final = _slot_setter("__pydantic_private__")


_FIELD_NAMES: Final[dict[type, set[str]]] = {}


def trusted(cls: type[_M], fields: dict[str, Any]) -> _M:
    """``cls(**fields)`` without validation, for values toolguard itself made valid.

    ``fields`` must give every field of ``cls`` by its name (none left to its
    default), each with a value of the field's type; dicts and lists are
    kept, not copied. With fewer (a field added later, say) this is
    ``cls(**fields)``: a model is never built incomplete. The names are not
    checked one by one (that would cost a third of what this saves): the
    tests build each call site's models both ways and compare them. Only
    for models without private attributes or validators that change values.
    """
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = set(cls.__pydantic_fields__)
    if len(fields) != len(names):
        return cls(**fields)
    model = _new_object(cls)
    _set_dict(model, fields)
    _set_extra(model, None)
    _set_fields_set(model, names.copy())
    _set_private(model, None)
    return model


def new_id() -> str:
    """A fresh random identifier (32 hex characters, 128 random bits)."""
    return os.urandom(16).hex()


def utcnow() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(timezone.utc)


def call_digest(
    name: str,
    args: dict[str, Any],
    key: bytes | None = None,
    *,
    thread_id: str = "",
    review_id: str = "",
) -> str:
    """The digest binding an approval to one call of one review (hex).

    SHA-256 of the canonical JSON ``{"args", "name", "review_id",
    "thread_id"}`` (keys sorted, no spaces, non-ASCII kept), or HMAC-SHA-256
    with ``key``. Covering the thread and review ids means a digested action
    copied into another review or thread no longer matches. A stored digest
    of any other form never matches, so such an action fails closed
    (``TAMPERED``).
    """
    canonical = _canonical_json(
        {"name": name, "args": args, "thread_id": thread_id, "review_id": review_id}
    ).encode("utf-8", "surrogatepass")
    if key is not None:
        keyed = _KEYED.get(key)
        if keyed is None:
            if len(_KEYED) >= _KEYED_MAX:
                _KEYED.clear()
            keyed = _KEYED[key] = hmac.new(key, digestmod=hashlib.sha256)
        mac = keyed.copy()  # the key's padding is hashed once per key, not per digest
        mac.update(canonical)
        return mac.hexdigest()
    return hashlib.sha256(canonical).hexdigest()


_KEYED: dict[bytes, hmac.HMAC] = {}
"""An HMAC-SHA-256 already keyed, per key (a process uses one or a few keys)."""
_KEYED_MAX = 64


def validated_digest(
    name: str, validated: Mapping[str, Any], key: bytes | None = None, *, scope: str = ""
) -> str:
    """The digest of a call as its tool validated it, bound to ``scope`` (hex).

    One call however the model wrote it: ``100``, ``100.0``, ``"100"`` and
    ``" 100 "`` validate to the same ``int``, so they give one digest. It is
    :func:`call_digest` of the name and :func:`canonical_values` of the
    validated arguments, with ``scope`` (a thread id, or a gateway's ledger)
    as the thread and ``"validated"`` as the review, so it never equals an
    approval's digest. HMAC-SHA-256 with ``key``; without one a plain
    SHA-256, which anyone who can read it can test guesses of a short secret
    against: published digests must be keyed.
    """
    return call_digest(
        name, canonical_values(validated), key, thread_id=scope, review_id="validated"
    )


def canonical_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """Validated arguments as canonical JSON data: equal values, equal data.

    Secret values (``SecretStr``) are revealed, sets sorted, decimals and
    floats of an integral value become that integer and other decimals their
    shortest text; what pydantic converts (models, dates, enums) is converted
    as it converts it, and an object it cannot convert counts by its type
    alone. Each loss of detail makes more calls equal, never fewer: a judge
    then sends more calls to a person, never fewer.
    """
    data = to_jsonable_python(_plain(dict(values)), fallback=_type_only)
    return cast("dict[str, Any]", _integral(data))


def _plain(value: Any) -> Any:
    """``value`` with secrets revealed, sets sorted and decimals made plain (see above)."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, set | frozenset):
        items = [_plain(item) for item in value]
        return sorted(items, key=lambda item: _canonical_json(_jsonable(item)))
    if isinstance(value, Decimal):
        if not value.is_finite():
            return str(value)
        if value == value.to_integral_value():
            return int(value)
        return format(value.normalize(), "f")
    reveal = getattr(value, "get_secret_value", None)
    if callable(reveal) and not isinstance(value, type):
        return _plain(reveal())
    return value


def _jsonable(value: Any) -> Any:
    return _integral(to_jsonable_python(value, fallback=_type_only))


def _integral(value: Any) -> Any:
    """JSON data with every float of an integral value as that integer."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _integral(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral(item) for item in value]
    return value


def _type_only(value: Any) -> str:
    """What an object pydantic cannot convert counts as: its type (all alike are equal)."""
    kind = type(value)
    return f"<{kind.__module__}.{kind.__qualname__}>"


EXCLUDE_IF: Final = "exclude_if" in inspect.signature(Field).parameters
"""Whether this pydantic can leave a field out of dumps by value (2.12+); else a serializer does."""


def omit_when(test: Callable[[Any], bool]) -> dict[str, Any]:
    """``Field`` options that leave the field out of dumps when ``test(value)`` holds."""
    return {"exclude_if": test} if EXCLUDE_IF else {}


def is_none(value: Any) -> bool:
    return value is None


def _is_default_allowed(value: Any) -> bool:
    return tuple(value) == ALLOWED_DECISIONS


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
    """Fixed text: ``Tool `NAME` is awaiting approval`` (or the tool's own override).

    Optional on input, as in LangChain: a request without one gets the fixed text."""

    @model_validator(mode="before")
    @classmethod
    def _default_description(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("description") is None:
            name = data.get("name")
            if isinstance(name, str):
                return {**data, "description": message("action_description", name=name)}
        return data


def _is_one(value: Any) -> bool:
    return isinstance(value, int) and value == 1


def _is_empty(value: Any) -> bool:
    return not value


class QuorumProgress(_Wire):
    """How far a quorum review of one action has come (``review_configs[i]["approvals"]``)."""

    required: int
    """How many distinct reviewers must approve (``requires_approval(approvals=N)``)."""
    given: int
    """How many have approved the arguments shown so far."""
    by: list[str] = Field(default_factory=list)
    """Who approved them, in order (the reviewer ids as given)."""


class ReviewConfig(_Wire):
    """How one action may be reviewed."""

    action_name: str
    """The tool's name, equal to the ``name`` of the matching action request."""
    allowed_decisions: list[DecisionType] = Field(default_factory=lambda: list(ALLOWED_DECISIONS))
    """``["approve", "edit", "reject"]`` unless the tool allows others
    (``requires_approval(allowed_decisions=...)``; LangChain payloads may list ``respond``)."""
    approvals: QuorumProgress | None = Field(None, **omit_when(is_none))
    """A quorum action's progress (only when it needs more than one approval);
    left out of dumps otherwise, so the payload is exactly LangChain's."""

    if not EXCLUDE_IF:  # pragma: no cover - pydantic < 2.12 has no Field(exclude_if=...)

        @model_serializer(mode="wrap")
        def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
            data: dict[str, Any] = handler(self)
            if self.approvals is None:
                data.pop("approvals", None)
            return data


class PendingReview(_Wire):
    """The ``pending_review`` payload: the actions of one model turn that need approval.

    ``action_requests`` and ``review_configs`` are parallel lists in the order
    of the tool calls in the model's message. ``model_validate`` also takes
    LangChain's per-call interrupt value (``{"type": "tool_approval",
    "tool_call_id", "name", "args", "description"}``) as a one-action review
    with the default allowed decisions (LangChain sends those in the
    interrupt's ``response_schema``, not in the value).
    """

    action_requests: list[ActionRequest]
    """One item per tool call that needs approval."""
    review_configs: list[ReviewConfig]
    """One item per action, same order."""

    @model_validator(mode="before")
    @classmethod
    def _from_tool_approval(cls, data: Any) -> Any:
        if (
            isinstance(data, dict)
            and data.get("type") == "tool_approval"
            and "action_requests" not in data
        ):
            request = {key: data[key] for key in ("name", "args", "description") if key in data}
            return {
                "action_requests": [request],
                "review_configs": [{"action_name": data.get("name")}],
            }
        return data

    @classmethod
    def for_actions(
        cls,
        actions: list[tuple[str, dict[str, Any], str | None]],
        allowed: Sequence[Sequence[DecisionType]] | None = None,
        approvals: Sequence[int] | None = None,
    ) -> PendingReview:
        """Build the payload from ``(name, json_args, description_override)`` triples.

        ``allowed`` gives each action's allowed decisions (default: ``ALLOWED_DECISIONS``);
        ``approvals`` each action's quorum (default 1: no ``approvals`` key).
        """
        kinds = allowed if allowed is not None else [ALLOWED_DECISIONS] * len(actions)
        quorums = list(approvals) if approvals is not None else [1] * len(actions)
        return cls(
            action_requests=[
                ActionRequest(
                    name=name,
                    args=args,
                    description=description or message("action_description", name=name),
                )
                for name, args, description in actions
            ],
            review_configs=[
                ReviewConfig(
                    action_name=name,
                    allowed_decisions=list(kind),
                    approvals=QuorumProgress(required=n, given=0) if n > 1 else None,
                )
                for (name, _, _), kind, n in zip(actions, kinds, quorums, strict=True)
            ],
        )


# --------------------------------------------------------------------------- decisions


class EditedAction(_Wire):
    """The call to run instead of the proposed one."""

    name: str
    """Tool to run; usually the original tool."""
    args: dict[str, Any]
    """ALL the arguments after the edit, not a diff."""


class ApproveDecision(_Wire):
    """Run the tool with the name and arguments the model proposed.

    With ``grant``, later matching calls of the same thread run without a
    review too (``ReviewedChat`` only; see docs/policies.md, "Standing grants").
    """

    type: Literal["approve"] = "approve"
    """Always ``"approve"``."""
    grant: GrantTerms | None = Field(None, **omit_when(is_none))
    """A standing grant made with this approve, or ``None``. Left out of dumps
    when ``None``, so a plain approve dumps as LangChain's."""

    if not EXCLUDE_IF:  # pragma: no cover - pydantic < 2.12 has no Field(exclude_if=...)

        @model_serializer(mode="wrap")
        def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
            data: dict[str, Any] = handler(self)
            if self.grant is None:
                data.pop("grant", None)
            return data


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
    message: str | None = Field(None, **omit_when(is_none))
    """Why; missing or empty means ``REJECTED_BY_USER_MESSAGE``. Left out of
    dumps when ``None``, as LangChain's ``RejectDecision`` has no null message."""

    if not EXCLUDE_IF:  # pragma: no cover - pydantic < 2.12 has no Field(exclude_if=...)

        @model_serializer(mode="wrap")
        def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
            data: dict[str, Any] = handler(self)
            if self.message is None:
                data.pop("message", None)
            return data


class RespondDecision(_Wire):
    """Do not run the tool; ``message`` is its result (LangChain's ``respond``).

    For "ask the user" tools whose real implementation is a person's answer.
    Allowed only for tools that list ``respond`` in their allowed decisions.
    The result has status ``"success"`` (as in LangChain) and outcome ``"responded"``.
    """

    type: Literal["respond"] = "respond"
    """Always ``"respond"``."""
    message: str
    """What the model reads as the tool's result."""


AnyDecision = ApproveDecision | EditDecision | RejectDecision | RespondDecision
"""Any decision model."""

Decision = Annotated[AnyDecision, Field(discriminator="type")]
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

ResultOutcome = Literal[
    "rejected",
    "no_decision",
    "expired",
    "cancelled",
    "failed",
    "invalid_arguments",
    "unknown_tool",
    "tampered",
    "interrupted",
    "responded",
    "denied",
]
"""Why a result is not the return value of a tool that ran (``ToolResult.outcome``)."""


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
    outcome: ResultOutcome | None = Field(None, **omit_when(is_none))
    """``None`` when the tool ran and returned; else why not: ``rejected``,
    ``no_decision``, ``expired``, ``cancelled``, ``failed`` (the tool raised),
    ``invalid_arguments``, ``unknown_tool``, ``tampered``, ``interrupted`` or
    ``responded`` (the reviewer answered for the tool; status ``success``)
    or ``denied`` (a ``deny`` rule refused the call; nobody was asked).
    Left out of dumps when ``None``: a success result dumps without it."""

    if not EXCLUDE_IF:  # pragma: no cover - pydantic < 2.12 has no Field(exclude_if=...)

        @model_serializer(mode="wrap")
        def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
            data: dict[str, Any] = handler(self)
            if self.outcome is None:
                data.pop("outcome", None)
            return data


ActionStatus = Literal[
    "requested",
    "approved",
    "edited",
    "rejected",
    "responded",
    "executed",
    "failed",
    "expired",
    "cancelled",
]


class Action(_Wire):
    """One approval request and its lifecycle.

    ``requested`` → ``approved`` | ``edited`` → ``executed`` | ``failed``, or
    ``requested`` → ``rejected`` | ``responded`` (also ``expired`` / ``cancelled``).
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
    """Digest of the name and arguments shown to the reviewer, bound to the thread and the
    review (see :func:`call_digest`); an approval covers only those."""
    reviewer: str | None = None
    """Who decided, when the decision came with a reviewer identity."""
    allowed_decisions: list[DecisionType] = Field(
        default_factory=lambda: list(ALLOWED_DECISIONS), **omit_when(_is_default_allowed)
    )
    """The decisions the reviewer may take (the tool's ``allowed_decisions``).
    Left out of dumps when it is ``ALLOWED_DECISIONS`` (the usual case)."""
    approvals_required: int = Field(1, **omit_when(_is_one))
    """How many distinct reviewers must approve (a quorum when above 1); left out of dumps at 1."""
    approved_by: list[str] = Field(default_factory=list, **omit_when(_is_empty))
    """The reviewers who approved these arguments so far, while a quorum is incomplete;
    left out of dumps when empty."""
    judgement: Judgement | None = Field(None, **omit_when(is_none))
    """What a :class:`~toolguard.Judge` said about the call, if one judged it; left out of
    dumps when ``None``."""
    trace_parent: str | None = Field(None, **omit_when(is_none))
    """The W3C ``traceparent`` of the span current when the call was proposed, when the
    application traces with OpenTelemetry: the call's ``execute_tool`` span joins that trace
    wherever the decision is applied. Left out of dumps when ``None``."""

    if not EXCLUDE_IF:  # pragma: no cover - pydantic < 2.12 has no Field(exclude_if=...)

        @model_serializer(mode="wrap")
        def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
            data: dict[str, Any] = handler(self)
            if _is_default_allowed(self.allowed_decisions):
                data.pop("allowed_decisions", None)
            if self.approvals_required == 1:
                data.pop("approvals_required", None)
            if not self.approved_by:
                data.pop("approved_by", None)
            if self.judgement is None:
                data.pop("judgement", None)
            if self.trace_parent is None:
                data.pop("trace_parent", None)
            return data

    @property
    def progress(self) -> QuorumProgress | None:
        """The quorum's progress, or ``None`` for an action that needs one approval."""
        if self.approvals_required <= 1:
            return None
        return QuorumProgress(
            required=self.approvals_required,
            given=len(self.approved_by),
            by=list(self.approved_by),
        )


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
    def held(self) -> list[Action]:
        """Actions already decided while others wait for a quorum (see docs/policies.md).

        Approved or edited actions that have not run yet; they run (or close)
        with the rest of the turn once every action is settled.
        """
        return [a for a in self.actions if a.status in ("approved", "edited") and a.result is None]

    @property
    def pending_review(self) -> PendingReview:
        """The review payload for the actions still waiting."""
        waiting = [a for a in self.actions if a.status == "requested"]
        return review_payload(
            (a.name, a.args, a.description, a.allowed_decisions, a.progress) for a in waiting
        )


def review_payload(
    requests: Iterable[tuple[str, Mapping[str, Any], str, Sequence[str], QuorumProgress | None]],
) -> PendingReview:
    """The ``pending_review`` payload, in LangChain's shape: the one builder every path uses.

    ``requests``: for each call waiting, in order, its tool's name, the
    arguments as the reviewer sees them (secrets replaced), the description,
    the decisions allowed, and a quorum's progress (``None`` for one
    approval). Built from values already checked; each payload gets its own
    lists and dicts.
    """
    action_requests: list[ActionRequest] = []
    review_configs: list[ReviewConfig] = []
    for name, args, description, allowed, progress in requests:
        action_requests.append(
            trusted(ActionRequest, {"name": name, "args": dict(args), "description": description})
        )
        review_configs.append(
            trusted(
                ReviewConfig,
                {"action_name": name, "allowed_decisions": list(allowed), "approvals": progress},
            )
        )
    return trusted(
        PendingReview, {"action_requests": action_requests, "review_configs": review_configs}
    )
