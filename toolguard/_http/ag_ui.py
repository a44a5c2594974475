"""``POST /hitl/ag-ui``: a :class:`~toolguard.ReviewedChat` as an AG-UI agent
(:func:`create_ag_ui_router`, :func:`create_ag_ui_app`; ``toolguard serve`` mounts it too).

The route takes AG-UI's ``RunAgentInput`` and answers the run's events as server-sent events
(:mod:`~toolguard._http.ag_ui_run` does the run); a paused run ends with one interrupt per
action awaiting review, and a run whose ``resume`` answers them decides the review through
:meth:`~toolguard.ReviewedChat.submit_review`. The route refuses what the chat's other routes
refuse before it runs (cross-site requests 403, bodies not JSON 415, too large 413, hostile
or not a ``RunAgentInput`` 422; with ``auth``, no signed-in reviewer 401).

The AG-UI models come from the ``ag-ui`` extra (``ag-ui-protocol``), imported when a router is
made: this module imports without it, and ``toolguard serve`` answers 501 on the route when
it is missing.
"""

# No ``from __future__ import annotations`` here: FastAPI reads the route's annotations.

from collections.abc import Callable, Iterable
from typing import Annotated, Any, Final

from fastapi import APIRouter, Depends, FastAPI, status
from fastapi.responses import StreamingResponse
from fastapi.routing import APIRoute

from toolguard._chat.chat import ReviewedChat
from toolguard._http.answers import Refusal
from toolguard._http.app import protected_app
from toolguard._http.auth import Authenticator, check_auth, identity_dependency
from toolguard._http.guards import Guard, route_class
from toolguard._http.parsing import DEFAULT_MAX_BODY_BYTES
from toolguard._http.routes import _reviewer_dependency, check_chat

PATH: Final = "/ag-ui"
"""The route's path under the router's prefix: ``POST /hitl/ag-ui``."""

MISSING: Final = 'AG-UI needs the ag-ui extra: pip install "toolguard-hitl[ag-ui]"'
"""The text of the ``ImportError`` (and of ``toolguard serve``'s 501) without the extra."""

STREAM_HEADERS: Final = {"x-accel-buffering": "no"}
"""The headers of the event stream besides its media type (a proxy must not buffer it)."""


def _needs_extra() -> None:
    """Raise ``ImportError`` with the install hint when ``ag-ui-protocol`` is missing."""
    try:
        import ag_ui.core  # noqa: F401, PLC0415 - the optional extra
    except ImportError as exc:
        raise ImportError(MISSING) from exc


def ag_ui_routes(
    chat: ReviewedChat,
    checked: type[APIRoute],
    *,
    prefix: str = "/hitl",
    path: str = PATH,
    reviewer: Callable[..., Any] | None = None,
    auth: Authenticator | None = None,
) -> APIRouter:
    """The router of ``POST {prefix}{path}``, whose route is ``checked`` (a
    :func:`~toolguard._http.guards.route_class`).

    Raises:
        ImportError: the ``ag-ui`` extra is not installed.
    """
    _needs_extra()
    from ag_ui.core import RunAgentInput  # noqa: PLC0415 - the optional extra

    from toolguard._http.ag_ui_run import run_events  # noqa: PLC0415 - needs the extra

    signed_in = identity_dependency(auth) if auth is not None else None
    who_asks = _reviewer_dependency(signed_in or reviewer)
    router = APIRouter(prefix=prefix, tags=["toolguard"], route_class=checked)

    @router.post(
        path,
        response_class=StreamingResponse,
        responses={
            200: {
                "content": {"text/event-stream": {}},
                "description": (
                    "The run's AG-UI events: RUN_STARTED, the model's text, its tool calls and"
                    " their results, RUN_FINISHED (with one interrupt per call awaiting"
                    " review), or RUN_ERROR when the run is refused."
                ),
            }
        },
    )
    async def post_ag_ui(
        body: RunAgentInput,
        who: Annotated[str | None, Depends(who_asks)],
    ) -> StreamingResponse:
        """A run of the chat as an AG-UI agent: the user's message, or a ``resume`` answering
        the interrupts of the paused run (approve, edit, reject)."""
        return StreamingResponse(
            run_events(chat, body, who, prefix),
            media_type="text/event-stream",
            headers=STREAM_HEADERS,
        )

    return router


def served_ag_ui_routes(
    chat: ReviewedChat, auth: Authenticator | None
) -> Callable[[type[APIRoute]], APIRouter]:
    """``POST /hitl/ag-ui`` for an app of :func:`~toolguard._http.app.protected_app`
    (``routers=``); without the ``ag-ui`` extra the route answers 501 with the install hint."""

    def make(checked: type[APIRoute]) -> APIRouter:
        try:
            return ag_ui_routes(chat, checked, auth=auth)
        except ImportError:
            router = APIRouter(prefix="/hitl", route_class=checked)

            @router.post(PATH, include_in_schema=False)
            async def no_ag_ui() -> None:
                raise Refusal(status_code=status.HTTP_501_NOT_IMPLEMENTED, detail=MISSING)

            return router

    return make


def create_ag_ui_router(
    chat: ReviewedChat,
    *,
    prefix: str = "/hitl",
    path: str = PATH,
    reviewer: Callable[..., Any] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    allowed_origins: Iterable[str] = (),
    auth: Authenticator | None = None,
) -> APIRouter:
    """``POST {prefix}{path}`` (``/hitl/ag-ui``): the chat as an AG-UI agent, to mount into
    any FastAPI app with ``include_router``.

    Point an AG-UI client at it (``new HttpAgent({url: ".../hitl/ag-ui"})``, CopilotKit's
    runtime). A run sends the user's last message; a call awaiting review ends the run with
    an interrupt (``RUN_FINISHED`` with ``outcome.type == "interrupt"``), and the next run's
    ``resume`` answers it: ``{approved: true}``, ``{approved: true, editedArgs}``,
    ``{approved: false, reason}`` or ``status: "cancelled"``, through the checks of
    :meth:`~toolguard.ReviewedChat.submit_review`. See docs/own-ui.md.

    Args:
        chat: the chat to serve.
        prefix: the path in front of ``path``.
        path: the route's own path (default ``/ag-ui``).
        reviewer: a FastAPI dependency returning who asks (see
            :func:`toolguard.http.create_router`): the reviewer of the answers to the
            interrupts and the actor of the messages.
        max_body_bytes: the largest body read (default 1 MiB; larger: 413).
        allowed_origins: other origins whose pages may post (else 403).
        auth: a :class:`~toolguard.http.HeaderAuth` or :class:`~toolguard.http.TokenAuth`:
            the route requires a signed-in reviewer (401), who is the reviewer.

    Returns:
        A router whose route refuses what :func:`toolguard.http.create_router`'s routes
        refuse (403, 413, 415, 422) and answers everything else as an AG-UI event stream.

    Raises:
        TypeError, ValueError: an option is invalid.
        ImportError: the ``ag-ui`` extra is not installed.
    """
    check_chat(chat)
    auth = check_auth(auth, reviewer)
    checked = route_class(Guard(max_body_bytes, allowed_origins))
    return ag_ui_routes(chat, checked, prefix=prefix, path=path, reviewer=reviewer, auth=auth)


def create_ag_ui_app(
    chat: ReviewedChat,
    *,
    reviewer: Callable[..., Any] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    allowed_origins: Iterable[str] = (),
    auth: Authenticator | None = None,
) -> FastAPI:
    """The chat as an AG-UI agent in an ASGI app of its own, answering ``POST /``: mount it
    into a Starlette or FastAPI app (``app.mount("/agent", create_ag_ui_app(chat))``: the
    agent's URL is then ``/agent/``). The options are those of :func:`create_ag_ui_router`.

    Raises:
        TypeError, ValueError: an option is invalid.
        ImportError: the ``ag-ui`` extra is not installed.
    """
    router = create_ag_ui_router(  # the options checked here, before the app is built
        chat,
        prefix="",
        path="/",
        reviewer=reviewer,
        max_body_bytes=max_body_bytes,
        allowed_origins=allowed_origins,
        auth=auth,
    )
    return protected_app(
        chat,
        allowed_hosts=None,  # the app it is mounted in says which Hosts it answers
        page=False,
        reviewer=reviewer,
        max_body_bytes=max_body_bytes,
        allowed_origins=allowed_origins,
        routers=[lambda _route_class: router],
        auth=auth,
        chat_routes=False,
    )
