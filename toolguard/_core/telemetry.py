"""OpenTelemetry spans for tool calls and their reviews, when the application traces.

toolguard never imports OpenTelemetry itself: an application that traces has
imported ``opentelemetry.trace`` to set its tracer provider, so :func:`tracer`
looks for that module in ``sys.modules`` and asks it for the global provider.
Without OpenTelemetry, or without a provider set, nothing is emitted and the
cost is one dictionary lookup (plus one call when the module is loaded).

Spans (see docs/observability.md):

* ``execute_tool {tool name}`` for every call that reaches an outcome, open
  while the tool runs, with the GenAI semantic conventions' attributes and
  ``toolguard.outcome``, ``toolguard.decided_by``, ``toolguard.review_id`` and
  ``toolguard.review.wait_ms``;
* ``toolguard.review`` from the request to the decision (its start and end
  times are the action's ``requested_at`` and ``decided_at``), a child of the
  call's span.

No attribute holds an argument, a result, a reason or an error message: only
names, ids, outcomes and times, so no secret can reach an exporter.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from toolguard._core.records import Action, ToolResult
from toolguard._version import __version__

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

TRACER_NAME = "toolguard"
"""The instrumentation scope of every span toolguard emits."""

_OUTCOMES: dict[str, str] = {
    "rejected": "rejected",
    "no_decision": "rejected",
    "responded": "responded",
    "expired": "expired",
    "cancelled": "cancelled",
    "denied": "denied",
    "interrupted": "interrupted",
}
"""``toolguard.outcome`` for a result's ``outcome`` (any other failure is ``failed``)."""

_UNREAD = object()
_PROVIDER_VARIABLE = "OTEL_PYTHON_TRACER_PROVIDER"
"""The environment variable naming a tracer provider to load (OpenTelemetry's own)."""
_PROVIDER_NAMED = _PROVIDER_VARIABLE in os.environ
"""Whether the environment names a provider (read once, when toolguard is imported)."""

BY_RULE = "rule"
"""``toolguard.decided_by`` when an allow or deny rule decided."""
BY_GRANT = "grant"
"""``toolguard.decided_by`` when a standing grant let the call run."""
BY_JUDGE = "judge"
"""``toolguard.decided_by`` when a judge approved the call on its own."""

_cached: tuple[object, Tracer] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Decided:
    """Who let a call reach its outcome, and the review it waited for (if any).

    Attributes:
        by: ``toolguard.decided_by``: the reviewer's id, ``"judge"``,
            ``"rule"`` or ``"grant"``; ``None`` when nobody decided (no
            approval was needed, an unnamed reviewer or a review that expired).
        review_id: the review the call waited in (``None``: it was not reviewed).
        requested_at: when the review was requested.
        decided_at: when it was decided (or closed).
        decision: the decision's type (``approve``, ``edit``, ``reject``,
            ``respond``); ``None`` when the review ended without one.
        status: the action's status at the decision (``approved``,
            ``rejected``, ``expired``...).
        outcome_by: who decided the outcome when it was not the reviewer
            (``"rule"``: a deny rule refused the approved call).
    """

    by: str | None = None
    review_id: str | None = None
    requested_at: datetime | None = None
    decided_at: datetime | None = None
    decision: str | None = None
    status: str | None = None
    outcome_by: str | None = None


def tracer() -> Tracer | None:
    """toolguard's tracer when the application set a tracer provider, else ``None``."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    return _tracer(trace)


def _tracer(trace: Any) -> Tracer | None:
    global _cached  # noqa: PLW0603 - one tracer per provider, kept across calls
    # The provider set by the application, read without get_tracer_provider()'s look at the
    # environment on every call (that function remains the fallback).
    provider: Any = getattr(trace, "_TRACER_PROVIDER", _UNREAD)
    if provider is None:
        if not _PROVIDER_NAMED:
            return None  # no provider set: nothing is recorded
        provider = trace.get_tracer_provider()  # it loads the one the environment names
    elif provider is _UNREAD:
        provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None  # no provider set: nothing is recorded
    cached = _cached
    if cached is not None and cached[0] is provider:
        return cached[1]
    made: Tracer = provider.get_tracer(TRACER_NAME, __version__)
    _cached = (provider, made)
    return made


def outcome_of(result: ToolResult) -> str:
    """``toolguard.outcome`` for the result the model reads."""
    if result.outcome is None:
        return "executed"
    return _OUTCOMES.get(result.outcome, "failed")


def _call_attributes(call_id: str, name: str, decided: Decided | None) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
    }
    if call_id:  # absent when the framework gave the call no id
        attributes["gen_ai.tool.call.id"] = call_id
    if decided is None:
        return attributes
    by = decided.outcome_by or decided.by
    if by is not None:
        attributes["toolguard.decided_by"] = by
    if decided.review_id is not None:
        attributes["toolguard.review_id"] = decided.review_id
        if decided.requested_at is not None and decided.decided_at is not None:
            waited = decided.decided_at - decided.requested_at
            attributes["toolguard.review.wait_ms"] = max(0, round(waited.total_seconds() * 1000))
    return attributes


def _review_span(otel: Tracer, name: str, decided: Decided | None) -> None:
    """The ``toolguard.review`` span of ``decided``'s review (a child of the current span)."""
    if decided is None or decided.review_id is None or decided.requested_at is None:
        return
    end = decided.decided_at or decided.requested_at
    attributes: dict[str, Any] = {
        "toolguard.review_id": decided.review_id,
        "gen_ai.tool.name": name,
    }
    if decided.decision is not None:
        attributes["toolguard.review.decision"] = decided.decision
    if decided.by is not None:
        attributes["toolguard.decided_by"] = decided.by
    if decided.status is not None:
        attributes["toolguard.review.status"] = decided.status
    span = otel.start_span(
        "toolguard.review", attributes=attributes, start_time=_ns(decided.requested_at)
    )
    span.end(end_time=_ns(end))


def _ns(moment: datetime) -> int:
    """``moment`` in nanoseconds since the epoch (a naive time is read as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return round(moment.timestamp() * 1_000_000) * 1000


@contextmanager
def running(otel: Tracer, call_id: str, name: str, decided: Decided | None) -> Iterator[Span]:
    """The ``execute_tool`` span of a call about to run, current while it runs.

    Spans the tool makes nest under it. The caller sets the outcome with
    :func:`finish` before leaving.
    """
    with otel.start_as_current_span(
        f"execute_tool {name}",
        attributes=_call_attributes(call_id, name, decided),
        record_exception=False,  # an exception's text may quote a secret
        set_status_on_exception=False,
    ) as span:
        _review_span(otel, name, decided)
        yield span


def finish(span: Span, outcome: str, error_type: str | None = None) -> None:
    """Record ``outcome`` on a call's span (``failed`` marks it an error, with ``error_type``)."""
    span.set_attribute("toolguard.outcome", outcome)
    if outcome == "failed":
        from opentelemetry.trace import StatusCode  # noqa: PLC0415 - loaded by the application

        span.set_attribute("error.type", error_type or "failed")
        span.set_status(StatusCode.ERROR)


def ended(
    otel: Tracer, call_id: str, name: str, result: ToolResult, decided: Decided | None
) -> None:
    """The span of a call that reached its outcome without running (refused, rejected...)."""
    outcome = outcome_of(result)
    with running(otel, call_id, name, decided) as span:
        finish(span, outcome, result.outcome)


def actions_ended(review_id: str, actions: Iterable[Action], reviewer: str | None = None) -> None:
    """Spans for review actions that ended without running (closed, interrupted, refused).

    Each action with a result gets its call's span and its review's span;
    one without a result (an edit put up for review again) gets the review's
    span only. ``reviewer``: who decided, for actions that do not name one.
    """
    otel = tracer()
    if otel is None:
        return
    for action in actions:
        decided = action_decided(review_id, action, reviewer)
        if action.result is None:
            _review_span(otel, action.name, decided)
            continue
        if action.result.outcome == "denied":  # a deny rule refused the approved call
            decided = replace(decided, outcome_by=BY_RULE)
        ended(otel, action.call_id, action.result.name or action.name, action.result, decided)


def action_decided(review_id: str, action: Action, reviewer: str | None = None) -> Decided:
    """How ``action`` was decided, for its spans."""
    decision = action.decision
    status = action.status
    if status in {"executed", "failed"}:  # the status the decision gave
        status = "approved" if decision is not None and decision.type == "approve" else "edited"
    return Decided(
        by=action.reviewer if action.reviewer is not None else reviewer,
        review_id=review_id,
        requested_at=action.requested_at,
        decided_at=action.decided_at or action.finished_at,
        decision=decision.type if decision is not None else None,
        status=status,
    )
