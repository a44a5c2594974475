"""What is refused before a route runs, and the security headers on every answer.

:class:`Guard` holds a router's limits: cross-site writes (403), bodies that are not JSON (415)
or too large (413); :func:`route_class` applies it, and the hostile-JSON checks (422), to each
route of the router wherever it is mounted. :class:`Protect`, the middleware of every
toolguard app, adds the ``Host`` allow-list (:class:`Hosts`, 421) and applies the same
cross-site and size limits to every route of the app, whichever router added it.
"""

from collections.abc import Callable, Coroutine, Iterable
from typing import Any
from urllib.parse import urlsplit

from fastapi import HTTPException, Request, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolguard._http.answers import (
    CONTENT_SECURITY_POLICY,
    DOCS_POLICY,
    SECURITY_HEADER_NAMES,
    SECURITY_HEADERS,
    Refusal,
    invalid_body,
    reply,
    trimmed,
)
from toolguard._http.parsing import body_problem

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


class Guard:
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
            return reply(
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
            return reply(
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
        return reply(413, f"The request body is larger than {self.max_body_bytes} bytes.")

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


def route_class(guard: Guard) -> type[APIRoute]:
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
                    problem = body_problem(body) if body else None
                    if problem is not None:
                        return invalid_body(problem)
                    request = _replay(request, body)
                try:
                    response = await handle(request)
                except RequestValidationError as exc:
                    return reply(422, trimmed(exc.errors()))
                except Refusal as exc:
                    return reply(exc.status_code, exc.detail, exc.headers)
                except HTTPException as exc:  # the app's own dependencies (e.g. a login)
                    exc.headers = {**SECURITY_HEADERS, **(exc.headers or {})}
                    raise
                for name, value in SECURITY_HEADERS.items():
                    response.headers[name] = value
                return response

            return route

    return _Route


class Hosts:
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


class _BodyTooLarge(Exception):  # noqa: N818 - a signal inside Protect, never raised out
    """A request body grew past the app's limit while a route was reading it."""


class Protect:
    """ASGI middleware of every toolguard app (:func:`~toolguard._http.app.protected_app`).

    In this order: a ``Host`` outside the allow-list gets a 421; a
    state-changing request (not ``GET``, ``HEAD`` or ``OPTIONS``) from a page
    of another origin a 403; a body over the limit a 413 (by its
    ``Content-Length`` before anything is read, or as soon as the bytes read
    pass it). These hold for every route of the app, whatever router added
    it. Every answer — the page, its files, the API, the docs, 404s, 405s and
    the 500 of an unexpected error — carries the security headers.
    """

    def __init__(
        self, app: ASGIApp, *, hosts: Hosts | None, guard: Guard, docs: frozenset[str]
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.guard = guard
        self.docs = docs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        policy = DOCS_POLICY if scope["path"] in self.docs else CONTENT_SECURITY_POLICY
        ours = [
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in {**SECURITY_HEADERS, "Content-Security-Policy": policy}.items()
        ]
        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                kept = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if k.lower() not in SECURITY_HEADER_NAMES
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
                await reply(500, "Internal Server Error")(scope, receive, send_with_headers)
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
            return reply(
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
