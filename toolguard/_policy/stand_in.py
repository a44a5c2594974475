"""A process-wide stand-in reviewer, set by :mod:`toolguard.testing`."""

from __future__ import annotations

from collections.abc import Callable

from toolguard._core.records import ApproveDecision, EditDecision, RejectDecision, ToolCall

AnyDecision = ApproveDecision | EditDecision | RejectDecision
StandInReviewer = Callable[[ToolCall], AnyDecision]

_reviewer: StandInReviewer | None = None


def get_stand_in() -> StandInReviewer | None:
    """The stand-in reviewer in force, if any."""
    return _reviewer


def set_stand_in(reviewer: StandInReviewer | None) -> StandInReviewer | None:
    """Install ``reviewer`` (or none) and return the previous one."""
    global _reviewer
    previous, _reviewer = _reviewer, reviewer
    return previous
