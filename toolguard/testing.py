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

import functools
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from toolguard._core.records import (
    ApproveDecision,
    EditDecision,
    RejectDecision,
    RespondDecision,
    ToolCall,
)
from toolguard._policy.decisions import parse_decision
from toolguard._policy.stand_in import StandInReviewer, set_stand_in

__all__ = ["ReviewLog", "StandIn", "auto_approve", "auto_reject", "fixed_decisions"]

F = TypeVar("F", bound=Callable[..., Any])

AnyDecision = ApproveDecision | EditDecision | RejectDecision


@dataclass(slots=True)
class ReviewLog:
    """What the stand-in reviewer saw and decided, in order."""

    calls: list[ToolCall] = field(default_factory=list)
    """Every call that needed approval."""
    decisions: list[AnyDecision] = field(default_factory=list)
    """The decision given for each of them."""


class StandIn:
    """A stand-in reviewer switch: a context manager (sync or async) and a decorator.

    Returned by :func:`auto_approve`, :func:`auto_reject` and
    :func:`fixed_decisions`. As a decorator it wraps sync and async functions
    alike, so ``@auto_approve()`` works on ``async def`` tests too. Each use
    starts afresh: a new :class:`ReviewLog`, and the full list of decisions
    again for :func:`fixed_decisions`.
    """

    def __init__(self, make_decide: Callable[[], Callable[[ToolCall], AnyDecision]]) -> None:
        self._make_decide = make_decide
        self._previous: list[StandInReviewer | None] = []
        self.log = ReviewLog()

    def _reviewer(self, log: ReviewLog) -> StandInReviewer:
        decide = self._make_decide()

        def review(call: ToolCall) -> AnyDecision:
            decision = decide(call)
            log.calls.append(call)
            log.decisions.append(decision)
            return decision

        return review

    def __enter__(self) -> ReviewLog:
        self.log = ReviewLog()
        self._previous.append(set_stand_in(self._reviewer(self.log)))
        return self.log

    def __exit__(self, *exc_info: object) -> None:
        set_stand_in(self._previous.pop())

    async def __aenter__(self) -> ReviewLog:
        return self.__enter__()

    async def __aexit__(self, *exc_info: object) -> None:
        self.__exit__(*exc_info)

    def __call__(self, func: F) -> F:
        """Use as a decorator: the stand-in is active while ``func`` runs."""
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                with self:
                    return await func(*args, **kwargs)

            return run_async  # type: ignore[return-value]  # same signature as func

        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return run  # type: ignore[return-value]  # same signature as func


def auto_approve() -> StandIn:
    """Approve every call that needs approval; ``with`` gives the :class:`ReviewLog`."""
    return StandIn(lambda: lambda _call: ApproveDecision())


def auto_reject(message: str | None = None) -> StandIn:
    """Reject every call that needs approval, with ``message`` as the reason."""
    return StandIn(lambda: lambda _call: RejectDecision(message=message))


def fixed_decisions(decisions: Iterable[Any]) -> StandIn:
    """Answer the calls that need approval with these decisions, in order.

    Args:
        decisions: decision dicts in the wire format or decision models. They
            are checked up front (``InvalidReviewDecisionError``).
            ``respond`` is not supported here (``ValueError``).

    Raises:
        AssertionError: (from the guarded call) when more calls need approval
            than decisions were given — the agent asked for something the test
            did not expect.
    """
    checked: list[ApproveDecision | EditDecision | RejectDecision] = []
    for item in decisions:
        decision = parse_decision(item)
        if isinstance(decision, RespondDecision):
            msg = "fixed_decisions takes approve, edit and reject decisions, not 'respond'"
            raise ValueError(msg)
        checked.append(decision)

    def make_decide() -> Callable[[ToolCall], AnyDecision]:
        queue = list(checked)

        def decide(call: ToolCall) -> AnyDecision:
            if not queue:
                msg = (
                    f"fixed_decisions got {len(checked)} decision{'s' * (len(checked) != 1)},"
                    " but another call needs"
                    f" approval: {call.name}({call.args})"
                )
                raise AssertionError(msg)
            return queue.pop(0)

        return decide

    return StandIn(make_decide)
