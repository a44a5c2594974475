"""The one factory of toolguard's apps (:func:`protected_app`): :func:`create_app`,
``toolguard serve`` and ``toolguard mcp-proxy`` all build theirs here, so every app has the
same protections (:class:`~toolguard._http.guards.Protect`) and serves the approval page the
same way.
"""

from collections.abc import Callable, Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter, Depends, FastAPI, HTTPException, status
from fastapi.responses import FileResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles

from toolguard._chat.chat import ReviewedChat
from toolguard._core.errors import InvalidReviewDecisionError
from toolguard._core.records import ApproveDecision
from toolguard._enforce.grant_use import check_grant_decisions
from toolguard._http.auth import Authenticator, check_auth, identity_dependency
from toolguard._http.guards import Guard, Hosts, Protect, route_class
from toolguard._http.live import ReviewFields
from toolguard._http.metrics import mount_metrics
from toolguard._http.parsing import DEFAULT_MAX_BODY_BYTES
from toolguard._http.routes import check_chat, routes
from toolguard._http.slack import slack_routers
from toolguard._stores.protocol import ThreadState
from toolguard._version import __version__

OPENAPI_URL = "/openapi.json"
"""Where an app serves its OpenAPI document when asked to (``openapi=True``, ``--openapi``)."""


def _page_dir() -> Path | None:
    """The folder of the approval page shipped in the package, if it is on disk."""
    folder = resources.files("toolguard").joinpath("static")
    return folder if isinstance(folder, Path) and folder.is_dir() else None


def create_app(
    chat: ReviewedChat,
    *,
    page: bool = True,
    title: str = "toolguard",
    reviewer: Callable[..., Any] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    allowed_origins: Iterable[str] = (),
    allowed_hosts: Iterable[str] | None = None,
    auth: Authenticator | None = None,
    openapi: bool = True,
) -> FastAPI:
    """A FastAPI app serving ``chat`` under ``/hitl`` and, optionally, the approval page.

    Every answer carries the security headers (a strict
    Content-Security-Policy, ``X-Frame-Options: DENY``, ``nosniff``,
    ``Referrer-Policy: no-referrer``, ``Cache-Control: no-store``). The
    cross-site and body-size checks of :func:`create_router` hold for every
    route of the app, also routes you add to it later.

    Args:
        chat: the chat to serve (also available as ``app.state.chat``).
        page: serve the approval page: ``index.html`` at ``/`` and its files
            under ``/static/``. Without the page files in the package, ``/``
            answers 404.
        title: the app's title in its OpenAPI document.
        reviewer: a dependency returning who asks (see :func:`create_router`).
        max_body_bytes: the largest request body (see :func:`create_router`).
        allowed_origins: other origins whose pages may send ``POST`` requests
            (see :func:`create_router`).
        allowed_hosts: the ``Host`` headers the app answers, against DNS
            rebinding: ``"host:port"``, ``"host"`` (any port), ``"[::1]:8000"``,
            or ``"*"`` (any); any other Host gets a 421. ``None`` (default):
            no check (``toolguard serve`` and ``toolguard mcp-proxy`` pass
            their own list).
        auth: a :class:`~toolguard.http.HeaderAuth` or
            :class:`~toolguard.http.TokenAuth`: every route under ``/hitl``
            requires a signed-in reviewer, who is the reviewer (see
            :func:`create_router`); the page and its files stay reachable.
        openapi: serve the API's OpenAPI document at ``/openapi.json``. The
            ``/docs`` and ``/redoc`` pages are never served: they load
            Swagger UI and ReDoc from a CDN, scripts the approval page's
            origin must not run.

    Returns:
        An ASGI app, e.g. for ``uvicorn``.

    Raises:
        TypeError, ValueError: an option is invalid (the text says which).
    """
    return protected_app(
        chat,
        page=page,
        title=title,
        reviewer=reviewer,
        max_body_bytes=max_body_bytes,
        allowed_origins=allowed_origins,
        allowed_hosts=allowed_hosts,
        auth=auth,
        openapi=openapi,
    )


def grantable(chat: ReviewedChat, state: ThreadState) -> list[bool]:
    """Whether an approve of each waiting action of ``state`` may carry a standing grant.

    In the order of the review's ``action_requests``. Asked of the pipeline's own check
    (:func:`~toolguard._enforce.grant_use.check_grant_decisions`) with a grant of the chat's
    scope (``"server"`` in the MCP gateway, else ``"thread"``) on one action at a time: false
    for a tool that needs a quorum and for a call an ``ask`` rule matches.
    """
    pending = state.pending
    if pending is None:
        return []
    count = sum(action.status == "requested" for action in pending.actions)
    scope = "thread" if chat.shared_grants is None else "server"
    granting = ApproveDecision.model_validate({"grant": {"scope": scope, "match": "tool"}})
    found: list[bool] = []
    for index in range(count):
        decisions = [granting if i == index else ApproveDecision() for i in range(count)]
        try:
            check_grant_decisions(chat.toolset, pending, decisions)
        except InvalidReviewDecisionError:
            found.append(False)
        else:
            found.append(True)
    return found


def _with_grantable(chat: ReviewedChat, fields: ReviewFields | None) -> ReviewFields:
    """``fields`` of each pending review, plus ``grantable`` (see :func:`grantable`)."""

    def review_fields(state: ThreadState) -> Mapping[str, Any]:
        more = fields(state) if fields is not None else {}
        return {**more, "grantable": grantable(chat, state)}

    return review_fields


def _with_shadow(
    chat: ReviewedChat, info: Callable[[], Mapping[str, Any]] | None
) -> Callable[[], Mapping[str, Any]]:
    """``info`` plus ``"shadow"`` (``true`` or ``"all"``) while the chat runs in shadow mode,
    which the page then says loudly."""

    def answer() -> Mapping[str, Any]:
        extra = dict(info()) if info is not None else {}
        shadow = chat.runner.shadow
        return {**extra, "shadow": shadow} if shadow else extra

    return answer


def protected_app(
    chat: ReviewedChat,
    *,
    allowed_hosts: Iterable[str] | None,
    page: bool = True,
    title: str = "toolguard",
    reviewer: Callable[..., Any] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    allowed_origins: Iterable[str] = (),
    routers: Iterable[Callable[[type[APIRoute]], APIRouter]] = (),
    auth: Authenticator | None = None,
    mode: Literal["chat", "gateway"] = "chat",
    info: Callable[[], Mapping[str, Any]] | None = None,
    review_fields: ReviewFields | None = None,
    openapi: bool = False,
    chat_routes: bool = True,
) -> FastAPI:
    """The one factory of toolguard's apps: :func:`create_app`, ``serve``, ``mcp-proxy`` and
    the AG-UI agent's app.

    The chat's routes under ``/hitl``, ``routers`` (functions that make more
    routers from the route class they are given, which answers hostile input as
    the chat's routes do, e.g. the gateway's ``GET /hitl/audit``), the approval
    page unless ``page`` is false, all behind :class:`~toolguard._http.guards.Protect`: the ``Host``
    allow-list (421), the cross-site refusal of state-changing requests
    (403), the body limit (413) and the security headers, for every route. ``allowed_hosts`` has
    no default: each caller says which Hosts it answers (``None``: any). With ``auth``, the
    chat's routes and ``routers`` require a signed-in reviewer (401); the page does not.
    ``mode``, ``info`` and ``review_fields``: what ``GET /hitl/info`` answers, whether
    ``POST /hitl/chat`` takes messages (not in ``"gateway"`` mode: 404), and more fields of
    each pending review (see :func:`~toolguard._http.routes.routes`); each also says which of
    its actions an approve may grant for (``grantable``, see :func:`grantable`). ``openapi``:
    serve the OpenAPI document at :data:`OPENAPI_URL` (JSON only: never the ``/docs`` or
    ``/redoc`` pages, whose scripts come from a CDN). ``chat_routes=False``: only ``routers``
    (an app serving one protocol, e.g. the AG-UI agent), without the chat's ``/hitl`` routes.

    Raises:
        TypeError, ValueError: an option is invalid (the text says which).
    """
    check_chat(chat)
    auth = check_auth(auth, reviewer)
    hosts = Hosts(allowed_hosts) if allowed_hosts is not None else None
    guard = Guard(max_body_bytes, allowed_origins)
    app = FastAPI(
        title=title,
        version=__version__,
        openapi_url=OPENAPI_URL if openapi else None,
        docs_url=None,
        redoc_url=None,
    )
    app.state.chat = chat
    app.state.auth = auth
    if chat_routes:
        app.include_router(
            routes(
                chat,
                guard,
                reviewer=reviewer,
                auth=auth,
                mode=mode,
                info=_with_shadow(chat, info),
                review_fields=_with_grantable(chat, review_fields),
            )
        )
    required = [Depends(identity_dependency(auth))] if auth is not None else []
    for make_router in routers:
        app.include_router(make_router(route_class(guard)), dependencies=required)
    for slack in slack_routers(chat):  # signed by Slack, not signed in: the route checks
        app.include_router(slack)
    mount_metrics(app, required)  # GET /metrics, with --metrics
    app.add_middleware(Protect, hosts=hosts, guard=guard, docs=frozenset())
    folder = _page_dir() if page else None
    if folder is not None:
        index = folder / "index.html"

        @app.get("/", include_in_schema=False)
        async def get_page() -> FileResponse:
            if not index.is_file():
                raise HTTPException(status_code=status.HTTP_404_NOT_FOUND, detail="Not Found")
            return FileResponse(index, media_type="text/html")

        app.mount("/static", StaticFiles(directory=folder), name="static")
    return app
