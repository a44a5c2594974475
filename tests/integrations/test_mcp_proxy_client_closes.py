"""The gateway over stdio ends with its client's transport, whatever the client's keep-alive.

fastmcp's ``StdioTransport`` keeps its server running after the client closes (``keep_alive``
is on by default) and sends nothing when it closes: the gateway cannot tell a client that closed
from one that pauses. Once the transport is closed (``client.close()``, or the client's process
ends) the gateway's stdin ends; it then stops at once and frees its approval page's port, so the
next gateway starts on the same port. While a kept-alive gateway still holds the port, the next
one says so on its one error line, naming that gateway and the way out.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp")
fastmcp = pytest.importorskip("fastmcp")

from fastmcp.client.transports import StdioTransport  # noqa: E402

from tests.helpers import command_env, free_port, run_toolguard  # noqa: E402
from toolguard._cli.startup import ListenError, listening_socket  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 30
UPSTREAM = [sys.executable, "-m", "tests.integrations.mcp_roots_upstream"]


def transport(tmp_path: Path, port: int, name: str) -> StdioTransport:
    """The gateway on ``port`` (signing in with the link, as by default), fastmcp's default
    keep-alive."""
    argv = ["-m", "toolguard", "mcp-proxy", "--db", str(tmp_path / f"{name}.sqlite3")]
    argv += ["--port", str(port), "--", *UPSTREAM]
    env = {**command_env(), "TOOLGUARD_MCP_LOG": str(tmp_path / f"{name}.jsonl")}
    return StdioTransport(sys.executable, argv, env=env, cwd=str(ROOT))


def _free(port: int) -> bool:
    try:
        listening_socket("127.0.0.1", port).close()
    except ListenError:
        return False
    return True


async def port_freed(port: int) -> None:
    """Wait until the port can be bound again (bounded by the test's ``fail_after``)."""
    while True:
        if _free(port):
            return
        await anyio.sleep(0.05)


async def test_a_closed_keep_alive_client_ends_its_gateway_and_the_next_one_starts(
    tmp_path: Path,
) -> None:
    port = free_port()
    listed: list[list[str]] = []
    with anyio.fail_after(LIMIT):
        for name in ("first", "second"):
            client = fastmcp.Client(transport(tmp_path, port, name))
            async with client:
                listed.append([tool.name for tool in await client.list_tools()])
            await client.close()  # the transport kept the gateway running until now
            await port_freed(port)
    assert (
        listed[0]
        == listed[1]
        == [
            "roots_seen",
            "capabilities",
            "environment",
            "summarise",
            "slow_write",
        ]
    )


async def test_a_gateway_a_kept_alive_client_holds_is_named_by_the_next_one(
    tmp_path: Path,
) -> None:
    port = free_port()
    with anyio.fail_after(LIMIT):
        client = fastmcp.Client(transport(tmp_path, port, "kept"))
        async with client:
            await client.list_tools()
        # closed, kept alive: its gateway still holds the port
        argv = ["mcp-proxy", "--db", str(tmp_path / "next.sqlite3"), "--port", str(port)]
        code, out, err = await anyio.to_thread.run_sync(
            lambda: run_toolguard(*argv, "--", *UPSTREAM, cwd=ROOT)
        )
        await client.close()
        await port_freed(port)
    shown = re.sub(r"pid \d+,", "pid N,", err)
    assert (code, out, shown) == (
        2,
        "",
        (
            f"error: --port {port}: the approval page cannot listen on 127.0.0.1:{port}: the port"
            f" is in use by another program (by another toolguard mcp-proxy, pid N, upstream:"
            f" {shlex.join(UPSTREAM)}: an MCP client that keeps its stdio server running after it"
            " closes, as fastmcp's StdioTransport does unless keep_alive=False, keeps it running"
            " until the client's transport is closed; --port 0 picks a free port); choose another"
            " --port (or --host)\n"
        ),
    )
