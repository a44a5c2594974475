"""The MCP gateway with redacted arguments (``MCPProxy(redact=...)``), in one process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

mcp = pytest.importorskip("mcp")

from mcp import Client, types  # noqa: E402

from toolguard import REDACTED, MemoryStore  # noqa: E402
from toolguard._gateway.proxy import MCPProxy  # noqa: E402

from .mcp_proxy_upstream import TOOLS, build_server  # noqa: E402

LIMIT = 20
SECRET = "/srv/private/hunter2-correct-horse"  # noqa: S105 - a test value


async def test_the_gateway_asks_with_the_placeholder_and_forwards_the_real_value(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log.jsonl"
    asked: list[str] = []

    async def ask(ctx: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "approve"})

    with anyio.fail_after(LIMIT):
        async with Client(build_server(log), mode="legacy") as upstream:
            store = MemoryStore()
            proxy = MCPProxy(upstream, TOOLS, store=store, ttl=60, redact={"delete_file": ["path"]})
            async with anyio.create_task_group() as tasks:
                proxy._tasks = tasks
                async with Client(
                    proxy.server(), mode="legacy", elicitation_callback=ask
                ) as client:
                    result = await client.call_tool("delete_file", {"path": SECRET})
                tasks.cancel_scope.cancel()
    assert result.is_error is False
    assert asked == [
        (
            "Approve the tool call `delete_file`?\n"
            "Tool description: Delete a file (claims read-only).\n"
            "Arguments (JSON):\n"
            "{\n"
            f'  "path": "{REDACTED}"\n'
            "}"
        )
    ]
    assert [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] == [
        {"tool": "delete_file", "args": {"path": SECRET}}
    ]
    [thread_id] = await store.thread_ids()
    exported = await proxy.chat.export_audit([thread_id])
    assert SECRET not in exported
    requested = json.loads(exported.splitlines()[0])
    assert (requested["kind"], requested["args"]) == ("requested", {"path": REDACTED})


def test_a_redact_option_naming_an_unknown_tool_or_argument_is_refused() -> None:
    with pytest.raises(ValueError, match="redact") as caught:
        MCPProxy(object(), TOOLS, store=MemoryStore(), redact={"drop_table": ["name"]})
    assert str(caught.value) == (
        "redact names the tool 'drop_table', which the upstream server does not list"
    )
    with pytest.raises(ValueError, match="redact") as caught:
        MCPProxy(object(), TOOLS, store=MemoryStore(), redact={"delete_file": ["pth"]})
    assert str(caught.value) == (
        "redact names 'pth', which is not a parameter of the tool 'delete_file'."
        " Its parameters: ['path']"
    )
