"""An upstream MCP server that acts on what its client is: its roots, its capabilities, its
environment; for the gateway's tests of roots, capabilities, secrets, the exact relay and
cancellation.

Like ``@modelcontextprotocol/server-filesystem``, it asks its client for the roots when the
client says it is initialized (if the client declared roots) and again on
``notifications/roots/list_changed``, and keeps the last answer. Its tools:

- ``roots_seen`` (read-only): the roots it was given, and how many times it asked;
- ``capabilities`` (read-only): the client capabilities it was told;
- ``environment`` (read-only): the values of the environment variables named in ``names``
  (``null`` when unset);
- ``summarise`` (needs approval): asks its client's model (``sampling/createMessage``,
  related to the call) and answers what it said;
- ``slow_write`` (needs approval): sleeps ``seconds``, then answers ``written``; a call
  cancelled meanwhile (``notifications/cancelled``) stops there;
- ``ask_model`` (read-only), listed only to a client that declared sampling (as
  ``@modelcontextprotocol/server-everything`` lists more tools to such a client): asks its
  client's model.

What happened is written to the JSON lines file of ``TOOLGUARD_MCP_LOG`` (over stdio:
``python -m tests.integrations.mcp_roots_upstream``) or kept in :class:`Log`. With
``--noisy N`` (``build_server(log, noisy=N)``) it says N times that its tools changed as soon
as its client is initialized, as ``@modelcontextprotocol/server-everything`` does at start.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import types
from mcp.server import Server
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata

NOTHING: dict[str, Any] = {"type": "object", "properties": {}}
READ_ONLY: dict[str, Any] = {"readOnlyHint": True}
TOOLS: list[dict[str, Any]] = [
    {"name": "roots_seen", "inputSchema": NOTHING, "annotations": READ_ONLY},
    {"name": "capabilities", "inputSchema": NOTHING, "annotations": READ_ONLY},
    {
        "name": "environment",
        "inputSchema": {
            "type": "object",
            "properties": {"names": {"type": "array", "items": {"type": "string"}}},
            "required": ["names"],
        },
        "annotations": READ_ONLY,
    },
    {
        "name": "summarise",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
        "annotations": {"destructiveHint": True},
    },
    {
        "name": "slow_write",
        "inputSchema": {
            "type": "object",
            "properties": {"seconds": {"type": "number"}},
            "required": ["seconds"],
        },
        "annotations": {"destructiveHint": True},
    },
]


ASK_MODEL: dict[str, Any] = {
    "name": "ask_model",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
    "annotations": READ_ONLY,
}


class Log:
    """What the server did: ``[event, ...]`` items, kept and (with a path) appended to a file."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.items: list[list[Any]] = []

    def add(self, *item: Any) -> None:
        self.items.append(list(item))
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as out:
                out.write(json.dumps(list(item)) + "\n")


def read_log(path: Path) -> list[list[Any]]:
    """The items a server over stdio wrote to ``path`` (none yet: ``[]``)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)


def build_server(log: Log, *, noisy: int = 0) -> Server[Any]:
    """The server; what it does goes to ``log``; ``noisy``: see the module docstring."""
    roots: list[str] = []
    asked = [0]

    async def learn_roots(ctx: Any) -> None:
        seen = ctx.session.client_capabilities
        if seen is None or seen.roots is None:
            return
        try:
            answer = await ctx.session.send_request(types.ListRootsRequest(), types.ListRootsResult)
        except MCPError as exc:
            log.add("roots refused", exc.error.message)
            return
        asked[0] += 1
        roots[:] = [str(root.uri) for root in answer.roots]
        log.add("roots", roots)

    async def initialized(ctx: Any, params: Any) -> None:
        for _ in range(noisy):
            await ctx.session.send_notification(types.ToolListChangedNotification())
        await learn_roots(ctx)

    async def roots_changed(ctx: Any, params: Any) -> None:
        await learn_roots(ctx)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        if noisy:
            log.add("listed")
        seen = ctx.session.client_capabilities
        more = [ASK_MODEL] if seen is not None and seen.sampling is not None else []
        return types.ListToolsResult.model_validate({"tools": [*TOOLS, *more]})

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
        args = params.arguments or {}
        name = params.name
        if name == "roots_seen":
            return _text(json.dumps({"roots": roots, "asked": asked[0]}))
        if name == "capabilities":
            seen = ctx.session.client_capabilities
            dumped = seen.model_dump(by_alias=True, exclude_none=True) if seen else None
            return _text(json.dumps(dumped, sort_keys=True))
        if name == "environment":
            return _text(json.dumps({key: os.environ.get(key) for key in args["names"]}))
        if name in {"summarise", "ask_model"}:
            message = types.SamplingMessage(
                role="user", content=types.TextContent(text=args["text"])
            )
            request = types.CreateMessageRequest(
                params=types.CreateMessageRequestParams(messages=[message], max_tokens=50)
            )
            metadata = ServerMessageMetadata(related_request_id=ctx.request_id)
            try:
                answer = await ctx.session.send_request(
                    request, types.CreateMessageResult, metadata=metadata
                )
            except MCPError as exc:
                return _text(f"sampling failed: {exc.error.message}", error=True)
            said = answer.content.text if isinstance(answer.content, types.TextContent) else "?"
            log.add("summarised", args["text"], said)
            return _text(f"model said: {said}")
        if name == "slow_write":
            log.add("write started", args["seconds"])
            try:
                await anyio.sleep(float(args["seconds"]))
            except anyio.get_cancelled_exc_class():
                log.add("write cancelled")
                raise
            log.add("write finished")
            return _text("written")
        return _text(f"unknown tool {name}", error=True)

    server: Server[Any] = Server(
        "toolguard-roots-upstream", on_list_tools=list_tools, on_call_tool=call_tool
    )
    server.add_notification_handler(
        "notifications/initialized", types.NotificationParams, initialized
    )
    server.add_notification_handler(
        "notifications/roots/list_changed", types.NotificationParams, roots_changed
    )
    return server


async def _main() -> None:
    noisy = int(sys.argv[sys.argv.index("--noisy") + 1]) if "--noisy" in sys.argv else 0
    server = build_server(Log(Path(os.environ["TOOLGUARD_MCP_LOG"])), noisy=noisy)
    async with stdio_server() as (read, write), server.lifespan(server) as lifespan:
        options = server.create_initialization_options()
        await serve_loop(server, read, write, lifespan_state=lifespan, init_options=options)


if __name__ == "__main__":
    anyio.run(_main)
