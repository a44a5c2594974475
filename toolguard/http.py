"""Serve a :class:`~toolguard.ReviewedChat` over HTTP with FastAPI.

Install the ``http`` extra (``pip install "toolguard-hitl[http]"``). This
module imports ``fastapi``; ``import toolguard`` never imports it.

Five routes, under ``/hitl`` by default:

* ``POST /hitl/chat`` ``{message, thread_id?}`` sends a user message;
* ``POST /hitl/review`` ``{thread_id, decisions, review_id?}`` answers the
  pending review (send the ``review_id`` you were shown: a decision for an
  older review then never approves a newer one);
* ``POST /hitl/cancel`` ``{thread_id, review_id?, reason?}`` cancels it;
* ``GET /hitl/threads/{thread_id}`` returns the stored history, the pending
  review and every action's status, so a page can reload;
* ``GET /hitl/threads/{thread_id}/audit`` returns the audit trail as JSON lines.

The ``POST`` routes answer ``{thread_id, reply, pending_review, review_id}``:
a reply, or the review payload in LangChain's human-in-the-loop format.
Errors follow the specification's table: a body of the wrong shape (an empty
``decisions`` list, an unknown decision ``type``, a decision that is not an
object, an ``edited_action`` without a string ``name`` or an object ``args``)
is a 422; decisions that do not answer the review (wrong count, an ``edit``
without ``edited_action``), a review with nothing pending (or no longer
current, or expired), and a message while a review is pending are a 400
whose ``detail`` is the error's text (in the language of
``TOOLGUARD_LANG``). A reviewer the chat's ``authorize`` hook refuses gets a
403, an unknown thread a 404, a thread changed by a simultaneous request a
409, a model that keeps calling tools a 500 and a failed model call a 502,
each with the text in ``detail``.

A whole app, with the approval page at ``/``::

    from toolguard import ReviewedChat, SQLiteStore
    from toolguard.http import create_app
    from toolguard.openai import OpenAIChatModel

    chat = ReviewedChat(
        OpenAIChatModel(model="gpt-4o-mini"), [send_email, search_contacts],
        store=SQLiteStore("toolguard.sqlite3"),
    )
    app = create_app(chat)  # uvicorn myapp:app

Or the routes only, mounted into an existing FastAPI app (the router maps
toolguard's errors to status codes itself, so no exception handler is
needed), with your login as the reviewer's identity::

    from fastapi import Depends, FastAPI
    from toolguard.http import create_router

    app = FastAPI()
    app.include_router(
        create_router(chat, prefix="/agent", reviewer=current_user_id),
        dependencies=[Depends(require_login)],
    )  # POST /agent/chat, POST /agent/review, ...

The chat reaches the routes through a dependency, so a test can swap it with
``app.dependency_overrides``. Put authentication in front of these routes in
production: whoever may call them may approve the tools.
"""

# No ``from __future__ import annotations`` here: FastAPI reads the routes'
# annotations at run time, and they refer to the router factory's locals.

import json
from collections.abc import Awaitable, Callable, Coroutine
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

try:
    import fastapi  # noqa: F401  (fail here, with a hint, when the extra is missing)
except ImportError as exc:  # pragma: no cover - depends on the environment
    msg = 'toolguard.http needs FastAPI: pip install "toolguard-hitl[http]"'
    raise ImportError(msg) from exc

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request, Response, status
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictStr,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
)

from toolguard._chat import ChatTurn, ReviewedChat
from toolguard._errors import (
    InvalidReviewDecisionError,
    ModelError,
    NoPendingReviewError,
    ReviewerNotAllowedError,
    ReviewPendingError,
    StepLimitError,
    ThreadBusyError,
    UnknownThreadError,
)
from toolguard._json import clean_text
from toolguard._models import Action, PendingReview
from toolguard._store import (
    ConcurrentUpdateError,
    CorruptThreadError,
    ThreadState,
    ThreadStatus,
)
from toolguard._version import __version__

__all__ = [
    "CancelRequest",
    "ChatRequest",
    "ChatResponse",
    "EditedActionBody",
    "ErrorResponse",
    "ReviewDecision",
    "ReviewRequest",
    "ThreadResponse",
    "create_app",
    "create_router",
]

_T = TypeVar("_T")


# --------------------------------------------------------------------------- request bodies


class ChatRequest(BaseModel):
    """The body of ``POST /hitl/chat``."""

    message: str = Field(min_length=1)
    """The user's text."""
    thread_id: str | None = None
    """An existing conversation; leave it out to start a new one."""


class EditedActionBody(BaseModel):
    """The call to run instead of the proposed one (the ``edited_action`` of an edit)."""

    name: StrictStr
    """The tool to run; usually the original tool."""
    args: dict[str, Any]
    """ALL the arguments after the edit, not a diff."""


class ReviewDecision(BaseModel):
    """One decision of ``POST /hitl/review``, checked for shape only.

    The type must be ``approve``, ``edit`` or ``reject``, and an
    ``edited_action`` given with an edit must have a string ``name`` and an
    object ``args`` (else 422). Whether an edit *has* an ``edited_action`` is
    checked afterwards by :func:`~toolguard.validate_decisions` (400), like
    the number of decisions. Fields that do not belong to the decision's type
    are ignored, whatever they hold.
    """

    type: Literal["approve", "edit", "reject"]
    """What to do with the action."""
    edited_action: EditedActionBody | None = None
    """For ``edit`` (required there): the call to run instead."""
    message: str | None = None
    """For ``reject`` (optional): the reason the model reads."""

    @field_validator("edited_action", mode="wrap")
    @classmethod
    def _edited_action_only_for_edit(
        cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> Any:
        return handler(value) if info.data.get("type") == "edit" else None

    @field_validator("message", mode="wrap")
    @classmethod
    def _message_only_for_reject(
        cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> Any:
        return handler(value) if info.data.get("type") == "reject" else None

    def to_wire(self) -> dict[str, Any]:
        """The decision in the wire format, with only the fields its type uses."""
        wire: dict[str, Any] = {"type": self.type}
        if self.edited_action is not None:
            wire["edited_action"] = self.edited_action.model_dump()
        if self.message is not None:
            wire["message"] = self.message
        return wire


class ReviewRequest(BaseModel):
    """The body of ``POST /hitl/review``."""

    thread_id: str
    """The conversation whose review this answers."""
    decisions: list[ReviewDecision] = Field(min_length=1)
    """One decision per action, in the order of ``action_requests``."""
    review_id: str | None = None
    """The review these decisions answer (``review_id`` of the chat answer); recommended,
    so that a late decision never approves a newer request."""


class CancelRequest(BaseModel):
    """The body of ``POST /hitl/cancel``."""

    thread_id: str
    """The conversation whose pending review is cancelled."""
    review_id: str | None = None
    """The review being cancelled; recommended, as for a review."""
    reason: str | None = None
    """Why, for the model and the audit trail."""


# --------------------------------------------------------------------------- responses


class ChatResponse(BaseModel):
    """What ``POST /hitl/chat``, ``/hitl/review`` and ``/hitl/cancel`` answer.

    After a cancel, ``review_id`` names the review that was closed.
    """

    model_config = ConfigDict(frozen=True)

    thread_id: str
    """The conversation's id (new when the chat started one)."""
    reply: str | None
    """The model's final text, or ``null`` while a review is pending."""
    pending_review: PendingReview | None
    """The actions awaiting a decision, or ``null``."""
    review_id: str | None
    """The id of the pending review, or ``null``."""

    @classmethod
    def from_turn(cls, turn: ChatTurn) -> "ChatResponse":
        """The response for one turn of the chat."""
        return cls(
            thread_id=turn.thread_id,
            reply=turn.reply,
            pending_review=turn.pending_review,
            review_id=turn.review_id,
        )


class ThreadResponse(BaseModel):
    """What ``GET /hitl/threads/{thread_id}`` answers: enough to redraw a page."""

    model_config = ConfigDict(frozen=True)

    thread_id: str
    """The conversation's id."""
    status: ThreadStatus
    """``idle``, ``awaiting_review`` or ``running`` (decisions being applied)."""
    messages: list[dict[str, Any]]
    """The stored history, in OpenAI Chat Completions format."""
    pending_review: PendingReview | None
    """The actions awaiting a decision, or ``null``."""
    review_id: str | None
    """The id of the pending review, or ``null``."""
    expires_at: datetime | None
    """When the pending review expires (``null``: no deadline, or nothing pending)."""
    actions: list[Action]
    """Every approval request of the thread with its status, decision and result."""

    @classmethod
    def from_state(cls, state: ThreadState) -> "ThreadResponse":
        """The response for a stored thread."""
        pending = state.pending if state.status == "awaiting_review" else None
        return cls(
            thread_id=state.thread_id,
            status=state.status,
            messages=state.messages,
            pending_review=pending.pending_review if pending is not None else None,
            review_id=pending.review_id if pending is not None else None,
            expires_at=pending.expires_at if pending is not None else None,
            actions=state.actions,
        )


class ErrorResponse(BaseModel):
    """The body of every 400, 403, 404, 409, 500 and 502 answer."""

    detail: str
    """What went wrong; for refused decisions, the error's catalog text."""


# --------------------------------------------------------------------------- errors

_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (InvalidReviewDecisionError, status.HTTP_400_BAD_REQUEST),
    # With its subclasses StaleReviewError and ReviewExpiredError.
    (NoPendingReviewError, status.HTTP_400_BAD_REQUEST),
    (ReviewPendingError, status.HTTP_400_BAD_REQUEST),
    (ReviewerNotAllowedError, status.HTTP_403_FORBIDDEN),
    (UnknownThreadError, status.HTTP_404_NOT_FOUND),
    (ThreadBusyError, status.HTTP_409_CONFLICT),
    (ConcurrentUpdateError, status.HTTP_409_CONFLICT),
    (StepLimitError, status.HTTP_500_INTERNAL_SERVER_ERROR),
    (CorruptThreadError, status.HTTP_500_INTERNAL_SERVER_ERROR),
    (ModelError, status.HTTP_502_BAD_GATEWAY),
)
_HANDLED = tuple(kind for kind, _ in _STATUS)


async def _answer(call: Awaitable[_T]) -> _T:
    """Await ``call``, turning toolguard's errors into HTTP errors with the text in ``detail``."""
    try:
        return await call
    except _HANDLED as exc:
        code = next(code for kind, code in _STATUS if isinstance(exc, kind))
        raise HTTPException(status_code=code, detail=clean_text(str(exc))) from exc


class _AsciiJSONResponse(JSONResponse):
    """JSON with non-ASCII escaped, so even a lone surrogate echoed from a body renders."""

    def render(self, content: Any) -> bytes:
        return json.dumps(
            content, ensure_ascii=True, allow_nan=False, separators=(",", ":")
        ).encode("ascii")


def _invalid_body(reason: str) -> _AsciiJSONResponse:
    error = {"type": "json_invalid", "loc": ["body"], "msg": "JSON decode error", "input": {}}
    return _AsciiJSONResponse(
        status_code=422,
        content={"detail": [{**error, "ctx": {"error": reason}}]},
    )


class _Route(APIRoute):
    """Answers every malformed body with a 422, wherever the router is mounted.

    FastAPI answers a body that is not UTF-8 with a generic 400 and renders
    validation errors with the app's handler, which fails on a lone surrogate
    echoed from the body (a 500). The router keeps both cases in its
    documented contract: 422, with the errors in ``detail``.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def route(request: Request) -> Response:
            body = await request.body()
            try:
                body.decode("utf-8")
            except UnicodeDecodeError:
                return _invalid_body("the body is not valid UTF-8")
            try:
                return await handle(request)
            except RequestValidationError as exc:
                return _AsciiJSONResponse(
                    status_code=422,
                    content={"detail": jsonable_encoder(exc.errors())},
                )

        return route


def _error(description: str) -> dict[str, Any]:
    return {"model": ErrorResponse, "description": description}


# --------------------------------------------------------------------------- router and app


def create_router(
    chat: ReviewedChat,
    *,
    prefix: str = "/hitl",
    reviewer: Callable[..., Any] | None = None,
) -> APIRouter:
    """The chat's routes, to mount into any FastAPI app with ``include_router``.

    Args:
        chat: the chat to serve; its store decides where threads live.
        prefix: the path in front of ``/chat``, ``/review``, ``/cancel`` and
            ``/threads``.
        reviewer: a FastAPI dependency returning who decides (e.g. the
            logged-in user's id, or ``None``). Its value goes to
            ``submit_review``/``cancel_review`` as ``reviewer``, for the
            chat's ``authorize`` hook and its audit trail. To require a login
            on every route, pass ``dependencies=[Depends(...)]`` to
            ``include_router``.

    Returns:
        A router whose routes map toolguard's errors to status codes on their
        own (400, 403, 404, 409, 500, 502), so the app needs no exception
        handler.
    """

    def get_chat() -> ReviewedChat:
        return chat

    def anonymous() -> None:
        return None

    router = APIRouter(prefix=prefix, tags=["toolguard"], route_class=_Route)
    common: dict[int | str, dict[str, Any]] = {
        404: _error("No thread has that id."),
        409: _error("Another request is changing the thread at the same time."),
    }
    runs_model: dict[int | str, dict[str, Any]] = {
        **common,
        500: _error("The model kept calling tools without answering."),
        502: _error("The model call failed."),
    }

    @router.post(
        "/chat",
        response_model=ChatResponse,
        responses={
            400: _error("A review is pending in this thread: send its decisions first."),
            **runs_model,
        },
    )
    async def post_chat(
        body: ChatRequest, reviewed_chat: Annotated[ReviewedChat, Depends(get_chat)]
    ) -> ChatResponse:
        """Send a user message; answers with the reply or the pending review."""
        turn = await _answer(reviewed_chat.send_message(body.message, body.thread_id))
        return ChatResponse.from_turn(turn)

    @router.post(
        "/review",
        response_model=ChatResponse,
        responses={
            400: _error(
                "Nothing is pending, the review is no longer current or has expired,"
                " or the decisions do not answer the review."
            ),
            403: _error("This reviewer may not decide in this thread."),
            **runs_model,
        },
    )
    async def post_review(
        body: ReviewRequest,
        reviewed_chat: Annotated[ReviewedChat, Depends(get_chat)],
        who: Annotated[str | None, Depends(reviewer or anonymous)],
    ) -> ChatResponse:
        """Answer the pending review; answers with the reply or the next pending review."""
        decisions = [decision.to_wire() for decision in body.decisions]
        turn = await _answer(
            reviewed_chat.submit_review(
                decisions, body.thread_id, review_id=body.review_id, reviewer=who
            )
        )
        return ChatResponse.from_turn(turn)

    @router.post(
        "/cancel",
        response_model=ChatResponse,
        responses={
            400: _error("Nothing is pending, or the review is no longer current."),
            403: _error("This reviewer may not decide in this thread."),
            **common,
        },
    )
    async def post_cancel(
        body: CancelRequest,
        reviewed_chat: Annotated[ReviewedChat, Depends(get_chat)],
        who: Annotated[str | None, Depends(reviewer or anonymous)],
    ) -> ChatResponse:
        """Cancel the pending review: nothing runs; the thread can go on with a new message."""
        turn = await _answer(
            reviewed_chat.cancel_review(
                body.thread_id, review_id=body.review_id, reviewer=who, reason=body.reason
            )
        )
        return ChatResponse.from_turn(turn)

    @router.get(
        "/threads/{thread_id}",
        response_model=ThreadResponse,
        responses={404: _error("No thread has that id.")},
    )
    async def get_thread(
        thread_id: str, reviewed_chat: Annotated[ReviewedChat, Depends(get_chat)]
    ) -> ThreadResponse:
        """The stored history, the pending review and the status of every action."""
        state = await _answer(reviewed_chat.get_thread(thread_id))
        return ThreadResponse.from_state(state)

    @router.get(
        "/threads/{thread_id}/audit",
        response_class=PlainTextResponse,
        responses={
            200: {
                "content": {"application/x-ndjson": {}},
                "description": "One audit event per line (JSON), oldest first.",
            },
            404: _error("No thread has that id."),
        },
    )
    async def get_audit(
        thread_id: str, reviewed_chat: Annotated[ReviewedChat, Depends(get_chat)]
    ) -> PlainTextResponse:
        """The thread's audit trail as JSON lines: requests, decisions (who, how) and outcomes."""
        text = await _answer(reviewed_chat.export_audit([thread_id]))
        return PlainTextResponse(text, media_type="application/x-ndjson")

    return router


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
) -> FastAPI:
    """A FastAPI app serving ``chat`` under ``/hitl`` and, optionally, the approval page.

    Args:
        chat: the chat to serve (also available as ``app.state.chat``).
        page: serve the approval page: ``index.html`` at ``/`` and its files
            under ``/static/``. Without the page files in the package, ``/``
            answers 404.
        title: the app's title in the OpenAPI docs (``/docs``).
        reviewer: a dependency returning who decides (see :func:`create_router`).

    Returns:
        An ASGI app, e.g. for ``uvicorn``.
    """
    app = FastAPI(title=title, version=__version__)
    app.state.chat = chat
    app.include_router(create_router(chat, reviewer=reviewer))
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
