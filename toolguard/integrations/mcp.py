"""Guard the tools of an MCP server: each becomes a toolguard :class:`~toolguard.Tool`.

::

    async with mcp.Client(server) as client:          # or a connected ClientSession
        tools = await toolguard.integrations.mcp.toolset(client)
        runner = toolguard.Runner(tools)              # or ReviewedChat(model, tools)

Every MCP tool keeps its name, description and FULL ``inputSchema`` (the
arguments a model sends are validated against it before anything runs).
Which tools need approval (see :meth:`toolguard.Classifier.explain`): a name
in the classifier's ``always`` list or with an approval verb (the server's
annotations cannot exempt those), a tool marked ``destructiveHint: true``,
and every tool not marked ``readOnlyHint: true`` (MCP's defaults are
destructive). A tool marked ``readOnlyHint: true`` with no approval verb runs
at once, and the operator's ``never`` list wins over the server's hints.

Calling a tool calls the MCP tool (``tools/call``). A successful result
becomes the tool's return value: the text of its text blocks joined with
newlines when that is all it has, otherwise a dict
``{"text": ..., "structuredContent": ..., "content": [...]}`` with the joined
text, the structured content when present, and the other content blocks
(images, resources, in MCP's wire format) when present. A result with
``isError: true`` raises :class:`MCPToolError` carrying the server's text, so
the model gets an error tool result ``Tool `NAME` failed: MCPToolError: ...``.

Needs ``pip install "toolguard-hitl[mcp]"``; tested with mcp 2.3 (both
``mcp.Client`` and ``mcp.ClientSession``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

try:
    import mcp
    import mcp.types as mcp_types
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    msg = 'toolguard.integrations.mcp needs the mcp package: pip install "toolguard-hitl[mcp]"'
    raise ImportError(msg) from exc

from toolguard._tools.classify import Classifier
from toolguard._tools.schema_tool import SchemaTool
from toolguard._tools.toolset import Toolset

__all__ = ["MAX_PAGES", "MCPToolError", "toolset"]

MAX_PAGES = 1_000
"""Most ``tools/list`` pages read from one server before giving up (a paginator that never ends)."""


class MCPToolError(RuntimeError):
    """An MCP tool answered with ``isError: true``; the text is the server's content."""


def _wire(model: Any) -> dict[str, Any]:
    """An MCP SDK model in the protocol's JSON shape (camelCase keys, whatever the SDK version)."""
    if isinstance(model, Mapping):
        return dict(model)
    data: dict[str, Any] = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return data


async def _list_page(session: Any, cursor: str | None) -> dict[str, Any]:
    client_class = getattr(mcp, "Client", None)  # mcp 2.x: the high-level client
    if client_class is not None and isinstance(session, client_class):
        page = await session.list_tools(cursor=cursor) if cursor else await session.list_tools()
    elif cursor:
        page = await session.list_tools(params=mcp_types.PaginatedRequestParams(cursor=cursor))
    else:
        page = await session.list_tools()
    return _wire(page)


async def _list_tools(session: Any) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        page = await _list_page(session, cursor)
        tools.extend(_wire(tool) for tool in page.get("tools") or [])
        next_cursor = page.get("nextCursor")
        if not next_cursor:
            return tools
        if next_cursor in seen:
            msg = (
                f"The MCP server repeated the tools/list cursor {next_cursor!r}: its listing loops"
            )
            raise RuntimeError(msg)
        seen.add(next_cursor)
        cursor = str(next_cursor)
    msg = f"The MCP server listed more than {MAX_PAGES} pages of tools (MAX_PAGES)"
    raise RuntimeError(msg)


def _result_value(result: dict[str, Any]) -> Any:
    blocks = [b for b in result.get("content") or [] if isinstance(b, Mapping)]
    text = "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
    others = [b for b in blocks if b.get("type") != "text"]
    structured = result.get("structuredContent")
    if structured is None and not others:
        return text
    value: dict[str, Any] = {"text": text}
    if structured is not None:
        value["structuredContent"] = structured
    if others:
        value["content"] = others
    return value


def _caller(session: Any, name: str) -> Any:
    async def call(**args: Any) -> Any:
        result = _wire(await session.call_tool(name, args))
        if result.get("isError"):
            value = _result_value(result)
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            raise MCPToolError(text or "the MCP tool reported an error without any text")
        return _result_value(result)

    call.__name__ = call.__qualname__ = name
    return call


def _as_tool(session: Any, listed: dict[str, Any]) -> SchemaTool:
    name = listed.get("name")
    schema = listed.get("inputSchema")
    try:
        if not isinstance(name, str):
            msg = f"tool names must be strings, got {name!r}"
            raise TypeError(msg)
        tool = SchemaTool(
            name,
            str(listed.get("description") or ""),
            schema if isinstance(schema, Mapping) else {"type": None},
            _caller(session, name),
        )
    except (TypeError, ValueError) as exc:
        msg = f"The MCP server's tool {name!r} cannot be guarded: {exc}"
        raise ValueError(msg) from None
    annotations = listed.get("annotations")
    tool.annotations = dict(annotations) if isinstance(annotations, Mapping) else {}
    return tool


async def toolset(session: Any, *, classifier: Classifier | None = None) -> Toolset:
    """Every tool of a connected MCP server, guarded where it needs approval.

    Lists the server's tools (following ``nextCursor`` pagination, at most
    :data:`MAX_PAGES` pages) and makes each one a :class:`~toolguard.Tool`
    with the same name, description and full ``inputSchema``. Call it again
    when the server's tools change.

    Args:
        session: a connected ``mcp.ClientSession`` or an entered mcp 2.x
            ``mcp.Client``; it must stay open while the tools are used.
        classifier: the rules (``always``, ``never``, verbs); defaults to
            ``Classifier()``. The tools' MCP annotations are applied on top,
            as described in the module docstring.

    Returns:
        A :class:`~toolguard.Toolset` for :class:`~toolguard.Runner`,
        :class:`~toolguard.ReviewedChat` or another integration;
        ``print(tools.table())`` shows which rule decided for each tool.

    Raises:
        TypeError: ``session`` is not an MCP client session.
        ValueError: a listed tool has no usable name or input schema, or two
            tools share a name.
        RuntimeError: the listing never ends.
    """
    if not (
        callable(getattr(session, "list_tools", None))
        and callable(getattr(session, "call_tool", None))
    ):
        msg = (
            "toolset() needs a connected mcp.ClientSession or an entered mcp.Client,"
            f" got {type(session).__name__}"
        )
        raise TypeError(msg)
    listed = await _list_tools(session)
    return Toolset([_as_tool(session, item) for item in listed], classifier=classifier)
