"""How a guarded tool decides that a call needs a human: :class:`ApprovalPolicy`."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from toolguard._core.checks import flag, kind, optional_text, positive_int
from toolguard._core.records import ALLOWED_DECISIONS, DECISION_TYPES, DecisionType
from toolguard._policy.redact import check_redact
from toolguard._policy.when import may_skip
from toolguard._tools.binding import is_async_callable

ApprovalPredicate = Callable[[dict[str, Any]], bool]
"""Decides, from a call's arguments (by parameter name), whether it needs approval."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalPolicy:
    """How a guarded tool decides that a call needs a human.

    Attributes:
        when: predicate on the call's arguments (a dict by parameter name,
            defaults filled in); ``None`` means every call needs approval.
        description: text shown in the review payload instead of
            ``Tool `NAME` is awaiting approval``.
        ttl: seconds a review of this tool stays open (``None``: the chat's
            default, which by default is no deadline).
        allowed_decisions: the decisions a reviewer may take on this tool,
            a non-empty subset of ``approve``, ``edit``, ``reject`` and
            ``respond``, kept in that order (default ``ALLOWED_DECISIONS``).
            The review payload lists them and other decisions are refused.
        redact: names of parameters whose values are secret: shown as
            ``REDACTED`` to reviewers and in logs, passed for real to the
            tool (checked against the tool's parameters when it is built).
        approvals: how many distinct, named reviewers must approve a call
            before it runs (a quorum; default 1, see docs/policies.md).
        judge: whether a :class:`~toolguard.Judge` with ``auto_approve=True``
            may approve a call of this tool (``False``: a person always
            decides; the judge's verdict still informs them).

    Raises:
        TypeError: ``allowed_decisions`` is not a list or tuple of texts.
        ValueError: it is empty or names an unknown decision type.
    """

    when: ApprovalPredicate | None = None
    description: str | None = None
    ttl: float | None = None
    allowed_decisions: tuple[DecisionType, ...] = ALLOWED_DECISIONS
    redact: tuple[str, ...] = ()
    approvals: int = 1
    judge: bool = True

    def needs_approval(self, args: Mapping[str, Any]) -> bool:
        """Whether a call with these arguments must wait for a human.

        Fails closed: only ``when`` returning ``False`` itself, for arguments
        without a NaN or an infinite number anywhere, means no approval. An
        exception from ``when`` or any other return value means approval.
        """
        if self.when is None:
            return True
        return not may_skip(self.when, args)

    def __post_init__(self) -> None:
        """Refuse wrong types now, not at the first call (a bad policy would need approval)."""
        predicate: object = self.when
        if predicate is not None and (not callable(predicate) or is_async_callable(predicate)):
            msg = f"when must be a function returning True or False, or None, got {kind(predicate)}"
            raise TypeError(msg)
        optional_text(self.description, "description")
        if self.ttl is not None:
            object.__setattr__(self, "ttl", ttl_seconds(self.ttl))
        checked = allowed_decisions_tuple(self.allowed_decisions)
        object.__setattr__(self, "allowed_decisions", checked)  # frozen: normalise once
        object.__setattr__(self, "redact", check_redact(self.redact))
        positive_int(self.approvals, "approvals")
        flag(self.judge, "judge")


def allowed_decisions_tuple(value: Iterable[str]) -> tuple[DecisionType, ...]:
    """Check ``allowed_decisions`` and return it in the canonical order, without repeats.

    Raises:
        TypeError: not a list, tuple or other collection of texts.
        ValueError: empty, or a value that is not a decision type.
    """
    given: object = value  # checked at run time for untyped callers
    if isinstance(given, (str, bytes, Mapping)) or not isinstance(given, Iterable):
        msg = (
            "allowed_decisions must be a list of decision types such as"
            f" ['approve', 'reject'], got {type(given).__name__}"
        )
        raise TypeError(msg)
    items = list(given)
    for item in items:
        if not isinstance(item, str):
            msg = f"allowed_decisions must hold texts, got {type(item).__name__}: {item!r}"
            raise TypeError(msg)
    unknown = [item for item in items if item not in DECISION_TYPES]
    if unknown:
        msg = (
            f"Unknown decision type {unknown[0]!r} in allowed_decisions."
            f" Choices: {list(DECISION_TYPES)}"
        )
        raise ValueError(msg)
    if not items:
        msg = f"allowed_decisions must allow at least one of {list(DECISION_TYPES)}"
        raise ValueError(msg)
    return tuple(kind for kind in DECISION_TYPES if kind in items)


def ttl_seconds(ttl: float | timedelta | None, name: str = "ttl") -> float | None:
    """A time-to-live in seconds, checked to be a positive, finite number or timedelta."""
    if ttl is None:
        return None
    value: object = ttl  # checked at run time for untyped callers
    if isinstance(value, bool) or not isinstance(value, int | float | timedelta):
        msg = f"{name} must be a number of seconds, a timedelta or None, got {kind(value)}"
        raise TypeError(msg)
    seconds = ttl.total_seconds() if isinstance(ttl, timedelta) else float(ttl)
    if not seconds > 0:
        msg = f"A review time-to-live must be positive, got {ttl!r}"
        raise ValueError(msg)
    if not math.isfinite(seconds):
        msg = f"{name} must be finite (None for no deadline), got {ttl!r}"
        raise ValueError(msg)
    return seconds
