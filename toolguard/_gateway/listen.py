"""``mcp-proxy --listen URL``: the gateway's MCP server over streamable HTTP, for many clients.

Instead of one client on stdin/stdout, the gateway serves MCP at
``http://HOST:PORT/PATH`` with the MCP SDK's
:class:`~mcp.server.streamable_http_manager.StreamableHTTPSessionManager`
(stateful sessions): each client has its own session, each of its calls its own
review, and a client that cancels a call or ends its session (or whose session
ends) cancels only the reviews of its own calls (the session's waiting
handlers are cancelled; :class:`~toolguard._gateway.proxy.MCPProxy` cancels
their reviews).

In front of the sessions, in this order: the approval page's own guards
(:class:`~toolguard._http.guards.Protect`: a ``Host`` that is not the bound
address or a loopback name, or one allowed with ``--allow-host``, gets a 421;
a state-changing request from a page of another origin a 403; a body over
``--max-body-bytes`` a 413; the security headers on every answer), then the
bearer token of ``--token-env`` (a missing or wrong token gets a 401 with
``WWW-Authenticate: Bearer``; compared in constant time). Only ``PATH`` is
served; any other path gets a 404. Streams are resumable
(:mod:`toolguard._gateway.resume`): a client whose connection closes while one
of its calls runs (or waits for a person) and that does not resume the call's
stream in time (or cannot) cancels that call, as if it had sent
``notifications/cancelled``.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import json
import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

import anyio
import anyio.abc
import anyio.lowlevel

from toolguard._core.hosts import default_hosts
from toolguard._gateway.resume import RESUME_SECONDS, SessionEvents, resumable_manager
from toolguard._gateway.starting import StartUpError

__all__ = [
    "BAD_BEARER",
    "NO_BEARER",
    "Listen",
    "ListenError",
    "listen_app",
    "parse_listen",
    "quiet_server",
    "serve_listening",
]

NO_BEARER: Final = (
    "This MCP gateway needs a bearer token: send Authorization: Bearer TOKEN, where TOKEN is"
    " the value of the gateway's --token-env variable."
)
"""The 401's ``detail`` for a request without a bearer token."""
BAD_BEARER: Final = (
    "The bearer token is not this MCP gateway's: send Authorization: Bearer TOKEN, where TOKEN"
    " is the value of the gateway's --token-env variable."
)
"""The 401's ``detail`` for a request with another token (or another scheme)."""
_REALM: Final = 'Bearer realm="toolguard mcp-proxy"'
_STOP_SECONDS: Final = 5.0  # how long open connections may take to close at shutdown
_MAX_TOKEN: Final = 4096


class ListenError(StartUpError):
    """The MCP server cannot listen (the text is the one error line)."""


@dataclass(frozen=True)
class Listen:
    """Where ``--listen`` serves MCP, and the bearer token its clients must send.

    Attributes:
        url: the URL as given, e.g. ``http://127.0.0.1:9000/mcp``.
        host: the address to bind (IPv6 without brackets).
        port: the port to bind.
        path: the one path served, e.g. ``/mcp``.
        token: the token clients send as ``Authorization: Bearer TOKEN``, or
            ``None`` (no token: loopback only).
        token_env: the environment variable holding ``token`` (``--token-env``), which
            the upstream command does not get.
    """

    url: str
    host: str
    port: int
    path: str
    token: str | None = None
    token_env: str | None = None

    def __repr__(self) -> str:  # the token stays out of logs and tracebacks
        token = ", token=<hidden>" if self.token is not None else ""
        return f"Listen(url={self.url!r}{token})"


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_listen(url: str, token_env: str | None, environ: Any = os.environ) -> Listen:
    """The :class:`Listen` of ``--listen URL`` and ``--token-env NAME``.

    Raises:
        ValueError: the URL is not ``http://HOST:PORT/PATH``, the variable is
            unset or empty, or the address is beyond loopback without a token
            (the text is the error line).
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        parts, port = None, None
    if (
        parts is None
        or parts.scheme != "http"
        or not parts.hostname
        or port is None
        or parts.username is not None
        or parts.query
        or parts.fragment
    ):
        msg = (
            f"--listen {url}: give http://HOST:PORT/PATH, e.g. http://127.0.0.1:8766/mcp"
            " (plain HTTP: put a TLS proxy in front to serve HTTPS)"
        )
        raise ValueError(msg)
    host = parts.hostname
    path = parts.path or "/"
    token = None
    if token_env is not None:
        token = environ.get(token_env)
        if not token:
            msg = (
                f"--token-env {token_env}: the environment variable {token_env} is"
                f" {'empty' if token is not None else 'not set'}; set it to the token the MCP"
                " clients will send (e.g. the output of: python -c 'import secrets;"
                " print(secrets.token_urlsafe(32))')"
            )
            raise ValueError(msg)
        if len(token) > _MAX_TOKEN or token != token.strip() or not token.isprintable():
            msg = (
                f"--token-env {token_env}: the token must be printable text without spaces"
                f" around it, at most {_MAX_TOKEN} characters"
            )
            raise ValueError(msg)
    elif not _loopback(host):
        msg = (
            f"--listen {url}: an address beyond loopback needs a bearer token: give"
            " --token-env NAME, the environment variable holding it"
        )
        raise ValueError(msg)
    return Listen(url=url, host=host, port=port, path=path, token=token, token_env=token_env)


# ---------------------------------------------------------------------------- the app


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


class _BearerToken:
    """ASGI: a request without ``Authorization: Bearer TOKEN`` (exactly one) gets the 401.

    The token is compared as a SHA-256 digest with :func:`hmac.compare_digest`:
    the time taken says nothing about the token, not even its length.
    """

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._digest = _digest(token)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from toolguard._http.answers import reply  # noqa: PLC0415

        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        values = [value for name, value in scope["headers"] if name == b"authorization"]
        if not values:
            await reply(401, NO_BEARER, {"WWW-Authenticate": _REALM})(scope, receive, send)
            return
        scheme, _, given = values[0].decode("latin-1").strip().partition(" ")
        presented = _digest(given.strip()) if len(given) <= _MAX_TOKEN else b""
        matches = hmac.compare_digest(presented, self._digest)
        if len(values) != 1 or scheme.lower() != "bearer" or not matches:
            challenge = f'{_REALM}, error="invalid_token"'
            await reply(401, BAD_BEARER, {"WWW-Authenticate": challenge})(scope, receive, send)
            return
        await self.app(scope, receive, send)


class _OnePath:
    """ASGI: ``path`` (and ``path/``) goes to ``app``; any other path gets a 404."""

    def __init__(self, app: Any, path: str) -> None:
        self.app = app
        self.paths = {path, path.rstrip("/") or "/", path.rstrip("/") + "/"}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from toolguard._http.answers import reply  # noqa: PLC0415

        if scope["type"] == "http" and scope["path"] not in self.paths:
            await reply(404, "Not Found")(scope, receive, send)
            return
        await self.app(scope, receive, send)


class _CancelOnDisconnect:
    """ASGI, around the session manager: a client whose connection closes while a call of its
    session is running cancels that call, as if it had sent ``notifications/cancelled``, unless
    it resumes the call's stream within :data:`~toolguard._gateway.resume.RESUME_SECONDS`.

    The MCP SDK keeps a session's request running when the HTTP connection that
    carries its answer closes (the client may come back for it). A gateway call
    waiting for a person would then stay open for a client that is gone; here the
    disconnect is told to the session as the client's own cancellation, through
    the manager's ordinary request path, so the proxy cancels the call's review.
    """

    def __init__(self, app: Any, events: Mapping[str, SessionEvents]) -> None:
        self.app = app
        self.events = events  # each session's, by session id
        self.resume_seconds = RESUME_SECONDS

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            await self.app(scope, receive, send)
            await self._dropped_replay(scope)
            return
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body: list[bytes] = []
        finished = False
        gone = False

        async def watched_receive() -> Any:
            nonlocal gone
            message = await receive()
            if message["type"] == "http.request":
                body.append(message.get("body", b""))
            elif message["type"] == "http.disconnect" and not finished:
                gone = True
            return message

        async def watched_send(message: Any) -> None:
            nonlocal finished
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                finished = True
            await send(message)

        await self.app(scope, watched_receive, watched_send)
        if gone:
            try:
                message = json.loads(b"".join(body))
            except ValueError:
                return
            if isinstance(message, dict) and "method" in message:
                await self._cancel_unless_resumed(scope, message.get("id"))

    async def _dropped_replay(self, scope: Any) -> None:
        """A resumed stream (``GET`` with ``Last-Event-ID``) that ended before its answer: its
        call is cancelled unless the client resumes it again in time."""
        headers = dict(scope["headers"])
        session, last = headers.get(b"mcp-session-id"), headers.get(b"last-event-id")
        events = self.events.get(session.decode("latin-1")) if session and last else None
        stream = events.stream_of(last.decode("latin-1")) if events and last else None
        if stream is not None and events is not None and events.resumable(stream):
            await self._cancel_unless_resumed(scope, int(stream) if stream.isdigit() else stream)

    async def _cancel_unless_resumed(self, scope: Any, request_id: Any) -> None:
        """Cancel the request ``request_id`` of the session of ``scope`` whose stream dropped,
        unless the client resumes that stream in time (when it can)."""
        if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
            return
        session = dict(scope["headers"]).get(b"mcp-session-id")
        events = self.events.get(session.decode("latin-1")) if session is not None else None
        resumable = events is not None and events.resumable(str(request_id))
        if resumable and await events.resumed(str(request_id), self.resume_seconds):  # type: ignore[union-attr]
            return
        await self._cancel(scope, request_id)

    async def _cancel(self, scope: Any, request_id: str | int) -> None:
        """Send ``notifications/cancelled`` for ``request_id`` to the session of ``scope``."""
        headers = dict(scope["headers"])
        session = headers.get(b"mcp-session-id")
        if session is None:
            return
        cancel = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "the client disconnected"},
        }
        payload = json.dumps(cancel).encode()
        kept = [
            (name, value)
            for name, value in scope["headers"]
            if name in (b"host", b"mcp-session-id", b"mcp-protocol-version", b"authorization")
        ]
        kept += [
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
            (b"content-length", str(len(payload)).encode()),
        ]
        sent = False

        async def receive() -> Any:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": payload, "more_body": False}
            await anyio.sleep_forever()
            return {"type": "http.disconnect"}  # never reached: the call ends first

        async def discard(message: Any) -> None:
            await anyio.lowlevel.checkpoint()

        with anyio.CancelScope(shield=True), anyio.move_on_after(_STOP_SECONDS):
            await self.app({**scope, "method": "POST", "headers": kept}, receive, discard)


def listen_app(
    server: Any,
    listen: Listen,
    *,
    allow_hosts: Iterable[str] = (),
    allow_origins: Iterable[str] = (),
    max_body_bytes: int,
) -> tuple[Any, Any]:
    """The ASGI app serving ``server`` (an MCP low-level server) at ``listen``, and its
    session manager, whose :meth:`run` must be entered while the app serves.

    The guards are the approval page's (:class:`~toolguard._http.guards.Protect`
    with the Hosts of :func:`~toolguard._core.hosts.default_hosts` for the
    listen address plus ``allow_hosts``, ``allow_origins`` and
    ``max_body_bytes``), then the bearer token of ``listen``.

    Raises:
        TypeError, ValueError: an option is invalid (the text says which).
    """
    from mcp.server.transport_security import TransportSecuritySettings  # noqa: PLC0415

    from toolguard._http.guards import Guard, Hosts, Protect  # noqa: PLC0415

    manager, events = resumable_manager(  # each session's events, replayed on resumption
        server,
        # Host and Origin are checked by Protect below, as on the approval page.
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_request_body_size=max_body_bytes,
    )
    app: Any = _CancelOnDisconnect(manager.handle_request, events)
    if listen.token is not None:
        app = _BearerToken(app, listen.token)
    app = _OnePath(app, listen.path)
    hosts = Hosts([*default_hosts(listen.host, listen.port), *allow_hosts])
    guard = Guard(max_body_bytes, allow_origins)
    return Protect(app, hosts=hosts, guard=guard, docs=frozenset()), manager


# ---------------------------------------------------------------------------- serving


def quiet_server(app: Any, *, host: str, port: int, **options: Any) -> Any:
    """uvicorn's server for one of the gateway's apps, without signal handling of its own.

    The gateway watches SIGINT and SIGTERM itself and stops its servers with the
    rest; no lifespan, no access log. ``options``: more of ``uvicorn.Config``'s.
    """
    import uvicorn  # noqa: PLC0415

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    config = uvicorn.Config(
        app, host=host, port=port, log_config=None, access_log=False, lifespan="off", **options
    )
    return Server(config)


async def serve_listening(
    server: Any,
    listen: Listen,
    *,
    on_ready: Callable[[], None],
    allow_hosts: Sequence[str] = (),
    allow_origins: Sequence[str] = (),
    max_body_bytes: int,
    signals: bool = True,
    stop: anyio.Event | None = None,
) -> int | None:
    """Serve ``server`` over streamable HTTP at ``listen`` until SIGINT or SIGTERM.

    ``on_ready`` is called once the address is bound (the status line). With
    ``signals`` (in the main thread of a POSIX process) the signal that
    stopped the gateway is returned (SIGINT for Ctrl-C, SIGTERM); without, it
    serves until ``stop`` is set (or until cancelled). On the way out every
    session ends (its waiting calls are cancelled, and with them their
    reviews), then the server stops.

    Raises:
        ListenError: the address cannot be bound.
    """
    app, manager = listen_app(
        server,
        listen,
        allow_hosts=allow_hosts,
        allow_origins=allow_origins,
        max_body_bytes=max_body_bytes,
    )
    http = quiet_server(
        app,
        host=listen.host,
        port=listen.port,
        timeout_graceful_shutdown=int(_STOP_SECONDS),
    )
    watch = signals and threading.current_thread() is threading.main_thread() and os.name == "posix"
    stopped: list[int] = []
    failed: list[BaseException] = []
    async with anyio.create_task_group() as tasks:

        async def serve() -> None:
            try:
                await http.serve()
            except SystemExit as exc:  # uvicorn exits when it cannot bind
                failed.append(exc)

        async with manager.run():
            tasks.start_soon(serve)
            with anyio.fail_after(30):
                while not http.started and not failed:  # noqa: ASYNC110 - no event to wait on
                    await anyio.sleep(0.02)
            if http.started:
                stopped.extend(await _until_stopped(on_ready, watch=watch, stop=stop))
            http.should_exit = True
        # the sessions have ended (manager.run() cancelled them): the server stops
    if failed:
        where = f"[{listen.host}]" if ":" in listen.host else listen.host
        msg = (
            f"--listen {listen.url}: cannot listen on {where}:{listen.port} (the port is in"
            " use, or the address is not this machine's); choose another port or address"
        )
        raise ListenError(msg)
    return stopped[0] if stopped else None


async def _until_stopped(
    on_ready: Callable[[], None], *, watch: bool, stop: anyio.Event | None
) -> list[int]:
    """Call ``on_ready``, then wait for SIGINT or SIGTERM (``watch``), else for ``stop``."""
    if not watch:
        on_ready()
        await (stop.wait() if stop is not None else anyio.sleep_forever())
        return []
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as received:
        on_ready()
        async for number in received:
            return [number]
    return []
