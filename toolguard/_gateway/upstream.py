"""The upstream MCP session: its tools listed, its answers on the wire, its resources and prompts.

The upstream is a connected ``mcp.Client`` (or anything with the same async
methods). Its answers are passed on as they are: a tool's ``CallToolResult``
becomes the run tool's value (:func:`wire`), and its resources and prompts
reach the gateway's client unchanged (they read; nobody reviews them).

A connection to the upstream declares the client capabilities of the MCP client
it serves, never more (:func:`upstream_client`, :func:`relayed_capabilities`):
the first connection, made at start-up before any client, declares none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "RELAYED",
    "list_upstream",
    "read_only_handlers",
    "relayed_capabilities",
    "upstream_client",
    "wire",
]

RELAYED: Final = ("sampling", "elicitation", "roots")
"""The client capabilities the gateway relays to the upstream: the upstream's requests of these
kinds reach the client (:mod:`toolguard._gateway.relay`)."""


def relayed_capabilities(capabilities: Any) -> Any:
    """The capabilities of :data:`RELAYED` as a client declared them (``sampling``,
    ``elicitation``, ``roots``, each with its own settings), as an ``mcp.types.ClientCapabilities``;
    ``None`` when it declared none of them."""
    from mcp import types  # noqa: PLC0415 - needs the mcp extra

    parts = {name: getattr(capabilities, name, None) for name in RELAYED}
    if all(part is None for part in parts.values()):
        return None
    return types.ClientCapabilities(**parts)


def upstream_client(
    target: Any, declared: Any, callbacks: Mapping[str, Any], **options: Any
) -> Any:
    """An ``mcp.Client`` of the upstream at ``target`` that declares exactly ``declared`` (an
    ``mcp.types.ClientCapabilities``; ``None``: no client capability), whatever ``callbacks``
    (``sampling_callback``, ...) it has.

    The MCP SDK's client declares a capability for each callback it is given; the gateway
    gives every connection all of them (its relay answers what the client cannot) and declares
    only what the client it serves declared, in ``initialize``, in ``server/discover`` and on
    every 2026-07-28 request.
    """
    from mcp import Client, types  # noqa: PLC0415 - needs the mcp extra

    client = Client(target, **callbacks, **options)
    ad = declared if declared is not None else types.ClientCapabilities()
    build = client._build_session

    async def build_session(exit_stack: Any) -> Any:
        session = await build(exit_stack)
        session._build_capabilities = lambda version: ad  # type: ignore[method-assign]
        return session

    client._build_session = build_session  # type: ignore[method-assign]
    return client


async def list_upstream(client: Any) -> list[dict[str, Any]]:
    """The upstream's tools in wire format (``tools/list`` items), every page followed."""
    from toolguard.integrations.mcp import _list_tools  # noqa: PLC0415 - needs the mcp extra

    return await _list_tools(client)


def wire(model: Any) -> dict[str, Any]:
    """An MCP answer (a pydantic model or a mapping) as its JSON wire dict."""
    if isinstance(model, Mapping):
        return dict(model)
    data: dict[str, Any] = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return data


def read_only_handlers(upstream: Any) -> dict[str, Any]:
    """Handlers forwarding the upstream's resources and prompts as they are (no review).

    Only for what the upstream declared in its capabilities; an upstream
    error (an unknown resource, ...) reaches the client as that error.
    Subscriptions and change notifications: :mod:`toolguard._gateway.relay`.
    """
    capabilities = getattr(upstream, "server_capabilities", None)
    handlers: dict[str, Any] = {}
    if getattr(capabilities, "resources", None) is not None:

        async def list_resources(ctx: Any, params: Any) -> Any:
            return await upstream.list_resources(cursor=getattr(params, "cursor", None))

        async def list_templates(ctx: Any, params: Any) -> Any:
            cursor = getattr(params, "cursor", None)
            return await upstream.list_resource_templates(cursor=cursor)

        async def read_resource(ctx: Any, params: Any) -> Any:
            return await upstream.read_resource(str(params.uri))

        handlers |= {
            "on_list_resources": list_resources,
            "on_list_resource_templates": list_templates,
            "on_read_resource": read_resource,
        }
    if getattr(capabilities, "prompts", None) is not None:

        async def list_prompts(ctx: Any, params: Any) -> Any:
            return await upstream.list_prompts(cursor=getattr(params, "cursor", None))

        async def get_prompt(ctx: Any, params: Any) -> Any:
            return await upstream.get_prompt(params.name, params.arguments)

        handlers |= {"on_list_prompts": list_prompts, "on_get_prompt": get_prompt}
    return handlers
