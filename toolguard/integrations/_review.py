"""What the framework integrations share: the review payload and the checks on decisions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from toolguard._errors import InvalidReviewDecisionError
from toolguard._messages import message
from toolguard._models import (
    ALLOWED_DECISIONS,
    ActionRequest,
    EditDecision,
    PendingReview,
    ReviewConfig,
)
from toolguard._tool import Tool
from toolguard._toolset import Tools, Toolset
from toolguard._validate import AnyDecision, validate_decisions


@dataclass(frozen=True, slots=True)
class ReviewItem:
    """One paused call as the reviewer sees it."""

    name: str
    args: dict[str, Any]
    description: str | None
    allowed_decisions: tuple[str, ...]


def as_toolset(tools: Tools) -> Toolset:
    """``tools`` as a :class:`Toolset`: a toolset as is, anything else through ``guard()``."""
    return tools if isinstance(tools, Toolset) else Toolset(tools)


def allowed_decisions(tool: Tool[Any, Any] | None) -> tuple[str, ...]:
    """The decisions a reviewer may take on calls of ``tool`` (all three by default)."""
    if tool is None or tool.approval is None:
        return tuple(ALLOWED_DECISIONS)
    return tuple(getattr(tool.approval, "allowed_decisions", ALLOWED_DECISIONS))


def review_payload(items: Sequence[ReviewItem]) -> PendingReview:
    """SPEC's ``pending_review`` payload for these calls, in order."""
    return PendingReview(
        action_requests=[
            ActionRequest(
                name=item.name,
                args=item.args,
                description=item.description or message("action_description", name=item.name),
            )
            for item in items
        ],
        review_configs=[
            ReviewConfig.model_validate(
                {"action_name": item.name, "allowed_decisions": list(item.allowed_decisions)}
            )
            for item in items
        ],
    )


def checked_decisions(
    review: PendingReview, decisions: Any, *, framework: str
) -> list[AnyDecision]:
    """``validate_decisions`` plus what the framework cannot do: switch an edit to another tool.

    Raises:
        NoPendingReviewError: nothing awaits a decision.
        InvalidReviewDecisionError: with SPEC's texts, or ``edit_other_tool``.
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
    return parsed
