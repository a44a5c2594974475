"""What passes between the MCP client and the upstream besides tool calls, and progress.

The gateway holds one connection to the upstream server, made at start-up
before any client connects. :class:`Relay` makes it transparent for what the
client can do and for what the upstream says:

- **Requests of the upstream** (``sampling/createMessage``, ``elicitation/create``,
  ``roots/list``) reach the MCP client on whose behalf the upstream works: the
  client whose request is being served, else the one whose tool call is
  running on the upstream (a call a reviewer approved on the page runs in the
  page's request: it is found by its tool and arguments), else the one
  client with requests in flight, else the one client connected. When it
  could be for several clients (the calls of several clients run at once on
  the upstream, which says not whose call it serves; or several are connected
  and none is calling), it goes to none: the upstream gets an error
  (:data:`AMBIGUOUS`), so one client's data never reaches another. The upstream
  is told at start-up that sampling, elicitation and roots are supported; a
  client that did not declare the capability, or no client at all, answers
  with an MCP error naming what is missing (see :data:`UNSUPPORTED`).
- **Notifications of the upstream**: ``notifications/tools/list_changed``
  re-lists the upstream's tools and classifies them as at start-up (rules,
  classifier, annotations, secret arguments), then tells every client;
  ``resources/list_changed`` and ``prompts/list_changed`` go to every client,
  ``resources/updated`` to the clients that subscribed to that resource.
- **Requests and notifications of the client**: ``resources/subscribe`` and
  ``resources/unsubscribe`` (when the upstream offers subscriptions) and
  ``notifications/roots/list_changed`` reach the upstream.

"The request being served" is a context variable set around every request
the gateway's MCP server handles (a server middleware), so this works the
same for one client over stdio and for several over streamable HTTP.

:func:`report_waiting` sends ``notifications/progress`` while a call waits for
a person, so that a client which restarts its request timeout on progress
does not give up during a review.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import sys
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

import anyio

from toolguard._gateway.upstream import list_upstream
from toolguard._tools.schema_tool import SchemaTool
from toolguard._tools.toolset import Toolset

if TYPE_CHECKING:
    from mcp.server import Server

    from toolguard._chat.chat import ReviewedChat

__all__ = [
    "AMBIGUOUS",
    "DEFAULT_PROGRESS_INTERVAL",
    "NO_CLIENT",
    "UNSUPPORTED",
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
AMBIGUOUS: Final = (
    "toolguard cannot tell which of its connected MCP clients {method} is for"
    " (the upstream does not say whose call it serves); it was not forwarded"
)
"""The error the upstream gets when the request could be for several clients: it goes to none
(a request meant for one client's call must not reach another client)."""

# The request of the gateway's MCP server being handled in this context.
_SERVING: contextvars.ContextVar[Any | None] = contextvars.ContextVar("_SERVING", default=None)

Forwarder = Callable[[str], Callable[..., Awaitable[dict[str, Any]]]]


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
) -> None:
    """Send ``notifications/progress`` for the request of ``ctx`` while its review waits.

    Only when the request carried a ``progressToken`` (the MCP SDK sends
    nothing otherwise): at once, then every ``interval`` seconds, with an
    increasing ``progress``, no ``total`` and :func:`waiting_message`. Ends as
    soon as the thread's review is decided, expired or cancelled; the caller
    cancels it before it answers the request, so none follows the result. A
    notification that cannot be sent (the client left) ends it quietly.
    """
    session = getattr(ctx, "session", None)
    if session is None:
        return
    count = 0
    try:
        while True:
            state = await chat.get_thread(thread_id)
            if state.status != "awaiting_review" or state.pending is None:
                return
            count += 1
            message = waiting_message(name, state.pending.review_id, page)
            await session.report_progress(float(count), None, message)
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


class _Upstream:
    """The upstream client as the proxy uses it, noting which client each tool call serves."""

    def __init__(self, client: Any, relay: Relay) -> None:
        self._client = client
        self._relay = relay

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        with self._relay.forwarding(name, arguments):
            return await self._client.call_tool(name, arguments)


class Relay:
    """Passes the upstream's requests and notifications to the clients, and theirs back.

    Use: ``Client(upstream, **relay.client_options())`` for the upstream
    connection, then :meth:`attach` with the proxy; the proxy's
    :meth:`~toolguard._gateway.proxy.MCPProxy.server` then calls
    :meth:`serve`. See the module docstring.
    """

    def __init__(self) -> None:
        self.client: Any = None
        self.proxy: Any = None
        self._serving: list[Any] = []  # requests being handled, oldest first
        self._forwarding: list[Any] = []  # the requests whose tool call runs on the upstream
        self._clients: dict[int, Any] = {}  # a session per client connection, latest first
        self._subscribed: dict[str, set[int]] = {}  # resource URI -> connections
        self._relisting = anyio.Lock()

    # ------------------------------------------------------------------ set-up

    def client_options(self) -> dict[str, Any]:
        """The ``mcp.Client`` arguments of the upstream connection: callbacks declaring
        sampling (with tools and context), elicitation (form and URL) and roots."""
        from mcp import types  # noqa: PLC0415

        return {
            "sampling_callback": self._sampling,
            "sampling_capabilities": types.SamplingCapability(
                context=types.SamplingContextCapability(), tools=types.SamplingToolsCapability()
            ),
            "elicitation_callback": self._elicitation,
            "list_roots_callback": self._roots,
            "message_handler": self._notified,
        }

    def attach(
        self,
        proxy: Any,
        client: Any,
        *,
        progress_interval: float = DEFAULT_PROGRESS_INTERVAL,
        page_url: str | None = None,
    ) -> None:
        """Relay for ``proxy``, whose upstream is the connected ``client``.

        ``progress_interval`` and ``page_url`` (the approval page, named in the
        messages) are those of the progress notifications (:func:`report_waiting`).
        """
        self.client = client
        self.proxy = proxy
        proxy.upstream = _Upstream(client, self)
        proxy.relay = self
        proxy.progress_interval, proxy.page_url = progress_interval, page_url

    def serve(self, server: Server[Any]) -> Server[Any]:
        """Add the relay to the gateway's MCP server: the middleware noting the request
        being served, the subscription handlers, roots notifications and the
        ``listChanged`` capabilities."""
        from mcp import types  # noqa: PLC0415
        from mcp.server.lowlevel.server import NotificationOptions  # noqa: PLC0415

        server.middleware.append(self._middleware)
        capabilities = getattr(self.client, "server_capabilities", None)
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
        session = getattr(ctx, "session", None)
        if session is not None:
            key = _connection(session)
            self._clients.pop(key, None)
            self._clients[key] = session  # the most recently active last
        if getattr(ctx, "request_id", None) is None:
            return await call_next(ctx)
        token = _SERVING.set(ctx)
        self._serving.append(ctx)
        try:
            return await call_next(ctx)
        finally:
            _drop(self._serving, ctx)
            _SERVING.reset(token)

    @contextlib.contextmanager
    def forwarding(self, name: str, arguments: Mapping[str, Any]) -> Iterator[None]:
        """Around a tool call on the upstream: note the client request it serves."""
        ctx = _SERVING.get() or self._call_of(name, arguments)
        if ctx is None:
            yield
            return
        self._forwarding.append(ctx)
        try:
            yield
        finally:
            _drop(self._forwarding, ctx)

    def _call_of(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """The latest ``tools/call`` being served with this tool and these arguments."""
        wanted = _canonical(arguments)
        for ctx in reversed(self._serving):
            params = getattr(ctx, "params", None) or {}
            if (
                getattr(ctx, "method", None) == "tools/call"
                and params.get("name") == name
                and _canonical(params.get("arguments") or {}) == wanted
            ):
                return ctx
        return None

    def _target(self) -> tuple[Any, Any] | Literal["ambiguous"] | None:
        """The client session an upstream request goes to, and the request it relates to.

        ``None``: no client; ``"ambiguous"``: it could be for more than one client
        (their calls run at once, or several are connected and none is calling).
        """
        ctx = _SERVING.get()
        if not any(item is ctx for item in self._serving):  # copied from a request that ended
            ctx = None
        if ctx is None:
            running = self._forwarding or self._serving
            if len({_connection(item.session) for item in running}) > 1:
                return "ambiguous"
            ctx = running[-1] if running else None
        if ctx is not None:
            return ctx.session, ctx.request_id
        if len(self._clients) > 1:
            return "ambiguous"
        if self._clients:
            return next(iter(self._clients.values())), None
        return None

    # ------------------------------------------------------------------ the upstream's requests

    async def _ask_client(
        self, method: str, missing: Callable[[Any], str | None], request: Any, result: Any
    ) -> Any:
        """Send ``request`` to the client of :meth:`_target`; its result or an ``ErrorData``."""
        from mcp import types  # noqa: PLC0415
        from mcp.shared.exceptions import MCPError  # noqa: PLC0415
        from mcp.shared.message import ServerMessageMetadata  # noqa: PLC0415

        target = self._target()
        if target is None or target == "ambiguous":
            text = NO_CLIENT if target is None else AMBIGUOUS
            return types.ErrorData(code=types.INVALID_REQUEST, message=text.format(method=method))
        session, related = target
        what = missing(getattr(session, "client_capabilities", None))
        if what is not None:
            message = UNSUPPORTED.format(what=what)
            return types.ErrorData(code=types.INVALID_REQUEST, message=message)
        try:
            return await session.send_request(
                request, result, metadata=ServerMessageMetadata(related_request_id=related)
            )
        except MCPError as exc:
            return exc.error
        except Exception as exc:  # the upstream gets an answer whatever happened
            return types.ErrorData(
                code=types.INTERNAL_ERROR,
                message=f"the MCP client connected to toolguard did not answer {method}: {exc}",
            )

    async def _sampling(self, context: Any, params: Any) -> Any:
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
        return await self._ask_client("sampling/createMessage", missing, request, result)

    async def _elicitation(self, context: Any, params: Any) -> Any:
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
        return await self._ask_client("elicitation/create", missing, request, types.ElicitResult)

    async def _roots(self, context: Any) -> Any:
        from mcp import types  # noqa: PLC0415

        def missing(capabilities: Any) -> str | None:
            return "roots" if getattr(capabilities, "roots", None) is None else None

        request = types.ListRootsRequest()
        return await self._ask_client("roots/list", missing, request, types.ListRootsResult)

    # ------------------------------------------------------------ the upstream's notifications

    async def _notified(self, message: Any) -> None:
        """The upstream's notifications (the ``mcp.Client``'s message handler)."""
        from mcp import types  # noqa: PLC0415

        if isinstance(message, types.ToolListChangedNotification):
            await self.relist()
        elif isinstance(message, types.ResourceUpdatedNotification):
            uri = str(message.params.uri)
            await self._tell(
                lambda session: session.send_resource_updated(uri),
                self._subscribed.get(uri, set()),
            )
        elif isinstance(message, types.ResourceListChangedNotification):
            await self._tell(lambda session: session.send_resource_list_changed())
        elif isinstance(message, types.PromptListChangedNotification):
            await self._tell(lambda session: session.send_prompt_list_changed())

    async def relist(self) -> None:
        """List the upstream's tools again, adopt them and tell every client.

        An upstream that cannot be listed, or a listing that cannot be guarded
        (see :func:`schema_tools`), leaves the tools as they were (one line on
        stderr); the clients are not told.
        """
        async with self._relisting:
            try:
                listed = await list_upstream(self.client)
                adopt_listing(self.proxy, listed)
            except Exception as exc:  # the previous tools stay in force
                sys.stderr.write(
                    f"toolguard mcp-proxy: the upstream's tools changed but could not be"
                    f" taken ({exc}); the previous tools stay in force\n"
                )
                return
        await self._tell(lambda session: session.send_tool_list_changed())

    async def _tell(
        self, send: Callable[[Any], Awaitable[None]], only: Iterable[int] | None = None
    ) -> None:
        """Notify every known client (or those of ``only``); a client gone is forgotten."""
        keys = list(self._clients) if only is None else [k for k in only if k in self._clients]
        for key in keys:
            await self._tell_one(send, key)

    async def _tell_one(self, send: Callable[[Any], Awaitable[None]], key: int) -> None:
        try:
            await send(self._clients[key])
        except Exception:  # its connection closed
            self._forget(key)

    def _forget(self, key: int) -> None:
        self._clients.pop(key, None)
        for uri in list(self._subscribed):
            self._subscribed[uri].discard(key)
            if not self._subscribed[uri]:
                del self._subscribed[uri]

    # ------------------------------------------------------------------ the client's requests

    async def _subscribe(self, ctx: Any, params: Any) -> Any:
        uri = str(params.uri)
        result = await self._upstream_request(_subscription("resources/subscribe", uri))
        self._subscribed.setdefault(uri, set()).add(_connection(ctx.session))
        return result

    async def _unsubscribe(self, ctx: Any, params: Any) -> Any:
        from mcp import types  # noqa: PLC0415

        uri = str(params.uri)
        subscribers = self._subscribed.get(uri, set())
        subscribers.discard(_connection(ctx.session))
        if subscribers:  # another client still wants its updates
            return types.EmptyResult()
        self._subscribed.pop(uri, None)
        return await self._upstream_request(_subscription("resources/unsubscribe", uri))

    async def _upstream_request(self, request: Any) -> Any:
        from mcp import types  # noqa: PLC0415

        return await self.client.session.send_request(request, types.EmptyResult)

    async def _roots_changed(self, ctx: Any, params: Any) -> None:
        from mcp import types  # noqa: PLC0415

        with contextlib.suppress(Exception):  # an upstream gone has nothing to re-read
            await self.client.session.send_notification(types.RootsListChangedNotification())


def _subscription(method: str, uri: str) -> Any:
    from mcp import types  # noqa: PLC0415

    params = {"uri": uri}
    if method == "resources/subscribe":
        return types.SubscribeRequest(params=types.SubscribeRequestParams.model_validate(params))
    return types.UnsubscribeRequest(params=types.UnsubscribeRequestParams.model_validate(params))


def _drop(items: list[Any], item: Any) -> None:
    """Remove ``item`` itself (not an equal one) from ``items``."""
    for index, other in enumerate(items):
        if other is item:
            del items[index]
            return


def _connection(session: Any) -> int:
    """The key of a session's client connection (one session object per request)."""
    return id(getattr(session, "_connection", session))


def _canonical(args: Mapping[str, Any]) -> str:
    return json.dumps(dict(args), sort_keys=True, ensure_ascii=True, allow_nan=True, default=str)
