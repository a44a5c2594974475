"""The validating path: check decisions against a pending review before resuming."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolguard._errors import InvalidReviewDecisionError, NoPendingReviewError
from toolguard._json import clean_text, scan_json, to_json_data
from toolguard._limits import MAX_DEPTH
from toolguard._messages import message
from toolguard._models import (
    ALLOWED_DECISIONS,
    ApproveDecision,
    EditDecision,
    EditedAction,
    PendingReview,
    PendingTurn,
    RejectDecision,
)

AnyDecision = ApproveDecision | EditDecision | RejectDecision


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


def parse_decision(decision: Any) -> AnyDecision:
    """Check one decision and return it as a model.

    Accepts a decision model or a mapping in the wire format. Fields that do
    not belong to the decision's type are ignored.

    Raises:
        InvalidReviewDecisionError: with the catalog text for the first problem.
    """
    if isinstance(decision, EditDecision):
        edited_model = decision.edited_action
        return EditDecision(
            edited_action=EditedAction(
                name=clean_text(edited_model.name), args=_edited_args(edited_model.args)
            )
        )
    if isinstance(decision, RejectDecision):
        return RejectDecision(message=clean_text(decision.message))
    if isinstance(decision, ApproveDecision):
        return decision
    if not isinstance(decision, Mapping):
        raise InvalidReviewDecisionError(message("decision_type", type=None))
    kind = decision.get("type")
    if not isinstance(kind, str) or kind not in ALLOWED_DECISIONS:
        raise InvalidReviewDecisionError(message("decision_type", type=repr(kind)))
    if kind == "approve":
        return ApproveDecision()
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


def validate_decisions(pending_review: Any, decisions: Any) -> list[AnyDecision]:
    """Check that ``decisions`` answer ``pending_review``, in the specification's order.

    The checks stop at the first problem: a pending action exists, the
    decisions are a list, their number equals the number of actions, then
    each decision in order (its type, then ``edited_action``). Nothing is
    changed by a refused call, so correct decisions can be sent afterwards.

    Args:
        pending_review: the payload (model or dict), a paused turn, or
            ``None`` when nothing is pending.
        decisions: one decision per action, in order; dicts in the wire
            format or decision models. Any Python value is accepted and
            refused with a documented error when it is not such a list.

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
    return [parse_decision(item) for item in items]
