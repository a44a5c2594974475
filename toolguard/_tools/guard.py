"""``requires_approval``: guard a function or tool so that calling it needs a human's approval.

The guarded callable looks exactly the same to any framework (name,
docstring, signature, type hints, sync or async), but calling it raises
:class:`~toolguard.ApprovalRequiredError` instead of running the body, unless
a ``when=`` predicate says this call needs no approval or
:func:`~toolguard.allow_once` granted it (see :meth:`Tool.__call__
<toolguard.Tool.__call__>` for the checks of a direct call).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any, ParamSpec, TypeVar, overload

from toolguard._core.checks import flag, optional_text
from toolguard._core.records import ALLOWED_DECISIONS, DecisionType
from toolguard._policy.redact import check_redact
from toolguard._policy.when import discard, has_non_finite
from toolguard._tools.approval import (
    ApprovalPolicy,
    ApprovalPredicate,
    allowed_decisions_tuple,
    ttl_seconds,
)
from toolguard._tools.binding import caller_locals, is_async_callable, reject_unwrappable
from toolguard._tools.tool import Tool

P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])

_POLICY_ATTR = "__toolguard_approval__"


@overload
def requires_approval(func: Tool[P, R], /) -> Tool[P, R]: ...
@overload
def requires_approval(func: F, /) -> F: ...
@overload
def requires_approval(
    *,
    when: ApprovalPredicate | None = None,
    description: str | None = None,
    ttl: float | timedelta | None = None,
    allowed_decisions: Iterable[DecisionType] = ALLOWED_DECISIONS,
    redact: Iterable[str] = (),
    approvals: int = 1,
    judge: bool = True,
    in_thread: bool = True,
) -> _Guard: ...
def requires_approval(
    func: Any = None,
    /,
    *,
    when: ApprovalPredicate | None = None,
    description: str | None = None,
    ttl: float | timedelta | None = None,
    allowed_decisions: Iterable[DecisionType] = ALLOWED_DECISIONS,
    redact: Iterable[str] = (),
    approvals: int = 1,
    judge: bool = True,
    in_thread: bool = True,
) -> Any:
    """Guard a function or tool: calling it needs a human's approval first.

    Use bare or with options::

        @requires_approval
        def delete_file(path: str) -> None: ...

        @requires_approval(when=lambda args: args["amount"] > 1000)
        def transfer(amount: float, to: str) -> str: ...

    The guarded function keeps its name, docstring, signature, type hints and
    sync/async nature, so any framework derives the same schema from it. Its
    body does not run: the call raises :class:`~toolguard.ApprovalRequiredError`
    carrying the review payload. It runs when ``when`` says this call needs no
    approval, inside :func:`~toolguard.allow_once` for exactly that call, or
    when the toolguard runner executes an approved call.

    Args:
        func: the function or :class:`Tool` (bare use).
        when: predicate on the call's arguments (a dict by parameter name,
            defaults included; validated values when the runner calls it).
            Return ``True`` when the call needs approval, ``False`` when it
            does not. It fails closed: the call needs approval when the
            predicate raises or returns anything but ``False``, when a NaN or
            an infinite number is anywhere in the arguments, and when the
            arguments do not bind to the signature (then the call raises
            ``TypeError`` and does not run).
        description: text for the review payload instead of
            ``Tool `NAME` is awaiting approval``.
        ttl: how long a review of this tool stays open (seconds or a
            ``timedelta``); past it the request is ``expired`` and never runs.
            Overrides the chat's ``review_ttl``.
        allowed_decisions: the decisions a reviewer may take, e.g.
            ``["approve", "reject"]`` (no edits) or ``["respond"]`` for an
            "ask the user" tool; a non-empty subset of ``approve``, ``edit``,
            ``reject`` and ``respond``. Default: ``ALLOWED_DECISIONS``.
        redact: names of secret parameters (top-level only), e.g.
            ``["password"]``: the review payload, the error, audit events,
            the page and error texts show ``REDACTED`` instead of the value,
            while the tool gets the real value. Parameters typed
            ``pydantic.SecretStr`` are redacted without being named.
        approvals: a quorum: how many distinct, named, authorized reviewers
            must approve a call before it runs (default 1). One reject ends
            the review; an edit restarts the count. See "A quorum of
            reviewers" in docs/policies.md.
        judge: ``False`` keeps a :class:`~toolguard.Judge` from approving
            calls of this tool on its own (with ``auto_approve=True``): a
            person always decides; the judge's verdict still informs them.
        in_thread: ``False`` runs a sync function on the event loop's thread
            once the runner may run it (no worker-thread hop). It then blocks
            the event loop while it runs: only for quick functions. See
            :func:`tool`. Default ``True``.

    Raises:
        TypeError: for classes, generators and non-callables, at decoration
            time; for ``allowed_decisions`` that is not a list of texts; for
            ``redact`` that is not a list of texts; for ``in_thread`` that is
            not ``True`` or ``False`` (and for ``judge`` likewise).
        ValueError: for a ``ttl`` that is not positive; for
            ``allowed_decisions`` that is empty or names an unknown type; for
            a ``redact`` name that is not a parameter of the function, or
            a dotted path; for ``approvals`` below 1 (``TypeError`` when not
            an int).
    """
    predicate: object = when  # checked at run time for untyped callers
    if predicate is not None and not callable(predicate):
        msg = f"when= must be a callable taking the arguments dict, got {type(predicate).__name__}"
        raise TypeError(msg)
    if predicate is not None and is_async_callable(predicate):
        msg = (
            "when= must be a plain function returning True or False: an async predicate"
            " cannot be awaited by a sync call"
        )
        raise TypeError(msg)
    optional_text(description, "description")
    guard = _Guard(
        ApprovalPolicy(
            when=when,
            description=description,
            ttl=ttl_seconds(ttl),
            allowed_decisions=allowed_decisions_tuple(allowed_decisions),
            redact=check_redact(redact),
            approvals=approvals,
            judge=judge,
        ),
        in_thread=flag(in_thread, "in_thread"),
    )
    if func is not None:
        return guard.wrap(func, caller_locals())
    return guard


class _Guard:
    """The configured form of :func:`requires_approval`."""

    __slots__ = ("in_thread", "policy")

    def __init__(self, policy: ApprovalPolicy, *, in_thread: bool = True) -> None:
        self.policy = policy
        self.in_thread = in_thread

    @overload
    def __call__(self, func: Tool[P, R], /) -> Tool[P, R]: ...
    @overload
    def __call__(self, func: F, /) -> F: ...
    def __call__(self, func: Any, /) -> Any:
        return self.wrap(func, caller_locals())

    def wrap(self, func: Any, localns: dict[str, Any]) -> Any:
        """Guard ``func``; ``localns`` resolves annotations naming local classes."""
        if isinstance(func, Tool):
            return func._derive(
                name=func.name,
                description=func.description,
                approval=self.policy,
                in_thread=self.in_thread,
            )
        reject_unwrappable(func, "requires_approval")
        built: Tool[Any, Any] | None = getattr(func, "__toolguard_tool__", None)
        target = built.func if built is not None else func
        in_thread = self.in_thread and (built is None or built.in_thread)
        # Build the tool now: it validates the signature once and gives a fast binder.
        guarded_tool: Tool[Any, Any] = Tool(
            target,
            approval=self.policy,
            redact=built.redact if built is not None else (),
            in_thread=in_thread,
            _localns=localns,
        )
        wrapper: Callable[..., Any]
        if guarded_tool.is_async:

            @functools.wraps(target)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                return await guarded_tool._call_async(args, kwargs)

            wrapper = async_wrapper
        else:
            full = guarded_tool._binder.full_plain
            when = self.policy.when
            if when is not None and full is not None:
                # The hot path of an allowed call, inlined: bind, check, ask, run. Every
                # doubt goes to the approval path, which raises and never runs the body.
                call_guarded = guarded_tool._call_needing_approval

                @functools.wraps(target)
                def wrapper(*args: Any, **kwargs: Any) -> Any:
                    try:
                        bound, plain = full(*args, **kwargs)
                    except TypeError:
                        return call_guarded(args, kwargs)  # raises: cannot be judged
                    if plain or not has_non_finite(bound.values()):
                        try:
                            verdict = when(bound)
                        except Exception:
                            verdict = True
                        if verdict is False:
                            return target(*args, **kwargs)
                        discard(verdict)
                    return call_guarded(args, kwargs)

            else:

                @functools.wraps(target)
                def wrapper(*args: Any, **kwargs: Any) -> Any:
                    return guarded_tool._call_guarded(args, kwargs)

        setattr(wrapper, _POLICY_ATTR, self.policy)
        wrapper.approvals = self.policy.approvals  # type: ignore[attr-defined]
        wrapper.__toolguard_tool__ = guarded_tool  # type: ignore[attr-defined]
        return wrapper
