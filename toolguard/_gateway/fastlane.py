"""The fast lane: a call that needs no review goes to the upstream as the client wrote it.

Over stdio, a ``tools/call`` request that runs at once (no review, no rule
that asks or denies, no judge of every call) is taken off the gateway's stdin
before the MCP SDK reads it, and written to the upstream server's stdin as it
came, under an id of the gateway's own (``toolguard-fast-N``); the upstream's
answer to that id is taken off its stdout before the SDK reads it, given the
client's id back, and written to the gateway's stdout. Nothing is parsed
into models or validated twice (the upstream validates the arguments, the
client the result): the hop costs little more than the pipes.

A request is left to the SDK's path, where everything else happens, when:
the gateway traces (its spans need the full path), it asks for progress
(``_meta.progressToken``) or retries an ``input_required`` answer, the
upstream connection serving the client is not open yet, or the message is
not a plain JSON object. On a 2026-07-28 upstream connection the call asks
for its log messages at the client's level, as on the SDK's path.
``notifications/cancelled`` for a request in the lane goes to the upstream
under the lane's id; a client that closes stdin has each of its calls in the
lane cancelled there.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

import anyio

from toolguard._core import telemetry

__all__ = ["CLOSED", "PREFIX", "Channels", "FastLane", "RawChannel"]

PREFIX: Final = "toolguard-fast-"
"""The ids the lane's requests carry on the upstream."""
_MARK: Final = PREFIX.encode()
CLOSED: Final = "the upstream MCP server closed the connection before it answered"
"""The error of a call in the lane whose upstream connection closed."""
_ENVELOPE: Final = "io.modelcontextprotocol/"  # the protocol's own _meta keys (2026-07-28)

Send = Callable[[bytes], Awaitable[None]]


class RawChannel:
    """One upstream connection's lines: ``send`` writes one to its stdin; :meth:`taken` is
    offered each line of its stdout first (the lane's answers are taken off)."""

    def __init__(self, send: Send) -> None:
        self.send = send
        self.waiting: dict[str, Callable[[dict[str, Any]], None]] = {}
        self.session: Any = None  # the SDK's session on this connection, once connected
        self._stamped: tuple[Any, dict[str, Any]] | None = None  # its stamp, and what it adds

    def stamp(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """``params`` as this connection sends them: the client's protocol envelope
        (``_meta`` keys of ``io.modelcontextprotocol/``) replaced by the one this connection
        negotiated, as the SDK stamps its own requests; ``None`` when that cannot be done."""
        envelope = self._envelope()
        if envelope is None:
            return None
        meta = params.get("_meta")
        kept = (
            {k: v for k, v in meta.items() if not k.startswith(_ENVELOPE)}
            if isinstance(meta, dict)
            else {}
        )
        kept.update(envelope)
        return {**params, "_meta": kept} if kept else _without(params, "_meta")

    def _envelope(self) -> dict[str, Any] | None:
        """The ``_meta`` keys the SDK stamps on this connection's requests (the same for
        each request of a connection: read once per stamp); ``None``: none can be read."""
        stamp = getattr(self.session, "_stamp", None)
        if not callable(stamp):
            return None
        if self._stamped is not None and self._stamped[0] is stamp:
            return self._stamped[1]
        data: dict[str, Any] = {"method": "tools/call", "params": {}}
        try:
            stamp(data, {})
        except Exception:  # an SDK that stamps otherwise: the SDK's path
            return None
        params = data.get("params")
        meta = params.get("_meta", {}) if isinstance(params, dict) else None
        if not isinstance(meta, dict) or any(not k.startswith(_ENVELOPE) for k in meta):
            return None  # a stamp this lane does not know: the SDK's path
        self._stamped = (stamp, dict(meta))
        return self._stamped[1]

    def taken(self, line: bytes) -> bool:
        """Whether ``line`` answers a request of the lane (then it is handed over)."""
        if _MARK not in line or not self.waiting:
            return False
        try:
            message = json.loads(line)
        except ValueError:
            return False
        key = message.get("id") if isinstance(message, dict) else None
        deliver = self.waiting.pop(key, None) if isinstance(key, str) else None
        if deliver is None:
            return False
        deliver(message)
        return True

    def end(self) -> None:
        """The connection closed: each request still waiting gets an error."""
        waiting, self.waiting = self.waiting, {}
        for lane_id, deliver in waiting.items():
            deliver(_error(lane_id, CLOSED))


class Channels:
    """The raw channel of each open upstream connection (``mcp.Client`` -> its start's)."""

    def __init__(self) -> None:
        self._starts: dict[int, Any] = {}

    @contextlib.asynccontextmanager
    async def adopt(self, client: Any, start: Any) -> AsyncIterator[None]:
        """While inside, ``client``'s lines are those of ``start`` (an ``UpstreamStart``)."""
        self._starts[id(client)] = start
        if isinstance(start.raw, RawChannel):
            start.raw.session = getattr(client, "session", None)
        try:
            yield
        finally:
            self._starts.pop(id(client), None)

    def __call__(self, client: Any) -> RawChannel | None:
        start = self._starts.get(id(client))
        channel = getattr(start, "raw", None)
        return channel if isinstance(channel, RawChannel) else None


class FastLane:
    """The gateway's fast lane over stdio (see the module docstring).

    Args:
        proxy: the gateway (its toolset, rules and relay say what may take the lane).
        channel_of: the raw channel of an upstream connection (``mcp.Client``), if any.
    """

    def __init__(self, proxy: Any, channel_of: Callable[[Any], RawChannel | None]) -> None:
        self.proxy = proxy
        self.channel_of = channel_of
        self.write: Callable[[bytes], None] | None = None  # the gateway's stdout, once serving
        self._ids = itertools.count(1)
        self._running: dict[Any, tuple[str, RawChannel]] = {}  # client id -> lane id, channel

    def serving(self, write: Callable[[bytes], None]) -> None:
        """Serve over ``write``, which writes one whole line to the gateway's stdout."""
        self.write = write

    # ------------------------------------------------------------------ the client's lines

    async def offer(self, line: bytes) -> bool:
        """Whether the client's ``line`` takes the lane (then it is on its way)."""
        if self.write is None or b'"tools/call"' not in line:
            return await self._cancelling(line)
        try:
            message = json.loads(line)
        except ValueError:
            return False
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            return False
        key = message.get("id")
        params = message.get("params")
        if not isinstance(key, str | int) or isinstance(key, bool) or not isinstance(params, dict):
            return False
        channel = self._channel() if self._runs_at_once(params) else None
        if channel is None or key in self._running:
            return False
        stamped = channel.stamp(params)
        if stamped is None:
            return False
        _opt_in(stamped, self._log_level())
        lane_id = f"{PREFIX}{next(self._ids)}"
        message["id"] = lane_id
        message["params"] = stamped
        write = self.write

        def deliver(reply: dict[str, Any]) -> None:  # in the upstream's reader
            self._running.pop(key, None)
            reply["id"] = key
            _unstamped(reply.get("result"))  # that connection's protocol stamps are its own
            write(_line(reply))

        channel.waiting[lane_id] = deliver
        self._running[key] = (lane_id, channel)
        try:
            await channel.send(_line(message))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            channel.waiting.pop(lane_id, None)
            deliver(_error(key, CLOSED))
        return True

    def _runs_at_once(self, params: dict[str, Any]) -> bool:
        """Whether the call runs without a review, and nothing asks for the SDK's path."""
        proxy = self.proxy
        name = params.get("name")
        args = params.get("arguments", {})
        meta = params.get("_meta")
        if not isinstance(name, str) or not isinstance(args, dict):
            return False
        if isinstance(meta, dict) and "progressToken" in meta:
            return False  # progress goes through the relay
        if "requestState" in params or "inputResponses" in params:
            return False
        if proxy.judges_every_call or name in proxy.unguardable or telemetry.tracer() is not None:
            return False
        if proxy.toolset.get(name) is None:
            return False
        runs: bool = proxy.at_once(name, args)[1]  # the gateway's one answer
        return runs

    def _log_level(self) -> str:
        """The level of the one client's ``logging/setLevel`` (``debug``: it set none)."""
        links = getattr(getattr(self.proxy, "relay", None), "_links", None) or {}
        level = next((getattr(link, "log_level", None) for link in links.values()), None)
        return level if isinstance(level, str) else "debug"

    def _channel(self) -> RawChannel | None:
        """The raw channel of the upstream connection serving the one client, if open."""
        relay: Any = getattr(self.proxy, "relay", None)
        links = getattr(relay, "_links", None)
        if relay is None or not links or len(links) != 1:
            return None
        link = next(iter(links.values()))
        client = relay.client if link.declared is None else link.client
        return self.channel_of(client) if client is not None else None

    async def _cancelling(self, line: bytes) -> bool:
        """Whether ``line`` cancels a call in the lane (then the upstream is told)."""
        if not self._running or b"notifications/cancelled" not in line:
            return False
        try:
            message = json.loads(line)
        except ValueError:
            return False
        params = message.get("params") if isinstance(message, dict) else None
        if not isinstance(params, dict):
            return False
        key = params.get("requestId")
        found = self._running.pop(key, None) if isinstance(key, str | int) else None
        if found is None:
            return False
        lane_id, channel = found
        channel.waiting.pop(lane_id, None)  # no answer goes to the client
        await self._cancel(channel, lane_id, params.get("reason"))
        return True

    # ------------------------------------------------------------------ the upstream's answer

    async def _cancel(self, channel: RawChannel, lane_id: str, reason: Any) -> None:
        params: dict[str, Any] = {"requestId": lane_id}
        if isinstance(reason, str):
            params["reason"] = reason
        notice = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            try:
                await channel.send(_line(notice))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                return

    async def close(self) -> None:
        """The client is gone: each call still in the lane is cancelled on the upstream."""
        running, self._running = self._running, {}
        for lane_id, channel in running.values():
            channel.waiting.pop(lane_id, None)
            await self._cancel(channel, lane_id, "the MCP client disconnected")


def _opt_in(params: dict[str, Any], level: str) -> None:
    """On a 2026-07-28 upstream connection (its envelope stamped in ``params``), ask for the
    call's log messages at ``level``, as the SDK's path does (see passing.py)."""
    meta = params.get("_meta")
    if isinstance(meta, dict) and any(k.startswith(_ENVELOPE) for k in meta):
        meta[_ENVELOPE + "logLevel"] = level


def _unstamped(result: Any) -> None:
    """Take the upstream connection's protocol stamps (``_meta`` keys of
    ``io.modelcontextprotocol/``) out of ``result``, as the SDK's path does."""
    meta = result.get("_meta") if isinstance(result, dict) else None
    if not isinstance(meta, dict) or not any(k.startswith(_ENVELOPE) for k in meta):
        return
    kept = {k: v for k, v in meta.items() if not k.startswith(_ENVELOPE)}
    if kept:
        result["_meta"] = kept
    else:
        del result["_meta"]


def _without(mapping: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if k != key}


def _line(message: dict[str, Any]) -> bytes:
    return (json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def _error(key: Any, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": key, "error": {"code": -32603, "message": text}}
