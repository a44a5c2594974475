"""Helpers for testing your own agents that use toolguard.

While one of these is active, nobody is asked: every call that would need
approval is decided on the spot by a stand-in reviewer — in direct calls of
guarded functions, in :class:`~toolguard.Runner` and in the chat use case.
Each works as a context manager and as a decorator::

    from toolguard.testing import auto_approve, fixed_decisions

    def test_agent_sends_the_mail():
        with auto_approve() as log:
            run_my_agent("mail Alice")
        assert [c.name for c in log.calls] == ["send_email"]

    def test_agent_adjusts_after_rejection():
        with fixed_decisions([{"type": "reject", "message": "wrong address"}, {"type": "approve"}]):
            ...

A direct call of a guarded function that the stand-in rejects raises
:class:`~toolguard.ActionRejectedError`. The switch is process-wide and is
restored when the block ends; do not run tests that use it in parallel
threads of one process.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from toolguard._models import ApproveDecision, EditDecision, RejectDecision, ToolCall
from toolguard._override import set_stand_in
from toolguard._validate import parse_decision

__all__ = ["ReviewLog", "auto_approve", "auto_reject", "fixed_decisions"]

AnyDecision = ApproveDecision | EditDecision | RejectDecision


@dataclass(slots=True)
class ReviewLog:
    """What the stand-in reviewer saw and decided, in order."""

    calls: list[ToolCall] = field(default_factory=list)
    """Every call that needed approval."""
    decisions: list[AnyDecision] = field(default_factory=list)
    """The decision given for each of them."""


@contextmanager
def _stand_in(decide: Any) -> Iterator[ReviewLog]:
    log = ReviewLog()

    def reviewer(call: ToolCall) -> AnyDecision:
        decision: AnyDecision = decide(call)
        log.calls.append(call)
        log.decisions.append(decision)
        return decision

    previous = set_stand_in(reviewer)
    try:
        yield log
    finally:
        set_stand_in(previous)


@contextmanager
def auto_approve() -> Iterator[ReviewLog]:
    """Approve every call that needs approval; yields the :class:`ReviewLog`."""
    with _stand_in(lambda _call: ApproveDecision()) as log:
        yield log


@contextmanager
def auto_reject(message: str | None = None) -> Iterator[ReviewLog]:
    """Reject every call that needs approval, with ``message`` as the reason."""
    with _stand_in(lambda _call: RejectDecision(message=message)) as log:
        yield log


@contextmanager
def fixed_decisions(decisions: Iterable[Any]) -> Iterator[ReviewLog]:
    """Answer the calls that need approval with these decisions, in order.

    Args:
        decisions: decision dicts in the wire format or decision models. They
            are checked up front (``InvalidReviewDecisionError``).

    Raises:
        AssertionError: when more calls need approval than decisions were
            given — the agent asked for something the test did not expect.
    """
    queue = [parse_decision(d) for d in decisions]
    given = len(queue)

    def decide(call: ToolCall) -> AnyDecision:
        if not queue:
            msg = (
                f"fixed_decisions got {given} decisions, but another call needs approval:"
                f" {call.name}({call.args})"
            )
            raise AssertionError(msg)
        return queue.pop(0)

    with _stand_in(decide) as log:
        yield log
