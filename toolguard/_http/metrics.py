"""``--metrics``: toolguard's metrics for Prometheus, at ``GET /metrics``.

:class:`PrometheusMetrics` is a :class:`~toolguard._core.metrics.Sink` with a
registry of its own (``prometheus-client``, the ``prometheus`` extra):

* ``toolguard_tool_calls_total{tool, outcome, decided_by}``, a counter;
* ``toolguard_review_duration_seconds{tool, decision}``, a histogram of the time
  from a review's request to a person's decision.

:func:`mount_metrics` adds ``GET /metrics`` (the text format Prometheus scrapes)
to an app behind the app's sign-in, while a sink is on (:func:`started`);
:meth:`PrometheusMetrics.serve_on` serves the same on a loopback port without
sign-in, for a scraper on the same machine.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Final

from toolguard._core import metrics

__all__ = ["BUCKETS", "PrometheusMetrics", "mount_metrics", "started"]

BUCKETS: Final = (1, 5, 15, 30, 60, 120, 300, 900, 1800, 3600, 14400, 86400)
"""The histogram's buckets in seconds: from a second to a day (people are slower than code)."""

_started: list[PrometheusMetrics] = []


class PrometheusMetrics:
    """The metrics in a Prometheus registry of their own, while :meth:`start`-ed.

    Raises:
        ImportError: ``prometheus-client`` is not installed (the ``prometheus`` extra).
    """

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram  # noqa: PLC0415

        self.registry = CollectorRegistry(auto_describe=True)
        self._calls = Counter(
            "toolguard_tool_calls",
            "Tool calls by tool, outcome and who decided.",
            ["tool", "outcome", "decided_by"],
            registry=self.registry,
        )
        self._waits = Histogram(
            "toolguard_review_duration_seconds",
            "Seconds from a review's request to a person's decision.",
            ["tool", "decision"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.on_app = False
        """Whether the apps built while it runs serve it at ``GET /metrics``."""
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def count(self, tool: str, outcome: str, decided_by: str) -> None:
        """See :meth:`toolguard._core.metrics.Sink.count`."""
        self._calls.labels(tool, outcome, decided_by).inc()

    def waited(self, tool: str, decision: str, seconds: float) -> None:
        """See :meth:`toolguard._core.metrics.Sink.waited`."""
        self._waits.labels(tool, decision).observe(seconds)

    def text(self) -> bytes:
        """The metrics in Prometheus's text format."""
        from prometheus_client import generate_latest  # noqa: PLC0415

        return bytes(generate_latest(self.registry))

    def start(self, *, on_app: bool = True) -> None:
        """Record toolguard's metrics here from now on (in this process).

        ``on_app``: the apps built from now on serve them at ``GET /metrics``
        (:func:`mount_metrics`); without it, only :meth:`serve_on`'s port does.
        """
        self.on_app = on_app
        metrics.add_sink(self)
        _started.append(self)

    def serve_on(self, port: int) -> int:
        """Serve ``GET /metrics`` on 127.0.0.1:``port`` (0: a free one), without sign-in.

        Returns:
            The port bound.

        Raises:
            OSError: the port cannot be bound.
        """
        from prometheus_client import start_http_server  # noqa: PLC0415

        self._server, self._thread = start_http_server(
            port, addr="127.0.0.1", registry=self.registry
        )
        return int(self._server.server_port)

    def stop(self) -> None:
        """Stop recording here, and stop serving the port."""
        metrics.remove_sink(self)
        if self in _started:
            _started.remove(self)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


def started() -> PrometheusMetrics | None:
    """The metrics ``--metrics`` started in this process (the latest), or ``None``."""
    return _started[-1] if _started else None


def mount_metrics(app: Any, dependencies: Sequence[Any]) -> None:
    """Add ``GET /metrics`` to ``app`` behind ``dependencies`` (its sign-in), when started."""
    from fastapi import APIRouter  # noqa: PLC0415
    from fastapi.responses import Response  # noqa: PLC0415

    sink = started()
    if sink is None or not sink.on_app:
        return
    router = APIRouter()

    @router.get(
        "/metrics",
        response_class=Response,
        responses={200: {"content": {"text/plain": {}}, "description": "Prometheus metrics."}},
    )
    async def get_metrics() -> Response:
        """toolguard's metrics in Prometheus's text format."""
        return Response(sink.text(), media_type="text/plain; version=0.0.4; charset=utf-8")

    app.include_router(router, dependencies=list(dependencies))
    app.state.metrics = sink
