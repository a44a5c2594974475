"""Traces of calls through the gateway decided on the approval page: the caller's trace.

The client's ``tools/call`` carries its trace context in ``_meta.traceparent``; a
call a reviewer decides belongs to that trace (a child of the gateway's server span
of the request), and the reviewer's own request is linked to it, never its parent.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

mcp = pytest.importorskip("mcp")

from mcp import Client, types  # noqa: E402
from opentelemetry import trace  # noqa: E402
from opentelemetry.context import Context  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

from tests.helpers import ours  # noqa: E402
from toolguard import MemoryStore  # noqa: E402
from toolguard._gateway.proxy import MCPProxy  # noqa: E402

from .mcp_proxy_upstream import TOOLS, build_server  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

LIMIT = 20


@asynccontextmanager
async def gateway(log: Path, ttl: float = 60) -> AsyncIterator[tuple[Client, MCPProxy]]:
    """The proxy over the test upstream, and a client that cannot answer questions."""
    with anyio.fail_after(LIMIT):
        async with Client(build_server(log), mode="legacy") as upstream:
            proxy = MCPProxy(upstream, TOOLS, store=MemoryStore(), ttl=ttl)
            async with anyio.create_task_group() as tasks:
                proxy._tasks = tasks
                async with Client(proxy.server(), mode="legacy") as client:
                    yield client, proxy
                tasks.cancel_scope.cancel()


async def waiting_review(proxy: MCPProxy) -> tuple[str, str]:
    """The thread and review id of the one call waiting for a decision."""
    while True:
        for thread_id in await proxy.chat.store.thread_ids():  # type: ignore[attr-defined]
            state = await proxy.chat.store.load(thread_id)
            if state is not None and state.status == "awaiting_review" and state.pending:
                return thread_id, state.pending.review_id
        await anyio.sleep(0.01)


async def decided_on_the_page(
    client: Client, proxy: MCPProxy, decision: dict[str, Any]
) -> tuple[types.CallToolResult, trace.Span, trace.Span]:
    """Call delete_file in the agent's trace; a reviewer decides in a request of another.

    Returns the result, the agent's span and the reviewer's request span.
    """
    app = trace.get_tracer("test app")
    spans: dict[str, Any] = {}

    async def review() -> None:
        thread_id, review_id = await waiting_review(proxy)
        with app.start_as_current_span("POST /hitl/review", context=Context()) as request:
            spans["request"] = request
            await proxy.chat.submit_review(
                [decision], thread_id, review_id=review_id, reviewer="ana"
            )

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(review)
        with app.start_as_current_span("agent turn") as agent:
            result = await client.call_tool("delete_file", {"path": "notes.txt"})
    return result, agent, spans["request"]


def one(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    [span] = [s for s in exporter.get_finished_spans() if s.name == name]
    return span


@pytest.mark.parametrize(
    ("decision", "outcome", "ran"),
    [
        ({"type": "approve"}, "executed", ['{"args": {"path": "notes.txt"}']),
        ({"type": "reject", "message": "keep it"}, "rejected", []),
    ],
)
async def test_a_call_decided_on_the_page_is_in_the_callers_trace_and_links_the_request(
    spans: InMemorySpanExporter,
    tmp_path: Path,
    decision: dict[str, Any],
    outcome: str,
    ran: list[str],
) -> None:
    log = tmp_path / "log.jsonl"
    async with gateway(log) as (client, proxy):
        result, agent, request = await decided_on_the_page(client, proxy, decision)
    assert result.is_error is (outcome != "executed")
    lines = log.read_text().splitlines() if log.exists() else []
    assert [line.split(', "tool"')[0] for line in lines] == ran
    call = one(spans, "execute_tool delete_file")
    caller = agent.get_span_context()
    everything = {s.context.span_id: s for s in spans.get_finished_spans()}
    # The gateway's server span of the client's request is in the agent's trace (the
    # client's span for the request, in _meta.traceparent, is its parent) ...
    served = everything[call.parent.span_id] if call.parent is not None else None
    assert served is not None
    assert (served.name, served.kind) == ("tools/call delete_file", SpanKind.SERVER)
    assert served.context.trace_id == caller.trace_id
    assert served.parent is not None
    assert served.parent.is_remote
    # ... and the call's span is its child: the reviewer's request is only linked.
    assert call.context.trace_id == caller.trace_id
    assert call.parent is not None
    assert call.parent.span_id == served.context.span_id
    assert [link.context for link in call.links] == [request.get_span_context()]
    assert request.get_span_context().trace_id != caller.trace_id
    attributes = dict(call.attributes or {})
    assert attributes["toolguard.outcome"] == outcome
    assert attributes["toolguard.decided_by"] == "ana"
    assert (attributes["gen_ai.tool.type"], attributes["gen_ai.tool.description"]) == (
        "extension",
        "Delete a file (claims read-only).",
    )
    if outcome == "executed":
        assert (call.status.status_code, attributes.get("error.type")) == (StatusCode.UNSET, None)
    else:
        assert (call.status.status_code, attributes["error.type"]) == (StatusCode.ERROR, outcome)
    review = one(spans, "toolguard.review")
    assert review.parent is not None
    assert review.parent.span_id == call.context.span_id
    # One execute_tool span for the call: toolguard's (the upstream's own server span is
    # under the gateway's request to it).
    counted = [
        s
        for s in spans.get_finished_spans()
        if (s.attributes or {}).get("gen_ai.operation.name") == "execute_tool"
        and s.context.trace_id == caller.trace_id
        and s.instrumentation_scope is not None
        and s.instrumentation_scope.name == "toolguard"
    ]
    assert counted == [call]


async def test_a_call_that_expires_is_an_expired_error_in_the_callers_trace(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    log = tmp_path / "log.jsonl"
    app = trace.get_tracer("test app")
    async with gateway(log, ttl=0.3) as (client, _):
        with app.start_as_current_span("agent turn") as agent:
            result = await client.call_tool("delete_file", {"path": "notes.txt"})
    assert result.is_error
    assert not log.exists()
    [call] = [s for s in ours(spans) if s.name == "execute_tool delete_file"]
    assert call.context.trace_id == agent.get_span_context().trace_id
    assert call.links == ()
    attributes = dict(call.attributes or {})
    assert (attributes["toolguard.outcome"], attributes["error.type"], call.status.status_code) == (
        "expired",
        "expired",
        StatusCode.ERROR,
    )


CONSOLE_GATEWAY = """
import sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import {processor}, ConsoleSpanExporter
provider = TracerProvider()
provider.add_span_processor({processor}(ConsoleSpanExporter({out})))
trace.set_tracer_provider(provider)
from toolguard._cli.main import main
sys.exit(main(["mcp-proxy", "--no-auth", "--db", sys.argv[1], *sys.argv[2:], "--", "true"]))
"""


@pytest.mark.parametrize("processor", ["SimpleSpanProcessor", "BatchSpanProcessor"])
def test_a_console_exporter_on_stdout_is_refused_in_stdio_mode_with_one_line(
    tmp_path: Path, processor: str
) -> None:
    db = tmp_path / "gateway.sqlite3"
    script = CONSOLE_GATEWAY.format(processor=processor, out="")
    done = subprocess.run(
        [sys.executable, "-c", script, str(db)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "error: the tracer provider's ConsoleSpanExporter writes spans to stdout, which is the"
        " MCP channel in stdio mode; export them to stderr, a file or a collector, or serve"
        " MCP with --listen\n"
    )
    assert not db.exists()  # refused before anything started


def test_a_console_exporter_on_stderr_or_with_listen_is_no_problem() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    from toolguard._gateway.listen import parse_listen
    from toolguard._gateway.run import stdout_problem

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stderr)))
    assert telemetry_stdout(provider) is None
    printing = TracerProvider()
    printing.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    assert telemetry_stdout(printing) == "ConsoleSpanExporter"
    listen = parse_listen("http://127.0.0.1:8766/mcp", None)
    with installed(printing):
        assert stdout_problem(listen) is None  # stdout is not the MCP channel there
        assert stdout_problem(None) is not None


@contextmanager
def installed(provider: Any) -> Iterator[None]:
    """``provider`` as the global tracer provider while inside (the previous one put back)."""
    from opentelemetry.util._once import Once

    before = (trace._TRACER_PROVIDER_SET_ONCE, trace._TRACER_PROVIDER)
    trace._TRACER_PROVIDER_SET_ONCE, trace._TRACER_PROVIDER = Once(), None
    trace.set_tracer_provider(provider)
    try:
        yield
    finally:
        trace._TRACER_PROVIDER_SET_ONCE, trace._TRACER_PROVIDER = before


def telemetry_stdout(provider: Any) -> str | None:
    from toolguard._core import telemetry

    with installed(provider):
        return telemetry.stdout_exporter()
