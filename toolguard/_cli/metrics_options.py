"""``--metrics`` and ``--metrics-port`` of ``toolguard serve`` and ``toolguard mcp-proxy``.

``--metrics`` counts every tool call (by tool, outcome and who decided) and
the time people take to decide, and serves them for Prometheus at ``GET
/metrics`` on the server's own address, behind its sign-in like every route.
``--metrics-port PORT`` serves the same on ``127.0.0.1:PORT`` without sign-in,
for a scraper on the same machine. Both need the ``prometheus`` extra and one
process (not ``--workers N``: each process would count only its own calls).
:func:`add_metrics_options` wraps the command's handler, so the command itself
does not change.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable

from toolguard._cli.options import port_number

__all__ = ["add_metrics_options"]

_Handler = Callable[[argparse.Namespace], int]


def add_metrics_options(parser: argparse.ArgumentParser) -> None:
    """``--metrics`` and ``--metrics-port`` on a command whose handler is already set."""
    parser.add_argument(
        "--metrics",
        action="store_true",
        help=(
            "serve Prometheus metrics at /metrics, behind the sign-in: tool calls by tool,"
            " outcome and who decided, and the time to decide (needs the 'prometheus' extra)"
        ),
    )
    parser.add_argument(
        "--metrics-port",
        type=port_number,
        metavar="PORT",
        help="also serve them on 127.0.0.1:PORT without sign-in, for a scraper on this machine",
    )
    inner: _Handler = parser.get_default("handler")
    parser.set_defaults(handler=functools.partial(_with_metrics, inner))


def _fail(text: str) -> int:
    sys.stderr.write(f"error: {text}\n")
    return 2


def _with_metrics(inner: _Handler, args: argparse.Namespace) -> int:
    """Run the command with the metrics on, as its options say."""
    port: int | None = args.metrics_port
    if not args.metrics and port is None:
        return inner(args)
    option = "--metrics" if args.metrics else "--metrics-port"
    workers = getattr(args, "workers", 1)
    if workers > 1:
        return _fail(
            f"{option} counts the calls of one process; it cannot be used with --workers"
            f" {workers} (run one process, or give the application an OpenTelemetry meter"
            " provider)"
        )
    from toolguard._http.metrics import PrometheusMetrics  # noqa: PLC0415 - with the command

    try:
        sink = PrometheusMetrics()
    except ImportError as exc:
        return _fail(
            f"{option} needs the 'prometheus' extra ({exc}):"
            " pip install 'toolguard-hitl[prometheus]'"
        )
    if port is not None:
        try:
            port = sink.serve_on(port)
        except OSError as exc:
            return _fail(
                f"--metrics-port {port}: cannot listen on 127.0.0.1:{port}:"
                f" {exc.strerror or exc}; choose another --metrics-port"
            )
        sys.stderr.write(f"toolguard: metrics at http://127.0.0.1:{port}/metrics (no sign-in)\n")
        sys.stderr.flush()
    sink.start(on_app=args.metrics)
    try:
        return inner(args)
    finally:
        sink.stop()
