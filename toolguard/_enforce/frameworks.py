"""The pipeline's edge for the framework integrations: proposals, payloads, deadlines, claims.

Each integration (Agents SDK, Pydantic AI, LangChain) only translates its
framework's paused state to and from these functions, which
:mod:`toolguard._enforce.pipeline` hands on: a proposed call is decided by
:func:`~toolguard._enforce.decide.decide` (:func:`propose`), the reviewer's
payload is built here (:func:`review_payload`), decisions are checked here
(:func:`checked_decisions`), votes are counted by :mod:`toolguard._enforce.quorum`,
the time is read here (:func:`now`), once-only claims are made here
(:func:`claim_once`), and bodies run through :mod:`toolguard._enforce.execute`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from toolguard._core import telemetry
from toolguard._core.catalog import message
from toolguard._core.errors import (
    AlreadyResumedError,
    InvalidReviewDecisionError,
    UnsupportedPolicyError,
)
from toolguard._core.jsonable import to_json_data
from toolguard._core.limits import Limits, check_limits
from toolguard._core.records import (
    ApproveDecision,
    EditDecision,
    PendingReview,
    QuorumProgress,
    ToolCall,
)
from toolguard._core.records import review_payload as payload_of
from toolguard._enforce.actions import EXPIRED_BEFORE_START, TAMPERED
from toolguard._enforce.calls import parse_tool_call
from toolguard._enforce.decide import Verdict, decide, decisions_for
from toolguard._enforce.judge import Judge
from toolguard._enforce.once import Claims
from toolguard._policy.decisions import AnyDecision, validate_decisions
from toolguard._policy.redact import keep_redacted, scrub, scrub_data
from toolguard._tools.tool import Tool
from toolguard._tools.toolset import Tools, Toolset

if TYPE_CHECKING:
    from opentelemetry.trace import Span

LIMITS: Limits = check_limits(None)
"""The bounds on a model's arguments: the runner's defaults."""

EXPIRED = EXPIRED_BEFORE_START
"""What the model reads for an approved call whose review deadline passed (the runner's text)."""

NOT_APPROVED_HERE = TAMPERED
"""What the model reads for an approval made for another call (the runner's text)."""

NO_ASKED_AT = (
    "toolguard has no record of when the review of this call began, so its deadline cannot be"
    " checked. It was not executed."
)
"""What the model reads for an approved call with a deadline but no record of when it asked."""


@dataclass(frozen=True, slots=True)
class ReviewItem:
    """One paused call as the reviewer sees it (``args`` with secrets shown as ``REDACTED``)."""

    name: str
    args: dict[str, Any]
    description: str | None
    allowed_decisions: tuple[str, ...]
    progress: QuorumProgress | None = None


def as_toolset(tools: Tools) -> Toolset:
    """``tools`` as a :class:`Toolset`: a toolset as is, anything else through ``guard()``.

    Raises:
        UnsupportedPolicyError: ``tools`` is a :class:`~toolguard.Runner`, a
            :class:`~toolguard.ReviewedChat` or a :class:`~toolguard.Judge`:
            the framework runs the turn, so their judge (and their other
            settings) would not apply; it is refused rather than dropped.
    """
    given: object = tools  # checked at run time for untyped callers
    component = "Judge" if isinstance(given, Judge) else getattr(given, "_toolguard_component", 0)
    if isinstance(component, str):
        msg = (
            f"toolguard's framework integrations take tools, not a {component}:"
            " the framework runs the turn, so a judge (judge=) and the other settings of a"
            " Runner or ReviewedChat would not apply. Pass the tools (a list, a mapping or a"
            " Toolset); for a judge, run them with toolguard.Runner or toolguard.ReviewedChat."
        )
        raise UnsupportedPolicyError(msg)
    return tools if isinstance(tools, Toolset) else Toolset(tools)


def propose(toolset: Toolset, call_id: str, name: str, arguments: Any) -> tuple[ToolCall, Verdict]:
    """Read one proposed call (a dict or JSON text) and ask the policy about it.

    The call is read as the runner reads it (:func:`toolguard.records.parse_tool_call`
    with the default :class:`~toolguard.Limits`), and :func:`toolguard._enforce.decide.decide`
    answers: run now, ask a person, or refuse with the text the model reads.
    """
    raw = {"id": call_id or "call_0", "name": name, "args": arguments}
    call = parse_tool_call(raw, limits=LIMITS)
    return call, decide(toolset, call)


allowed_decisions = decisions_for
"""The decisions a reviewer may take on calls of a tool (the one definition, in ``decide``)."""


def review_item(
    tool: Tool[Any, Any] | None,
    name: str,
    args: Mapping[str, Any],
    *,
    required: int = 1,
    by: Sequence[str] = (),
) -> ReviewItem:
    """How a reviewer sees a call of ``tool`` with the real ``args`` (secrets replaced)."""
    shown = tool.shown_args(args) if tool is not None else dict(args)
    progress = (
        QuorumProgress(required=required, given=len(by), by=list(by)) if required > 1 else None
    )
    return ReviewItem(
        name=name,
        args=shown,
        description=tool.review_description() if tool is not None else None,
        allowed_decisions=allowed_decisions(tool),
        progress=progress,
    )


def review_payload(items: Sequence[ReviewItem]) -> PendingReview:
    """The ``pending_review`` payload for these calls, in order (a quorum's progress kept)."""
    return payload_of(
        (
            item.name,
            item.args,
            item.description or message("action_description", name=item.name),
            item.allowed_decisions,
            item.progress,
        )
        for item in items
    )


def checked_decisions(
    review: PendingReview, decisions: Any, *, framework: str
) -> list[AnyDecision]:
    """``validate_decisions`` plus what a framework cannot do.

    Refused: an edit that switches to another tool, and an approve carrying a
    standing ``grant`` (a grant lives in a conversation's state, which only
    :class:`~toolguard.ReviewedChat` keeps).

    Raises:
        NoPendingReviewError: nothing awaits a decision.
        InvalidReviewDecisionError: with the texts of ``validate_decisions``,
            ``edit_other_tool``, or the grant refusal.
    """
    parsed = validate_decisions(review, decisions)
    for request, decision in zip(review.action_requests, parsed, strict=True):
        if isinstance(decision, EditDecision) and decision.edited_action.name != request.name:
            raise InvalidReviewDecisionError(
                message(
                    "edit_other_tool",
                    name=request.name,
                    other=decision.edited_action.name,
                    framework=framework,
                )
            )
    refuse_grants([r.name for r in review.action_requests], parsed, framework)
    return parsed


def refuse_grants(names: Sequence[str], parsed: Sequence[AnyDecision], where: str) -> None:
    """Refuse an approve carrying a standing ``grant`` on a path that cannot keep one.

    A grant lives in a conversation's state, which only
    :class:`~toolguard.ReviewedChat` keeps; anywhere else it would be
    dropped, so it is refused instead.

    Raises:
        InvalidReviewDecisionError: naming the action and ``where``; nothing changed.
    """
    for name, decision in zip(names, parsed, strict=False):
        if isinstance(decision, ApproveDecision) and decision.grant is not None:
            msg = (
                f"The approval of `{name}` carries a standing grant, which {where}"
                " cannot keep: grants live in a conversation's state. Use toolguard.ReviewedChat"
                " (or its HTTP service) for grants, or approve without 'grant'."
            )
            raise InvalidReviewDecisionError(msg)


def edited_args(
    tool: Tool[Any, Any] | None, edited: Mapping[str, Any], real: Mapping[str, Any]
) -> dict[str, Any]:
    """An edit's arguments; a secret left as ``REDACTED`` keeps the call's real value."""
    if tool is None or not tool.redacted:
        return dict(edited)
    return keep_redacted(edited, real, tool.redacted)[0]


# --------------------------------------------------------------------------- deadlines


def now() -> float:
    """The time a review starts or a call starts, in seconds since the epoch (wall clock).

    A paused run may resume in another process, so the time is the wall clock,
    as each framework stores it.
    """
    return time.time()


def deadline_refusal(tool: Tool[Any, Any], asked_at: object) -> str | None:
    """Why an approved call of ``tool`` must not start now, or ``None`` when it may.

    ``asked_at`` is when the call asked for its review (seconds since the
    epoch). A tool with ``requires_approval(ttl=...)`` refuses to start at or
    after ``asked_at + ttl`` (:data:`EXPIRED`), and fails closed without a
    readable ``asked_at`` (:data:`NO_ASKED_AT`). Call it right before the body
    would start.
    """
    ttl = tool.approval.ttl if tool.approval is not None else None
    if ttl is None:
        return None
    if isinstance(asked_at, bool) or not isinstance(asked_at, int | float):
        return NO_ASKED_AT
    if not math.isfinite(asked_at):
        return NO_ASKED_AT
    return EXPIRED if now() >= asked_at + ttl else None


def has_deadline(tool: Tool[Any, Any]) -> bool:
    """Whether reviews of ``tool`` expire (``requires_approval(ttl=...)``)."""
    return tool.approval is not None and tool.approval.ttl is not None


# --------------------------------------------------------------------------- once only


def check_claims(claims: object) -> Claims | None:
    """``claims`` when it is a store with ``claim(key)`` (or ``None``); else ``TypeError``."""
    if claims is not None and not callable(getattr(claims, "claim", None)):
        msg = (
            "claims must be a store with an async claim(key) method (MemoryStore,"
            f" SQLiteStore, PostgresStore), got {type(claims).__name__}"
        )
        raise TypeError(msg)
    return claims  # type: ignore[return-value]


async def claim_once(claims: Claims | None, review_id: str) -> None:
    """Claim an approved call's review in ``claims`` before it runs (nothing without a store).

    Raises:
        AlreadyResumedError: another run (maybe another process) claimed it:
            the call ran or runs there, and does not run here.
    """
    if claims is None:
        return
    if not await claims.claim(f"resume:{review_id}"):
        raise AlreadyResumedError(review_id)


# --------------------------------------------------------------------------- results


def _secrets(tool: Tool[Any, Any], argsets: Sequence[Mapping[str, Any]]) -> list[str]:
    found: list[str] = []
    for args in argsets:
        found += tool.secret_texts(args)
    return found


def shown_result(tool: Tool[Any, Any], value: Any, *argsets: Mapping[str, Any]) -> Any:
    """The tool's return value, with any secret argument it echoes scrubbed (as the runner does)."""
    if not tool.redacted:
        return value
    secrets = _secrets(tool, argsets)
    try:
        data = to_json_data(value)
    except (ValueError, RecursionError):
        return scrub(str(value), secrets)
    return scrub_data(data, secrets)


# --------------------------------------------------------------------------- spans


def reviewed(
    review_id: object,
    asked_at: object,
    *,
    decision: str,
    by: object = None,
    decided_at: object = None,
) -> telemetry.Decided:
    """How a framework's call was decided, for its span (unreadable entries are left out).

    ``asked_at`` and ``decided_at`` are seconds since the epoch, as the
    frameworks store them; ``by`` the reviewer's id.
    """
    requested = _moment(asked_at)
    return telemetry.Decided(
        by=by if isinstance(by, str) else None,
        review_id=review_id if isinstance(review_id, str) and review_id else None,
        requested_at=requested,
        decided_at=_moment(decided_at) or requested,
        decision=decision,
        status={
            "approve": "approved",
            "edit": "edited",
            "reject": "rejected",
            "respond": "responded",
        }.get(decision),
    )


def _moment(seconds: object) -> datetime | None:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        return None
    if not math.isfinite(seconds):
        return None
    try:
        return datetime.fromtimestamp(seconds, timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None


@contextmanager
def call_span(
    call_id: str,
    name: str,
    decided: telemetry.Decided | None = None,
    tool: Tool[Any, Any] | None = None,
) -> Iterator[Span | None]:
    """The call's ``execute_tool`` span, current while the body runs (``None``: not tracing).

    ``tool``: the tool, for its type and description. Set how it ended with
    :func:`finish` before leaving.
    """
    otel = telemetry.tracer()
    if otel is None:
        yield None
        return
    with telemetry.running(otel, call_id, name, decided, tool=tool) as span:
        yield span


def finish(span: Span | None, outcome: str, error: BaseException | None = None) -> None:
    """Record how the call of ``span`` ended (nothing when not tracing)."""
    if span is not None:
        telemetry.finish(span, outcome, type(error).__qualname__ if error is not None else None)


def allowed_by(verdict: Verdict) -> telemetry.Decided | None:
    """Who let a call run without a review, for its span: an allow rule, or nobody."""
    return telemetry.Decided(by=telemetry.BY_RULE) if verdict.rule is not None else None


def trace_refusal(
    call: ToolCall,
    verdict: Verdict,
    decided: telemetry.Decided | None = None,
    *,
    call_id: str | None = None,
) -> None:
    """The span of a call the policy refused (a deny rule, an unknown tool, bad arguments).

    ``decided``: the review of a call refused after its approval (a deny rule
    then decides the outcome); ``call_id``: the framework's id, when it is
    not ``call.id`` (``""``: the framework gave none).
    """
    otel = telemetry.tracer()
    if otel is None:
        return
    kind = verdict.refusal_kind or "failed"
    if decided is None:
        decided = telemetry.Decided(by=telemetry.BY_RULE if verdict.rule is not None else None)
    elif kind == "denied" and verdict.rule is not None:
        decided = replace(decided, outcome_by=telemetry.BY_RULE)
    ran_id = call.id if call_id is None else call_id
    with telemetry.running(otel, ran_id, call.name, decided) as span:
        telemetry.finish(span, "denied" if kind == "denied" else "failed", kind)


def trace_ended(
    call_id: str,
    name: str,
    outcome: str,
    decided: telemetry.Decided | None = None,
    error_type: str | None = None,
    *,
    tool: Tool[Any, Any] | None = None,
) -> None:
    """The span of a call that ended without running (rejected, expired, not the approved call).

    ``tool``: the tool, for its type and description.
    """
    otel = telemetry.tracer()
    if otel is None:
        return
    with telemetry.running(otel, call_id, name, decided, tool=tool) as span:
        telemetry.finish(span, outcome, error_type)
