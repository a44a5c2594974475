"""How the routes answer: the security headers, error bodies, and toolguard's errors as status
codes (:func:`answer`), each ``detail`` cut short and echoing only a prefix of the input.
"""

import json
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, TypeVar

from fastapi import HTTPException, status
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse

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

_T = TypeVar("_T")

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self';"
    " img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""The Content-Security-Policy of every response: no inline script or style, nothing from
other sites, no framing."""

DOCS_POLICY = (
    "default-src 'none'; script-src 'unsafe-inline' https://cdn.jsdelivr.net;"
    " style-src 'unsafe-inline' https://cdn.jsdelivr.net; img-src 'self' data: https:;"
    " font-src https:; worker-src blob:; connect-src 'self'; base-uri 'none';"
    " form-action 'none'; frame-ancestors 'none'"
)
"""For FastAPI's /docs and /redoc pages only: they load Swagger UI / ReDoc from a CDN."""

SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-store",
}
"""The headers of every answer."""
SECURITY_HEADER_NAMES = frozenset(name.lower().encode("latin-1") for name in SECURITY_HEADERS)
"""Their names as ASGI writes them (lower case bytes)."""

ECHO_LIMIT = 100
"""A 422 echoes at most this many characters of the offending input."""
_MAX_ERRORS = 20
"""A 422 lists at most this many validation errors (then how many more there were)."""
_DETAIL_LIMIT = 500
"""An error's ``detail`` text is cut to this many characters."""

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


class Refusal(HTTPException):
    """An error answer the router renders itself, with the security headers."""


def shorten(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters and ``…``."""
    return text if len(text) <= limit else text[:limit] + "\u2026"


async def answer(call: Awaitable[_T], prefix: str = "/hitl") -> _T:
    """Await ``call``, turning toolguard's errors into HTTP errors with the text in ``detail``."""
    try:
        return await call
    except _HANDLED as exc:
        code = next(code for kind, code in _STATUS if isinstance(exc, kind))
        detail = shorten(clean_text(_http_text(exc, prefix)), _DETAIL_LIMIT)
        raise Refusal(status_code=code, detail=detail) from exc


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


def reply(code: int, detail: Any, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """The answer ``{"detail": detail}`` with status ``code``, ``headers`` and the security
    headers."""
    return _AsciiJSONResponse(
        status_code=code,
        content={"detail": detail},
        headers={**(headers or {}), **SECURITY_HEADERS},
    )


def invalid_body(reason: str) -> JSONResponse:
    """The 422 for a body refused before it is parsed, in FastAPI's ``json_invalid`` shape."""
    error = {"type": "json_invalid", "loc": ["body"], "msg": "JSON decode error", "input": {}}
    return reply(422, [{**error, "ctx": {"error": reason}}])


def _echo(value: Any) -> Any:
    """``value`` if its JSON text is short, else the first characters of that text and ``…``."""
    if isinstance(value, str):
        return shorten(value, ECHO_LIMIT)
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return value if len(text) <= ECHO_LIMIT else shorten(text, ECHO_LIMIT)


def trimmed(errors: Sequence[Any]) -> list[Any]:
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
