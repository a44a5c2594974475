"""The gateway's fast lane over stdio: a call that needs no review goes to the upstream as the
client wrote it, and its answer comes back unchanged but for the id.

The upstream here logs the JSON-RPC id of each call it gets (the lane's are
``toolguard-fast-N``), and has a read that waits until it is cancelled.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

mcp = pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from .test_mcp_proxy import ROOT, free_port  # noqa: E402

LIMIT = 60

UPSTREAM = """
import json, os, sys
import anyio
from mcp import types
from mcp.server import Server
from mcp.server.stdio import stdio_server

LOG = os.environ["FASTLANE_LOG"]
TOOLS = [
    {"name": "get_time", "description": "The time.", "annotations": {"readOnlyHint": True},
     "inputSchema": {"type": "object", "properties": {"zone": {"type": "string"}}}},
    {"name": "wait_forever", "description": "Read slowly.", "annotations": {"readOnlyHint": True},
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "delete_note", "description": "Delete a note.",
     "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}}},
]


def log(**entry):
    with open(LOG, "a", encoding="utf-8") as file:
        file.write(json.dumps(entry, sort_keys=True) + "\\n")


async def list_tools(ctx, params):
    return types.ListToolsResult.model_validate({"tools": TOOLS})


async def call_tool(ctx, params):
    log(tool=params.name, id=ctx.request_id, args=params.arguments or {})
    if params.name == "wait_forever":
        try:
            await anyio.sleep_forever()
        finally:
            log(tool=params.name, id=ctx.request_id, event="cancelled")
    text = "12:00 " + json.dumps(params.arguments or {}, sort_keys=True, ensure_ascii=False)
    return types.CallToolResult(
        content=[types.TextContent(text=text)], structured_content={"zone": "é ✓"}
    )


async def main():
    server = Server("fastlane-upstream", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(main)
"""


def params(tmp_path: Path, log: Path, *, direct: bool = False) -> StdioServerParameters:
    script = tmp_path / "upstream.py"
    script.write_text(UPSTREAM, encoding="utf-8")
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), "FASTLANE_LOG": str(log)}
    if direct:
        return StdioServerParameters(command=sys.executable, args=[str(script)], env=env)
    gateway = [
        "-m",
        "toolguard",
        "mcp-proxy",
        "--no-auth",
        "--port",
        str(free_port()),
        "--db",
        str(tmp_path / "gateway.sqlite3"),
        "--ttl",
        "1",
        "--",
        sys.executable,
        str(script),
    ]
    return StdioServerParameters(command=sys.executable, args=gateway, env=env, cwd=str(ROOT))


def logged(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


async def test_a_read_takes_the_lane_and_answers_as_the_upstream_did(tmp_path: Path) -> None:
    log, direct_log = tmp_path / "log.jsonl", tmp_path / "direct.jsonl"
    args = {"zone": "Asia/Jakarta", "note": "café ☕", "n": 1.5, "big": 12345678901234567890}
    with anyio.fail_after(LIMIT):
        async with Client(params(tmp_path, direct_log, direct=True), mode="legacy") as direct:
            expected = await direct.call_tool("get_time", args)
        async with Client(params(tmp_path, log), mode="legacy") as client:
            answers = [await client.call_tool("get_time", args) for _ in range(3)]
    # What the lane answers is what the upstream answers a direct client (the first call may
    # take the SDK's path, before the gateway knows the client).
    assert [a.model_dump() for a in answers[1:]] == [expected.model_dump()] * 2
    assert answers[0].content == expected.content
    calls = logged(log)
    assert [c["tool"] for c in calls] == ["get_time"] * 3
    # The first call may come before the gateway knows the client (the SDK's path); the
    # ones after it take the lane.
    assert [str(c["id"]).startswith("toolguard-fast-") for c in calls][1:] == [True, True]
    assert all(c["args"] == args for c in calls)


async def test_a_call_that_needs_a_review_never_takes_the_lane(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    with anyio.fail_after(LIMIT):
        async with Client(params(tmp_path, log), mode="legacy") as client:
            await client.call_tool("get_time", {})
            result = await client.call_tool("delete_note", {"id": "n1"})  # expires: ttl 1 s
    assert result.is_error
    assert [c["tool"] for c in logged(log)] == ["get_time"]  # it never ran


async def test_a_client_that_gives_up_on_a_call_in_the_lane_cancels_it_upstream(
    tmp_path: Path,
) -> None:
    log = tmp_path / "log.jsonl"
    with anyio.fail_after(LIMIT):
        async with Client(params(tmp_path, log), mode="legacy") as client:
            await client.call_tool("get_time", {})
            with pytest.raises(MCPError):
                await client.call_tool("wait_forever", {}, read_timeout_seconds=1)
            while len(logged(log)) < 3:  # noqa: ASYNC110 - the upstream logs it was cancelled
                await anyio.sleep(0.05)
            after = await client.call_tool("get_time", {"zone": "UTC"})
    assert not after.is_error
    calls = logged(log)
    waited = [c for c in calls if c["tool"] == "wait_forever"]
    assert [c.get("event") for c in waited] == [None, "cancelled"]
    assert str(waited[0]["id"]).startswith("toolguard-fast-")
    assert waited[0]["id"] == waited[1]["id"]


# --------------------------------------------------------------------------- which calls may


async def lane_over(upstream_log: Path, **options: Any) -> tuple[Any, Any]:
    """A lane of a proxy over the test upstream (``options`` are the proxy's)."""
    from toolguard import MemoryStore
    from toolguard._gateway.fastlane import FastLane
    from toolguard._gateway.proxy import MCPProxy

    from .mcp_proxy_upstream import TOOLS, build_server

    client = Client(build_server(upstream_log), mode="legacy")
    upstream = await client.__aenter__()
    proxy = MCPProxy(upstream, TOOLS, store=MemoryStore(), **options)
    return FastLane(proxy, lambda _: None), client


@pytest.mark.parametrize(
    ("params", "takes"),
    [
        ({"name": "read_file", "arguments": {"path": "a"}}, True),
        ({"name": "read_file"}, True),
        ({"name": "delete_file", "arguments": {"path": "a"}}, False),  # needs a review
        ({"name": "read_file", "arguments": {"path": "/etc/passwd"}}, False),  # denied
        ({"name": "read_file", "arguments": {"path": "/secret/x"}}, False),  # asks
        ({"name": "archive_file", "arguments": {"path": "/srv/x"}}, True),  # allowed
        ({"name": "no_such_tool", "arguments": {}}, False),
        ({"name": "read_file", "arguments": {"path": "a"}, "_meta": {"progressToken": 1}}, False),
        ({"name": "read_file", "arguments": {"path": "a"}, "requestState": "s"}, False),
        ({"name": "read_file", "arguments": ["a"]}, False),
        ({"name": 7, "arguments": {}}, False),
    ],
)
async def test_only_a_call_that_runs_at_once_may_take_the_lane(
    tmp_path: Path, params: dict[str, Any], takes: bool
) -> None:
    from toolguard import Rules

    rules = Rules(
        deny=['read_file(path="/etc/*")'],
        ask=['read_file(path="/secret/*")'],
        allow=['archive_file(path="/srv/*")'],
    )
    lane, client = await lane_over(tmp_path / "log.jsonl", rules=rules)
    try:
        assert lane._runs_at_once(params) is takes
    finally:
        await client.__aexit__(None, None, None)


async def test_no_call_takes_the_lane_while_a_judge_sees_every_call(tmp_path: Path) -> None:
    lane, client = await lane_over(tmp_path / "log.jsonl")
    read = {"name": "read_file", "arguments": {"path": "a"}}
    try:
        assert lane._runs_at_once(read) is True
        lane.proxy.judges_every_call = True
        assert lane._runs_at_once(read) is False
    finally:
        await client.__aexit__(None, None, None)


async def test_no_call_takes_the_lane_while_the_gateway_traces(tmp_path: Path, spans: Any) -> None:
    lane, client = await lane_over(tmp_path / "log.jsonl")
    try:  # every call then has its span, which the lane would not give it
        assert lane._runs_at_once({"name": "read_file", "arguments": {"path": "a"}}) is False
    finally:
        await client.__aexit__(None, None, None)
