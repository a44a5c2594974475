"""An upstream MCP server that logs, completes and reports progress, for the gateway tests.

Run over stdio (``python -m tests.integrations.mcp_passthrough_upstream``) or
streamable HTTP (``... --http PORT``, at ``http://127.0.0.1:PORT/mcp``). Its
tools:

- ``steps`` (read-only): three ``notifications/progress`` (1/3, 2/3, 3/3) for
  the call's progress token, then a result naming the ``_meta`` it got;
- ``chatty`` (read-only): one ``notifications/message`` at each of debug,
  info, warning and error (data ``"<level> <tag>"``) for the call;
- ``deploy`` (destructive: waits for a person): two progress notifications,
  then its result names the ``_meta`` it got. Every run is appended to the
  JSON-lines file of ``TOOLGUARD_MCP_LOG``.

``logging/setLevel`` is answered (and said with an info message at the new
level's session); ``completion/complete`` completes a prompt's ``topic``
argument from a fixed list.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import anyio
from mcp import types
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPDeprecationWarning

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)  # served for earlier protocols

EMPTY: dict[str, Any] = {"type": "object", "properties": {"tag": {"type": "string"}}}
TOOLS: list[dict[str, Any]] = [
    {"name": "steps", "inputSchema": EMPTY, "annotations": {"readOnlyHint": True}},
    {"name": "chatty", "inputSchema": EMPTY, "annotations": {"readOnlyHint": True}},
    {"name": "deploy", "inputSchema": EMPTY, "annotations": {"destructiveHint": True}},
]
TOPICS = ["alpha", "alps", "beta"]


def _meta(ctx: Any) -> dict[str, Any]:
    """The call's ``_meta`` as it arrived, without the protocol's own keys."""
    params = ctx.params if isinstance(ctx.params, dict) else {}
    meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
    return {k: v for k, v in meta.items() if not k.startswith("io.modelcontextprotocol/")}


def build_server(log: Path) -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult.model_validate({"tools": TOOLS})

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = dict(params.arguments or {})
        tag = str(args.get("tag", ""))
        if params.name == "chatty":
            for level in ("debug", "info", "warning", "error"):
                await ctx.session.send_log_message(
                    level, f"{level} {tag}", "upstream", related_request_id=ctx.request_id
                )
            return types.CallToolResult(content=[types.TextContent(text=f"chatty {tag}")])
        steps = 3 if params.name == "steps" else 2
        for step in range(1, steps + 1):
            await ctx.session.report_progress(float(step), float(steps), f"{tag} step {step}")
        if params.name == "deploy":
            with log.open("a", encoding="utf-8") as out:
                out.write(json.dumps({"tool": "deploy", "args": args}) + "\n")
        text = json.dumps({"tool": params.name, "tag": tag, "meta": _meta(ctx)}, sort_keys=True)
        return types.CallToolResult(content=[types.TextContent(text=text)])

    async def set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        await ctx.session.send_log_message("info", f"level {params.level}", "upstream")
        return types.EmptyResult()

    async def complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        prefix = params.argument.value
        values = [topic for topic in TOPICS if topic.startswith(prefix)]
        return types.CompleteResult(
            completion=types.Completion(values=values, total=len(values), has_more=False)
        )

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        prompt = {"name": "summarise", "arguments": [{"name": "topic", "required": True}]}
        return types.ListPromptsResult.model_validate({"prompts": [prompt]})

    return Server(
        "toolguard-passthrough-upstream",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_set_logging_level=set_level,
        on_completion=complete,
        on_list_prompts=list_prompts,
    )


async def _main() -> None:
    server = build_server(Path(os.environ["TOOLGUARD_MCP_LOG"]))
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def _serve_http(port: int) -> None:
    import uvicorn

    server = build_server(Path(os.environ["TOOLGUARD_MCP_LOG"]))
    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        _serve_http(int(sys.argv[2]))
    else:
        anyio.run(_main)
