"""Guard the tools of an MCP server: each becomes a toolguard :class:`~toolguard.Tool`.

::

    async with mcp.Client(server) as client:          # or the object you already hold
        tools = await toolguard.integrations.mcp.toolset(client)
        runner = toolguard.Runner(tools)              # or ReviewedChat(model, tools)

``toolset()`` takes the MCP client objects users hold, each recognised by its
class: a connected ``mcp.ClientSession``, an entered ``mcp.Client``, a
connected MCP server of the OpenAI Agents SDK (any ``agents.mcp.MCPServer``:
``MCPServerStdio``, ``MCPServerStreamableHttp``, ``MCPServerSse``) and an
entered ``fastmcp.Client``. Calls go through that object. Anything else is a
``TypeError`` naming what is accepted (a Pydantic AI ``MCPToolset`` is guarded
by :func:`toolguard.integrations.pydantic_ai.toolset`).

Every MCP tool keeps its name, description and FULL ``inputSchema`` (the
arguments a model sends are validated against it before anything runs).
Which tools need approval (see :meth:`toolguard.Classifier.explain`): a name
in the classifier's ``always`` list or with an approval verb (the server's
annotations cannot exempt those), a tool marked ``destructiveHint: true``,
and every tool not marked ``readOnlyHint: true`` (MCP's defaults are
destructive). A tool marked ``readOnlyHint: true`` with no approval verb runs
at once, and the operator's ``never`` list wins over the server's hints.

Calling a tool calls the MCP tool (``tools/call``). A successful result
becomes the tool's return value, each part of it once:

* with ``structuredContent``: that object alone (its text blocks are the same
  value serialized for older clients, so they are left out); when the result
  also has non-text blocks, ``{"structuredContent": ..., "content": [...]}``
  with those blocks described as below;
* without: every content block as text, joined with newlines: a text block's
  text; an image or audio block as ``[image: image/png, 68 bytes]``; a
  resource link as ``[resource link: URI (NAME)]``; an embedded text resource
  as ``[resource: URI]`` and its text on the next line, a binary one as
  ``[resource: URI, TYPE, N bytes]``.

A result with ``isError: true`` raises :class:`MCPToolError` carrying the
server's text (its content blocks as above, else its structured content as
JSON), so the model gets an error tool result
``Tool `NAME` failed: MCPToolError: ...``.

Needs ``pip install "toolguard-hitl[mcp]"``; tested with mcp 2.3, fastmcp 4.2
and the OpenAI Agents SDK 0.24.
"""

from __future__ import annotations

import base64
import binascii
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

try:
    import mcp
    import mcp.types as mcp_types
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    msg = 'toolguard.integrations.mcp needs the mcp package: pip install "toolguard-hitl[mcp]"'
    raise ImportError(msg) from exc

from toolguard import (
    Classifier,
)
from toolguard._enforce.pipeline import (
    SchemaTool,
    ShadowMode,
    Toolset,
    UnsupportedPolicyError,
    refuse_shadow,
)

__all__ = ["ACCEPTED", "MAX_PAGES", "MCPToolError", "StructuredResult", "toolset"]

MAX_PAGES = 1_000
"""Most ``tools/list`` pages read from one server before giving up (a paginator that never ends)."""

ACCEPTED = (
    "a connected mcp.ClientSession, an entered mcp.Client, a connected OpenAI Agents SDK MCP"
    " server (agents.mcp.MCPServer: MCPServerStdio, MCPServerStreamableHttp, MCPServerSse)"
    " or an entered fastmcp.Client"
)
"""The objects :func:`toolset` takes, as its ``TypeError`` names them."""


class MCPToolError(RuntimeError):
    """An MCP tool answered with ``isError: true``; the text is the server's content."""


def _wire(model: Any) -> dict[str, Any]:
    """An MCP SDK model in the protocol's JSON shape (camelCase keys, whatever the SDK version)."""
    if isinstance(model, Mapping):
        return dict(model)
    data: dict[str, Any] = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return data


# ---------------------------------------------------------------------------- the objects held


@dataclass(frozen=True, slots=True)
class _Upstream:
    """The object the user holds and which of the accepted kinds it is."""

    kind: str  # "session", "client", "agents" or "fastmcp"
    held: Any

    async def page(self, cursor: str | None) -> dict[str, Any]:
        """One ``tools/list`` page in wire format (``tools`` and ``nextCursor``)."""
        held = self.held
        if self.kind == "client":
            return _wire(await (held.list_tools(cursor=cursor) if cursor else held.list_tools()))
        if self.kind == "fastmcp":
            return _wire(await held.list_tools_mcp(cursor=cursor))
        if self.kind == "agents":
            # The Agents SDK follows the pages itself (and applies the server's tool_filter).
            return {"tools": [_wire(tool) for tool in await held.list_tools()]}
        if cursor:
            return _wire(
                await held.list_tools(params=mcp_types.PaginatedRequestParams(cursor=cursor))
            )
        return _wire(await held.list_tools())

    async def call(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        """``tools/call`` through the object held; the ``CallToolResult`` in wire format."""
        if self.kind == "fastmcp":
            return _wire(await self.held.call_tool_mcp(name, args))
        return _wire(await self.held.call_tool(name, args))


def _loaded_class(module: str, name: str) -> type | None:
    """``module.name`` when ``module`` is already imported, else ``None``.

    An object of a framework's class exists only once its module is imported,
    so looking in ``sys.modules`` recognises it without importing a framework
    the user does not use (or has not installed).
    """
    loaded = sys.modules.get(module)
    found = getattr(loaded, name, None) if loaded is not None else None
    return found if isinstance(found, type) else None


def _upstream(held: object) -> _Upstream:
    """Which accepted kind ``held`` is.

    Raises:
        TypeError: it is none of :data:`ACCEPTED`.
        UnsupportedPolicyError: an Agents SDK server with its own ``require_approval``.
    """
    fastmcp_client = _loaded_class("fastmcp", "Client")
    agents_server = _loaded_class("agents.mcp", "MCPServer")
    if isinstance(held, mcp.ClientSession):
        return _Upstream("session", held)
    if isinstance(held, mcp.Client):
        return _Upstream("client", held)
    if fastmcp_client is not None and isinstance(held, fastmcp_client):
        return _Upstream("fastmcp", held)
    if agents_server is not None and isinstance(held, agents_server):
        _check_agents_server(held)
        return _Upstream("agents", held)
    msg = f"toolset() takes {ACCEPTED}, got {type(held).__module__}.{type(held).__qualname__}"
    pydantic_ai_toolset = _loaded_class("pydantic_ai.mcp", "MCPToolset")
    if pydantic_ai_toolset is not None and isinstance(held, pydantic_ai_toolset):
        msg += "; guard a Pydantic AI MCPToolset with toolguard.integrations.pydantic_ai.toolset()"
    raise TypeError(msg)


def _check_agents_server(server: Any) -> None:
    """Refuse a server whose own approval setting toolguard would otherwise ignore."""
    policy = getattr(server, "_needs_approval_policy", False)
    if policy is False or (isinstance(policy, Mapping) and not any(policy.values())):
        return
    msg = (
        f"The MCP server {server.name!r} has its own require_approval setting, which toolguard"
        " cannot apply: toolguard decides which calls wait. Build the server without"
        " require_approval and say it to toolguard instead: toolset(server,"
        ' classifier=Classifier(always=["TOOL", ...])), or toolguard.guard(tools,'
        ' rules=Rules(ask=["TOOL"]))'
    )
    raise UnsupportedPolicyError(msg)


async def _list_tools(session: Any) -> list[dict[str, Any]]:
    """Every tool ``session`` (an accepted object) lists, in wire format, every page followed."""
    upstream = session if isinstance(session, _Upstream) else _upstream(session)
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        page = await upstream.page(cursor)
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


# ---------------------------------------------------------------------------- results


def _size(data: object) -> str:
    try:
        return f"{len(base64.b64decode(str(data), validate=True))} bytes"
    except (binascii.Error, ValueError):
        return "unreadable data"


def _described(block: Mapping[str, Any]) -> str:
    """A content block as text: a text block's text, a line describing any other block."""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind in ("image", "audio"):
        return f"[{kind}: {block.get('mimeType', 'unknown type')}, {_size(block.get('data'))}]"
    if kind == "resource_link":
        name = block.get("name")
        return f"[resource link: {block.get('uri')}" + (f" ({name})" if name else "") + "]"
    if kind == "resource":
        resource = block.get("resource")
        resource = resource if isinstance(resource, Mapping) else {}
        head = f"[resource: {resource.get('uri')}"
        if "text" in resource:
            return f"{head}]\n{resource.get('text')}"
        return f"{head}, {resource.get('mimeType', 'unknown type')}, {_size(resource.get('blob'))}]"
    return f"[{kind} content]"


class StructuredResult(dict[str, Any]):
    """The value of a result with ``structuredContent`` (a ``dict``), and what a client that
    reads the content blocks shows instead, for the integrations whose framework's own MCP
    path gives that (the OpenAI Agents SDK's).

    ``content_text``: every content block as text, joined with newlines.
    ``structured_content``: the result's ``structuredContent`` as the server sent it.
    ``structured_first``: the server is an Agents SDK server built with
    ``use_structured_content=True``, whose own path gives the structured content.
    """

    __slots__ = ("content_text", "structured_content", "structured_first")

    content_text: str
    structured_content: Any
    structured_first: bool


def _result_value(result: Mapping[str, Any], *, structured_first: bool = False) -> Any:
    """What the model reads of a ``CallToolResult`` (see the module docstring's rule).

    With ``structuredContent``: that object, once (its text blocks mirror it),
    or ``{"structuredContent": ..., "content": [descriptions]}`` when it also
    has non-text blocks, as a :class:`StructuredResult`. Without: every block
    as text, joined with newlines.
    """
    blocks = [b for b in result.get("content") or [] if isinstance(b, Mapping)]
    text = "\n".join(_described(b) for b in blocks)
    structured = result.get("structuredContent")
    if structured is None:
        return text
    others = [_described(b) for b in blocks if b.get("type") != "text"]
    value = StructuredResult(
        structured if not others else {"structuredContent": structured, "content": others}
    )
    value.content_text = text
    value.structured_content = structured
    value.structured_first = structured_first
    return value


def _error_text(result: Mapping[str, Any]) -> str:
    """The server's text of an ``isError`` result (its structured content when it has no text)."""
    blocks = [b for b in result.get("content") or [] if isinstance(b, Mapping)]
    text = "\n".join(_described(b) for b in blocks)
    structured = result.get("structuredContent")
    if not text and structured is not None:
        text = json.dumps(structured, ensure_ascii=False, sort_keys=True)
    return text or "the MCP tool reported an error without any text"


def _caller(upstream: _Upstream, name: str) -> Any:
    structured_first = upstream.kind == "agents" and bool(
        getattr(upstream.held, "use_structured_content", False)
    )

    async def call(**args: Any) -> Any:
        result = await upstream.call(name, args)
        if result.get("isError"):
            raise MCPToolError(_error_text(result))
        return _result_value(result, structured_first=structured_first)

    call.__name__ = call.__qualname__ = name
    return call


def _as_tool(upstream: _Upstream, listed: dict[str, Any]) -> SchemaTool:
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
            _caller(upstream, name),
        )
    except (TypeError, ValueError) as exc:
        msg = f"The MCP server's tool {name!r} cannot be guarded: {exc}"
        raise ValueError(msg) from None
    annotations = listed.get("annotations")
    tool.annotations = dict(annotations) if isinstance(annotations, Mapping) else {}
    return tool


async def toolset(
    session: Any, *, classifier: Classifier | None = None, shadow: ShadowMode = False
) -> Toolset:
    """Every tool of a connected MCP server, guarded where it needs approval.

    Lists the server's tools (following ``nextCursor`` pagination, at most
    :data:`MAX_PAGES` pages) and makes each one a :class:`~toolguard.Tool`
    with the same name, description and full ``inputSchema``. Call it again
    when the server's tools change.

    Args:
        session: the MCP client object you hold (:data:`ACCEPTED`): a
            connected ``mcp.ClientSession``, an entered ``mcp.Client``, a
            connected ``agents.mcp.MCPServer`` of the OpenAI Agents SDK or an
            entered ``fastmcp.Client``. Every call goes through it, so it must
            stay open while the tools are used.
        classifier: the rules (``always``, ``never``, verbs); defaults to
            ``Classifier()``. The tools' MCP annotations are applied on top,
            as described in the module docstring.

    Returns:
        A :class:`~toolguard.Toolset` for :class:`~toolguard.Runner`,
        :class:`~toolguard.ReviewedChat` or another integration;
        ``print(tools.table())`` shows which rule decided for each tool.

    Raises:
        TypeError: ``session`` is none of the accepted objects (the text
            names them).
        UnsupportedPolicyError: an Agents SDK server built with its own
            ``require_approval``, which toolguard cannot apply (the text
            names what to use instead).
        ValueError: a listed tool has no usable name or input schema, or two
            tools share a name.
        RuntimeError: the listing never ends.
        UnsupportedPolicyError: ``shadow`` on: a toolset has no shadow mode;
            the Runner or ReviewedChat that runs it has (the text says so).
    """
    refuse_shadow(
        shadow,
        "toolguard.integrations.mcp.toolset()",
        hint="Give shadow=True to the toolguard.Runner or toolguard.ReviewedChat that runs it.",
    )
    upstream = _upstream(session)
    listed = await _list_tools(upstream)
    return Toolset([_as_tool(upstream, item) for item in listed], classifier=classifier)
