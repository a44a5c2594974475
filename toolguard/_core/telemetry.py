"""OpenTelemetry spans for tool calls and their reviews, when the application traces.

toolguard never imports OpenTelemetry itself: an application that traces has
imported ``opentelemetry.trace`` to set its tracer provider, so :func:`tracer`
looks for that module in ``sys.modules`` and asks it for the global provider.
Without OpenTelemetry, or without a provider set, nothing is emitted and the
cost is one dictionary lookup (plus one call when the module is loaded).

Spans (see docs/observability.md):

* ``execute_tool {tool name}`` for every call that reaches an outcome, open
  while the tool runs, with the GenAI semantic conventions' attributes
  (``gen_ai.tool.type``: ``function`` for a tool the application runs,
  ``extension`` for one an MCP server runs behind the gateway) and
  ``toolguard.outcome``, ``toolguard.decided_by``, ``toolguard.review_id`` and
  ``toolguard.review.wait_ms``; a call that did not run (refused, rejected,
  expired, cancelled...) or failed has the status ``ERROR`` and its kind as
  ``error.type``;
* ``toolguard.review`` from the request to the decision (its start and end
  times are the action's ``requested_at`` and ``decided_at``), a child of the
  call's span.

A reviewed call belongs to its caller's trace: the span current when the call
was proposed is kept with its request (``Action.trace_parent``, a W3C
``traceparent``), and the call's span is its child wherever the decision is
applied; the span current there (a reviewer's HTTP request) is linked to it.

No attribute holds an argument, a result, a reason or an error message: only
names, ids, outcomes, times and the tool's own description, so no secret can
reach an exporter.

The same outcome is counted by :mod:`toolguard._core.metrics` in :func:`finish`
(the one place every call's outcome is recorded): while metrics are recorded
but nothing traces, :func:`tracer` gives a tracer whose spans go nowhere, so
every path still reaches :func:`finish`.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Protocol, cast

from toolguard._core import metrics
from toolguard._core.records import Action, ToolResult
from toolguard._version import __version__

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Link, Span, Tracer


class Tool(Protocol):
    """What a span reads of a tool (a :class:`toolguard.Tool`): its function and description."""

    @property
    def func(self) -> Any: ...

    @property
    def description(self) -> str: ...


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

FUNCTION = "function"
"""``gen_ai.tool.type`` of a tool the application's own code runs (the conventions' client side)."""
EXTENSION = "extension"
"""``gen_ai.tool.type`` of a tool a server runs for the agent (an MCP server behind the gateway)."""
TOOL_TYPE_ATTRIBUTE = "__toolguard_tool_type__"
"""Set on a tool's function to give its ``gen_ai.tool.type`` (see :func:`mark_type`)."""

_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
"""A W3C ``traceparent`` of version 00, as :func:`caller` writes it."""

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
BY_SHADOW = "shadow"
"""``toolguard.decided_by`` when shadow mode ran a call a person (or a deny rule) would have
stopped; ``toolguard.shadow.would`` says which (``ask`` or ``deny``)."""

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
    trace_parent: str | None = None
    """The W3C ``traceparent`` of the span current when the call was proposed (its caller):
    the call's span joins that trace (``None``: the span current where it runs)."""
    would: str | None = None
    """In shadow mode: what the enforced policy would have done (``ask`` or ``deny``), the
    span's ``toolguard.shadow.would``."""


def mark_type(func: Callable[..., Any], tool_type: str) -> None:
    """Give the tools running ``func`` the ``gen_ai.tool.type`` ``tool_type``."""
    setattr(func, TOOL_TYPE_ATTRIBUTE, tool_type)


def _tool_facts(tool: Tool | None) -> dict[str, Any]:
    """``gen_ai.tool.type`` and, when it has one, ``gen_ai.tool.description`` of ``tool``.

    Without the tool (a framework's call whose tool was not handed over, an
    unknown tool) the type is ``function``: every such path runs the
    application's own functions.
    """
    if tool is None:
        return {"gen_ai.tool.type": FUNCTION}
    facts: dict[str, Any] = {
        "gen_ai.tool.type": getattr(tool.func, TOOL_TYPE_ATTRIBUTE, FUNCTION),
    }
    if tool.description:
        facts["gen_ai.tool.description"] = tool.description
    return facts


def caller() -> str | None:
    """The W3C ``traceparent`` of the span current now, when the application traces.

    Kept with a review's request (``Action.trace_parent``) so that the call's
    span joins its caller's trace wherever the decision is applied. ``None``
    without a tracer provider or a current span (one dictionary lookup).
    """
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None or _tracer(trace) is None:
        return None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


@contextmanager
def current(trace_parent: str | None) -> Iterator[None]:
    """Make the span ``trace_parent`` names (another process's) the current one while inside.

    A decision taken on another process's page is applied where the call
    waits: its request's span, handed over, is then linked to the call's span
    as if it were applied there. Nothing changes without a valid one, or when
    the application does not trace.
    """
    found = _TRACEPARENT.fullmatch(trace_parent) if trace_parent else None
    if found is None or _tracing() is None:
        yield
        return
    from opentelemetry import context, trace  # noqa: PLC0415 - loaded by the application

    origin = trace.SpanContext(
        int(found[1], 16),
        int(found[2], 16),
        is_remote=True,
        trace_flags=trace.TraceFlags(int(found[3], 16)),
    )
    if not origin.is_valid:
        yield
        return
    token = context.attach(trace.set_span_in_context(trace.NonRecordingSpan(origin)))
    try:
        yield
    finally:
        context.detach(token)


def _placement(trace_parent: str | None) -> tuple[Context | None, list[Link] | None]:
    """Where a call's span goes: its parent context and its links.

    A call proposed under another trace than the current one (a review decided
    by a reviewer's request, a turn resumed elsewhere) becomes a child of its
    caller's span, with the current span linked to it; otherwise it is a child
    of the current span, as any span.
    """
    found = _TRACEPARENT.fullmatch(trace_parent) if trace_parent else None
    if found is None:
        return None, None
    from opentelemetry import trace  # noqa: PLC0415 - loaded by the application

    trace_id, span_id = int(found[1], 16), int(found[2], 16)
    if trace_id == 0 or span_id == 0:
        return None, None
    current = trace.get_current_span().get_span_context()
    if current.is_valid and current.trace_id == trace_id:
        return None, None  # already in the caller's trace: under the current span
    origin = trace.SpanContext(
        trace_id, span_id, is_remote=True, trace_flags=trace.TraceFlags(int(found[3], 16))
    )
    parent = trace.set_span_in_context(trace.NonRecordingSpan(origin))
    return parent, [trace.Link(current)] if current.is_valid else None


def tracer() -> Tracer | None:
    """toolguard's tracer when the application set a tracer provider, else ``None``.

    While metrics are recorded (:func:`toolguard._core.metrics.active`) and
    nothing traces, a tracer whose spans go nowhere, so that every call's
    outcome still reaches :func:`finish`, where it is counted.
    """
    found = _tracing()
    if found is None and metrics.active():
        return _NOWHERE
    return found


def _tracing() -> Tracer | None:
    """toolguard's tracer when the application set a tracer provider, else ``None``."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    return _tracer(trace)


class _NowhereSpan:
    """A span that records nothing (no OpenTelemetry needed)."""

    def set_attribute(self, key: str, value: Any) -> None:
        """Nothing."""

    def end(self, end_time: int | None = None) -> None:
        """Nothing."""


class _Nowhere:
    """The tracer of :func:`tracer` while only metrics are recorded: its spans go nowhere."""

    def start_span(self, name: str, **_: Any) -> Any:
        """A span that records nothing."""
        return _NOWHERE_SPAN


_NOWHERE_SPAN: Span = cast("Span", _NowhereSpan())
"""The span :func:`running` gives while only metrics are recorded."""
_NOWHERE: Tracer = cast("Tracer", _Nowhere())
"""The tracer :func:`tracer` gives while only metrics are recorded (the parts used here)."""
_CALL: ContextVar[tuple[str, Decided | None] | None] = ContextVar("toolguard_call", default=None)
"""The call whose span is current (its name and how it was decided), for :func:`finish`."""


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


def stdout_exporter() -> str | None:
    """The class name of a span exporter of the application's provider that writes to stdout.

    OpenTelemetry's ``ConsoleSpanExporter`` writes to stdout by default (as
    ``OTEL_TRACES_EXPORTER=console`` sets it up), which is the MCP channel of a
    gateway served over stdio. ``None`` when no exporter of the provider does.
    """
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None or _tracer(trace) is None:
        return None
    provider = trace.get_tracer_provider()
    active = getattr(provider, "_active_span_processor", None)
    for processor in getattr(active, "_span_processors", ()):
        exporter = getattr(processor, "span_exporter", None)
        out = getattr(exporter, "out", None)
        if out is not None and _is_stdout(out):
            return type(exporter).__name__
    return None


def _is_stdout(stream: Any) -> bool:
    """Whether ``stream`` writes to this process's standard output."""
    if stream is sys.stdout or stream is sys.__stdout__:
        return True
    try:
        return bool(stream.fileno() == 1)
    except (AttributeError, OSError, ValueError):
        return False


def outcome_of(result: ToolResult) -> str:
    """``toolguard.outcome`` for the result the model reads."""
    if result.outcome is None:
        return "executed"
    return _OUTCOMES.get(result.outcome, "failed")


def _call_attributes(
    call_id: str, name: str, decided: Decided | None, tool: Tool | None
) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
    }
    if call_id:  # absent when the framework gave the call no id
        attributes["gen_ai.tool.call.id"] = call_id
    attributes.update(_tool_facts(tool))
    if decided is None:
        return attributes
    by = decided.outcome_by or decided.by
    if by is not None:
        attributes["toolguard.decided_by"] = by
    if decided.would is not None:
        attributes["toolguard.shadow.would"] = decided.would
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
def running(
    otel: Tracer,
    call_id: str,
    name: str,
    decided: Decided | None,
    *,
    tool: Tool | None = None,
) -> Iterator[Span]:
    """The ``execute_tool`` span of a call about to run, current while it runs.

    Spans the tool makes nest under it. A reviewed call's span is a child of
    its caller's (``decided.trace_parent``) when that is another trace than
    the current one, which is then linked to it. ``tool`` gives
    ``gen_ai.tool.type`` and ``gen_ai.tool.description``. The caller sets the
    outcome with :func:`finish` before leaving.
    """
    token = _CALL.set((name, decided))
    try:
        if otel is _NOWHERE:  # only metrics are recorded: counted in finish()
            yield _NOWHERE_SPAN
            return
        parent, links = _placement(decided.trace_parent if decided is not None else None)
        with otel.start_as_current_span(
            f"execute_tool {name}",
            context=parent,
            links=links,
            attributes=_call_attributes(call_id, name, decided, tool),
            record_exception=False,  # an exception's text may quote a secret
            set_status_on_exception=False,
        ) as span:
            _review_span(otel, name, decided)
            yield span
    finally:
        _CALL.reset(token)


def finish(span: Span, outcome: str, error_type: str | None = None) -> None:
    """Record ``outcome`` on a call's span; any outcome but ``executed`` marks it an error.

    ``error.type`` is the outcome (``rejected``, ``denied``, ``expired``,
    ``cancelled``...), so a dashboard counts executed and refused calls from
    the standard attributes; a ``failed`` call's is ``error_type`` (the
    exception's class, or why it could not run). The call is counted in the
    metrics here (:func:`toolguard._core.metrics.record`), once.
    """
    call = _CALL.get()
    if call is not None:
        _count(call[0], outcome, call[1])
    if span is _NOWHERE_SPAN:
        return
    span.set_attribute("toolguard.outcome", outcome)
    if outcome != "executed":
        from opentelemetry.trace import StatusCode  # noqa: PLC0415 - loaded by the application

        span.set_attribute(
            "error.type", (error_type or "failed") if outcome == "failed" else outcome
        )
        span.set_status(StatusCode.ERROR)


def _count(name: str, outcome: str, decided: Decided | None) -> None:
    """Count a call of ``name`` that reached ``outcome`` in the metrics."""
    if decided is None:
        metrics.record(name, outcome, "none", None, None)
        return
    decision = decided.decision
    waited = None
    if decision is not None and decided.requested_at is not None and decided.decided_at:
        waited = max(0.0, (decided.decided_at - decided.requested_at).total_seconds())
    by = metrics.decided_by(decided.outcome_by or decided.by, decision)
    metrics.record(name, outcome, by, decision, waited)


def ended(
    otel: Tracer,
    call_id: str,
    name: str,
    result: ToolResult,
    decided: Decided | None,
    *,
    tool: Tool | None = None,
) -> None:
    """The span of a call that reached its outcome without running (refused, rejected...)."""
    outcome = outcome_of(result)
    with running(otel, call_id, name, decided, tool=tool) as span:
        finish(span, outcome, result.outcome)


def actions_ended(
    review_id: str,
    actions: Iterable[Action],
    reviewer: str | None = None,
    tools: Any = None,
) -> None:
    """Spans for review actions that ended without running (closed, interrupted, refused).

    Each action with a result gets its call's span and its review's span;
    one without a result (an edit put up for review again) gets the review's
    span only. ``reviewer``: who decided, for actions that do not name one;
    ``tools``: the toolset (anything with ``get(name)``), for each tool's type
    and description.
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
        name = action.result.name or action.name
        tool = tools.get(name) if tools is not None else None
        ended(otel, action.call_id, name, action.result, decided, tool=tool)


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
        trace_parent=action.trace_parent,
    )
