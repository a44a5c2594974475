"""Roots and capabilities as the client has them: through the gateway, the upstream is told the
capabilities of the client it serves and no more, and learns that client's roots and their
changes, as it would directly.

The upstream is ``tests/integrations/mcp_roots_upstream.py``, which asks for the roots when
its client says it is initialized and again on ``notifications/roots/list_changed`` (as
``@modelcontextprotocol/server-filesystem`` does). Each test compares what the upstream saw
through ``toolguard mcp-proxy`` (a real process, over stdio or ``--listen`` on 127.0.0.1)
with what it sees from the same client directly.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

import anyio
import pytest

pytest.importorskip("mcp")
httpx2 = pytest.importorskip("httpx2")
pytest.importorskip("uvicorn")

from mcp import Client, StdioServerParameters, types  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from tests.helpers import command_env, free_port  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 30  # seconds: the bound of every wait
UPSTREAM = [sys.executable, "-m", "tests.integrations.mcp_roots_upstream"]


class Roots:
    """A client's roots, which it may change."""

    def __init__(self, *uris: str) -> None:
        self.uris = list(uris)

    async def __call__(self, context: Any) -> types.ListRootsResult:
        return types.ListRootsResult.model_validate({"roots": [{"uri": u} for u in self.uris]})


async def sample(context: Any, params: Any) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(text="ok"), model="m"
    )


def said(result: types.CallToolResult) -> Any:
    return json.loads(result.content[0].text)  # type: ignore[union-attr]


def direct(tmp_path: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=UPSTREAM[0],
        args=UPSTREAM[1:],
        env={**command_env(), "TOOLGUARD_MCP_LOG": str(tmp_path / "direct.jsonl")},
        cwd=str(ROOT),
    )


def through_the_gateway(tmp_path: Path) -> StdioServerParameters:
    argv = [
        "-m", "toolguard", "mcp-proxy", "--db", str(tmp_path / "proxy.sqlite3"),
        "--port", str(free_port()), "--no-auth", "--", *UPSTREAM,
    ]  # fmt: skip
    return StdioServerParameters(
        command=sys.executable,
        args=argv,
        env={**command_env(), "TOOLGUARD_MCP_LOG": str(tmp_path / "gateway.jsonl")},
        cwd=str(ROOT),
    )


async def until_roots(client: Client, expected: list[str]) -> dict[str, Any]:
    """What ``roots_seen`` answers once the upstream holds ``expected``."""
    while True:
        seen: dict[str, Any] = said(await client.call_tool("roots_seen", {}))
        if seen["roots"] == expected:
            return seen
        await anyio.sleep(0.02)


async def a_session(target: Any, roots: Roots) -> tuple[dict[str, Any], Any, dict[str, Any]]:
    """What the upstream saw of a client with ``roots`` (and sampling): its capabilities, its
    roots, and its roots after the client changed them and said so."""
    async with Client(
        target, mode="legacy", list_roots_callback=roots, sampling_callback=sample
    ) as c:
        capabilities = said(await c.call_tool("capabilities", {}))
        first = await until_roots(c, roots.uris)
        roots.uris = ["file:///home/me/other"]
        await c.session.send_notification(types.RootsListChangedNotification())
        second = await until_roots(c, roots.uris)
    return capabilities, first, second


async def test_the_upstream_learns_the_clients_roots_and_their_changes(tmp_path: Path) -> None:
    with anyio.fail_after(LIMIT):
        straight = await a_session(direct(tmp_path), Roots("file:///home/me/narrow"))
        proxied = await a_session(through_the_gateway(tmp_path), Roots("file:///home/me/narrow"))
    assert (
        proxied
        == straight
        == (
            {"roots": {"listChanged": True}, "sampling": {}},  # declared: the client's, no more
            {"roots": ["file:///home/me/narrow"], "asked": 1},  # asked when it was initialized
            {"roots": ["file:///home/me/other"], "asked": 2},  # and again when they changed
        )
    )


async def test_a_client_that_declares_nothing_is_declared_nothing(tmp_path: Path) -> None:
    """No sampling, elicitation or roots declared on its behalf; the upstream never asks."""
    async with Client(through_the_gateway(tmp_path), mode="legacy") as client:
        with anyio.fail_after(LIMIT):
            capabilities = said(await client.call_tool("capabilities", {}))
            roots = said(await client.call_tool("roots_seen", {}))
    assert capabilities == {}
    assert roots == {"roots": [], "asked": 0}


async def listed_tools(target: Any, **callbacks: Any) -> tuple[list[str], list[str]]:
    """The tools the upstream lists to a client with ``callbacks``, and what ``ask_model``
    answers it (when listed)."""
    async with Client(target, mode="legacy", **callbacks) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        asked = (
            await client.call_tool("ask_model", {"text": "hi"}) if "ask_model" in names else None
        )
    return names, [block.text for block in asked.content] if asked is not None else []  # type: ignore[union-attr]


async def test_a_client_is_listed_the_tools_the_upstream_lists_to_it(tmp_path: Path) -> None:
    """The upstream lists ``ask_model`` only to a client that declared sampling: through the
    gateway too, a plain client is not shown it and a sampling client is (and can call it)."""
    with anyio.fail_after(LIMIT):
        plain = await listed_tools(through_the_gateway(tmp_path))
        sampling = await listed_tools(through_the_gateway(tmp_path), sampling_callback=sample)
        straight = await listed_tools(direct(tmp_path), sampling_callback=sample)
    tools = ["roots_seen", "capabilities", "environment", "summarise", "slow_write"]
    assert plain == (tools, [])
    assert sampling == straight == ([*tools, "ask_model"], ["model said: ok"])


# ---------------------------------------------------------------------------- --listen


def _line(stream: IO[bytes] | None) -> str:
    assert stream is not None
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout=LIMIT)
    return lines[0].decode() if lines else ""


@asynccontextmanager
async def listening(tmp_path: Path) -> AsyncIterator[tuple[str, str]]:
    """``toolguard mcp-proxy --listen`` on 127.0.0.1 in front of the roots upstream; its MCP
    URL and its approval page's."""
    url, port = f"http://127.0.0.1:{free_port()}/mcp", free_port()
    argv = [
        "mcp-proxy", "--db", str(tmp_path / "listen.sqlite3"), "--port", str(port),
        "--no-auth", "--listen", url, "--", *UPSTREAM,
    ]  # fmt: skip
    env = {**command_env(), "TOOLGUARD_MCP_LOG": str(tmp_path / "listen.jsonl")}
    with subprocess.Popen(  # noqa: ASYNC220 - started once, read by a thread
        [sys.executable, "-m", "toolguard", *argv],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        try:
            _line(process.stderr)  # --no-auth's warning
            assert _line(process.stderr).startswith("toolguard mcp-proxy: MCP ")
            yield url, f"http://127.0.0.1:{port}"
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=LIMIT)


@asynccontextmanager
async def over_http(url: str, **callbacks: Any) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(timeout=LIMIT) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy", **callbacks) as c,
    ):
        yield c


async def test_with_listen_each_client_has_its_own_roots_and_capabilities(
    tmp_path: Path,
) -> None:
    """Two clients with different roots and a plain one, at once: each is seen as it is."""
    ann, bob = Roots("file:///home/ann/project"), Roots("file:///home/bob/notes")
    with anyio.fail_after(LIMIT):
        async with (
            listening(tmp_path) as (url, _),
            over_http(url, list_roots_callback=ann) as first,
            over_http(url, list_roots_callback=bob, sampling_callback=sample) as second,
            over_http(url) as plain,
        ):
            seen = [
                await until_roots(first, ann.uris),
                await until_roots(second, bob.uris),
                said(await plain.call_tool("roots_seen", {})),
            ]
            declared = [said(await c.call_tool("capabilities", {})) for c in (first, second, plain)]
            ann.uris = ["file:///home/ann/elsewhere"]
            await first.session.send_notification(types.RootsListChangedNotification())
            changed = [await until_roots(first, ann.uris), await until_roots(second, bob.uris)]
    assert seen == [
        {"roots": ["file:///home/ann/project"], "asked": 1},
        {"roots": ["file:///home/bob/notes"], "asked": 1},
        {"roots": [], "asked": 0},
    ]
    assert declared == [
        {"roots": {"listChanged": True}},
        {"roots": {"listChanged": True}, "sampling": {}},
        {},
    ]
    assert changed == [
        {"roots": ["file:///home/ann/elsewhere"], "asked": 2},
        {"roots": ["file:///home/bob/notes"], "asked": 1},  # another client's change: not its
    ]
