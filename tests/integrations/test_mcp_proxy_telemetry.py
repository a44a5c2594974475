"""OpenTelemetry spans of calls through the MCP gateway (`toolguard mcp-proxy`), in one process."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

mcp = pytest.importorskip("mcp")

from mcp import Client, types  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

from tests.helpers import ours  # noqa: E402
from toolguard import MemoryStore, Rules  # noqa: E402
from toolguard._core import telemetry  # noqa: E402
from toolguard._gateway.proxy import CLIENT_REVIEWER, MCPProxy  # noqa: E402

from .mcp_proxy_upstream import TOOLS, build_server  # noqa: E402

LIMIT = 20
SECRET = "/srv/private/hunter2-correct-horse"  # noqa: S105 - a test value


@asynccontextmanager
async def gateway(log: Path, store: MemoryStore) -> AsyncIterator[Client]:
    """The proxy over the test upstream: delete_file reviewed (path redacted), archive denied."""

    async def approve(ctx: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"decision": "approve"})

    with anyio.fail_after(LIMIT):
        async with Client(build_server(log), mode="legacy") as upstream:
            proxy = MCPProxy(
                upstream,
                TOOLS,
                store=store,
                ttl=60,
                rules=Rules(deny=["archive_file"]),
                redact={"delete_file": ["path"]},
            )
            async with anyio.create_task_group() as tasks:
                proxy._tasks = tasks
                async with Client(
                    proxy.server(), mode="legacy", elicitation_callback=approve
                ) as client:
                    yield client
                tasks.cancel_scope.cancel()


async def three_calls(log: Path, store: MemoryStore) -> list[types.CallToolResult]:
    async with gateway(log, store) as client:
        return [
            await client.call_tool("delete_file", {"path": SECRET}),
            await client.call_tool("archive_file", {"path": SECRET}),
            await client.call_tool("read_file", {"path": SECRET}),
        ]


DESCRIPTIONS = {item["name"]: item["description"] for item in TOOLS}


def call_attributes(span: ReadableSpan, name: str, **more: Any) -> dict[str, Any]:
    """The attributes ``span`` must have; its call id is the gateway's own (``mcp-`` and hex).

    The upstream server runs the tool: its type is ``extension``, with the listed description.
    """
    call_id = (span.attributes or {})["gen_ai.tool.call.id"]
    assert isinstance(call_id, str)
    assert call_id.startswith("mcp-")
    toolguard = {f"toolguard.{k.replace('__', '.')}": v for k, v in more.items()}
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "extension",
        "gen_ai.tool.description": DESCRIPTIONS[name],
        **toolguard,
    }


async def test_reviewed_denied_and_allowed_calls_have_exactly_their_spans(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    log = tmp_path / "log.jsonl"
    store = MemoryStore()
    results = await three_calls(log, store)
    assert [r.is_error for r in results] == [False, True, False]
    assert [json.loads(line)["tool"] for line in log.read_text().splitlines()] == [
        "delete_file",
        "read_file",
    ]
    everything = {s.context.span_id: s for s in spans.get_finished_spans()}
    exported = ours(spans)
    assert [s.name for s in exported] == [
        "toolguard.review",
        "execute_tool delete_file",
        "execute_tool archive_file",
        "execute_tool read_file",
    ]
    review, delete, archive, read = exported
    attributes = dict(delete.attributes or {})
    review_id = attributes["toolguard.review_id"]
    assert dict(review.attributes or {}) == {
        "toolguard.review_id": review_id,
        "gen_ai.tool.name": "delete_file",
        "toolguard.review.decision": "approve",
        "toolguard.decided_by": CLIENT_REVIEWER,
        "toolguard.review.status": "approved",
    }
    assert attributes == call_attributes(
        delete,
        "delete_file",
        decided_by=CLIENT_REVIEWER,
        review_id=review_id,
        review__wait_ms=attributes["toolguard.review.wait_ms"],
        outcome="executed",
    )
    assert isinstance(attributes["toolguard.review.wait_ms"], int)
    assert attributes["toolguard.review.wait_ms"] >= 0
    assert dict(archive.attributes or {}) == {
        **call_attributes(archive, "archive_file", decided_by="rule", outcome="denied"),
        "error.type": "denied",
    }
    # A call that needed no review has no id: MCP gives a call none.
    assert dict(read.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "read_file",
        "gen_ai.tool.type": "extension",
        "gen_ai.tool.description": "Read a file.",
        "toolguard.outcome": "executed",
    }
    # A refused call is an error a dashboard can count; the executed ones are not.
    assert [s.status.status_code for s in exported] == [
        StatusCode.UNSET,
        StatusCode.UNSET,
        StatusCode.ERROR,
        StatusCode.UNSET,
    ]
    # Each call is counted once: the gateway's server span of a tools/call does not say
    # execute_tool, only toolguard's span does (the upstream server, in this process here,
    # has its own server spans, under the gateway's requests to it).
    upstream = {s.context.span_id for s in everything.values() if s.name.startswith("MCP send")}
    counted = [
        s.name
        for s in everything.values()
        if (s.attributes or {}).get("gen_ai.operation.name") == "execute_tool"
        and (s.parent is None or s.parent.span_id not in upstream)
    ]
    assert sorted(counted) == sorted(s.name for s in exported[1:])
    # The review is a child of its call; each call a child of the gateway's server span for
    # the client's tools/call, and the parent of the SDK's span for the call to the upstream.
    assert review.parent is not None
    assert review.parent.span_id == delete.context.span_id
    for call, name in [(delete, "delete_file"), (archive, "archive_file"), (read, "read_file")]:
        assert call.parent is not None
        served = everything[call.parent.span_id]
        assert served.instrumentation_scope is not None
        assert (served.instrumentation_scope.name, served.name, served.kind) == (
            "mcp-python-sdk",
            f"tools/call {name}",
            SpanKind.SERVER,
        )
        assert dict(served.attributes or {}) == {
            "mcp.method.name": "tools/call",
            "mcp.protocol.version": (served.attributes or {})["mcp.protocol.version"],
            "jsonrpc.request.id": (served.attributes or {})["jsonrpc.request.id"],
            "gen_ai.tool.name": name,
            **({"error.type": "tool_error"} if name == "archive_file" else {}),
        }
        sent = sorted(
            s.name
            for s in everything.values()
            if s.parent is not None and s.parent.span_id == call.context.span_id
        )
        forwarded = [n for n in sent if n.startswith("MCP send tools/call")]
        assert forwarded == ([] if name == "archive_file" else [f"MCP send tools/call {name}"])
    texts = json.dumps([[dict(s.attributes or {}), list(s.events)] for s in exported])
    assert "hunter2" not in texts
    assert [s.status.description for s in exported] == [None, None, None, None]


async def test_without_a_tracer_provider_nothing_is_recorded(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    unused = TracerProvider()
    unused.add_span_processor(SimpleSpanProcessor(exporter))
    assert telemetry.tracer() is None
    log = tmp_path / "log.jsonl"
    results = await three_calls(log, MemoryStore())
    assert [r.is_error for r in results] == [False, True, False]
    assert len(log.read_text().splitlines()) == 2
    assert exporter.get_finished_spans() == ()
    unused.shutdown()
