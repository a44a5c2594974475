"""The chat's routes (:func:`create_router`), in three groups: the turns (``POST /chat``,
``/review``, ``/cancel``), one thread (its history, grants and audit trail), and the listings
(tools, pending reviews, the live stream).

Each route calls one method of the chat through :func:`~toolguard._http.answers.answer`,
which turns toolguard's errors into status codes; the route class of
:func:`~toolguard._http.guards.route_class` refuses what the router's guard refuses first.
"""

# No ``from __future__ import annotations`` here: FastAPI reads the routes' annotations at run
# time, and they refer to the router factory's locals.

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any, Literal
from uuid import UUID

from fastapi import APIRouter, Depends, Request, Response, status
from fastapi import Path as PathParam
from fastapi.responses import PlainTextResponse, StreamingResponse

from toolguard._chat.chat import ReviewedChat
from toolguard._core.audit import to_jsonl
from toolguard._core.jsonable import clean_text
from toolguard._http.answers import ECHO_LIMIT, Refusal, answer, shorten
from toolguard._http.auth import Authenticator, check_auth, identity_dependency, session_router
from toolguard._http.guards import Guard, route_class
from toolguard._http.live import ReviewFields, Streams, events_response, pending_reviews
from toolguard._http.parsing import DEFAULT_MAX_BODY_BYTES
from toolguard._http.schemas import (
    CancelRequest,
    ChatRequest,
    ChatResponse,
    ErrorResponse,
    GrantResponse,
    Id,
    ReviewRequest,
    ThreadResponse,
)
from toolguard._http.stats import add_stats_route
from toolguard._policy.redact import shown_messages

_log = logging.getLogger("toolguard.http")

_Dependency = Callable[..., Any]
"""A FastAPI dependency: the chat's (one per router) or the reviewer's."""

NO_MESSAGES = (
    "This server is a toolguard mcp-proxy gateway: its calls come from MCP clients and it takes"
    " no chat messages. Decide its pending reviews with POST /hitl/review."
)
"""The 404 of ``POST /hitl/chat`` on a gateway."""


def create_router(
    chat: ReviewedChat,
    *,
    prefix: str = "/hitl",
    reviewer: Callable[..., Any] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    allowed_origins: Iterable[str] = (),
    auth: Authenticator | None = None,
) -> APIRouter:
    """The chat's routes, to mount into any FastAPI app with ``include_router``.

    Args:
        chat: the chat to serve; its store decides where threads live.
        prefix: the path in front of ``/chat``, ``/review``, ``/cancel`` and
            ``/threads``.
        reviewer: a FastAPI dependency returning who is asking (e.g. the
            logged-in user's id, or ``None``): a ``str``, an ``int`` or a
            ``UUID`` (passed on as text); any other value is a setup error
            answered with a 500. It goes to ``submit_review``/``cancel_review``
            as ``reviewer`` (the chat's ``authorize`` hook and its audit
            trail) and to ``get_thread``, ``audit_trail`` and
            ``send_message`` as ``actor`` (the chat's ``access`` hook). To
            require a login on every route, pass ``dependencies=[Depends(...)]``
            to ``include_router``.
        max_body_bytes: the largest body a route reads; a larger one gets a
            413 before anything is parsed (default 1 MiB).
        allowed_origins: origins (``scheme://host[:port]``) besides the
            server's own whose pages may send ``POST`` requests; any other
            ``Origin`` gets a 403.
        auth: a :class:`~toolguard.http.HeaderAuth` or
            :class:`~toolguard.http.TokenAuth`: every route then requires a
            signed-in reviewer (401 with ``WWW-Authenticate`` otherwise), who
            is the identity of every request (give ``auth`` or ``reviewer``,
            not both); the router gets ``GET /session`` (who is signed in) and,
            with a ``TokenAuth``, ``POST /session`` (sign in) and ``DELETE
            /session`` (sign out).

    Returns:
        A router whose routes map toolguard's errors to status codes on their
        own (400, 403, 404, 409, 500, 502), refuse cross-site writes (403),
        bodies that are not JSON (415), too large (413) or hostile (422), and
        send the security headers, so the app needs no exception handler.

    Raises:
        TypeError, ValueError: ``max_body_bytes``, ``allowed_origins`` or ``auth``
            is invalid, or both ``auth`` and ``reviewer`` are given.
    """
    check_chat(chat)
    return routes(
        chat, Guard(max_body_bytes, allowed_origins), prefix=prefix, reviewer=reviewer, auth=auth
    )


def check_chat(chat: object) -> None:
    """Refuse anything but a :class:`~toolguard.ReviewedChat` (``TypeError``)."""
    if not isinstance(chat, ReviewedChat):
        msg = f"chat must be a toolguard.ReviewedChat, got {type(chat).__name__}"
        raise TypeError(msg)


def routes(
    chat: ReviewedChat,
    guard: Guard,
    *,
    prefix: str = "/hitl",
    reviewer: Callable[..., Any] | None = None,
    auth: Authenticator | None = None,
    mode: Literal["chat", "gateway"] = "chat",
    info: Callable[[], Mapping[str, Any]] | None = None,
    review_fields: ReviewFields | None = None,
) -> APIRouter:
    """The routes of :func:`create_router`, refusing what ``guard`` refuses.

    With ``auth``, every route but the session routes requires a signed-in reviewer (a
    dependency of the whole router, so also ``GET /tools``), who is the reviewer.
    ``GET /info`` answers ``{"mode": mode}`` and the fields of ``info()``; in ``"gateway"``
    mode ``POST /chat`` answers 404 (a gateway's threads take no messages).
    ``review_fields`` adds fields to each item of ``GET /reviews`` and ``GET /events``.
    """
    auth = check_auth(auth, reviewer)

    async def get_chat() -> ReviewedChat:
        return chat

    signed_in = identity_dependency(auth) if auth is not None else None
    who_asks = _reviewer_dependency(signed_in or reviewer)
    checked = route_class(guard)
    router = APIRouter(
        prefix=prefix,
        tags=["toolguard"],
        route_class=checked,
        dependencies=[Depends(signed_in)] if signed_in is not None else [],
    )
    _add_turn_routes(router, get_chat, who_asks, prefix, messages=mode == "chat")
    _add_thread_routes(router, get_chat, who_asks, prefix)
    _add_listing_routes(router, get_chat, who_asks, review_fields)
    add_stats_route(router, get_chat, who_asks)
    _add_info_route(router, mode, info)
    if auth is None:
        _add_no_session_route(router)
        return router
    both = APIRouter()
    both.include_router(session_router(auth, prefix, checked))
    both.include_router(router)
    return both


# --------------------------------------------------------------------------- the reviewer


def _reviewer_text(value: object) -> str | None:
    """The reviewer's id as text: ``str``, ``int`` and ``UUID`` are kept, as text."""
    if value is None:
        return None
    if isinstance(value, str):
        text: str = clean_text(str.__str__(value))
        return text
    if isinstance(value, int) and not isinstance(value, bool):
        return int.__repr__(value)
    if isinstance(value, UUID):
        return str(value)
    _log.error(
        "toolguard.http: the reviewer dependency returned a %s; it must return a str, an int,"
        " a UUID or None",
        type(value).__name__,
    )
    raise Refusal(
        status_code=status.HTTP_500_INTERNAL_SERVER_ERROR,
        detail=(
            "Server misconfigured: the reviewer dependency must return a str, an int, a UUID or"
            f" None, not a {shorten(type(value).__name__, ECHO_LIMIT)}."
        ),
    )


def _reviewer_dependency(reviewer: Callable[..., Any] | None) -> _Dependency:
    """A dependency that runs ``reviewer`` and gives its value as text (or ``None``)."""

    # Dependencies are async: FastAPI runs a plain ``def`` dependency in a worker thread,
    # a thread hop per request for nothing (benchmarks/bench_http.py).
    async def anonymous() -> None:
        return None

    source = reviewer or anonymous

    async def identity(value: Annotated[Any, Depends(source)]) -> str | None:
        return _reviewer_text(value)

    return identity


# --------------------------------------------------------------------------- documented errors


def _error(description: str) -> dict[str, Any]:
    return {"model": ErrorResponse, "description": description}


_REFUSED: dict[int | str, dict[str, Any]] = {
    403: _error("A cross-site request, or the chat's access hook refused the caller."),
    413: _error("The body is larger than the limit."),
    415: _error("The body is not JSON (Content-Type: application/json)."),
}
"""The refusals of every route that changes a thread."""
_COMMON: dict[int | str, dict[str, Any]] = {
    **_REFUSED,
    404: _error("No thread has that id."),
    409: _error("Another request is changing the thread at the same time."),
}
"""Those, and the errors of a route that changes a stored thread."""
_RUNS_MODEL: dict[int | str, dict[str, Any]] = {
    **_COMMON,
    500: _error("The model kept calling tools without answering."),
    502: _error("The model call failed."),
}
"""Those, and the errors of a route that calls the model."""
_MAY_NOT_DECIDE = _error("A cross-site request, or this reviewer may not decide in this thread.")
_MAY_NOT_READ = _error("The chat's access hook refused the caller.")
_NO_THREAD = _error("No thread has that id.")


# --------------------------------------------------------------------------- the routes


def _add_turn_routes(
    router: APIRouter,
    get_chat: _Dependency,
    who_asks: _Dependency,
    prefix: str,
    *,
    messages: bool = True,
) -> None:
    """``POST /chat``, ``/review`` and ``/cancel``: each answers one turn of the chat.

    Without ``messages``, ``POST /chat`` answers 404 whatever it is sent.
    """
    if not messages:
        # Registered first, so it answers instead of the route below, before any body is read.
        @router.post("/chat", include_in_schema=False)
        async def no_chat() -> None:
            raise Refusal(status_code=status.HTTP_404_NOT_FOUND, detail=NO_MESSAGES)

    @router.post(
        "/chat",
        include_in_schema=messages,
        response_model=ChatResponse,
        responses={
            400: _error("A review is pending in this thread: send its decisions first."),
            **_RUNS_MODEL,
        },
    )
    async def post_chat(
        body: ChatRequest,
        reviewed_chat: Annotated[ReviewedChat, Depends(get_chat)],
        who: Annotated[str | None, Depends(who_asks)],
    ) -> ChatResponse:
        """Send a user message; answers with the reply or the pending review."""
        turn = await answer(
            reviewed_chat.send_message(body.message, body.thread_id, actor=who), prefix
        )
        return ChatResponse.from_turn(turn)

    @router.post(
        "/review",
        response_model=ChatResponse,
        responses={
            400: _error(
                "Nothing is pending, the review is no longer current or has expired,"
                " or the decisions do not answer the review."
            ),
            **_RUNS_MODEL,
            403: _MAY_NOT_DECIDE,
        },
    )
    async def post_review(
        body: ReviewRequest,
        reviewed_chat: Annotated[ReviewedChat, Depends(get_chat)],
        who: Annotated[str | None, Depends(who_asks)],
    ) -> ChatResponse:
        """Answer the pending review; answers with the reply or the next pending review."""
        decisions = [decision.to_wire() for decision in body.decisions]
        turn = await answer(
            reviewed_chat.submit_review(
                decisions, body.thread_id, review_id=body.review_id, reviewer=who
            ),
            prefix,
        )
        return ChatResponse.from_turn(turn)

    @router.post(
        "/cancel",
        response_model=ChatResponse,
        responses={
            400: _error("Nothing is pending, or the review is no longer current."),
            **_COMMON,
            403: _MAY_NOT_DECIDE,
        },
    )
    async def post_cancel(
        body: CancelRequest,
        reviewed_chat: Annotated[ReviewedChat, Depends(get_chat)],
        who: Annotated[str | None, Depends(who_asks)],
    ) -> ChatResponse:
        """Cancel the pending review: nothing runs; the thread can go on with a new message."""
        turn = await answer(
            reviewed_chat.cancel_review(
                body.thread_id, review_id=body.review_id, reviewer=who, reason=body.reason
            ),
            prefix,
        )
        return ChatResponse.from_turn(turn)


def _add_thread_routes(
    router: APIRouter, get_chat: _Dependency, who_asks: _Dependency, prefix: str
) -> None:
    """``/threads/{thread_id}``: the stored thread, the revocation of a grant, the audit trail."""
    thread_path = Annotated[Id, PathParam()]

    @router.get(
        "/threads/{thread_id}",
        response_model=ThreadResponse,
        responses={403: _MAY_NOT_READ, 404: _NO_THREAD},
    )
    async def get_thread(
        thread_id: thread_path,
        reviewed_chat: Annotated[ReviewedChat, Depends(get_chat)],
        who: Annotated[str | None, Depends(who_asks)],
    ) -> ThreadResponse:
        """The stored history, the pending review and the status of every action."""
        state = await answer(reviewed_chat.get_thread(thread_id, actor=who), prefix)
        # The stored history holds the real values of redacted arguments: not shown here.
        shown = shown_messages(reviewed_chat, state.messages)
        return ThreadResponse.from_state(state, reviewed_chat.clock(), messages=shown)

    @router.delete(
        "/threads/{thread_id}/grants/{grant_id}",
        response_model=GrantResponse,
        responses={
            **_COMMON,
            403: _MAY_NOT_DECIDE,
            404: _error("No thread has that id, or it has no active grant with that id."),
        },
    )
    async def delete_grant(
        thread_id: thread_path,
        grant_id: Annotated[Id, PathParam()],
        reviewed_chat: Annotated[ReviewedChat, Depends(get_chat)],
        who: Annotated[str | None, Depends(who_asks)],
    ) -> GrantResponse:
        """Revoke a standing grant: later matching calls are reviewed again."""
        grant = await answer(reviewed_chat.revoke_grant(thread_id, grant_id, reviewer=who), prefix)
        return GrantResponse.from_grant(grant, reviewed_chat.clock())

    @router.get(
        "/threads/{thread_id}/audit",
        response_class=PlainTextResponse,
        responses={
            200: {
                "content": {"application/x-ndjson": {}},
                "description": "One audit event per line (JSON), oldest first.",
            },
            403: _MAY_NOT_READ,
            404: _NO_THREAD,
        },
    )
    async def get_audit(
        thread_id: thread_path,
        reviewed_chat: Annotated[ReviewedChat, Depends(get_chat)],
        who: Annotated[str | None, Depends(who_asks)],
    ) -> PlainTextResponse:
        """The thread's audit trail as JSON lines: requests, decisions (who, how) and outcomes."""
        events = await answer(reviewed_chat.audit_trail(thread_id, actor=who), prefix)
        return PlainTextResponse(to_jsonl(events), media_type="application/x-ndjson")


def _add_no_session_route(router: APIRouter) -> None:
    """``GET /session`` where nobody signs in: ``{"reviewer": null}`` (the page asks it first)."""

    @router.get("/session")
    async def get_session() -> dict[str, None]:
        """Who is signed in: nobody signs in to this server, so ``{"reviewer": null}``."""
        return {"reviewer": None}


def _add_info_route(
    router: APIRouter, mode: str, info: Callable[[], Mapping[str, Any]] | None
) -> None:
    """``GET /info``: what the server is, for the page (read-only)."""

    @router.get("/info")
    async def get_info() -> dict[str, Any]:
        """What serves this API: ``{"mode": "chat"}`` (a chat with an agent: ``toolguard serve``,
        :func:`create_app`) or ``{"mode": "gateway", "server": {...}}`` (``toolguard
        mcp-proxy``: its calls come from MCP clients; ``server`` is the upstream MCP server:
        ``target`` (its command line or URL), ``name``, ``version``, ``title``). In shadow mode
        it also has ``"shadow"``: ``true``, or ``"all"`` when deny rules do not refuse either."""
        extra = info() if info is not None else {}
        return {"mode": mode, **{key: value for key, value in extra.items() if key != "mode"}}


def _add_listing_routes(
    router: APIRouter,
    get_chat: _Dependency,
    who_asks: _Dependency,
    review_fields: ReviewFields | None = None,
) -> None:
    """``GET /tools``, ``/reviews`` and ``/events``: the chat's tools and its pending reviews."""

    @router.get("/tools")
    async def get_tools(
        reviewed_chat: Annotated[ReviewedChat, Depends(get_chat)],
    ) -> dict[str, list[dict[str, Any]]]:
        """The chat's tools: ``{"tools": [{"name", "description", "parameters", "approval"}]}``.

        ``parameters`` is each tool's JSON Schema, so a page can check an edit
        before sending it (the server validates it again). ``approval`` says
        whether the tool needs approval and why:
        ``{"needs_approval": true, "rule": "verb", "reason": "the word 'send' is ..."}``
        (see :class:`toolguard.classify.Classification`).
        """
        toolset = reviewed_chat.toolset
        tools = []
        for tool in toolset.values():
            why = toolset.explain(tool.name)
            approval = {
                "needs_approval": why.needs_approval,
                "rule": why.rule,
                "reason": why.reason,
            }
            tools.append({**tool.openai_schema["function"], "approval": approval})
        return {"tools": tools}

    @router.get("/reviews")
    async def get_reviews(
        reviewed_chat: Annotated[ReviewedChat, Depends(get_chat)],
        who: Annotated[str | None, Depends(who_asks)],
    ) -> dict[str, list[dict[str, Any]]]:
        """Every pending review: ``{"reviews": [{thread_id, review_id, pending_review}, ...]}``.

        Oldest thread first; threads the chat's ``access`` hook does not let
        the caller read (operation ``"read"``) and damaged threads are left out.
        """
        return {"reviews": await pending_reviews(reviewed_chat, who, fields=review_fields)}

    streams = Streams()

    @router.get(
        "/events",
        response_class=StreamingResponse,
        responses={
            200: {
                "content": {"text/event-stream": {}},
                "description": "Server-sent events: `reviews` and `thread`.",
            },
            503: _error("Too many live streams are open."),
        },
    )
    async def get_events(
        request: Request,
        reviewed_chat: Annotated[ReviewedChat, Depends(get_chat)],
        who: Annotated[str | None, Depends(who_asks)],
    ) -> Response:
        """A live stream of server-sent events, for pages that show pending reviews.

        ``event: reviews`` carries ``{"reviews": [...]}`` (the items of ``GET
        /hitl/reviews`` plus ``requested_at`` and ``expires_at``) first and
        whenever the list changes; ``event: thread`` carries ``{"thread_id",
        "status", "version"}`` when a readable thread changes. The store is
        read every second, so changes made by other processes show too. At
        most 32 streams at once (503).
        """
        return events_response(reviewed_chat, who, request, streams, review_fields)
