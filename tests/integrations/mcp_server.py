"""A small MCP server for the tests: in memory (``build_server``) or over stdio (run as a script).

Every real execution of a tool is appended to a JSON-lines file (the path in
``TOOLGUARD_MCP_LOG``, or the ``log`` given to ``build_server``), so a test can
check that a tool ran exactly once, with which arguments, or not at all. The
tools come in two ``tools/list`` pages, to exercise pagination.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
from mcp import types
from mcp.server import Server
from mcp.server.stdio import stdio_server

RO = {"readOnlyHint": True}
RO_DESTRUCTIVE = {"readOnlyHint": True, "destructiveHint": True}
NOT_DESTRUCTIVE = {"readOnlyHint": False, "destructiveHint": False}

FILE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "Path inside the workspace."},
        "mode": {"type": "string", "enum": ["text", "binary"], "description": "How to read."},
    },
    "required": ["path"],
}

REF_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "event": {"$ref": "#/$defs/Event", "description": "The event to book."},
        "attendees": {"type": "array", "items": {"$ref": "#/$defs/Person"}},
    },
    "required": ["event"],
    "$defs": {
        "Event": {
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "room": {"type": "string", "enum": ["A", "B"]},
            },
            "required": ["title", "room"],
        },
        "Person": {
            "type": "object",
            "properties": {"email": {"type": "string", "description": "Work address."}},
            "required": ["email"],
        },
    },
}

# name -> (description, inputSchema, annotations or None)
TOOLS: dict[str, tuple[str, dict[str, Any], dict[str, Any] | None]] = {
    "read_file": ("Read a file.", FILE_SCHEMA, RO),
    "list_files": ("List files (no annotations at all).", FILE_SCHEMA, None),
    "archive_file": ("Archive a file (additive, says the server).", FILE_SCHEMA, NOT_DESTRUCTIVE),
    "purge_cache": ("Purge the cache (contradictory hints).", FILE_SCHEMA, RO_DESTRUCTIVE),
    "delete_file": ("Delete a file (claims read-only).", FILE_SCHEMA, RO),
    "book_room": ("Book a room.", REF_SCHEMA, RO),
    "fail_always": ("Always answers with an MCP error result.", FILE_SCHEMA, RO),
    "stats": ("Structured statistics.", {"type": "object", "properties": {}}, RO),
}
PAGE_ONE = ["read_file", "list_files", "archive_file", "purge_cache"]


def _listed(name: str) -> types.Tool:
    description, schema, annotations = TOOLS[name]
    return types.Tool.model_validate(
        {
            "name": name,
            "description": description,
            "inputSchema": schema,
            **({"annotations": annotations} if annotations is not None else {}),
        }
    )


def build_server(log: Path) -> Server[Any]:
    """The server; each execution is appended to ``log`` as ``{"tool": ..., "args": ...}``."""

    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        cursor = params.cursor if params is not None else None
        if cursor is None:
            return types.ListToolsResult.model_validate(
                {"tools": [_listed(n) for n in PAGE_ONE], "nextCursor": "page-2"}
            )
        rest = [n for n in TOOLS if n not in PAGE_ONE]
        return types.ListToolsResult.model_validate({"tools": [_listed(n) for n in rest]})

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments or {}
        with log.open("a", encoding="utf-8") as file:
            file.write(json.dumps({"tool": params.name, "args": args}, sort_keys=True) + "\n")
        if params.name == "fail_always":
            return types.CallToolResult.model_validate(
                {
                    "content": [{"type": "text", "text": f"no such file: {args.get('path')}"}],
                    "isError": True,
                }
            )
        if params.name == "stats":
            return types.CallToolResult.model_validate(
                {
                    "content": [{"type": "text", "text": '{"files": 3}'}],
                    "structuredContent": {"files": 3},
                }
            )
        return types.CallToolResult.model_validate(
            {
                "content": [
                    {"type": "text", "text": f"{params.name} done"},
                    {"type": "text", "text": json.dumps(args, sort_keys=True)},
                ]
            }
        )

    return Server("toolguard-test", on_list_tools=list_tools, on_call_tool=call_tool)


def executions(log: Path) -> list[dict[str, Any]]:
    """Every execution recorded so far, in order."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


async def _main() -> None:
    server = build_server(Path(os.environ["TOOLGUARD_MCP_LOG"]))
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(_main)
