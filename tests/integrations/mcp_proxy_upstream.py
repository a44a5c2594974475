"""An upstream MCP server for the gateway tests, run over stdio (``python -m``).

Every real execution of a tool is appended to the JSON-lines file named by
``TOOLGUARD_MCP_LOG`` (``{"tool": ..., "args": ...}``), so a test can check
that a tool ran exactly once, with which arguments, or not at all. The tools
cover the classifier's cases (read-only, a verb, no annotations), structured
output with an ``outputSchema``, an error result, and the environment the
proxy passed on.
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
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

PATH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"path": {"type": "string", "description": "Path inside the workspace."}},
    "required": ["path"],
}
STATS_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {"files": {"type": "integer"}, "bytes": {"type": "integer"}},
    "required": ["files", "bytes"],
}

TOOLS: list[dict[str, Any]] = [
    {
        "name": "read_file",
        "title": "Read a file",
        "description": "Read a file.",
        "inputSchema": PATH_SCHEMA,
        "annotations": {"readOnlyHint": True, "title": "Reader"},
    },
    {
        "name": "delete_file",
        "description": "Delete a file (claims read-only).",
        "inputSchema": PATH_SCHEMA,
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "archive_file",
        "description": "Archive a file (no annotations at all).",
        "inputSchema": PATH_SCHEMA,
    },
    {
        "name": "stats",
        "description": "Structured statistics.",
        "inputSchema": {"type": "object", "properties": {}},
        "outputSchema": STATS_OUTPUT,
        "annotations": {"readOnlyHint": True, "idempotentHint": True},
    },
    {
        "name": "fail_always",
        "description": "Always answers with an MCP error result.",
        "inputSchema": PATH_SCHEMA,
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "show_env",
        "description": "Shows the TOOLGUARD_PROXY_PROBE environment variable.",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"readOnlyHint": True},
    },
]

RESOURCES: list[dict[str, Any]] = [
    {"uri": "file:///srv/readme.md", "name": "readme", "mimeType": "text/markdown"}
]
RESOURCE_TEMPLATES: list[dict[str, Any]] = [
    {"uriTemplate": "file:///srv/{path}", "name": "a file", "mimeType": "text/plain"}
]
PROMPTS: list[dict[str, Any]] = [
    {
        "name": "summarise",
        "description": "Summarise a topic.",
        "arguments": [{"name": "topic", "description": "What to summarise.", "required": True}],
    }
]


def build_server(log: Path) -> Server[Any]:
    """The server; each execution is appended to ``log``."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult.model_validate({"tools": TOOLS})

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments or {}
        with log.open("a", encoding="utf-8") as file:
            file.write(json.dumps({"tool": params.name, "args": args}, sort_keys=True) + "\n")
        if params.name == "fail_always":
            text = f"no such file: {args.get('path')}"
            return types.CallToolResult.model_validate(
                {"content": [{"type": "text", "text": text}], "isError": True}
            )
        if params.name == "stats":
            return types.CallToolResult.model_validate(
                {
                    "content": [{"type": "text", "text": '{"files": 3, "bytes": 42}'}],
                    "structuredContent": {"files": 3, "bytes": 42},
                }
            )
        if params.name == "show_env":
            probe = os.environ.get("TOOLGUARD_PROXY_PROBE", "(unset)")
            return types.CallToolResult.model_validate(
                {"content": [{"type": "text", "text": probe}]}
            )
        return types.CallToolResult.model_validate(
            {
                "content": [
                    {"type": "text", "text": f"{params.name} done"},
                    {"type": "text", "text": json.dumps(args, sort_keys=True)},
                ]
            }
        )

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult.model_validate({"resources": RESOURCES})

    async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult.model_validate(
            {"resourceTemplates": RESOURCE_TEMPLATES}
        )

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> Any:
        uri = str(params.uri)
        if uri != "file:///srv/readme.md":
            raise MCPError(code=-32002, message=f"Resource not found: {uri}")
        return types.ReadResourceResult.model_validate(
            {"contents": [{"uri": uri, "mimeType": "text/markdown", "text": "# Read me"}]}
        )

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult.model_validate({"prompts": PROMPTS})

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> Any:
        topic = (params.arguments or {}).get("topic", "")
        return types.GetPromptResult.model_validate(
            {
                "description": "Summarise a topic.",
                "messages": [
                    {"role": "user", "content": {"type": "text", "text": f"Summarise {topic}."}}
                ],
            }
        )

    return Server(
        "toolguard-proxy-upstream",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


async def _main() -> None:
    server = build_server(Path(os.environ["TOOLGUARD_MCP_LOG"]))
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def _serve_http(port: int) -> None:
    """Serve the same tools over streamable HTTP at ``http://127.0.0.1:PORT/mcp``."""
    import uvicorn

    server = build_server(Path(os.environ["TOOLGUARD_MCP_LOG"]))
    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        _serve_http(int(sys.argv[2]))
    else:
        anyio.run(_main)
