"""The gateway's MCP server span of a ``tools/call``, so that each call is counted once.

The MCP SDK wraps every request a server gets in a span of its own; for a
``tools/call`` it carries ``gen_ai.operation.name = "execute_tool"``. In the
gateway, toolguard's own ``execute_tool`` span of the call (which knows how
it ended: executed, rejected, denied, expired, cancelled) is a child of it,
so a dashboard counting ``execute_tool`` spans would count every call twice.

:class:`ToolCallSpans` takes the SDK's place for ``tools/call`` only: the same
``SERVER`` span (``tools/call {name}``, the MCP attributes, the parent given by
the request's ``_meta.traceparent``, the error of a failed request) without
``gen_ai.operation.name``. Every other request keeps the SDK's own span.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

__all__ = ["ToolCallSpans", "counted_once"]

_TRACER_NAME = "mcp-python-sdk"
"""The instrumentation scope of the span: the MCP SDK's, whose span this one stands for."""


def _parent(meta: Mapping[str, Any] | None) -> Any:
    """The context the request's ``_meta`` carries (W3C trace context), or ``None``."""
    if not meta:
        return None
    from opentelemetry import propagate, trace  # noqa: PLC0415 - the MCP SDK's dependency

    try:
        context = propagate.extract(meta)
    except (ValueError, TypeError):
        return None
    return context if trace.get_current_span(context).get_span_context().is_valid else None


class ToolCallSpans:
    """A server middleware: the span of a ``tools/call`` without ``gen_ai.operation.name``.

    ``sdk``: the MCP SDK's own middleware, which still traces every other request.
    """

    def __init__(self, sdk: Any) -> None:
        self.sdk = sdk

    async def __call__(self, ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        if ctx.method != "tools/call":
            return await self.sdk(ctx, call_next)
        from mcp import types  # noqa: PLC0415
        from mcp.shared.exceptions import MCPError  # noqa: PLC0415
        from opentelemetry import trace  # noqa: PLC0415 - the MCP SDK's dependency

        name = ctx.params.get("name") if ctx.params else None
        attributes: dict[str, Any] = {
            "mcp.method.name": ctx.method,
            "mcp.protocol.version": ctx.protocol_version,
        }
        if ctx.request_id is not None:
            attributes["jsonrpc.request.id"] = str(ctx.request_id)
        if isinstance(name, str):
            attributes["gen_ai.tool.name"] = name
        tracer = trace.get_tracer(_TRACER_NAME)
        with tracer.start_as_current_span(
            f"tools/call {name}" if isinstance(name, str) else "tools/call",
            kind=trace.SpanKind.SERVER,
            attributes=attributes,
            context=_parent(ctx.meta),
            record_exception=False,  # an exception's text may quote an argument
            set_status_on_exception=False,
        ) as span:
            try:
                result = await call_next(ctx)
            except MCPError as exc:
                code = str(exc.error.code)
                span.set_attributes({"error.type": code, "rpc.response.status_code": code})
                span.set_status(trace.StatusCode.ERROR)
                raise
            except Exception as exc:
                span.set_attribute("error.type", type(exc).__qualname__)
                span.set_status(trace.StatusCode.ERROR)
                raise
            failed = (isinstance(result, types.CallToolResult) and result.is_error) or (
                isinstance(result, Mapping) and result.get("isError") is True
            )
            if failed:
                span.set_attribute("error.type", "tool_error")
                span.set_status(trace.StatusCode.ERROR)
            return result


def counted_once(server: Any) -> Any:
    """``server`` with :class:`ToolCallSpans` in place of the MCP SDK's tracing middleware."""
    middleware = getattr(server, "middleware", None)
    if isinstance(middleware, list):
        server.middleware = [ToolCallSpans(m) if _is_sdk_tracing(m) else m for m in middleware]
    return server


def _is_sdk_tracing(middleware: object) -> bool:
    """Whether ``middleware`` is the MCP SDK's tracing middleware (``OpenTelemetryMiddleware``)."""
    kind = type(middleware)
    return kind.__name__ == "OpenTelemetryMiddleware" and kind.__module__.startswith("mcp.")
