"""The validating path: check decisions against a pending review before resuming."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolguard._core.catalog import message
from toolguard._core.errors import InvalidReviewDecisionError, NoPendingReviewError
from toolguard._core.jsonable import clean_text, scan_json, to_json_data
from toolguard._core.limits import MAX_DEPTH
from toolguard._core.records import (
    ALLOWED_DECISIONS,
    DECISION_TYPES,
    AnyDecision,
    ApproveDecision,
    EditDecision,
    EditedAction,
    PendingReview,
    PendingTurn,
    RejectDecision,
    RespondDecision,
)
from toolguard._core.standing import GrantScope, GrantTerms, terms_problem

__all__ = [
    "AnyDecision",
    "allowed_for",
    "as_decision_list",
    "check_allowed",
    "parse_decision",
    "parse_grant",
    "validate_decisions",
]

Allowed = tuple[str, Sequence[str]]
"""An action's name and the decision types it allows."""


def _count_actions(pending_review: Any) -> int:
    if pending_review is None:
        return 0
    if isinstance(pending_review, PendingTurn):
        return sum(1 for a in pending_review.actions if a.status == "requested")
    if isinstance(pending_review, PendingReview):
        return len(pending_review.action_requests)
    if isinstance(pending_review, Mapping):
        requests = pending_review.get("action_requests")
        if isinstance(requests, Sequence) and not isinstance(requests, (str, bytes)):
            return len(requests)
    return 0


def _listed(value: Any) -> list[Any]:
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray)):
        return list(value)
    return []


def allowed_for(pending_review: Any) -> list[Allowed]:
    """Each waiting action's name and allowed decision types, in order.

    A payload action without a review config (or whose ``allowed_decisions``
    is not a list of texts) allows ``ALLOWED_DECISIONS``, LangChain's
    default; a given list is taken as it is (an empty one allows nothing).
    """
    if isinstance(pending_review, PendingTurn):
        return [
            (a.name, tuple(a.allowed_decisions))
            for a in pending_review.actions
            if a.status == "requested"
        ]
    if isinstance(pending_review, PendingReview):
        pending_review = pending_review.model_dump()
    if not isinstance(pending_review, Mapping):
        return []
    requests = _listed(pending_review.get("action_requests"))
    configs = _listed(pending_review.get("review_configs"))
    out: list[Allowed] = []
    for index, request in enumerate(requests):
        name = request.get("name") if isinstance(request, Mapping) else None
        config = configs[index] if index < len(configs) else None
        kinds = config.get("allowed_decisions") if isinstance(config, Mapping) else None
        listed = _listed(kinds)
        given = isinstance(kinds, Sequence) and not isinstance(kinds, (str, bytes, bytearray))
        allowed = (
            tuple(listed)
            if given and all(isinstance(k, str) for k in listed)
            else ALLOWED_DECISIONS
        )
        out.append((name if isinstance(name, str) else "", allowed))
    return out


def check_allowed(kind: str, allowed: Allowed | None) -> None:
    """Refuse a decision type the action does not allow (the catalog text names both)."""
    if allowed is None:
        return
    name, kinds = allowed
    if kind not in kinds:
        raise InvalidReviewDecisionError(
            message("decision_not_allowed", type=repr(kind), name=repr(name), allowed=list(kinds))
        )


def _kind(value: Any) -> str:
    return "None" if value is None else type(value).__name__


def _edited_args(args: dict[str, Any]) -> dict[str, Any]:
    """An edit's arguments as JSON data a thread can store, or the documented error.

    The runner's :class:`~toolguard.Limits` are checked when the edit is
    applied (an error result); this only refuses what no store could keep.
    """
    if scan_json(args, MAX_DEPTH).too_deep is not None:
        raise InvalidReviewDecisionError(message("edited_args_unusable", limit=MAX_DEPTH))
    try:
        data: dict[str, Any] = to_json_data(args)
    except Exception:  # whatever the value does, the edit is refused
        raise InvalidReviewDecisionError(message("edited_args_unusable", limit=MAX_DEPTH)) from None
    return data


def parse_grant(grant: Any, *, scope: GrantScope = "thread") -> GrantTerms | None:
    """The ``grant`` of an approve decision as a model (``None``: no grant).

    ``scope`` is the only scope accepted: ``"thread"`` in a chat, ``"server"``
    in the MCP gateway.

    Raises:
        InvalidReviewDecisionError: with the catalog text for the first
            problem: not an object, unknown keys, ``scope`` not ``scope``,
            ``match`` not ``"tool"``/``"args"``, ``uses`` not a whole number
            from 1 to 10,000, ``ttl`` not a finite number of seconds above 0
            and at most 366 days (``bool`` is no number).
    """
    if grant is None:
        return None
    if isinstance(grant, GrantTerms):
        grant = dict(grant)
    if not isinstance(grant, Mapping):
        raise InvalidReviewDecisionError(message("grant_shape", kind=_kind(grant)))
    data = dict(grant)
    problem = terms_problem(data, scope)
    if problem is not None:
        raise InvalidReviewDecisionError(message(problem[0], **problem[1]))
    return GrantTerms.model_validate(data)


def _no_grant(kind: str, decision: Any) -> None:
    """Refuse a ``grant`` on a decision that is not an approve."""
    grant = decision.get("grant") if isinstance(decision, Mapping) else None
    if grant is not None:
        raise InvalidReviewDecisionError(message("grant_not_approve", type=repr(kind)))


def parse_decision(
    decision: Any, allowed: Allowed | None = None, *, grant_scope: GrantScope = "thread"
) -> AnyDecision:
    """Check one decision and return it as a model.

    Accepts a decision model or a mapping in the wire format. Fields that do
    not belong to the decision's type are ignored, except ``grant``: it is
    checked on an approve (:func:`parse_grant`, with ``grant_scope``) and refused
    on any other type.
    Checks, in order: the type, that ``allowed`` (the action's name and
    allowed types, when given) lists it, then the fields of that type.

    Raises:
        InvalidReviewDecisionError: with the catalog text for the first problem.
    """
    if isinstance(decision, (ApproveDecision, EditDecision, RejectDecision, RespondDecision)):
        check_allowed(decision.type, allowed)
        if isinstance(decision, EditDecision):
            edited_model = decision.edited_action
            return EditDecision(
                edited_action=EditedAction(
                    name=clean_text(edited_model.name), args=_edited_args(edited_model.args)
                )
            )
        if isinstance(decision, RejectDecision):
            return RejectDecision(message=clean_text(decision.message))
        if isinstance(decision, RespondDecision):
            return RespondDecision(message=clean_text(decision.message))
        return ApproveDecision(grant=parse_grant(decision.grant, scope=grant_scope))
    if not isinstance(decision, Mapping):
        raise InvalidReviewDecisionError(message("decision_type", type=None))
    kind = decision.get("type")
    if not isinstance(kind, str) or kind not in DECISION_TYPES:
        raise InvalidReviewDecisionError(message("decision_type", type=repr(kind)))
    check_allowed(kind, allowed)
    if kind == "approve":
        return ApproveDecision(grant=parse_grant(decision.get("grant"), scope=grant_scope))
    _no_grant(kind, decision)
    if kind == "edit":
        edited = decision.get("edited_action")
        if edited is None:
            raise InvalidReviewDecisionError(message("edit_needs_action"))
        if isinstance(edited, EditedAction):
            return parse_decision(EditDecision(edited_action=edited))
        if not (
            isinstance(edited, Mapping)
            and isinstance(edited.get("name"), str)
            and isinstance(edited.get("args"), Mapping)
            and all(isinstance(key, str) for key in edited["args"])
        ):
            raise InvalidReviewDecisionError(message("edited_action_shape"))
        return EditDecision(
            edited_action=EditedAction(
                name=clean_text(edited["name"]), args=_edited_args(dict(edited["args"]))
            )
        )
    reason = decision.get("message")
    if kind == "respond":
        if not isinstance(reason, str):
            raise InvalidReviewDecisionError(message("respond_needs_message", kind=_kind(reason)))
        return RespondDecision(message=clean_text(reason))
    if reason is not None and not isinstance(reason, str):
        raise InvalidReviewDecisionError(message("reject_message_type", kind=_kind(reason)))
    return RejectDecision(message=clean_text(reason))


def as_decision_list(decisions: Any) -> list[Any]:
    """``decisions`` as a list, or the documented error when it is not a list or tuple."""
    if isinstance(decisions, (str, bytes, bytearray, Mapping)) or not isinstance(
        decisions, Sequence
    ):
        raise InvalidReviewDecisionError(message("decisions_not_list", kind=_kind(decisions)))
    return list(decisions)


def validate_decisions(
    pending_review: Any, decisions: Any, *, grant_scope: GrantScope = "thread"
) -> list[AnyDecision]:
    """Check that ``decisions`` answer ``pending_review``, in a fixed order of checks.

    The checks stop at the first problem: a pending action exists, the
    decisions are a list, their number equals the number of actions, then
    each decision in order (its type, that the action's review config allows
    that type, then ``edited_action`` or ``message``). Nothing is changed by
    a refused call, so correct decisions can be sent afterwards.

    A ``respond`` decision (LangChain's: the reviewer's ``message`` becomes
    the tool's result and the tool does not run) is accepted only for actions
    whose ``allowed_decisions`` list it; by default none do.

    Args:
        pending_review: the payload (model or dict, e.g. LangChain's own
            ``HITLRequest``), a paused turn, or ``None`` when nothing is pending.
        decisions: one decision per action, in order; dicts in the wire
            format or decision models. Any Python value is accepted and
            refused with a documented error when it is not such a list.
        grant_scope: the one ``scope`` a grant may have: ``"thread"``
            (default; a chat's) or ``"server"`` (the MCP gateway's).

    Returns:
        The decisions as models, in order.

    Raises:
        NoPendingReviewError: nothing awaits a decision.
        InvalidReviewDecisionError: the decisions do not answer the review.
    """
    expected = _count_actions(pending_review)
    if expected == 0:
        raise NoPendingReviewError
    items = as_decision_list(decisions)
    if len(items) != expected:
        raise InvalidReviewDecisionError(
            message("decision_count", expected=expected, received=len(items))
        )
    allowed = allowed_for(pending_review)
    return [
        parse_decision(item, allowed[i], grant_scope=grant_scope) for i, item in enumerate(items)
    ]
