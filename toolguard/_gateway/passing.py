"""What passes with a call besides its arguments: ``_meta``, progress, log messages, completions.

The gateway offers its clients what the upstream offers (its capabilities say
so) and passes it on as the upstream would send it directly:

- **``_meta``** of a client's ``tools/call`` (its ``progressToken``, trace
  context such as ``traceparent``, any other key) reaches the upstream as the
  client sent it; only the protocol's own envelope (``io.modelcontextprotocol/``
  keys) is each connection's. Should another call on the same upstream
  connection use the same progress token at that moment (two clients sharing
  it), the gateway sends a token of its own for this one and maps it back.
- **Progress**: the upstream's ``notifications/progress`` for that token reach
  the client that asked, under its token. With the gateway's own progress
  while a person decides (:func:`~toolguard._gateway.relay.report_waiting`), it
  is one increasing stream per token (:class:`Progress`): the waiting
  notifications count 1, 2, 3, ... without a total; the upstream's values and
  total that follow are shifted past the last one sent (unchanged for a call
  that did not wait); a value that would not increase is not sent.
- **Log messages**: ``logging/setLevel`` goes to the client's upstream
  connection (on a 2026-07-28 upstream connection, which has no such request,
  the level goes with each of that client's requests instead, as the
  ``io.modelcontextprotocol/logLevel`` opt-in). The upstream's
  ``notifications/message`` reach the client of the connection: on a
  client's own connection, that client; on the shared first connection, the
  clients whose calls run there at that moment, or all of its clients when
  none does. Each client gets only messages at or above the level it set (all
  of them before it set one); a message goes with the client's call when
  exactly one of its calls runs.
- **Completions**: ``completion/complete`` is answered by the client's upstream
  connection.
"""

from __future__ import annotations

import contextlib
import itertools
import warnings
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.lowlevel

if TYPE_CHECKING:
    from mcp.server import Server

__all__ = ["ENVELOPE", "LEVELS", "Passing", "Progress", "at_least", "drop", "unstamped"]

LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
"""The log levels, from the most verbose (RFC 5424's order, as MCP names them)."""
ENVELOPE: Final = "io.modelcontextprotocol/"
"""The prefix of the ``_meta`` keys that belong to one connection's protocol envelope."""
_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
_OWN_TOKEN: Final = "toolguard-progress-"  # noqa: S105 - a progress token, no secret


def at_least(level: str, minimum: str | None) -> bool:
    """Whether a message at ``level`` passes a client's ``minimum`` (``None``: every one)."""
    if minimum is None or minimum not in LEVELS:
        return True
    return LEVELS.index(level) >= LEVELS.index(minimum) if level in LEVELS else True


class Progress:
    """The progress stream of one client request that carried a ``progressToken``.

    ``ctx`` is the request's context (its session reports for that token).
    The values it sends only increase: see the module docstring.
    """

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.last: float | None = None  # the last value sent
        self.shift: float | None = None  # added to the upstream's values, once it reports
        self._lock = anyio.Lock()

    async def waiting(self, message: str) -> None:
        """One notification of the gateway's own: the call waits for a person."""
        async with self._lock:
            value = 1.0 if self.last is None else float(int(self.last) + 1)
            await self._send(value, None, message)

    async def upstream(self, progress: float, total: float | None, message: str | None) -> None:
        """One notification of the upstream, shifted past the waiting ones."""
        async with self._lock:
            if self.shift is None:
                self.shift = 0.0 if self.last is None else float(int(self.last) + 1)
            value = self.shift + progress
            if self.last is not None and value <= self.last:
                return  # it would not increase: the client's stream stays monotonic
            await self._send(value, None if total is None else self.shift + total, message)

    async def settled(self) -> None:
        """Wait until the notifications already on their way are sent (before the answer)."""
        for _ in range(3):  # the upstream's notifications read before its answer start first
            await anyio.lowlevel.checkpoint()
        async with self._lock:
            return

    async def _send(self, value: float, total: float | None, message: str | None) -> None:
        await self.ctx.session.report_progress(value, total, message)
        self.last = value


class Passing:
    """The pass-through of one relay (see the module docstring); ``relay`` is its
    :class:`~toolguard._gateway.relay.Relay`."""

    def __init__(self, relay: Any) -> None:
        self.relay = relay
        self._progress: dict[int, Progress] = {}  # id(request context) -> its stream
        self._routes: dict[tuple[int, Any], Progress] = {}  # (connection, token) -> stream
        self._running: dict[int, list[Any]] = {}  # connection -> the requests whose calls run
        self._tokens = itertools.count(1)

    # ------------------------------------------------------------------ set-up

    def serve(self, server: Server[Any], capabilities: Any) -> None:
        """Offer ``logging/setLevel`` and ``completion/complete`` when the upstream does."""
        from mcp import types  # noqa: PLC0415

        if getattr(capabilities, "logging", None) is not None:
            server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, self._level)
        if getattr(capabilities, "completions", None) is not None:
            server.add_request_handler(
                "completion/complete", types.CompleteRequestParams, self._complete
            )

    @contextlib.contextmanager
    def request(self, ctx: Any) -> Iterator[None]:
        """Around one request the gateway serves: its progress stream, if it asked for one."""
        meta = getattr(ctx, "meta", None)
        if getattr(ctx, "method", None) != "tools/call" or not isinstance(meta, dict):
            yield
            return
        if meta.get("progress_token") is None:
            yield
            return
        self._progress[id(ctx)] = Progress(ctx)
        try:
            yield
        finally:
            self._progress.pop(id(ctx), None)

    def progress_of(self, ctx: Any) -> Progress | None:
        """The progress stream of the request ``ctx`` (``None``: it asked for none)."""
        return self._progress.get(id(ctx)) if ctx is not None else None

    # ------------------------------------------------------------------ a call on the upstream

    @contextlib.asynccontextmanager
    async def calling(
        self, ctx: Any, link: Any, upstream: Any
    ) -> AsyncIterator[dict[str, Any] | None]:
        """Around one tool call of the request ``ctx`` on ``upstream`` (``link``'s connection):
        the ``_meta`` to send (``None``: none), its progress routed back, the call noted as
        running there (for the upstream's log messages)."""
        key = self._key(link)
        meta = self.outgoing(ctx, link, upstream)
        progress = self.progress_of(ctx)
        route = None
        if progress is not None and meta is not None and "progress_token" in meta:
            token = meta["progress_token"]
            if (key, token) in self._routes:  # another call there uses it now: one of ours
                token = meta["progress_token"] = f"{_OWN_TOKEN}{next(self._tokens)}"
            route = (key, token)
            self._routes[route] = progress
        running = self._running.setdefault(key, [])
        if ctx is not None:
            running.append(ctx)
        try:
            yield meta
        finally:
            if route is not None:
                with anyio.CancelScope(shield=True):
                    await self._routes[route].settled()  # its progress goes before the answer
                self._routes.pop(route, None)
            if ctx is not None:
                drop(running, ctx)
            if not running:
                self._running.pop(key, None)

    def outgoing(self, ctx: Any, link: Any, upstream: Any) -> dict[str, Any] | None:
        """The ``_meta`` of the request ``ctx`` as it goes to ``upstream``: the client's, without
        its envelope, with the log-level opt-in of a 2026-07-28 upstream connection."""
        meta = getattr(ctx, "meta", None)
        given = dict(meta) if isinstance(meta, dict) else {}
        out = {k: v for k, v in given.items() if not str(k).startswith(ENVELOPE)}
        if _modern(upstream):
            level = self.opt_in(ctx, link, given.get(_LOG_LEVEL))
            if level is not None:
                out[_LOG_LEVEL] = level
        return out or None

    def opt_in(self, ctx: Any, link: Any, asked: Any) -> str | None:
        """The log level a 2026-07-28 upstream connection is asked for on a request of the
        client of ``ctx``: a 2026-07-28 client's own opt-in (``asked``); a client of an earlier
        protocol, the level it set, else every message (``debug``), as such a server sends."""
        if _modern_version(getattr(ctx, "protocol_version", None)):
            return asked if isinstance(asked, str) else None
        level = getattr(link, "log_level", None)
        return level if isinstance(level, str) else "debug"

    # ------------------------------------------------------------ the upstream's notifications

    async def notified(self, link: Any, message: Any) -> bool:
        """Pass on a progress or log notification of ``link``'s upstream connection (``None``:
        the first); ``False`` for any other notification."""
        from mcp import types  # noqa: PLC0415

        if isinstance(message, types.ProgressNotification):
            params = message.params
            progress = self._routes.get((self._key(link), params.progress_token))
            if progress is not None:
                with contextlib.suppress(Exception):  # the client left: nothing to tell
                    await progress.upstream(params.progress, params.total, params.message)
            return True
        if isinstance(message, types.LoggingMessageNotification):
            await self._log(link, message.params)
            return True
        return False

    async def _log(self, link: Any, params: Any) -> None:
        """Send an upstream log message to the clients it belongs to (see the module docstring)."""
        key = self._key(link)
        running = list(self._running.get(key, []))
        targets: dict[int, tuple[Any, list[Any]]] = {}  # client -> (its link, its running calls)
        for ctx in running:
            owner = self.relay.link_of(ctx)
            client = id(owner) if owner is not None else id(ctx)
            targets.setdefault(client, (owner, []))[1].append(ctx)
        if not targets:  # nobody's call runs there: the clients of that connection
            clients = [link] if link is not None else self.relay.sharing()
            targets = {id(c): (c, []) for c in clients}
        for owner, calls in targets.values():
            if not at_least(params.level, getattr(owner, "log_level", None)):
                continue
            if len(calls) == 1:
                session, related = calls[0].session, calls[0].request_id
            elif owner is not None:
                session, related = owner.session, None
            else:
                continue  # several calls of a 2026-07-28 client: none of them is sure
            with contextlib.suppress(Exception), _deprecated():  # its connection closed
                await session.send_log_message(
                    params.level, params.data, params.logger, related_request_id=related
                )

    # ------------------------------------------------------------------ the client's requests

    async def _level(self, ctx: Any, params: Any) -> Any:
        """``logging/setLevel``: the client's level, and its upstream connection's (the most
        verbose level of the clients sharing it; none asked of a 2026-07-28 connection)."""
        from mcp import types  # noqa: PLC0415

        link = self.relay.link_of(ctx)
        if link is not None:
            link.log_level = params.level
        upstream = await link.upstream() if link is not None else self.relay.client
        if not _modern(upstream):
            sharing = [link] if link is not None and link.declared is not None else None
            clients = sharing if sharing is not None else self.relay.sharing()
            levels = [getattr(c, "log_level", None) for c in clients]
            known = [level for level in levels if level in LEVELS] or [params.level]
            with _deprecated():
                await upstream.set_logging_level(min(known, key=LEVELS.index))
        return types.EmptyResult()

    async def _complete(self, ctx: Any, params: Any) -> Any:
        """``completion/complete``, answered by the client's upstream connection."""
        link = self.relay.link_of(ctx)
        upstream = await link.upstream() if link is not None else self.relay.client
        context = params.context.arguments if params.context is not None else None
        argument = {"name": params.argument.name, "value": params.argument.value}
        return await upstream.complete(params.ref, argument, context)

    @staticmethod
    def _key(link: Any) -> int:
        """The key of ``link``'s upstream connection (0: the first one, which it shares)."""
        return link.key if link is not None and link.declared is not None else 0


@contextlib.contextmanager
def _deprecated() -> Iterator[None]:
    """Quiet the SDK's warning that logging is deprecated from 2026-07-28 on: earlier
    protocols have it, and the gateway passes it on for them."""
    from mcp.shared.exceptions import MCPDeprecationWarning  # noqa: PLC0415

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        yield


def _modern_version(version: Any) -> bool:
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS  # noqa: PLC0415

    return version in MODERN_PROTOCOL_VERSIONS


def _modern(upstream: Any) -> bool:
    """Whether the upstream connection speaks 2026-07-28 or later (no ``logging/setLevel``)."""
    return _modern_version(getattr(upstream, "protocol_version", None))


def unstamped(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` (a wire answer) without the upstream connection's envelope keys in its
    ``_meta``: the gateway's own connection to the client stamps its own."""
    meta = result.get("_meta")
    if not isinstance(meta, dict) or not any(str(k).startswith(ENVELOPE) for k in meta):
        return result
    kept = {k: v for k, v in meta.items() if not str(k).startswith(ENVELOPE)}
    return {k: v for k, v in result.items() if k != "_meta"} | ({"_meta": kept} if kept else {})


def drop(items: list[Any], item: Any) -> None:
    """Remove ``item`` itself (not an equal one) from ``items``."""
    for index, other in enumerate(items):
        if other is item:
            del items[index]
            return
