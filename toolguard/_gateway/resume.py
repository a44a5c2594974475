"""Resumable streams for ``--listen``: a client whose connection drops comes back for its answer.

A client of protocol 2025-11-25 or later gets, on each SSE stream of the
gateway's streamable HTTP, a priming event first (an event id and empty data,
with ``retry:`` :data:`RETRY_MS`), then every message with an event id. Should
its connection drop, it reconnects with ``GET`` and ``Last-Event-ID``: the
messages it missed are sent again, then the stream goes on (the result of a
call that waited for a person included). Each session has its own events
(:class:`SessionEvents`, the MCP SDK's ``EventStore``; at most
:data:`MAX_EVENTS` per session, the oldest forgotten first): an event id of one
session means nothing in another.

A call whose stream dropped is not cancelled at once: its client has
:data:`RESUME_SECONDS` to resume that stream; one that does not (or whose
stream cannot be resumed: an earlier protocol, no priming event) has its call
cancelled, as if it had sent ``notifications/cancelled`` (see
:mod:`toolguard._gateway.listen`).
"""

from __future__ import annotations

import collections
import itertools
from typing import Any, Final

import anyio

__all__ = [
    "MAX_EVENTS",
    "RESUME_SECONDS",
    "RETRY_MS",
    "SessionEvents",
    "resumable_manager",
]

RETRY_MS: Final = 1000
"""The ``retry:`` of the priming events: milliseconds a client waits before it reconnects."""
RESUME_SECONDS: Final = 5.0
"""Seconds a call whose stream dropped waits for its client to resume it before it is cancelled."""
MAX_EVENTS: Final = 1000
"""The events kept per session for replay (the oldest are forgotten first)."""
_POLL_SECONDS: Final = 0.05


class SessionEvents:
    """The events of one session's streams, replayed after ``Last-Event-ID`` (an
    ``mcp.server.streamable_http.EventStore``: see :func:`resumable_manager`)."""

    def __init__(self, limit: int = MAX_EVENTS) -> None:
        self.limit = limit
        self._events: collections.OrderedDict[str, tuple[str, Any]] = collections.OrderedDict()
        self._ids = itertools.count(1)
        self._primed: set[str] = set()  # streams with a priming event: resumable
        self._answered: set[str] = set()  # streams whose response was sent
        self._replays: collections.Counter[str] = collections.Counter()

    async def store_event(self, stream_id: str, message: Any) -> str:
        """Keep one event of ``stream_id`` (``None``: a priming event); its id."""
        from mcp.types import JSONRPCError, JSONRPCResponse  # noqa: PLC0415

        event_id = str(next(self._ids))
        self._events[event_id] = (stream_id, message)
        if message is None:
            self._primed.add(stream_id)
        elif isinstance(message, JSONRPCResponse | JSONRPCError):
            self._answered.add(stream_id)
        while len(self._events) > self.limit:
            self._events.popitem(last=False)
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: Any) -> str | None:
        """Send the messages of the stream of ``last_event_id`` that came after it; the
        stream's id (``None``: an event id this session does not know)."""
        from mcp.server.streamable_http import EventMessage  # noqa: PLC0415

        found = self._events.get(last_event_id)
        if found is None:
            return None
        stream_id = found[0]
        self._replays[stream_id] += 1
        later = list(self._events.items())
        start = next(i for i, (event_id, _) in enumerate(later) if event_id == last_event_id)
        for event_id, (stream, message) in later[start + 1 :]:
            if stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream_id

    def stream_of(self, event_id: str) -> str | None:
        """The stream an event id of this session belongs to."""
        found = self._events.get(event_id)
        return found[0] if found is not None else None

    def resumable(self, stream_id: str) -> bool:
        """Whether ``stream_id`` is a request's stream that the client can resume and that
        still waits for its answer (the session's own ``GET`` stream waits for none)."""
        from mcp.server.streamable_http import GET_STREAM_KEY  # noqa: PLC0415

        primed = stream_id in self._primed and stream_id != GET_STREAM_KEY
        return primed and stream_id not in self._answered

    async def resumed(self, stream_id: str, seconds: float = RESUME_SECONDS) -> bool:
        """Whether the client resumes ``stream_id`` (or its answer is sent) within ``seconds``."""
        before = self._replays[stream_id]
        with anyio.move_on_after(seconds):
            while self._replays[stream_id] == before and stream_id not in self._answered:  # noqa: ASYNC110
                await anyio.sleep(_POLL_SECONDS)
            return True
        return False


def resumable_manager(server: Any, **options: Any) -> tuple[Any, dict[str, SessionEvents]]:
    """The MCP SDK's ``StreamableHTTPSessionManager`` for ``server`` (with ``options``), each of
    whose sessions has its own :class:`SessionEvents`; and those events by session id (a
    session's are dropped with it)."""
    import weakref  # noqa: PLC0415

    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager  # noqa: PLC0415

    sessions: weakref.WeakValueDictionary[str, SessionEvents] = weakref.WeakValueDictionary()

    class Manager(StreamableHTTPSessionManager):
        def _admit_session(self, requestor: Any) -> Any:
            transport = super()._admit_session(requestor)
            if transport is not None and transport.mcp_session_id is not None:
                events = SessionEvents()  # this session's own (the SDK shares one otherwise)
                transport._event_store = events  # type: ignore[assignment]
                sessions[transport.mcp_session_id] = events
            return transport

    events: Any = SessionEvents()  # an EventStore by its methods (mcp is an optional extra)
    manager = Manager(server, event_store=events, retry_interval=RETRY_MS, **options)
    return manager, sessions  # type: ignore[return-value]
