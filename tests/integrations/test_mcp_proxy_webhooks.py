"""The MCP gateway's reviews send signed webhooks (``mcp-proxy --notify-url/--notify-secret``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

mcp = pytest.importorskip("mcp")

from mcp import Client, types  # noqa: E402

from tests.helpers import WEBHOOK_SECRET, Receiver, receiver  # noqa: E402, F401 - a fixture
from toolguard import MemoryStore, Webhook  # noqa: E402
from toolguard._gateway.proxy import MCPProxy  # noqa: E402

from .mcp_proxy_upstream import TOOLS, build_server  # noqa: E402

LIMIT = 20


async def test_an_approval_by_elicitation_sends_requested_then_decided(
    tmp_path: Path,
    receiver: Receiver,  # noqa: F811 - the fixture
) -> None:
    log = tmp_path / "log.jsonl"

    async def approve(ctx: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"decision": "approve"})

    with anyio.fail_after(LIMIT):
        async with Client(build_server(log), mode="legacy") as upstream:
            proxy = MCPProxy(upstream, TOOLS, store=MemoryStore(), ttl=60)
            proxy.chat.notify = Webhook(receiver.url, secret=WEBHOOK_SECRET)
            async with anyio.create_task_group() as tasks:
                proxy._tasks = tasks
                async with Client(
                    proxy.server(), mode="legacy", elicitation_callback=approve
                ) as client:
                    result = await client.call_tool("delete_file", {"path": "d"})
                tasks.cancel_scope.cancel()
            delivered = await proxy.chat.deliver_notifications()
    assert result.is_error is False
    assert [json.loads(line) for line in log.read_text().splitlines()] == [
        {"tool": "delete_file", "args": {"path": "d"}}
    ]
    assert delivered == 2
    assert all(r["signed"] and r["answer"] == 200 for r in receiver.received)
    bodies = [r["body"] for r in receiver.received]
    assert [b["event"] for b in bodies] == ["review.requested", "review.decided"]
    assert bodies[0]["pending_review"]["action_requests"] == [
        {
            "name": "delete_file",
            "args": {"path": "d"},
            "description": "Tool `delete_file` is awaiting approval",
        }
    ]
    assert [(d["type"], d["tool"], d["args"]) for d in bodies[1]["decisions"]] == [
        ("approve", "delete_file", {"path": "d"})
    ]
    assert bodies[0]["thread_id"] == bodies[1]["thread_id"]
