"""What passes between the MCP clients and the upstream besides tool calls, and progress.

The gateway connects to the upstream at start-up, before any client connects:
that first connection lists the tools and declares no client capability. A
client that declared sampling, elicitation or roots (any of them) gets a
connection to the upstream of its own, opened when it is initialized (for an
upstream command: its own process), which declares exactly what that client
declared and serves everything that client asks (tool calls, resources,
prompts, subscriptions); the other clients share the first connection. So
the upstream is never told a capability the client it serves does not have,
and it learns the roots of that client and their changes (it asks
``roots/list`` when it is told the client is initialized, as it would
directly). :class:`Relay` makes each connection transparent:

- **Requests of the upstream** (``sampling/createMessage``, ``elicitation/create``,
  ``roots/list``) on a client's own connection go to that client, and only to
  it: related to its call that runs on the upstream when exactly one does (a
  call approved on the page runs in its client's request, see
  :mod:`toolguard._gateway.handoff`), otherwise on the client's own channel. A
  kind the client did not declare is refused with :data:`UNSUPPORTED`. On the
  first connection, which declared nothing, every request is refused
  (:data:`UNSUPPORTED`, or :data:`NO_CLIENT` while no client is connected):
  one client's data never reaches another client, and nothing is guessed.
- **Notifications of the upstream**: ``notifications/tools/list_changed``
  re-lists the tools on the connection that said so and classifies them as at
  start-up (rules, classifier, annotations, secret arguments), then tells every
  client; ``resources/list_changed`` and ``prompts/list_changed`` go to the
  clients of that connection, ``resources/updated`` to its clients that
  subscribed to that resource. Notifications that arrive before the gateway is
  ready are handled once it is (several tool changes become one listing).
- **Requests and notifications of the client**: ``resources/subscribe`` and
  ``resources/unsubscribe`` (when the upstream offers subscriptions) reach the
  client's connection; ``notifications/roots/list_changed`` reaches the
  client's own connection (the first one never declared roots).

"The request being served" is a context variable set around every request
the gateway's MCP server handles (a server middleware), so this works the
same for one client over stdio and for several over streamable HTTP. A
2026-07-28 client has no connection of its own (it cannot be asked anything
during a call, and is told of changes only on a ``subscriptions/listen``
stream): it shares the first connection.

:func:`report_waiting` sends ``notifications/progress`` while a call waits for
a person, so that a client which restarts its request timeout on progress
does not give up during a review.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import anyio

from toolguard._gateway.handoff import deciding
from toolguard._gateway.passing import Passing, Progress, drop
from toolguard._gateway.upstream import list_upstream, relayed_capabilities, upstream_client
from toolguard._tools.schema_tool import SchemaTool
from toolguard._tools.toolset import Toolset

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from mcp.server import Server

    from toolguard._chat.chat import ReviewedChat

__all__ = [
    "DEFAULT_PROGRESS_INTERVAL",
    "NO_CLIENT",
    "NO_CONNECTION",
    "UNSUPPORTED",
    "Opener",
    "Relay",
    "report_waiting",
    "schema_tools",
    "waiting_message",
]

DEFAULT_PROGRESS_INTERVAL: Final = 2.0
"""Seconds between two progress notifications of a call waiting for a person."""
UNSUPPORTED: Final = "the MCP client connected to toolguard does not support {what}"
"""The error the upstream gets for a request the client cannot answer."""
NO_CLIENT: Final = "no MCP client is connected to toolguard to answer {method}"
"""The error the upstream gets for a request while no client is connected."""
NO_CONNECTION: Final = (
    "toolguard could not connect to the upstream MCP server for this client: {why}"
)
"""The error of a client's request when its own connection to the upstream could not be made."""

# The request of the gateway's MCP server being handled in this context.
_SERVING: contextvars.ContextVar[Any | None] = contextvars.ContextVar("_SERVING", default=None)

Forwarder = Callable[[str], Callable[..., Awaitable[dict[str, Any]]]]
Opener = Callable[[Any, Mapping[str, Any]], "AbstractAsyncContextManager[Any]"]
"""``opener(declared, callbacks)``: a new connection to the upstream that declares exactly
``declared`` (an ``mcp.types.ClientCapabilities``) and has the relay's ``callbacks``
(``sampling_callback``, ...); entered, the connected ``mcp.Client``."""


# ---------------------------------------------------------------------------- progress


def waiting_message(name: str, review_id: str, page: str | None) -> str:
    """The text of the progress notifications of a call waiting for a decision."""
    where = f" on {page}" if page else ""
    return f"Waiting for a person to approve `{name}` (review {review_id}){where}"


async def report_waiting(  # noqa: PLR0917 - one waiting call
    ctx: Any,
    chat: ReviewedChat,
    thread_id: str,
    name: str,
    interval: float,
    page: str | None,
    progress: Progress | None = None,
) -> None:
    """Send ``notifications/progress`` for the request of ``ctx`` while its review waits.

    Only when the request carried a ``progressToken`` (the MCP SDK sends
    nothing otherwise): at once, then every ``interval`` seconds, with an
    increasing ``progress``, no ``total`` and :func:`waiting_message`. Ends as
    soon as the thread's review is decided, expired or cancelled; the caller
    cancels it before it answers the request, so none follows the result. A
    notification that cannot be sent (the client left) ends it quietly. ``progress``: the
    request's stream, shared with the upstream's progress (see :mod:`~toolguard._gateway.passing`).
    """
    if getattr(ctx, "session", None) is None:
        return
    stream = progress if progress is not None else Progress(ctx)
    try:
        while True:
            state = await chat.get_thread(thread_id)
            if state.status != "awaiting_review" or state.pending is None:
                return
            await stream.waiting(waiting_message(name, state.pending.review_id, page))
            await anyio.sleep(interval)
    except Exception:  # progress is a courtesy; the call goes on without it
        return


# ---------------------------------------------------------------------------- the upstream's tools


def schema_tools(
    listed: Sequence[Mapping[str, Any]],
    forwarder: Forwarder,
    secret: Mapping[str, Sequence[str]],
) -> tuple[list[SchemaTool], dict[str, str]]:
    """The guarded tools of an upstream listing, and the tools that cannot be guarded.

    Each listed tool becomes a :class:`SchemaTool` running ``forwarder(name)``,
    with the listing's annotations and the ``secret`` arguments of its name;
    a tool whose ``inputSchema`` cannot be compiled is returned with the
    reason instead (it is listed, never run).

    Raises:
        ValueError: a tool has no text name; ``secret`` names an argument the
            tool's schema does not have.
    """
    tools: list[SchemaTool] = []
    unguardable: dict[str, str] = {}
    for item in listed:
        name = item.get("name")
        if not isinstance(name, str):
            msg = f"the upstream MCP server listed a tool without a text name: {name!r}"
            raise ValueError(msg)
        schema = item.get("inputSchema")
        try:
            tool = SchemaTool(
                name,
                str(item.get("description") or ""),
                schema if isinstance(schema, Mapping) else {"type": None},
                forwarder(name),
            )
        except (TypeError, ValueError) as exc:
            unguardable[name] = str(exc)
            continue
        if secret.get(name):
            tool = SchemaTool(
                name,
                tool.description,
                tool.parameters,
                tool.func,
                redact=secret[name],  # a ValueError here: a typo must stop the gateway
                _validator=tool._validator,
            )
        annotations = item.get("annotations")
        tool.annotations = dict(annotations) if isinstance(annotations, Mapping) else {}
        tools.append(tool)
    return tools, unguardable


def adopt_listing(proxy: Any, listed: Sequence[Mapping[str, Any]]) -> None:
    """Make ``listed`` the proxy's tools, classified as at start-up, in one step.

    The proxy's toolset object stays the same (the chat, its runner and its
    secret vault hold it): its tools are replaced at once, between two
    awaits, so a call in flight sees the old tools or the new ones, never a
    mix. A waiting call whose tool is gone is refused when it is approved.

    Raises:
        ValueError: see :func:`schema_tools` (nothing is changed then).
    """
    items = [dict(item) for item in listed]
    names = {item.get("name") for item in items}
    secret = {tool: args for tool, args in proxy.redact.items() if tool in names}
    tools, unguardable = schema_tools(items, proxy._forwarder, secret)
    live: Toolset = proxy.toolset
    fresh = Toolset(tools, classifier=proxy.classifier, rules=live.rules)
    live._tools, live._classifications = fresh._tools, fresh._classifications
    proxy.listed, proxy.unguardable = items, unguardable


# ---------------------------------------------------------------------------- the relay


class _Link:
    """A client connection of the gateway's MCP server, and its connection to the upstream.

    ``declared``: the capabilities of :data:`~toolguard._gateway.upstream.RELAYED` the
    client declared, which its own upstream connection declares; ``None``: it declared
    none and shares the first connection.
    """

    def __init__(self, relay: Relay, key: int, connection: Any, session: Any) -> None:
        self.relay = relay
        self.key = key
        self.connection = connection  # kept while open: its id is the key
        self.session = session  # the latest request's session: the client's own channel
        self.declared = relayed_capabilities(getattr(connection, "client_capabilities", None))
        self.client: Any = None  # its own connected upstream, once open
        self.problem: str | None = None
        self.opened: anyio.Event | None = None
        self.closed = anyio.Event()
        self.running: list[Any] = []  # its requests whose tool call runs on the upstream now
        self.log_level: str | None = None  # the level of its logging/setLevel, if any

    def open_soon(self) -> None:
        """Start opening its own upstream connection, if it has one and it is not opening."""
        if self.declared is None or self.opened is not None:
            return
        self.opened = anyio.Event()
        tasks = getattr(self.relay.proxy, "_tasks", None)
        if tasks is None or self.relay.opener is None:
            self.problem = "the gateway opens no connection per client here"
            self.opened.set()
            return
        tasks.start_soon(self._hold, self.relay.opener)

    async def _hold(self, opener: Opener) -> None:
        """Open its upstream connection, keep it until the client's connection closes."""
        assert self.opened is not None  # noqa: S101 - set by open_soon
        try:
            async with opener(self.declared, self.relay.client_options(self)) as client:
                await self.relay.listed_by(self, client)  # what it lists to this client
                self.client = client
                self.opened.set()
                await self.closed.wait()
        except Exception as exc:
            self.problem = " ".join(str(exc).split()) or "it did not start"
            sys.stderr.write(f"toolguard mcp-proxy: {NO_CONNECTION.format(why=self.problem)}\n")
        finally:
            self.client = None
            self.opened.set()

    async def upstream(self) -> Any:
        """The upstream connection of this client (its own, opened if need be, or the first).

        Raises:
            MCPError: its own connection could not be made.
        """
        if self.declared is None:
            return self.relay.client
        if self.client is None:
            self.open_soon()
            assert self.opened is not None  # noqa: S101 - set by open_soon
            await self.opened.wait()
        return self._connected()

    def _connected(self) -> Any:
        """Its own upstream connection; ``MCPError`` when there is none."""
        if self.client is None:
            from mcp import types  # noqa: PLC0415
            from mcp.shared.exceptions import MCPError  # noqa: PLC0415

            why = self.problem or "it closed"
            raise MCPError(code=types.INTERNAL_ERROR, message=NO_CONNECTION.format(why=why))
        return self.client


class _Upstream:
    """The upstream as the proxy uses it: each request of a client goes to that client's
    upstream connection, and its tool calls are noted as running for it."""

    def __init__(self, client: Any, relay: Relay) -> None:
        self._client = client
        self._relay = relay

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        step = deciding()  # a decision runs a held call: its client's request
        ctx = step.held.ctx if step is not None else _SERVING.get()
        link = self._relay.link_of(ctx)

        async def send() -> Any:
            upstream = await link.upstream() if link is not None else self._client
            passing = self._relay.passing.calling(ctx, link, upstream)  # _meta, progress, logs
            with self._relay.running(link, ctx):
                async with passing as meta:
                    if meta is None:
                        return await upstream.call_tool(name, arguments)
                    return await upstream.call_tool(name, arguments, meta=meta)

        return await (step.run(send) if step is not None else send())

    async def _serving(self) -> Any:
        link = self._relay.link_of(_SERVING.get())
        return await link.upstream() if link is not None else self._client

    async def list_resources(self, cursor: str | None = None) -> Any:
        return await (await self._serving()).list_resources(cursor=cursor)

    async def list_resource_templates(self, cursor: str | None = None) -> Any:
        return await (await self._serving()).list_resource_templates(cursor=cursor)

    async def read_resource(self, uri: str) -> Any:
        return await (await self._serving()).read_resource(uri)

    async def list_prompts(self, cursor: str | None = None) -> Any:
        return await (await self._serving()).list_prompts(cursor=cursor)

    async def get_prompt(self, name: str, arguments: Any = None) -> Any:
        return await (await self._serving()).get_prompt(name, arguments)

    async def complete(self, ref: Any, argument: Any, context_arguments: Any = None) -> Any:
        return await (await self._serving()).complete(ref, argument, context_arguments)


class Relay:
    """Passes the upstream's requests and notifications to the clients, and theirs back.

    Use: ``relay.connect(target)`` for the first upstream connection (it declares no
    client capability), then :meth:`attach` with the proxy; the proxy's
    :meth:`~toolguard._gateway.proxy.MCPProxy.server` then calls :meth:`serve`.
    ``opener`` makes the connection of a client that declared sampling, elicitation
    or roots (see :data:`Opener`); without one, every client shares the first
    connection (and the upstream's requests are refused). Its connections live in
    the proxy's background tasks. See the module docstring.
    """

    def __init__(self, opener: Opener | None = None) -> None:
        self.opener = opener
        self.client: Any = None
        self.proxy: Any = None
        self._links: dict[int, _Link] = {}  # the clients' connections, oldest first
        self._subscribed: dict[tuple[int, str], set[int]] = {}  # (upstream, URI) -> clients
        self._relisting = anyio.Lock()
        self._stale: set[int] = set()  # the connections whose tools changed, not yet listed
        self._listings: dict[int, list[dict[str, Any]]] = {}  # each connection's tools (0: first)
        self._ready = anyio.Event()  # set by attach: notifications wait for it
        self.passing = Passing(self)  # _meta, progress, log messages, completions

    # ------------------------------------------------------------------ set-up

    def client_options(self, link: _Link | None = None) -> dict[str, Any]:
        """The ``mcp.Client`` callbacks of an upstream connection (``link``'s; ``None``: the
        first one): sampling, elicitation, roots and notifications, answered for that
        connection's client."""

        async def sampling(context: Any, params: Any) -> Any:
            return await self._sampling(link, params)

        async def elicitation(context: Any, params: Any) -> Any:
            return await self._elicitation(link, params)

        async def roots(context: Any) -> Any:
            return await self._roots(link)

        async def notified(message: Any) -> None:
            await self._notified(link, message)

        return {
            "sampling_callback": sampling,
            "elicitation_callback": elicitation,
            "list_roots_callback": roots,
            "message_handler": notified,
        }

    def connect(self, target: Any, **options: Any) -> Any:
        """The first upstream connection (an ``mcp.Client`` of ``target``, with ``options``):
        it declares no client capability and its requests are refused."""
        return upstream_client(target, None, self.client_options(), **options)

    def attach(
        self,
        proxy: Any,
        client: Any,
        *,
        progress_interval: float = DEFAULT_PROGRESS_INTERVAL,
        page_url: str | None = None,
    ) -> None:
        """Relay for ``proxy``, whose first upstream connection is the connected ``client``.

        ``progress_interval`` and ``page_url`` (the approval page, named in the
        messages) are those of the progress notifications (:func:`report_waiting`).
        From here on the upstream's notifications are handled (those that came
        before are handled now).
        """
        self.client = client
        self.proxy = proxy
        self._listings[0] = [dict(item) for item in proxy.listed]
        proxy.upstream = _Upstream(client, self)
        proxy.relay = self
        proxy.progress_interval, proxy.page_url = progress_interval, page_url
        self._ready.set()

    def serve(self, server: Server[Any]) -> Server[Any]:
        """Add the relay to the gateway's MCP server: the middleware noting the request
        being served, the subscription handlers, roots notifications and the
        ``listChanged`` capabilities."""
        from mcp import types  # noqa: PLC0415
        from mcp.server.lowlevel.server import NotificationOptions  # noqa: PLC0415

        server.middleware.append(self._middleware)
        capabilities = getattr(self.client, "server_capabilities", None)
        self.passing.serve(server, capabilities)
        resources = getattr(capabilities, "resources", None)
        prompts = getattr(capabilities, "prompts", None)
        if resources is not None and resources.subscribe:
            server.add_request_handler(
                "resources/subscribe", types.SubscribeRequestParams, self._subscribe
            )
            server.add_request_handler(
                "resources/unsubscribe", types.UnsubscribeRequestParams, self._unsubscribe
            )
        server.add_notification_handler(
            "notifications/roots/list_changed", types.NotificationParams, self._roots_changed
        )
        options = NotificationOptions(
            prompts_changed=prompts is not None,
            resources_changed=resources is not None,
            tools_changed=True,
        )
        initialization = server.create_initialization_options

        def create_initialization_options(
            notification_options: Any = None, *args: Any, **kwargs: Any
        ) -> Any:
            return initialization(notification_options or options, *args, **kwargs)

        server.create_initialization_options = create_initialization_options  # type: ignore[method-assign]
        return server

    # ------------------------------------------------------------------ which client

    async def _middleware(self, ctx: Any, call_next: Any) -> Any:
        """Around every request and notification the gateway's MCP server handles."""
        link = self._note(getattr(ctx, "session", None))
        if link is not None and getattr(ctx, "method", None) == "notifications/initialized":
            link.open_soon()  # the upstream learns of this client as it would directly
        if getattr(ctx, "request_id", None) is None:
            return await call_next(ctx)
        token = _SERVING.set(ctx)
        try:
            with self.passing.request(ctx):
                return await call_next(ctx)
        finally:
            _SERVING.reset(token)

    def _note(self, session: Any) -> _Link | None:
        """The link of ``session``'s client connection, made at its first message after
        ``initialize``; ``None`` for a 2026-07-28 request (no connection of its own)."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS  # noqa: PLC0415

        connection = getattr(session, "_connection", None)
        if connection is None or getattr(connection, "client_params", None) is None:
            return None
        if getattr(connection, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS:
            return None
        key = id(connection)
        link = self._links.get(key)
        if link is None:
            link = self._links[key] = _Link(self, key, connection, session)
            connection.exit_stack.callback(self._closed, key)
        else:
            link.session = session
        return link

    def sharing(self) -> list[_Link]:
        """The clients that share the first upstream connection (they declared nothing)."""
        return [link for link in self._links.values() if link.declared is None]

    def link_of(self, ctx: Any) -> _Link | None:
        """The link of the client whose request ``ctx`` is (``None``: none, or a 2026-07-28
        request: the first connection serves it)."""
        return self._note(getattr(ctx, "session", None)) if ctx is not None else None

    def _closed(self, key: int) -> None:
        """A client connection closed: its own upstream connection closes, it is forgotten."""
        link = self._links.pop(key, None)
        self._listings.pop(key, None)
        if link is not None:
            link.closed.set()
        for subscription in list(self._subscribed):
            self._subscribed[subscription].discard(key)
            if not self._subscribed[subscription]:
                del self._subscribed[subscription]

    @contextlib.contextmanager
    def running(self, link: _Link | None, ctx: Any) -> Iterator[None]:
        """Around a tool call on the upstream: note the client request it serves."""
        if link is None or ctx is None:
            yield
            return
        link.running.append(ctx)
        try:
            yield
        finally:
            drop(link.running, ctx)

    # ------------------------------------------------------------------ the upstream's requests

    async def _ask_client(
        self,
        link: _Link | None,
        method: str,
        missing: Callable[[Any], str | None],
        request: Any,
        result: Any,
    ) -> Any:
        """Send ``request`` to the client of ``link``; its result or an ``ErrorData``."""
        from mcp import types  # noqa: PLC0415
        from mcp.shared.exceptions import MCPError  # noqa: PLC0415
        from mcp.shared.message import ServerMessageMetadata  # noqa: PLC0415

        if link is None:  # the first connection declared nothing: no client answers it
            if not self._links:
                return types.ErrorData(
                    code=types.INVALID_REQUEST, message=NO_CLIENT.format(method=method)
                )
            lacking = missing(None) or method
            return types.ErrorData(
                code=types.INVALID_REQUEST, message=UNSUPPORTED.format(what=lacking)
            )
        what = missing(link.declared)
        if what is not None:
            return types.ErrorData(
                code=types.INVALID_REQUEST, message=UNSUPPORTED.format(what=what)
            )
        if len(link.running) == 1:  # for its one call that runs: on that request's stream
            session, related = link.running[0].session, link.running[0].request_id
        else:  # none, or several of its calls: on the client's own channel
            session, related = link.session, None
        try:
            return await session.send_request(
                request, result, metadata=ServerMessageMetadata(related_request_id=related)
            )
        except MCPError as exc:
            return exc.error
        except Exception as exc:  # the upstream gets an answer whatever happened
            why = " ".join(str(exc).split()) or "its connection closed"
            return types.ErrorData(
                code=types.INTERNAL_ERROR,
                message=f"the MCP client connected to toolguard did not answer {method}: {why}",
            )

    async def _sampling(self, link: _Link | None, params: Any) -> Any:
        from mcp import types  # noqa: PLC0415

        with_tools = params.tools is not None or params.tool_choice is not None

        def missing(capabilities: Any) -> str | None:
            sampling = getattr(capabilities, "sampling", None)
            if sampling is None:
                return "sampling"
            if with_tools and sampling.tools is None:
                return "sampling with tools"
            return None

        result = types.CreateMessageResultWithTools if with_tools else types.CreateMessageResult
        request = types.CreateMessageRequest(params=params)
        return await self._ask_client(link, "sampling/createMessage", missing, request, result)

    async def _elicitation(self, link: _Link | None, params: Any) -> Any:
        from mcp import types  # noqa: PLC0415

        by_url = isinstance(params, types.ElicitRequestURLParams)

        def missing(capabilities: Any) -> str | None:
            elicitation = getattr(capabilities, "elicitation", None)
            if elicitation is None:
                return "elicitation"
            if by_url and elicitation.url is None:
                return "URL-mode elicitation"
            if not by_url and elicitation.form is None and elicitation.url is not None:
                return "form-mode elicitation"
            return None

        request = types.ElicitRequest(params=params)
        return await self._ask_client(
            link, "elicitation/create", missing, request, types.ElicitResult
        )

    async def _roots(self, link: _Link | None) -> Any:
        from mcp import types  # noqa: PLC0415

        def missing(capabilities: Any) -> str | None:
            return "roots" if getattr(capabilities, "roots", None) is None else None

        request = types.ListRootsRequest()
        return await self._ask_client(link, "roots/list", missing, request, types.ListRootsResult)

    # ------------------------------------------------------------ the upstream's notifications

    async def _notified(self, link: _Link | None, message: Any) -> None:
        """The notifications of an upstream connection (``link``'s own; ``None``: the first),
        handled once the gateway is ready."""
        from mcp import types  # noqa: PLC0415

        if await self.passing.notified(link, message):
            return  # progress and log messages (see passing.py)
        if isinstance(message, types.ToolListChangedNotification):
            self._stale.add(id(link))
            await self._ready.wait()
            if link is not None and link.opened is not None:
                await link.opened.wait()  # said while its connection was being made
            if id(link) in self._stale:  # not taken yet by an earlier notification
                self._stale.discard(id(link))
                await self.relist(link.client if link is not None else None)
            return
        await self._ready.wait()
        clients = [link] if link is not None else list(self._links.values())
        if isinstance(message, types.ResourceUpdatedNotification):
            uri = str(message.params.uri)
            wanted = self._subscribed.get((_upstream_key(link), uri), set())
            await self._tell(
                lambda session: session.send_resource_updated(uri),
                [c for c in clients if c.key in wanted],
            )
        elif isinstance(message, types.ResourceListChangedNotification):
            await self._tell(lambda session: session.send_resource_list_changed(), clients)
        elif isinstance(message, types.PromptListChangedNotification):
            await self._tell(lambda session: session.send_prompt_list_changed(), clients)

    async def relist(self, source: Any = None) -> None:
        """List the upstream's tools again (on ``source``, a connection; ``None``: the first),
        adopt them and tell every client.

        An upstream that cannot be listed, or a listing that cannot be guarded
        (see :func:`schema_tools`), leaves the tools as they were (one line on
        stderr); the clients are not told.
        """
        key = next(
            (
                link.key
                for link in self._links.values()
                if source is not None and link.client is source
            ),
            0,
        )
        async with self._relisting:
            previous = self._listings.get(key)
            try:
                listed = await list_upstream(source if source is not None else self.client)
                self._listings[key] = listed
                self._adopt()
            except Exception as exc:  # the previous tools stay in force
                if previous is not None:
                    self._listings[key] = previous
                why = " ".join(str(exc).split()) or "it did not answer tools/list"
                sys.stderr.write(
                    f"toolguard mcp-proxy: the upstream's tools changed but could not be"
                    f" taken ({why}); the previous tools stay in force\n"
                )
                return
        await self._tell(lambda session: session.send_tool_list_changed(), self._links.values())

    async def listed_by(self, link: _Link, client: Any) -> None:
        """Take what the own connection of ``link`` lists (a server may list more tools to a
        client that declared more capabilities): that client's ``tools/list`` answer, and
        guarded with the others'. A listing that cannot be taken leaves it the first one's."""
        async with self._relisting:
            try:
                self._listings[link.key] = await list_upstream(client)
                self._adopt()
            except Exception as exc:
                self._listings.pop(link.key, None)
                why = " ".join(str(exc).split()) or "it did not answer tools/list"
                sys.stderr.write(
                    f"toolguard mcp-proxy: the tools the upstream lists to a client could not"
                    f" be taken ({why}); it is shown the tools listed at start-up\n"
                )

    def _adopt(self) -> None:
        """Guard every tool a connection lists: the first connection's, then the others' new
        names (see :func:`adopt_listing`; ``ValueError``: nothing is changed)."""
        union = list(self._listings.get(0, []))
        names = {item.get("name") for item in union}
        for key, listed in self._listings.items():
            for item in listed if key != 0 else []:
                if item.get("name") not in names:
                    names.add(item.get("name"))
                    union.append(item)
        if union != self.proxy.listed:
            adopt_listing(self.proxy, union)

    async def ready_for(self, ctx: Any) -> None:
        """Wait until the own upstream connection of the client of ``ctx`` (if it has one) is
        open, or could not be opened."""
        from mcp.shared.exceptions import MCPError  # noqa: PLC0415

        link = self.link_of(ctx)
        if link is not None and link.declared is not None:
            with contextlib.suppress(MCPError):  # its calls say why; it is listed the first's
                await link.upstream()

    def listed_for(self, ctx: Any) -> list[dict[str, Any]]:
        """The ``tools/list`` answer for the client of ``ctx``: the tools its connection lists,
        each as the gateway guards it (a name listed differently by two connections is
        shown, and guarded, as the first connection lists it)."""
        guarded = {item.get("name"): item for item in self.proxy.listed}
        key = _upstream_key(self.link_of(ctx))
        own = self._listings.get(key) if key != 0 else None
        if own is None:
            own = self._listings.get(0, self.proxy.listed)
        return [guarded[item.get("name")] for item in own if item.get("name") in guarded]

    async def _tell(self, send: Callable[[Any], Awaitable[None]], links: Any) -> None:
        """Notify the clients of ``links``; a client gone is skipped."""
        for link in list(links):
            with contextlib.suppress(Exception):  # its connection closed
                await send(link.session)

    # ------------------------------------------------------------------ the client's requests

    async def _subscribe(self, ctx: Any, params: Any) -> Any:
        uri = str(params.uri)
        link = self.link_of(ctx)
        upstream = await link.upstream() if link is not None else self.client
        result = await _upstream_request(upstream, _subscription("resources/subscribe", uri))
        if link is not None:
            self._subscribed.setdefault((_upstream_key(link), uri), set()).add(link.key)
        return result

    async def _unsubscribe(self, ctx: Any, params: Any) -> Any:
        from mcp import types  # noqa: PLC0415

        uri = str(params.uri)
        link = self.link_of(ctx)
        upstream = await link.upstream() if link is not None else self.client
        subscription = (_upstream_key(link), uri)
        subscribers = self._subscribed.get(subscription, set())
        if link is not None:
            subscribers.discard(link.key)
        if subscribers:  # another client still wants its updates
            return types.EmptyResult()
        self._subscribed.pop(subscription, None)
        return await _upstream_request(upstream, _subscription("resources/unsubscribe", uri))

    async def _roots_changed(self, ctx: Any, params: Any) -> None:
        from mcp import types  # noqa: PLC0415

        link = self.link_of(ctx)
        if link is None or link.client is None:  # the first connection never declared roots
            return
        with contextlib.suppress(Exception):  # an upstream gone has nothing to re-read
            await link.client.session.send_notification(types.RootsListChangedNotification())


async def _upstream_request(upstream: Any, request: Any) -> Any:
    from mcp import types  # noqa: PLC0415

    return await upstream.session.send_request(request, types.EmptyResult)


def _upstream_key(link: _Link | None) -> int:
    """The key of the upstream connection of ``link`` (0: the first one, which it shares)."""
    return link.key if link is not None and link.declared is not None else 0


def _subscription(method: str, uri: str) -> Any:
    from mcp import types  # noqa: PLC0415

    params = {"uri": uri}
    if method == "resources/subscribe":
        return types.SubscribeRequest(params=types.SubscribeRequestParams.model_validate(params))
    return types.UnsubscribeRequest(params=types.UnsubscribeRequestParams.model_validate(params))
