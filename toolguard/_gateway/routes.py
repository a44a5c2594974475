"""The gateway's HTTP app: toolguard's API and page, plus ``GET /hitl/audit``.

Served on ``127.0.0.1:--port`` beside the MCP server: ``GET /hitl/reviews``
lists the pending reviews, ``POST /hitl/review`` decides, ``GET /hitl/audit``
exports every call's audit trail (a call a deny rule refused asked nobody, so
nobody has its thread id). The app is built by the same factory as ``toolguard
serve``'s, with the same protections.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from toolguard._chat.chat import ReviewedChat
from toolguard._core.hosts import default_hosts
from toolguard._gateway.calls_info import CallsInfo
from toolguard._gateway.grants import grants_router

if TYPE_CHECKING:
    from fastapi import APIRouter, FastAPI
    from fastapi.routing import APIRoute

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_PORT",
    "audit_router",
    "build_app",
]

DEFAULT_PORT: Final = 8765
"""The port of the approval page and HTTP API when no ``--port`` is given."""
DEFAULT_MAX_BODY_BYTES: Final = 1024 * 1024
"""The largest request body of the HTTP API when no ``--max-body-bytes`` is given (1 MiB)."""


def audit_router(chat: ReviewedChat, route_class: type[APIRoute] | None = None) -> APIRouter:
    """``GET /hitl/audit``: the audit trail of every call the gateway recorded, as JSON lines.

    One thread per call, so the per-thread ``GET /hitl/threads/{id}/audit``
    needs an id nobody has for a call that asked no one (a ``denied`` one).
    This answers :meth:`~toolguard.ReviewedChat.export_audit` of the whole
    store: oldest thread first, each thread's events in order; a thread that
    cannot be read back is skipped (logged). It reads every thread.
    """
    from fastapi import APIRouter  # noqa: PLC0415
    from fastapi.responses import PlainTextResponse  # noqa: PLC0415
    from fastapi.routing import APIRoute  # noqa: PLC0415

    router = APIRouter(prefix="/hitl", tags=["hitl"], route_class=route_class or APIRoute)

    @router.get(
        "/audit",
        response_class=PlainTextResponse,
        response_model=None,  # the annotation below is text here (postponed annotations)
        responses={
            200: {
                "content": {"application/x-ndjson": {}},
                "description": "One audit event per line (JSON), oldest thread first.",
            }
        },
    )
    async def get_audit() -> PlainTextResponse:
        """Every recorded call's audit events: requests, decisions, outcomes, denied calls."""
        return PlainTextResponse(await chat.export_audit(), media_type="application/x-ndjson")

    return router


def build_app(
    chat: ReviewedChat,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    allow_hosts: Iterable[str] = (),
    allow_origins: Iterable[str] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    auth: Any = None,
    calls: CallsInfo | None = None,
    openapi: bool = False,
) -> FastAPI:
    """Toolguard's HTTP API (``GET /hitl/reviews`` included), ``GET /hitl/audit`` and the page.

    Built by the same factory as ``toolguard serve``'s app, with the same
    protections: it answers only the ``Host`` headers of
    :func:`~toolguard._core.hosts.default_hosts` for ``host`` and ``port`` (the
    bound address and the loopback names) plus ``allow_hosts`` (``"*"``: any),
    any other Host gets a 421, so a web page rebinding its own name to
    127.0.0.1 cannot list, approve or read the audit; a state-changing
    request from a page of another origin than ``allow_origins`` gets a 403,
    a body over ``max_body_bytes`` a 413; every answer carries the security
    headers. ``auth`` (a :class:`~toolguard.http.HeaderAuth` or
    :class:`~toolguard.http.TokenAuth`) makes every route under ``/hitl``, ``GET /hitl/audit``
    included, require a signed-in reviewer.

    It is a gateway's API: ``GET /hitl/info`` answers ``{"mode": "gateway", "server": {...}}``,
    ``POST /hitl/chat`` answers 404 (the threads hold MCP clients' calls, not
    conversations), and each item of ``GET /hitl/reviews`` and ``GET /hitl/events`` has a
    ``call`` field: ``{"server": {...}, "client": {...} | null}``, from ``calls`` (the
    proxy's :attr:`~toolguard._gateway.proxy.MCPProxy.calls`; without it, nothing is known
    about the server or the clients). ``openapi`` (``--openapi``) serves the OpenAPI document at
    ``/openapi.json``; no docs page is served.

    Raises:
        TypeError, ValueError: an option is invalid (the text says which).
    """
    from toolguard._http.app import protected_app  # noqa: PLC0415

    known = calls if calls is not None else CallsInfo()
    return protected_app(
        chat,
        title="toolguard mcp-proxy",
        allowed_hosts=[*default_hosts(host, port), *allow_hosts],
        allowed_origins=allow_origins,
        max_body_bytes=max_body_bytes,
        routers=[partial(audit_router, chat), partial(grants_router, chat)],
        auth=auth,
        mode="gateway",
        info=known.info,
        review_fields=known.review_fields,
        openapi=openapi,
    )
