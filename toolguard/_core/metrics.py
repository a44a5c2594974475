"""Metrics of tool calls: how each ended, who decided, and how long a person took to decide.

Recorded in one place, :func:`record`, which :func:`toolguard._core.telemetry.finish`
calls for every call that reaches an outcome (the same place its span gets its
outcome), so each call counts once whichever path it took:

* ``toolguard.tool.calls``, a counter (unit ``{call}``) with the attributes
  ``gen_ai.tool.name``, ``toolguard.outcome`` (``executed``, ``rejected``,
  ``denied``, ``expired``, ``cancelled``, ``failed``...) and
  ``toolguard.decided_by`` (:data:`DECIDERS`: ``person``, ``rule``, ``grant``,
  ``judge``, ``shadow``, or ``none`` when nobody had to decide);
* ``toolguard.review.duration``, a histogram (unit ``s``) of the time from a
  review's request to a person's decision, with ``gen_ai.tool.name`` and
  ``toolguard.review.decision`` (``approve``, ``edit``, ``reject``, ``respond``).

They go to the application's OpenTelemetry meter provider when it set one
(``opentelemetry.metrics.set_meter_provider``; toolguard never imports
OpenTelemetry itself and looks for it in ``sys.modules``, as for tracing), and
to every :class:`Sink` added with :func:`add_sink` (``--metrics``: a
Prometheus registry). Without either, nothing is recorded and a call costs one
dictionary lookup. No attribute holds an argument, a result or a reviewer's
name.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Final, Protocol

__all__ = [
    "CALLS",
    "DECIDERS",
    "DURATION",
    "METER_NAME",
    "Sink",
    "active",
    "add_sink",
    "decided_by",
    "record",
    "remove_sink",
]

METER_NAME: Final = "toolguard"
"""The instrumentation scope of toolguard's instruments."""
CALLS: Final = "toolguard.tool.calls"
"""The counter of tool calls by tool, outcome and who decided."""
DURATION: Final = "toolguard.review.duration"
"""The histogram of the seconds from a review's request to a person's decision."""
DECIDERS: Final = ("person", "rule", "grant", "judge", "shadow", "none")
"""The values of ``toolguard.decided_by`` in the metrics."""

_MACHINES: Final = frozenset({"rule", "grant", "judge", "shadow"})
_PROVIDER_NAMED: Final = "OTEL_PYTHON_METER_PROVIDER" in os.environ


class Sink(Protocol):
    """Somewhere else the metrics go (``--metrics``: a Prometheus registry)."""

    def count(self, tool: str, outcome: str, decided_by: str) -> None:
        """One call of ``tool`` reached ``outcome``, decided by ``decided_by``."""
        ...

    def waited(self, tool: str, decision: str, seconds: float) -> None:
        """A person decided ``decision`` on a call of ``tool`` ``seconds`` after the request."""
        ...


_sinks: list[Sink] = []
_instruments: tuple[object, Any, Any] | None = None


def add_sink(sink: Sink) -> None:
    """Send the metrics to ``sink`` too (until :func:`remove_sink`)."""
    _sinks.append(sink)


def remove_sink(sink: Sink) -> None:
    """Stop sending the metrics to ``sink`` (nothing when it was not added)."""
    if sink in _sinks:
        _sinks.remove(sink)


def _provider() -> Any:
    """The meter provider the application set, or ``None``."""
    module = sys.modules.get("opentelemetry.metrics._internal")
    if module is None:
        return None
    provider = getattr(module, "_METER_PROVIDER", None)
    if provider is None and _PROVIDER_NAMED:
        provider = module.get_meter_provider()  # it loads the one the environment names
        if isinstance(provider, module._ProxyMeterProvider):  # none loaded
            return None
    return provider


def active() -> bool:
    """Whether anything records the metrics (a meter provider is set, or a sink added)."""
    return bool(_sinks) or _provider() is not None


def decided_by(by: str | None, decision: str | None) -> str:
    """``toolguard.decided_by`` of the metrics, from a span's ``decided_by`` and decision.

    ``rule``, ``grant``, ``judge`` and ``shadow`` stay; a reviewer's name, or a
    decision by a reviewer nobody named, is ``person``; nobody is ``none``.
    """
    if by in _MACHINES:
        return by or "none"
    return "person" if by is not None or decision is not None else "none"


def _otel(provider: Any) -> tuple[Any, Any]:
    """The counter and histogram of ``provider`` (made once per provider)."""
    global _instruments  # noqa: PLW0603 - one pair of instruments per provider
    cached = _instruments
    if cached is not None and cached[0] is provider:
        return cached[1], cached[2]
    from toolguard._version import __version__  # noqa: PLC0415 - only when recording

    meter = provider.get_meter(METER_NAME, __version__)
    counter = meter.create_counter(
        CALLS, unit="{call}", description="Tool calls by tool, outcome and who decided."
    )
    histogram = meter.create_histogram(
        DURATION, unit="s", description="Seconds from a review's request to a person's decision."
    )
    _instruments = (provider, counter, histogram)
    return counter, histogram


def record(
    tool: str, outcome: str, decided: str, decision: str | None, waited: float | None
) -> None:
    """Count one call of ``tool`` that reached ``outcome`` (``decided``: :func:`decided_by`).

    ``waited``: the seconds a person took to decide ``decision`` (``None``: no
    person decided, or the review's times are unknown).
    """
    provider = _provider()
    if provider is not None:
        counter, histogram = _otel(provider)
        counter.add(
            1,
            {
                "gen_ai.tool.name": tool,
                "toolguard.outcome": outcome,
                "toolguard.decided_by": decided,
            },
        )
        if waited is not None and decision is not None:
            histogram.record(
                waited, {"gen_ai.tool.name": tool, "toolguard.review.decision": decision}
            )
    for sink in tuple(_sinks):  # a sink may be removed meanwhile
        sink.count(tool, outcome, decided)
        if waited is not None and decision is not None:
            sink.waited(tool, decision, waited)
