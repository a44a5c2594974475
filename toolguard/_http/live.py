"""The pending reviews: as a listing (``GET /hitl/reviews``, :func:`pending_reviews`) and as a
live stream of server-sent events (``GET /hitl/events``, :func:`events_response`).

Both list only the threads the chat's ``access`` hook lets the caller read. The stream reads
the store every second, so changes made by other processes show too.
"""

import inspect
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

import anyio
from fastapi import Request, Response, status
from fastapi.responses import StreamingResponse
from pydantic import TypeAdapter

from toolguard._chat.access import reviewer_id
from toolguard._chat.chat import ReviewedChat
from toolguard._core.errors import CorruptThreadError
from toolguard._http.answers import reply
from toolguard._stores.protocol import ThreadState, ThreadStatus

_log = logging.getLogger("toolguard.http")

_EVENTS_POLL_SECONDS = 1.0
"""How often ``GET /hitl/events`` reads the store's threads to look for changes."""

_EVENTS_HEARTBEAT_SECONDS = 15.0
"""A comment line at least this often keeps proxies from closing an idle stream."""

_EVENTS_LIFETIME_SECONDS = 300.0
"""A stream ends after this long; the browser's EventSource reconnects by itself."""

_EVENTS_RETRY_MS = 1000
"""The reconnection delay the stream asks of EventSource (its ``retry:`` field)."""

_EVENTS_MAX_STREAMS = 32
"""At most this many ``GET /hitl/events`` streams at once per router; more get a 503."""

ReviewFields = Callable[[ThreadState], Mapping[str, Any]]
"""More fields for each item of the listing and the stream (e.g. the gateway's ``call``);
they never replace the item's own fields."""


class Streams:
    """How many event streams a router has open (each reads the store every second)."""

    def __init__(self) -> None:
        self.open = 0


async def _may_read(chat: ReviewedChat, actor: str | None, state: ThreadState) -> bool:
    """Whether the chat's ``access`` hook lets ``actor`` read ``state`` (not audited: a listing)."""
    if chat.access is None:
        return True
    verdict: object = chat.access(actor, state, "read")
    if inspect.isawaitable(verdict):
        verdict = await verdict
    if verdict is True:
        return True
    if verdict is not False:
        # Fails closed: the thread is left out of the listing.
        _log.error(
            "toolguard.http: the access hook must return True or False, got %s",
            type(verdict).__name__,
        )
    return False


async def _readable_threads(chat: ReviewedChat, actor: str | None) -> list[ThreadState]:
    """Every stored thread ``actor`` may read, oldest first; damaged ones are skipped."""
    lister = getattr(chat.store, "thread_ids", None)
    states: list[ThreadState] = []
    for thread_id in await lister() if lister is not None else []:
        try:
            state = await chat.store.load(thread_id)
        except CorruptThreadError as exc:
            _log.warning("toolguard.http: skipped thread %r: %s", exc.thread_id, exc.reason)
            continue
        if state is not None and await _may_read(chat, actor, state):
            states.append(state)
    states.sort(key=lambda s: (s.created_at, s.thread_id))
    return states


_DATETIME: TypeAdapter[datetime] = TypeAdapter(datetime)


def _iso(moment: datetime) -> str:
    """``moment`` as pydantic writes it in the other answers (UTC as ``Z``)."""
    text: str = _DATETIME.dump_python(moment, mode="json")
    return text


def _pending_of(
    states: Iterable[ThreadState], *, times: bool = False, fields: ReviewFields | None = None
) -> list[dict[str, Any]]:
    """``[{thread_id, review_id, pending_review}, ...]`` of the threads awaiting a review.

    With ``times``, each item also has ``requested_at`` (the earliest request
    of the review) and ``expires_at`` (its deadline or ``None``), ISO 8601.
    With ``fields``, each item also has the fields it gives for the thread.
    """
    reviews: list[dict[str, Any]] = []
    for state in states:
        pending = state.pending
        if state.status != "awaiting_review" or pending is None:
            continue
        item: dict[str, Any] = {
            "thread_id": state.thread_id,
            "review_id": pending.review_id,
            "pending_review": pending.pending_review.model_dump(mode="json"),
        }
        if times:
            asked = [a.requested_at for a in pending.actions]
            deadline = pending.expires_at
            item["requested_at"] = _iso(min(asked)) if asked else None
            item["expires_at"] = _iso(deadline) if deadline is not None else None
        if fields is not None:
            for key, value in fields(state).items():
                item.setdefault(key, value)
        reviews.append(item)
    return reviews


async def pending_reviews(
    chat: ReviewedChat, actor: str | None = None, *, fields: ReviewFields | None = None
) -> list[dict[str, Any]]:
    """The pending reviews of every thread ``actor`` may read, oldest thread first.

    The body of ``GET /hitl/reviews``: each item is ``{"thread_id",
    "review_id", "pending_review"}``. A thread the chat's ``access`` hook
    does not let ``actor`` read (operation ``"read"``) is left out, and so is
    a thread that cannot be read back (``CorruptThreadError``, logged). A
    store without ``thread_ids()`` lists nothing. ``fields``: more fields for
    each item (see :data:`ReviewFields`).

    Raises:
        TypeError: ``chat`` is not a ``ReviewedChat``, or ``actor`` is not
            text, an ``int``, a ``UUID`` or ``None``.
    """
    served: object = chat  # checked at run time for untyped callers
    if not isinstance(served, ReviewedChat):
        msg = f"chat must be a toolguard.ReviewedChat, got {type(served).__name__}"
        raise TypeError(msg)
    return _pending_of(await _readable_threads(chat, reviewer_id(actor, "actor")), fields=fields)


def sse(event: str, data: Any) -> bytes:
    """One server-sent event: ``event:`` and one ``data:`` line of ASCII JSON."""
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"))
    return f"event: {event}\ndata: {text}\n\n".encode("ascii")


def _shutting_down(request: Request) -> bool:
    """Whether the server (uvicorn) asked this connection to finish: a graceful shutdown."""
    cycle = getattr(request.receive, "__self__", None)
    return getattr(cycle, "keep_alive", True) is False


async def _live_events(
    chat: ReviewedChat,
    actor: str | None,
    request: Request,
    streams: Streams,
    fields: ReviewFields | None,
) -> AsyncIterator[bytes]:
    """The ``GET /hitl/events`` stream, counted in ``streams`` while it runs."""
    streams.open += 1
    try:
        async for chunk in _events(chat, actor, request, fields):
            yield chunk
    finally:
        streams.open -= 1


async def _events(
    chat: ReviewedChat, actor: str | None, request: Request, fields: ReviewFields | None
) -> AsyncIterator[bytes]:
    """The ``GET /hitl/events`` stream: ``reviews`` and ``thread`` events as the store changes."""
    started = anyio.current_time()
    stopping_already = _shutting_down(request)  # e.g. "Connection: close" from the start
    yield f"retry: {_EVENTS_RETRY_MS}\n\n".encode("ascii")
    shown: list[dict[str, Any]] | None = None
    versions: dict[str, tuple[ThreadStatus, int]] | None = None
    quiet_since = anyio.current_time()
    while True:
        states = await _readable_threads(chat, actor)
        reviews = _pending_of(states, times=True, fields=fields)
        now_versions = {s.thread_id: (s.status, s.version) for s in states}
        if versions is not None:
            for state in states:
                if versions.get(state.thread_id) != now_versions[state.thread_id]:
                    quiet_since = anyio.current_time()
                    yield sse(
                        "thread",
                        {
                            "thread_id": state.thread_id,
                            "status": state.status,
                            "version": state.version,
                        },
                    )
        versions = now_versions
        if reviews != shown:
            quiet_since = anyio.current_time()
            shown = reviews
            yield sse("reviews", {"reviews": reviews})
        if anyio.current_time() - quiet_since >= _EVENTS_HEARTBEAT_SECONDS:
            quiet_since = anyio.current_time()
            yield b": heartbeat\n\n"
        await anyio.sleep(_EVENTS_POLL_SECONDS)
        if await request.is_disconnected():
            return
        if not stopping_already and _shutting_down(request):
            return
        if anyio.current_time() - started >= _EVENTS_LIFETIME_SECONDS:
            return


def events_response(
    chat: ReviewedChat,
    actor: str | None,
    request: Request,
    streams: Streams,
    fields: ReviewFields | None = None,
) -> Response:
    """The answer of ``GET /hitl/events``: the live stream, or a 503 when too many are open.

    ``fields``: more fields for each pending review (see :data:`ReviewFields`).
    """
    if streams.open >= _EVENTS_MAX_STREAMS:
        return reply(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            f"Too many live streams are open ({_EVENTS_MAX_STREAMS}): close other pages,"
            " or poll GET /hitl/reviews instead.",
        )
    return StreamingResponse(
        _live_events(chat, actor, request, streams, fields),
        media_type="text/event-stream",
        headers={"X-Accel-Buffering": "no"},
    )
