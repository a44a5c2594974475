"""Start-up: what the upstream says before the gateway is ready is handled once it is.

``@modelcontextprotocol/server-everything`` says several times that its tools changed as soon
as it is initialized, before the gateway has listed them; the gateway used to print a line
naming Python types for each. Here ``tests/integrations/mcp_roots_upstream.py --noisy 5`` does
the same, in front of ``toolguard mcp-proxy`` over stdio (and in process): the gateway prints
its status lines only, lists the tools once more when it is ready, and serves as usual.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.helpers import command_env, free_port
from toolguard import MemoryStore
from toolguard._gateway.proxy import MCPProxy
from toolguard._gateway.relay import Relay
from toolguard._gateway.upstream import list_upstream

from .mcp_roots_upstream import TOOLS, Log, build_server

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 30


async def test_tool_changes_said_before_the_gateway_is_ready_are_taken_once_it_is(
    capsys: pytest.CaptureFixture[str],
) -> None:
    relay = Relay()
    log = Log()
    with anyio.fail_after(LIMIT):
        async with relay.connect(build_server(log, noisy=5), mode="legacy") as up:
            listed = await list_upstream(up)
            await anyio.sleep(0.2)  # the five notifications arrive, and wait
            proxy = MCPProxy(up, listed, store=MemoryStore(), ttl=60)
            relay.attach(proxy, up)
            while True:
                if log.items.count(["listed"]) == 2:
                    break
                await anyio.sleep(0.01)
            await anyio.sleep(0.2)  # (no third listing comes)
    assert capsys.readouterr().err == ""
    # listed at start-up, then once more for the five changes said meanwhile
    assert log.items == [["listed"], ["listed"]]
    assert [tool["name"] for tool in proxy.listed] == [tool["name"] for tool in TOOLS]


async def test_the_gateway_process_starts_quietly_in_front_of_a_noisy_upstream(
    tmp_path: Path,
) -> None:
    port = free_port()
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m", "toolguard", "mcp-proxy", "--db", str(tmp_path / "proxy.sqlite3"),
            "--port", str(port), "--no-auth", "--",
            sys.executable, "-m", "tests.integrations.mcp_roots_upstream", "--noisy", "5",
        ],
        env={**command_env(), "TOOLGUARD_MCP_LOG": str(tmp_path / "log.jsonl")},
        cwd=str(ROOT),
    )  # fmt: skip
    errors = tmp_path / "stderr.txt"
    with errors.open("w", encoding="utf-8") as errlog, anyio.fail_after(LIMIT):
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            listed = [tool.name for tool in (await client.list_tools()).tools]
            capabilities = await client.call_tool("capabilities", {})
    lines = errors.read_text(encoding="utf-8").splitlines()
    assert listed == [tool["name"] for tool in TOOLS]
    assert [block.text for block in capabilities.content] == ["{}"]  # type: ignore[union-attr]
    assert [line.split(":")[0] for line in lines] == ["warning", "toolguard mcp-proxy"]
    assert lines[1].startswith(f"toolguard mcp-proxy: approval page http://127.0.0.1:{port}/")
