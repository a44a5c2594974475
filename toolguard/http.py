"""Serve a :class:`~toolguard.ReviewedChat` over HTTP with FastAPI.

Install the ``http`` extra (``pip install "toolguard-hitl[http]"``). This
module imports ``fastapi``; ``import toolguard`` never imports it.

Eight routes, under ``/hitl`` by default:

* ``POST /hitl/chat`` ``{message, thread_id?}`` sends a user message;
* ``POST /hitl/review`` ``{thread_id, decisions, review_id?}`` answers the
  pending review (send the ``review_id`` you were shown: a decision for an
  older review then never approves a newer one);
* ``POST /hitl/cancel`` ``{thread_id, review_id?, reason?}`` cancels it;
* ``GET /hitl/threads/{thread_id}`` returns the stored history, the pending
  review and every action's status, so a page can reload;
* ``GET /hitl/threads/{thread_id}/audit`` returns the audit trail as JSON lines;
* ``GET /hitl/tools`` lists the chat's tools with their JSON schemas;
* ``GET /hitl/reviews`` lists every pending review, oldest thread first;
* ``GET /hitl/events`` streams server-sent events as reviews arrive and
  threads change (the approval page's live list).

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

The routes defend themselves, whatever FastAPI version runs them: a
``POST`` from a page of another origin is a 403, a body that is not
``application/json`` a 415, one over ``max_body_bytes`` (1 MiB) a 413
before it is read, hostile JSON (nested over 64 levels, ``NaN``, duplicate
keys) a 422 before it is parsed; error answers echo only a short prefix of
the input; every answer carries a strict Content-Security-Policy and the
other security headers. The chat's ``access`` hook guards reads and
messages (403). :func:`create_app` can also check the ``Host`` header
(``allowed_hosts``, 421) against DNS rebinding. See docs/http.md.

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
production: whoever may call them may approve the tools (the ``reviewer``
dependency's value, as text, is the actor of the ``authorize`` and
``access`` hooks).
"""

# No ``from __future__ import annotations`` here: FastAPI reads the routes'
# annotations at run time, and they refer to the router factory's locals.

import inspect
import json
import logging
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Sequence
from datetime import datetime, timezone
from importlib import resources
from itertools import accumulate
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import urlsplit
from uuid import UUID

import anyio

try:
    import fastapi  # noqa: F401  (fail here, with a hint, when the extra is missing)
except ImportError as exc:  # pragma: no cover - depends on the environment
    msg = 'toolguard.http needs FastAPI: pip install "toolguard-hitl[http]"'
    raise ImportError(msg) from exc

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request, Response, status
from fastapi import Path as PathParam
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, StreamingResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictStr,
    TypeAdapter,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
)
from pydantic_core import PydanticCustomError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolguard._chat.access import reviewer_id
from toolguard._chat.chat import ReviewedChat
from toolguard._chat.turns import ChatTurn
from toolguard._core.audit import to_jsonl
from toolguard._core.catalog import message
from toolguard._core.errors import (
    AccessDeniedError,
    ConcurrentUpdateError,
    CorruptThreadError,
    InvalidReviewDecisionError,
    ModelError,
    NoPendingReviewError,
    ReviewerNotAllowedError,
    ReviewPendingError,
    StepLimitError,
    ThreadBusyError,
    UnknownGrantError,
    UnknownThreadError,
)
from toolguard._core.jsonable import clean_text
from toolguard._core.records import Action, PendingReview
from toolguard._core.standing import GrantStatus, StandingGrant
from toolguard._policy.redact import shown_messages
from toolguard._stores.memory import ThreadState, ThreadStatus
from toolguard._version import __version__

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "DEFAULT_MAX_BODY_BYTES",
    "MAX_BODY_DEPTH",
    "CancelRequest",
    "ChatRequest",
    "ChatResponse",
    "EditedActionBody",
    "ErrorResponse",
    "GrantResponse",
    "ReviewDecision",
    "ReviewRequest",
    "ThreadResponse",
    "create_app",
    "create_router",
    "pending_reviews",
]

_T = TypeVar("_T")
_log = logging.getLogger(__name__)

DEFAULT_MAX_BODY_BYTES = 1024 * 1024
"""The largest request body the routes read (1 MiB); larger ones get a 413."""

MAX_BODY_DEPTH = 64
"""The deepest nesting of arrays and objects a request body may have; deeper ones get a 422."""

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self';"
    " img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""The Content-Security-Policy of every response: no inline script or style, nothing from
other sites, no framing."""

_DOCS_POLICY = (
    "default-src 'none'; script-src 'unsafe-inline' https://cdn.jsdelivr.net;"
    " style-src 'unsafe-inline' https://cdn.jsdelivr.net; img-src 'self' data: https:;"
    " font-src https:; worker-src blob:; connect-src 'self'; base-uri 'none';"
    " form-action 'none'; frame-ancestors 'none'"
)
"""For FastAPI's /docs and /redoc pages only: they load Swagger UI / ReDoc from a CDN."""

_HEADERS: dict[str, str] = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-store",
}
_HEADER_NAMES = frozenset(name.lower().encode("latin-1") for name in _HEADERS)

_ECHO_LIMIT = 100
"""A 422 echoes at most this many characters of the offending input."""
_MAX_ERRORS = 20
"""A 422 lists at most this many validation errors (then how many more there were)."""
_DETAIL_LIMIT = 500
"""An error's ``detail`` text is cut to this many characters."""
_ID_MAX_LENGTH = 128
"""The longest thread or review id a body or path may carry (ids toolguard makes have 32)."""
_MAX_INT_DIGITS = 4300
"""The most digits an integer in a body may have (Python's own default limit)."""


def _short_id(value: str) -> str:
    # Not Field(max_length=...): pydantic's length constraint refuses lone surrogates.
    if len(value) > _ID_MAX_LENGTH:
        kind, text = "string_too_long", "String should have at most {max_length} characters"
        raise PydanticCustomError(kind, text, {"max_length": _ID_MAX_LENGTH})
    return value


_Id = Annotated[str, AfterValidator(_short_id)]
"""A thread or review id: text of at most 128 characters."""


# --------------------------------------------------------------------------- request bodies


class ChatRequest(BaseModel):
    """The body of ``POST /hitl/chat``."""

    message: str = Field(min_length=1)
    """The user's text."""
    thread_id: _Id | None = None
    """An existing conversation; leave it out to start a new one."""


class EditedActionBody(BaseModel):
    """The call to run instead of the proposed one (the ``edited_action`` of an edit)."""

    name: StrictStr
    """The tool to run; usually the original tool."""
    args: dict[str, Any]
    """ALL the arguments after the edit, not a diff."""


class ReviewDecision(BaseModel):
    """One decision of ``POST /hitl/review``, checked for shape only.

    The type must be ``approve``, ``edit``, ``reject`` or ``respond``, and an
    ``edited_action`` given with an edit must have a string ``name`` and an
    object ``args`` (else 422). Whether an edit *has* an ``edited_action`` is
    checked afterwards by :func:`~toolguard.validate_decisions` (400), like
    the number of decisions. Fields that do not belong to the decision's type
    are ignored, whatever they hold.
    """

    type: Literal["approve", "edit", "reject", "respond"]
    """What to do with the action (``respond`` only where the review config allows it)."""
    edited_action: EditedActionBody | None = None
    """For ``edit`` (required there): the call to run instead."""
    message: str | None = None
    """For ``reject`` (optional): the reason the model reads; for ``respond``
    (required): the answer the model reads as the tool's result."""
    grant: dict[str, Any] | None = None
    """For ``approve`` (optional): a standing grant, e.g. ``{"scope": "thread",
    "match": "tool", "uses": 5, "ttl": 3600}``. Its fields, and a grant on any
    other type, are checked by :func:`~toolguard.validate_decisions` (400)."""

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
        return handler(value) if info.data.get("type") in ("reject", "respond") else None

    def to_wire(self) -> dict[str, Any]:
        """The decision in the wire format, with only the fields its type uses."""
        wire: dict[str, Any] = {"type": self.type}
        if self.edited_action is not None:
            # Lone surrogates (JSON text may escape them) become U+FFFD, in keys too.
            wire["edited_action"] = clean_text(self.edited_action.model_dump())
        if self.message is not None:
            wire["message"] = self.message
        if self.grant is not None:
            wire["grant"] = self.grant
        return wire


class ReviewRequest(BaseModel):
    """The body of ``POST /hitl/review``."""

    thread_id: _Id
    """The conversation whose review this answers."""
    decisions: list[ReviewDecision] = Field(min_length=1)
    """One decision per action, in the order of ``action_requests``."""
    review_id: _Id | None = None
    """The review these decisions answer (``review_id`` of the chat answer); recommended,
    so that a late decision never approves a newer request."""


class CancelRequest(BaseModel):
    """The body of ``POST /hitl/cancel``."""

    thread_id: _Id
    """The conversation whose pending review is cancelled."""
    review_id: _Id | None = None
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
    grants: list["GrantResponse"] = Field(default_factory=list)
    """The thread's standing grants, active or ended, oldest first, with their status."""

    @classmethod
    def from_state(
        cls,
        state: ThreadState,
        now: datetime | None = None,
        *,
        messages: list[dict[str, Any]] | None = None,
    ) -> "ThreadResponse":
        """The response for a stored thread (grant statuses at ``now``; default: the UTC time).

        ``messages``: the history to show instead of the stored one (secrets redacted).
        """
        pending = state.pending if state.status == "awaiting_review" else None
        moment = now if now is not None else datetime.now(timezone.utc)
        return cls(
            grants=[GrantResponse.from_grant(g, moment) for g in state.grants],
            thread_id=state.thread_id,
            status=state.status,
            messages=state.messages if messages is None else messages,
            pending_review=pending.pending_review if pending is not None else None,
            review_id=pending.review_id if pending is not None else None,
            expires_at=pending.expires_at if pending is not None else None,
            actions=state.actions,
        )


class GrantResponse(StandingGrant):
    """A standing grant as the thread's JSON lists it, with its status now."""

    status: GrantStatus
    """``active``, ``used_up``, ``expired`` or ``revoked``."""

    @classmethod
    def from_grant(cls, grant: StandingGrant, now: datetime) -> "GrantResponse":
        """The grant with its status at ``now``."""
        return cls(**dict(grant), status=grant.status_at(now))


ThreadResponse.model_rebuild()


class ErrorResponse(BaseModel):
    """The body of every 400, 403, 404, 409, 413, 415, 421, 500 and 502 answer."""

    detail: str
    """What went wrong; for refused decisions, the error's catalog text."""


# --------------------------------------------------------------------------- errors

_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (InvalidReviewDecisionError, status.HTTP_400_BAD_REQUEST),
    # With its subclasses StaleReviewError and ReviewExpiredError.
    (NoPendingReviewError, status.HTTP_400_BAD_REQUEST),
    (ReviewPendingError, status.HTTP_400_BAD_REQUEST),
    (ReviewerNotAllowedError, status.HTTP_403_FORBIDDEN),
    (AccessDeniedError, status.HTTP_403_FORBIDDEN),
    (UnknownThreadError, status.HTTP_404_NOT_FOUND),
    (UnknownGrantError, status.HTTP_404_NOT_FOUND),
    (ThreadBusyError, status.HTTP_409_CONFLICT),
    (ConcurrentUpdateError, status.HTTP_409_CONFLICT),
    (StepLimitError, status.HTTP_500_INTERNAL_SERVER_ERROR),
    (CorruptThreadError, status.HTTP_500_INTERNAL_SERVER_ERROR),
    (ModelError, status.HTTP_502_BAD_GATEWAY),
)
_HANDLED = tuple(kind for kind, _ in _STATUS)


class _Refusal(HTTPException):
    """An error answer the router renders itself, with the security headers."""


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "\u2026"


async def _answer(call: Awaitable[_T], prefix: str = "/hitl") -> _T:
    """Await ``call``, turning toolguard's errors into HTTP errors with the text in ``detail``."""
    try:
        return await call
    except _HANDLED as exc:
        code = next(code for kind, code in _STATUS if isinstance(exc, kind))
        detail = _shorten(clean_text(_http_text(exc, prefix)), _DETAIL_LIMIT)
        raise _Refusal(status_code=code, detail=detail) from exc


def _http_text(exc: Exception, prefix: str) -> str:
    """The error's text for an HTTP client: routes instead of Python methods."""
    if isinstance(exc, UnknownThreadError):
        return message("unknown_thread_http", thread_id=exc.thread_id, route=f"POST {prefix}/chat")
    if isinstance(exc, ThreadBusyError):
        return message("thread_busy_http", thread_id=exc.thread_id)
    return str(exc)


class _AsciiJSONResponse(JSONResponse):
    """JSON with non-ASCII escaped, so even a lone surrogate echoed from a body renders."""

    def render(self, content: Any) -> bytes:
        return json.dumps(
            content, ensure_ascii=True, allow_nan=False, separators=(",", ":")
        ).encode("ascii")


def _reply(code: int, detail: Any) -> _AsciiJSONResponse:
    return _AsciiJSONResponse(status_code=code, content={"detail": detail}, headers=_HEADERS)


def _invalid_body(reason: str) -> _AsciiJSONResponse:
    error = {"type": "json_invalid", "loc": ["body"], "msg": "JSON decode error", "input": {}}
    return _reply(422, [{**error, "ctx": {"error": reason}}])


def _echo(value: Any) -> Any:
    """``value`` if its JSON text is short, else the first characters of that text and ``…``."""
    if isinstance(value, str):
        return _shorten(value, _ECHO_LIMIT)
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return value if len(text) <= _ECHO_LIMIT else _shorten(text, _ECHO_LIMIT)


def _trimmed(errors: Sequence[Any]) -> list[Any]:
    """The first validation errors, whose ``input``, ``loc`` and ``ctx`` echo a short prefix."""
    result = []
    for error in errors[:_MAX_ERRORS]:
        item = dict(error)
        if "input" in item:
            item["input"] = _echo(item["input"])
        if "loc" in item:
            item["loc"] = [_echo(part) for part in item["loc"]]
        if isinstance(item.get("ctx"), dict):
            item["ctx"] = {
                key: _echo(v if isinstance(v, (str, int, float)) else str(v))
                for key, v in item["ctx"].items()
            }
        result.append(item)
    if len(errors) > _MAX_ERRORS:
        more = len(errors) - _MAX_ERRORS
        result.append(
            {"type": "too_many_errors", "loc": ["body"], "msg": f"{more} more errors not shown"}
        )
    encoded: list[Any] = jsonable_encoder(result)
    return encoded


# --------------------------------------------------------------------------- hostile bodies


class _BodyProblemError(ValueError):
    """Why a body that Python's ``json`` would read is still refused (422)."""


_ESCAPE = re.compile(r"\\.", re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _nesting(text: str) -> int:
    """How deeply arrays and objects nest in JSON ``text`` (linear, no recursion)."""
    outside_strings = _ESCAPE.sub("", text).split('"')[::2]
    brackets = _NOT_BRACKET.sub("", "".join(outside_strings))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _no_constant(name: str) -> Any:
    msg = f"{name} is not a JSON number"
    raise _BodyProblemError(msg)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        msg = "a number is too large for a float"
        raise _BodyProblemError(msg)
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_INT_DIGITS:
        msg = f"an integer has more than {_MAX_INT_DIGITS} digits"
        raise _BodyProblemError(msg)
    return int(text)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            msg = f"duplicate key {_shorten(key, _ECHO_LIMIT)!r} in an object"
            raise _BodyProblemError(msg)
        result[key] = value
    return result


def _body_problem(body: bytes) -> str | None:
    """Why ``body`` is refused before FastAPI reads it, or ``None`` (FastAPI's own checks follow).

    Not UTF-8, nested deeper than :data:`MAX_BODY_DEPTH`, ``NaN`` or
    ``Infinity`` (not JSON), a number beyond a float or with more than 4300
    digits, or an object with a duplicate key. JSON syntax errors are left to
    FastAPI, which answers them with its ``json_invalid`` 422.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return "the body is not valid UTF-8"
    # Starlette's parser skips a byte order mark; check the same text it will read.
    text = text.removeprefix("\ufeff")
    if _nesting(text) > MAX_BODY_DEPTH:
        return f"the JSON is nested more than {MAX_BODY_DEPTH} levels deep"
    try:
        json.loads(
            text,
            parse_constant=_no_constant,
            parse_float=_finite,
            parse_int=_bounded_int,
            object_pairs_hook=_unique_keys,
        )
    except _BodyProblemError as exc:
        return str(exc)
    except json.JSONDecodeError:
        return None
    except (ValueError, RecursionError):  # pragma: no cover - the checks above come first
        return "the JSON cannot be read"
    return None


# --------------------------------------------------------------------------- cross-site requests

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
_Origin = tuple[str, str, int]


def _parse_origin(text: str) -> _Origin | None:
    """``(scheme, host, port)`` of ``scheme://host[:port]``, or ``None`` if it is not one."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), parts.hostname
    if scheme not in _DEFAULT_PORTS or not host or parts.path not in ("", "/"):
        return None
    if parts.query or parts.fragment or parts.username is not None:
        return None
    host = f"[{host}]" if ":" in host else host
    return scheme, host.lower(), port if port is not None else _DEFAULT_PORTS[scheme]


def _split_host(text: str) -> tuple[str, int | None] | None:
    """``host`` and ``port`` of a Host header or an allow-list entry (``None``: malformed)."""
    text = text.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        host, rest = text[: end + 1], text[end + 1 :]
        if end < 0 or (rest and not rest.startswith(":")):
            return None
        port_text = rest[1:] if rest else None
    else:
        host, colon, port_text_or_empty = text.partition(":")
        port_text = port_text_or_empty if colon else None
    if not host:
        return None
    if port_text is None:
        return host, None
    if not port_text.isdigit() or not port_text.isascii() or int(port_text) > 65535:
        return None
    return host, int(port_text)


def _own_origin(request: Request) -> _Origin | None:
    """The origin the request was made to: its scheme and its Host header."""
    scheme = request.url.scheme.lower()
    host_header = request.headers.get("host")
    if host_header is None or scheme not in _DEFAULT_PORTS:
        return None
    split = _split_host(host_header)
    if split is None:
        return None
    host, port = split
    return scheme, host, port if port is not None else _DEFAULT_PORTS[scheme]


def _origins(allowed: Iterable[str]) -> frozenset[_Origin]:
    if isinstance(allowed, str):
        msg = f"allowed_origins must be a list of origins, not one string: [{allowed!r}]"
        raise TypeError(msg)
    parsed = set()
    for entry in allowed:
        item: object = entry  # checked at run time for untyped callers
        if not isinstance(item, str):
            msg = f"allowed_origins entries must be text, got {type(item).__name__}"
            raise TypeError(msg)
        origin = _parse_origin(entry)
        if origin is None:
            msg = (
                f"allowed_origins: {entry!r} is not an origin; write scheme://host[:port],"
                " e.g. 'https://admin.example.com' (no path; 'null' is never allowed)"
            )
            raise ValueError(msg)
        parsed.add(origin)
    return frozenset(parsed)


class _Guard:
    """What a router refuses before it reads a body: cross-site requests, non-JSON, too large."""

    def __init__(self, max_body_bytes: int, allowed_origins: Iterable[str]) -> None:
        if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int):
            msg = f"max_body_bytes must be an int (bytes), got {type(max_body_bytes).__name__}"
            raise TypeError(msg)
        if max_body_bytes < 1:
            msg = f"max_body_bytes must be at least 1, got {max_body_bytes}"
            raise ValueError(msg)
        self.max_body_bytes = max_body_bytes
        self.allowed_origins = _origins(allowed_origins)

    def cross_site(self, request: Request) -> bool:
        """Whether a state-changing request comes from a page of another origin."""
        origins = request.headers.getlist("origin")
        site = request.headers.get("sec-fetch-site")
        if len(origins) > 1:
            return True
        if origins:
            origin = _parse_origin(origins[0])
            if origin is None:  # "null" (sandboxed pages, redirects) and anything malformed
                return True
            if origin in self.allowed_origins:
                return False
            if origin != _own_origin(request):
                return True
        return site is not None and site.strip().lower() not in ("same-origin", "none")

    def refusal(self, request: Request, *, reads_body: bool) -> Response | None:
        """The 403, 415 or 413 for ``request``, or ``None`` when it may go on."""
        if request.method not in _SAFE_METHODS and self.cross_site(request):
            return _reply(
                403,
                "Cross-site request refused: state-changing requests must come from this"
                " server's own pages, from clients that send no Origin header, or from an"
                " origin allowed with allowed_origins (--allow-origin of toolguard serve or"
                " mcp-proxy).",
            )
        if not reads_body:
            return None
        media_type, _, params = request.headers.get("content-type", "").partition(";")
        charset = params.strip().lower().replace(" ", "")
        if media_type.strip().lower() != "application/json" or charset not in (
            "",
            "charset=utf-8",
            'charset="utf-8"',
        ):
            return _reply(
                415,
                "The request body must be JSON: send Content-Type: application/json (UTF-8).",
            )
        return self.declared_too_large(request)

    def declared_too_large(self, request: Request) -> Response | None:
        """The 413 for a ``Content-Length`` over the limit, or ``None``."""
        declared = request.headers.get("content-length", "").strip()
        if declared.isdigit() and declared.isascii() and int(declared) > self.max_body_bytes:
            return self.too_large()
        return None

    def too_large(self) -> Response:
        return _reply(413, f"The request body is larger than {self.max_body_bytes} bytes.")

    async def read(self, request: Request) -> bytes | None:
        """The body, read chunk by chunk; ``None`` as soon as it passes the limit."""
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > self.max_body_bytes:
                return None
            chunks.append(chunk)
        return b"".join(chunks)


def _replay(request: Request, body: bytes) -> Request:
    """A request whose body is ``body`` (already read); later receives go to the client."""
    delivered = False
    original = request.receive

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await original()

    return Request(request.scope, receive)


def _route_class(guard: _Guard) -> type[APIRoute]:
    class _Route(APIRoute):
        """Checks a request before FastAPI reads it, and renders every answer of the route.

        Refuses cross-site writes (403), bodies that are not JSON (415) or too
        large (413), and hostile JSON (422) before anything is parsed;
        renders validation errors with a short echo of the input (FastAPI's
        handler would echo it whole, and fails on a lone surrogate) and
        toolguard's errors itself, so the router keeps its documented
        contract wherever it is mounted; adds the security headers.
        """

        def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
            handle = super().get_route_handler()
            reads_body = self.body_field is not None

            async def route(request: Request) -> Response:
                refused = guard.refusal(request, reads_body=reads_body)
                if refused is not None:
                    return refused
                if reads_body:
                    body = await guard.read(request)
                    if body is None:
                        return guard.too_large()
                    problem = _body_problem(body) if body else None
                    if problem is not None:
                        return _invalid_body(problem)
                    request = _replay(request, body)
                try:
                    response = await handle(request)
                except RequestValidationError as exc:
                    return _reply(422, _trimmed(exc.errors()))
                except _Refusal as exc:
                    return _reply(exc.status_code, exc.detail)
                except HTTPException as exc:  # the app's own dependencies (e.g. a login)
                    exc.headers = {**_HEADERS, **(exc.headers or {})}
                    raise
                for name, value in _HEADERS.items():
                    response.headers[name] = value
                return response

            return route

    return _Route


def _error(description: str) -> dict[str, Any]:
    return {"model": ErrorResponse, "description": description}


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
    raise _Refusal(
        status_code=status.HTTP_500_INTERNAL_SERVER_ERROR,
        detail=(
            "Server misconfigured: the reviewer dependency must return a str, an int, a UUID or"
            f" None, not a {_shorten(type(value).__name__, _ECHO_LIMIT)}."
        ),
    )


def _reviewer_dependency(reviewer: Callable[..., Any] | None) -> Callable[..., Any]:
    """A dependency that runs ``reviewer`` and gives its value as text (or ``None``)."""

    # Dependencies are async: FastAPI runs a plain ``def`` dependency in a worker thread,
    # a thread hop per request for nothing (benchmarks/bench_http.py).
    async def anonymous() -> None:
        return None

    source = reviewer or anonymous

    async def identity(value: Annotated[Any, Depends(source)]) -> str | None:
        return _reviewer_text(value)

    return identity


# --------------------------------------------------------------------------- pending reviews, live

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


class _Streams:
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


def _pending_of(states: Iterable[ThreadState], *, times: bool = False) -> list[dict[str, Any]]:
    """``[{thread_id, review_id, pending_review}, ...]`` of the threads awaiting a review.

    With ``times``, each item also has ``requested_at`` (the earliest request
    of the review) and ``expires_at`` (its deadline or ``None``), ISO 8601.
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
        reviews.append(item)
    return reviews


async def pending_reviews(chat: ReviewedChat, actor: str | None = None) -> list[dict[str, Any]]:
    """The pending reviews of every thread ``actor`` may read, oldest thread first.

    The body of ``GET /hitl/reviews``: each item is ``{"thread_id",
    "review_id", "pending_review"}``. A thread the chat's ``access`` hook
    does not let ``actor`` read (operation ``"read"``) is left out, and so is
    a thread that cannot be read back (``CorruptThreadError``, logged). A
    store without ``thread_ids()`` lists nothing.

    Raises:
        TypeError: ``chat`` is not a ``ReviewedChat``, or ``actor`` is not
            text, an ``int``, a ``UUID`` or ``None``.
    """
    served: object = chat  # checked at run time for untyped callers
    if not isinstance(served, ReviewedChat):
        msg = f"chat must be a toolguard.ReviewedChat, got {type(served).__name__}"
        raise TypeError(msg)
    return _pending_of(await _readable_threads(chat, reviewer_id(actor, "actor")))


def _sse(event: str, data: Any) -> bytes:
    """One server-sent event: ``event:`` and one ``data:`` line of ASCII JSON."""
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"))
    return f"event: {event}\ndata: {text}\n\n".encode("ascii")


def _shutting_down(request: Request) -> bool:
    """Whether the server (uvicorn) asked this connection to finish: a graceful shutdown."""
    cycle = getattr(request.receive, "__self__", None)
    return getattr(cycle, "keep_alive", True) is False


async def _live_events(
    chat: ReviewedChat, actor: str | None, request: Request, streams: _Streams
) -> AsyncIterator[bytes]:
    """The ``GET /hitl/events`` stream, counted in ``streams`` while it runs."""
    streams.open += 1
    try:
        async for chunk in _events(chat, actor, request):
            yield chunk
    finally:
        streams.open -= 1


async def _events(chat: ReviewedChat, actor: str | None, request: Request) -> AsyncIterator[bytes]:
    """The ``GET /hitl/events`` stream: ``reviews`` and ``thread`` events as the store changes."""
    started = anyio.current_time()
    stopping_already = _shutting_down(request)  # e.g. "Connection: close" from the start
    yield f"retry: {_EVENTS_RETRY_MS}\n\n".encode("ascii")
    shown: list[dict[str, Any]] | None = None
    versions: dict[str, tuple[ThreadStatus, int]] | None = None
    quiet_since = anyio.current_time()
    while True:
        states = await _readable_threads(chat, actor)
        reviews = _pending_of(states, times=True)
        now_versions = {s.thread_id: (s.status, s.version) for s in states}
        if versions is not None:
            for state in states:
                if versions.get(state.thread_id) != now_versions[state.thread_id]:
                    quiet_since = anyio.current_time()
                    yield _sse(
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
            yield _sse("reviews", {"reviews": reviews})
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


# --------------------------------------------------------------------------- router and app


def create_router(
    chat: ReviewedChat,
    *,
    prefix: str = "/hitl",
    reviewer: Callable[..., Any] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    allowed_origins: Iterable[str] = (),
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

    Returns:
        A router whose routes map toolguard's errors to status codes on their
        own (400, 403, 404, 409, 500, 502), refuse cross-site writes (403),
        bodies that are not JSON (415), too large (413) or hostile (422), and
        send the security headers, so the app needs no exception handler.

    Raises:
        TypeError, ValueError: ``max_body_bytes`` or ``allowed_origins`` is invalid.
    """
    _check_chat(chat)
    return _routes(chat, _Guard(max_body_bytes, allowed_origins), prefix=prefix, reviewer=reviewer)


def _check_chat(chat: object) -> None:
    if not isinstance(chat, ReviewedChat):
        msg = f"chat must be a toolguard.ReviewedChat, got {type(chat).__name__}"
        raise TypeError(msg)


def _routes(
    chat: ReviewedChat,
    guard: "_Guard",
    *,
    prefix: str = "/hitl",
    reviewer: Callable[..., Any] | None = None,
) -> APIRouter:
    """The routes of :func:`create_router`, refusing what ``guard`` refuses."""

    async def get_chat() -> ReviewedChat:
        return chat

    who_asks = _reviewer_dependency(reviewer)
    router = APIRouter(prefix=prefix, tags=["toolguard"], route_class=_route_class(guard))
    refused: dict[int | str, dict[str, Any]] = {
        403: _error("A cross-site request, or the chat's access hook refused the caller."),
        413: _error("The body is larger than the limit."),
        415: _error("The body is not JSON (Content-Type: application/json)."),
    }
    common: dict[int | str, dict[str, Any]] = {
        **refused,
        404: _error("No thread has that id."),
        409: _error("Another request is changing the thread at the same time."),
    }
    runs_model: dict[int | str, dict[str, Any]] = {
        **common,
        500: _error("The model kept calling tools without answering."),
        502: _error("The model call failed."),
    }
    thread_path = Annotated[_Id, PathParam()]

    @router.post(
        "/chat",
        response_model=ChatResponse,
        responses={
            400: _error("A review is pending in this thread: send its decisions first."),
            **runs_model,
        },
    )
    async def post_chat(
        body: ChatRequest,
        reviewed_chat: Annotated[ReviewedChat, Depends(get_chat)],
        who: Annotated[str | None, Depends(who_asks)],
    ) -> ChatResponse:
        """Send a user message; answers with the reply or the pending review."""
        turn = await _answer(
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
            **runs_model,
            403: _error("A cross-site request, or this reviewer may not decide in this thread."),
        },
    )
    async def post_review(
        body: ReviewRequest,
        reviewed_chat: Annotated[ReviewedChat, Depends(get_chat)],
        who: Annotated[str | None, Depends(who_asks)],
    ) -> ChatResponse:
        """Answer the pending review; answers with the reply or the next pending review."""
        decisions = [decision.to_wire() for decision in body.decisions]
        turn = await _answer(
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
            **common,
            403: _error("A cross-site request, or this reviewer may not decide in this thread."),
        },
    )
    async def post_cancel(
        body: CancelRequest,
        reviewed_chat: Annotated[ReviewedChat, Depends(get_chat)],
        who: Annotated[str | None, Depends(who_asks)],
    ) -> ChatResponse:
        """Cancel the pending review: nothing runs; the thread can go on with a new message."""
        turn = await _answer(
            reviewed_chat.cancel_review(
                body.thread_id, review_id=body.review_id, reviewer=who, reason=body.reason
            ),
            prefix,
        )
        return ChatResponse.from_turn(turn)

    @router.get(
        "/threads/{thread_id}",
        response_model=ThreadResponse,
        responses={
            403: _error("The chat's access hook refused the caller."),
            404: _error("No thread has that id."),
        },
    )
    async def get_thread(
        thread_id: thread_path,
        reviewed_chat: Annotated[ReviewedChat, Depends(get_chat)],
        who: Annotated[str | None, Depends(who_asks)],
    ) -> ThreadResponse:
        """The stored history, the pending review and the status of every action."""
        state = await _answer(reviewed_chat.get_thread(thread_id, actor=who), prefix)
        # The stored history holds the real values of redacted arguments: not shown here.
        shown = shown_messages(reviewed_chat, state.messages)
        return ThreadResponse.from_state(state, reviewed_chat.clock(), messages=shown)

    @router.delete(
        "/threads/{thread_id}/grants/{grant_id}",
        response_model=GrantResponse,
        responses={
            **common,
            403: _error("A cross-site request, or this reviewer may not decide in this thread."),
            404: _error("No thread has that id, or it has no active grant with that id."),
        },
    )
    async def delete_grant(
        thread_id: thread_path,
        grant_id: Annotated[_Id, PathParam()],
        reviewed_chat: Annotated[ReviewedChat, Depends(get_chat)],
        who: Annotated[str | None, Depends(who_asks)],
    ) -> GrantResponse:
        """Revoke a standing grant: later matching calls are reviewed again."""
        grant = await _answer(reviewed_chat.revoke_grant(thread_id, grant_id, reviewer=who), prefix)
        return GrantResponse.from_grant(grant, reviewed_chat.clock())

    @router.get(
        "/threads/{thread_id}/audit",
        response_class=PlainTextResponse,
        responses={
            200: {
                "content": {"application/x-ndjson": {}},
                "description": "One audit event per line (JSON), oldest first.",
            },
            403: _error("The chat's access hook refused the caller."),
            404: _error("No thread has that id."),
        },
    )
    async def get_audit(
        thread_id: thread_path,
        reviewed_chat: Annotated[ReviewedChat, Depends(get_chat)],
        who: Annotated[str | None, Depends(who_asks)],
    ) -> PlainTextResponse:
        """The thread's audit trail as JSON lines: requests, decisions (who, how) and outcomes."""
        events = await _answer(reviewed_chat.audit_trail(thread_id, actor=who), prefix)
        return PlainTextResponse(to_jsonl(events), media_type="application/x-ndjson")

    @router.get("/tools")
    async def get_tools(
        reviewed_chat: Annotated[ReviewedChat, Depends(get_chat)],
    ) -> dict[str, list[dict[str, Any]]]:
        """The chat's tools: ``{"tools": [{"name", "description", "parameters", "approval"}]}``.

        ``parameters`` is each tool's JSON Schema, so a page can check an edit
        before sending it (the server validates it again). ``approval`` says
        whether the tool needs approval and why:
        ``{"needs_approval": true, "rule": "verb", "reason": "the word 'send' is ..."}``
        (see :class:`toolguard.Classification`).
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
        return {"reviews": await pending_reviews(reviewed_chat, who)}

    streams = _Streams()

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
        if streams.open >= _EVENTS_MAX_STREAMS:
            return _reply(
                status.HTTP_503_SERVICE_UNAVAILABLE,
                f"Too many live streams are open ({_EVENTS_MAX_STREAMS}): close other pages,"
                " or poll GET /hitl/reviews instead.",
            )
        return StreamingResponse(
            _live_events(reviewed_chat, who, request, streams),
            media_type="text/event-stream",
            headers={"X-Accel-Buffering": "no"},
        )

    return router


def _page_dir() -> Path | None:
    """The folder of the approval page shipped in the package, if it is on disk."""
    folder = resources.files("toolguard").joinpath("static")
    return folder if isinstance(folder, Path) and folder.is_dir() else None


class _Hosts:
    """An allow-list of ``Host`` headers: ``host:port``, ``host`` (any port) or ``*`` (any)."""

    def __init__(self, entries: Iterable[str]) -> None:
        if isinstance(entries, str):
            msg = f"allowed_hosts must be a list of hosts, not one string: [{entries!r}]"
            raise TypeError(msg)
        self.anything = False
        self.exact: set[tuple[str, int]] = set()
        self.any_port: set[str] = set()
        for entry in entries:
            item: object = entry  # checked at run time for untyped callers
            if not isinstance(item, str):
                msg = f"allowed_hosts entries must be text, got {type(item).__name__}"
                raise TypeError(msg)
            split = _split_host(entry)
            if entry == "*":
                self.anything = True
                continue
            if split is None:
                msg = (
                    f"allowed_hosts: {entry!r} is not a host; write HOST, HOST:PORT or"
                    " [IPv6]:PORT, e.g. 'localhost:8000', or '*' for any host"
                )
                raise ValueError(msg)
            host, port = split
            if port is None:
                self.any_port.add(host)
            else:
                self.exact.add((host, port))

    def allow(self, scope: Scope) -> bool:
        if self.anything:
            return True
        values = [value for name, value in scope["headers"] if name == b"host"]
        if len(values) != 1:
            return False
        split = _split_host(values[0].decode("latin-1"))
        if split is None:
            return False
        host, port = split
        if port is None:
            port = _DEFAULT_PORTS.get(scope.get("scheme", "http"), 80)
        return host in self.any_port or (host, port) in self.exact


class _BodyTooLarge(Exception):  # noqa: N818 - a signal inside _Protect, never raised out
    """A request body grew past the app's limit while a route was reading it."""


class _Protect:
    """ASGI middleware of every toolguard app (:func:`_protected_app`).

    In this order: a ``Host`` outside the allow-list gets a 421; a
    state-changing request (not ``GET``, ``HEAD`` or ``OPTIONS``) from a page
    of another origin a 403; a body over the limit a 413 (by its
    ``Content-Length`` before anything is read, or as soon as the bytes read
    pass it). These hold for every route of the app, whatever router added
    it. Every answer — the page, its files, the API, the docs, 404s, 405s and
    the 500 of an unexpected error — carries the security headers.
    """

    def __init__(
        self, app: ASGIApp, *, hosts: _Hosts | None, guard: "_Guard", docs: frozenset[str]
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.guard = guard
        self.docs = docs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        policy = _DOCS_POLICY if scope["path"] in self.docs else CONTENT_SECURITY_POLICY
        ours = [
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in {**_HEADERS, "Content-Security-Policy": policy}.items()
        ]
        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                kept = [
                    (k, v) for k, v in message.get("headers", []) if k.lower() not in _HEADER_NAMES
                ]
                message = {**message, "headers": [*kept, *ours]}
            await send(message)

        refused = self.refusal(scope)
        if refused is not None:
            await refused(scope, receive, send_with_headers)
            return
        # Reads keep the server's own receive: no route reads their body, and the live
        # stream asks it whether the server is stopping.
        limited = receive if scope["method"] in _SAFE_METHODS else self.limited(receive)
        try:
            await self.app(scope, limited, send_with_headers)
        except _BodyTooLarge:
            if not started:
                await self.guard.too_large()(scope, receive, send_with_headers)
        except Exception:
            if not started:
                await _reply(500, "Internal Server Error")(scope, receive, send_with_headers)
            raise

    def limited(self, receive: Receive) -> Receive:
        """``receive``, raising :class:`_BodyTooLarge` once the body passes the limit."""
        size = 0

        async def receive_limited() -> Message:
            nonlocal size
            message = await receive()
            if message["type"] == "http.request":
                size += len(message.get("body", b""))
                if size > self.guard.max_body_bytes:
                    raise _BodyTooLarge
            return message

        return receive_limited

    def refusal(self, scope: Scope) -> Response | None:
        """The 421, 403 or 413 for a request before the app sees it, or ``None``."""
        if self.hosts is not None and not self.hosts.allow(scope):
            return _reply(
                status.HTTP_421_MISDIRECTED_REQUEST,
                "Misdirected request: this server does not answer to the host in the Host"
                " header (allow it with allowed_hosts, or --allow-host of toolguard serve or"
                " mcp-proxy).",
            )
        request = Request(scope)
        if request.method in _SAFE_METHODS:
            return None
        return self.guard.refusal(request, reads_body=False) or self.guard.declared_too_large(
            request
        )


def create_app(
    chat: ReviewedChat,
    *,
    page: bool = True,
    title: str = "toolguard",
    reviewer: Callable[..., Any] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    allowed_origins: Iterable[str] = (),
    allowed_hosts: Iterable[str] | None = None,
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
        title: the app's title in the OpenAPI docs (``/docs``).
        reviewer: a dependency returning who asks (see :func:`create_router`).
        max_body_bytes: the largest request body (see :func:`create_router`).
        allowed_origins: other origins whose pages may send ``POST`` requests
            (see :func:`create_router`).
        allowed_hosts: the ``Host`` headers the app answers, against DNS
            rebinding: ``"host:port"``, ``"host"`` (any port), ``"[::1]:8000"``,
            or ``"*"`` (any); any other Host gets a 421. ``None`` (default):
            no check (``toolguard serve`` and ``toolguard mcp-proxy`` pass
            their own list).

    Returns:
        An ASGI app, e.g. for ``uvicorn``.

    Raises:
        TypeError, ValueError: an option is invalid (the text says which).
    """
    return _protected_app(
        chat,
        page=page,
        title=title,
        reviewer=reviewer,
        max_body_bytes=max_body_bytes,
        allowed_origins=allowed_origins,
        allowed_hosts=allowed_hosts,
    )


def _protected_app(
    chat: ReviewedChat,
    *,
    allowed_hosts: Iterable[str] | None,
    page: bool = True,
    title: str = "toolguard",
    reviewer: Callable[..., Any] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    allowed_origins: Iterable[str] = (),
    routers: Iterable[APIRouter] = (),
) -> FastAPI:
    """The one factory of toolguard's apps: :func:`create_app`, ``serve`` and ``mcp-proxy``.

    The chat's routes under ``/hitl``, ``routers`` (more routes, e.g. the
    gateway's ``GET /hitl/audit``), the approval page unless ``page`` is
    false, all behind :class:`_Protect`: the ``Host`` allow-list (421), the
    cross-site refusal of state-changing requests (403), the body limit
    (413) and the security headers, for every route. ``allowed_hosts`` has
    no default: each caller says which Hosts it answers (``None``: any).

    Raises:
        TypeError, ValueError: an option is invalid (the text says which).
    """
    _check_chat(chat)
    hosts = _Hosts(allowed_hosts) if allowed_hosts is not None else None
    guard = _Guard(max_body_bytes, allowed_origins)
    app = FastAPI(title=title, version=__version__)
    app.state.chat = chat
    app.include_router(_routes(chat, guard, reviewer=reviewer))
    for router in routers:
        app.include_router(router)
    docs = frozenset(
        url for url in (app.docs_url, app.redoc_url, app.swagger_ui_oauth2_redirect_url) if url
    )
    app.add_middleware(_Protect, hosts=hosts, guard=guard, docs=docs)
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
