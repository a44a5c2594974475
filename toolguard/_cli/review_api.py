"""The HTTP API of a running toolguard server as ``toolguard review`` uses it: signing in
(:func:`connect`), requests (:class:`Server`) and the live listing of pending reviews
(:class:`Live`).

Only the standard library speaks HTTP here (``http.client``), so ``toolguard review`` works with
toolguard's core install. Requests follow no redirects and go only to the address given, so a
token is never sent anywhere else. Sign-in: a bearer token (a server with ``--tokens``); a
sign-in link given as the address; or, without either, the current sign-in link of this user's
server at that address, from the runtime files ``toolguard link`` reads.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import signal
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import FrameType
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from pydantic import ValidationError

from toolguard._cli.auth import is_loopback
from toolguard._cli.terminal import prose
from toolguard._core.records import PendingReview

__all__ = [
    "DECISION_TIMEOUT",
    "GoneError",
    "Live",
    "ReviewError",
    "Server",
    "check_url",
    "connect",
    "failure_reason",
    "refused",
    "token_from_env",
]

_TIMEOUT = 10.0
"""Seconds a request may take (a decision: :data:`DECISION_TIMEOUT`)."""
DECISION_TIMEOUT = 600.0
"""Seconds ``POST /hitl/review`` may take: the approved tools and the model run first."""
_STREAM_TIMEOUT = 40.0
"""Seconds without a byte after which the live stream counts as lost (a heartbeat comes at 15)."""
_RETRIES = 3
"""Attempts to reach the server again, half a second apart, before it counts as gone."""
_MAX_BODY = 32 * 1024 * 1024
"""The largest answer read from the server."""
_SIGN_IN_PATH = "/hitl/sign-in"
_SESSION_COOKIE = "toolguard_session"
_LINK_CHALLENGE = "SignInLink"
_COOKIE_VALUE = re.compile(r'[A-Za-z0-9._+\-]{1,1024}|"[A-Za-z0-9._@+\-\\]{1,1024}"')
"""A session cookie as toolguard makes it (``NAME.TIME.HEX``, quoted when the name holds ``@``);
anything else is not sent back."""


class ReviewError(Exception):
    """The command stops: the text (one line) says why; ``code`` is the exit code."""

    def __init__(self, text: str, code: int = 1) -> None:
        super().__init__(text)
        self.code = code


class GoneError(Exception):
    """The review on the screen was decided elsewhere (raised at the reviewer's prompt)."""


# ---------------------------------------------------------------------------- HTTP


@dataclass(frozen=True, slots=True)
class _Answer:
    """A server's answer: its status, its JSON body (``None`` when it is not JSON), its detail."""

    status: int
    body: Any

    @property
    def detail(self) -> str:
        """The ``detail`` of an error body (or the status), control characters escaped: a
        server's text never acts on the terminal."""
        detail = self.body.get("detail") if isinstance(self.body, dict) else None
        return prose(detail) if isinstance(detail, str) else f"HTTP {self.status}"


class Server:
    """The HTTP API of a toolguard server at ``url`` (its page's address), with a sign-in.

    Args:
        url: ``http[s]://HOST[:PORT][/PATH]``; the API is under ``PATH/hitl``.
        token: sent as ``Authorization: Bearer TOKEN`` (a server with ``--tokens``).
    """

    def __init__(self, url: str, *, token: str | None = None) -> None:
        parts = urlsplit(url)
        self.https = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.https else 80)
        self.root = parts.path.rstrip("/")
        self.url = f"{parts.scheme}://{parts.netloc}{self.root}/"
        self.token = token
        self.cookie: str | None = None

    def headers(self) -> dict[str, str]:
        """The sign-in headers of every request."""
        found = {"Accept": "application/json"}
        if self.token is not None:
            found["Authorization"] = f"Bearer {self.token}"
        if self.cookie is not None:
            found["Cookie"] = f"{_SESSION_COOKIE}={self.cookie}"
        return found

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self.https:
            context = ssl.create_default_context()
            return http.client.HTTPSConnection(
                self.host, self.port, timeout=timeout, context=context
            )
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        timeout: float = _TIMEOUT,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[_Answer, http.client.HTTPResponse]:
        """``method`` on ``PATH/hitl...`` ``path``; the answer and the raw response (read).

        Raises:
            OSError: the server cannot be reached (refused, timed out, closed).
            http.client.HTTPException: it did not answer HTTP.
        """
        connection = self._connection(timeout)
        sent = {**self.headers(), **(headers or {})}
        data = None
        if body is not None:
            data = json.dumps(body, ensure_ascii=True).encode("ascii")
            sent["Content-Type"] = "application/json"
        try:
            connection.request(method, self.root + path, body=data, headers=sent)
            response = connection.getresponse()
            raw = response.read(_MAX_BODY + 1)
        finally:
            connection.close()
        try:
            parsed = json.loads(raw) if len(raw) <= _MAX_BODY else None
        except ValueError:
            parsed = None
        return _Answer(response.status, parsed), response

    def call(
        self, method: str, path: str, body: Any = None, *, timeout: float = _TIMEOUT
    ) -> _Answer:
        """Like :meth:`request`, but a server that cannot be reached is a :class:`ReviewError`,
        and so is a sign-in it refuses (401) or a ``Host`` it does not answer (421)."""
        try:
            found, _ = self.request(method, path, body, timeout=timeout)
        except (OSError, http.client.HTTPException) as exc:
            raise ReviewError(self.lost(exc)) from None
        refused(found)
        return found

    def lost(self, exc: BaseException) -> str:
        """The line of a server that stopped answering."""
        return f"lost the server at {self.url}: {failure_reason(exc)}; is it still running?"

    @contextlib.contextmanager
    def stream(self, path: str) -> Iterator[http.client.HTTPResponse]:
        """``GET path`` as an open response, read as it comes (server-sent events)."""
        connection = self._connection(_STREAM_TIMEOUT)
        try:
            headers = {**self.headers(), "Accept": "text/event-stream"}
            connection.request("GET", self.root + path, headers=headers)
            yield connection.getresponse()
        finally:
            connection.close()


def failure_reason(exc: BaseException) -> str:
    """Why a connection failed, in a few words."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed ({exc.reason or exc})"
    if isinstance(exc, (http.client.RemoteDisconnected, ConnectionResetError)):
        return "the connection was closed"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[:1].lower() + exc.strerror[1:]
    return str(exc) or type(exc).__name__


def refused(found: _Answer) -> None:
    """Raise the :class:`ReviewError` of a refused sign-in (401) or ``Host`` (421)."""
    if found.status == 401:
        msg = f"the server signed this terminal out: {found.detail}"
        raise ReviewError(msg)
    if found.status == 421:
        msg = (
            f"the server does not answer to this address: {found.detail} Use the address it"
            " printed at start."
        )
        raise ReviewError(msg)


# ---------------------------------------------------------------------------- signing in


def check_url(url: str) -> str | None:
    """Why ``--url`` cannot be used, or ``None``."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"--url {url}: {exc}"
    del port
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return (
            f"--url expects the server's address, e.g. http://127.0.0.1:8000/ (toolguard serve)"
            f" or http://127.0.0.1:8765/ (toolguard mcp-proxy), got {url!r}"
        )
    if parts.username is not None or parts.password is not None:
        return "--url must hold no user name or password: give a token with --token-env NAME"
    return None


def token_from_env(name: str) -> str:
    """The token in environment variable ``name``.

    Raises:
        ReviewError: it is unset, empty, or holds what a header cannot carry (code 2).
    """
    value = os.environ.get(name)
    if not value:
        msg = f"--token-env {name}: the environment variable {name} is not set or empty"
        raise ReviewError(msg, 2)
    token = value.strip()
    if not token.isascii() or not token.isprintable() or " " in token:
        msg = (
            f"--token-env {name}: the token holds spaces or characters a header cannot carry;"
            " check the value (toolguard token prints one)"
        )
        raise ReviewError(msg, 2)
    return token


def _link_parts(url: str) -> tuple[str, str] | None:
    """``(page address, code)`` when ``url`` is a sign-in link, else ``None``."""
    parts = urlsplit(url)
    if not parts.path.rstrip("/").endswith(_SIGN_IN_PATH):
        return None
    codes = parse_qs(parts.query).get("code", [])
    if len(codes) != 1:
        return None
    root = parts.path.rstrip("/").removesuffix(_SIGN_IN_PATH)
    return f"{parts.scheme}://{parts.netloc}{root}/", codes[0]


def _open_link(server: Server, code: str) -> None:
    """Open a sign-in link: keep its session cookie.

    Raises:
        ReviewError: the server refused the code, or answered without a cookie.
    """
    path = f"{_SIGN_IN_PATH}?code={quote(code, safe='')}"
    try:
        found, response = server.request("GET", path)
    except (OSError, http.client.HTTPException) as exc:
        raise ReviewError(_unreachable(server, exc)) from None
    for header in response.headers.get_all("Set-Cookie") or []:
        name, _, rest = header.partition("=")
        value = rest.partition(";")[0].strip()
        if name.strip() == _SESSION_COOKIE and _COOKIE_VALUE.fullmatch(value):
            server.cookie = value
    if found.status != 303 or server.cookie is None:
        msg = f"the sign-in link was refused: {found.detail}"
        raise ReviewError(msg)


def _same_server(server: Server, url: str) -> bool:
    """Whether the page address ``url`` (a runtime file's) is ``server``'s."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return False
    host = parts.hostname or ""
    same_host = host == server.host or (is_loopback(host) and is_loopback(server.host))
    return same_host and port == server.port and parts.path.rstrip("/") == server.root


def _local_link(server: Server) -> tuple[str, str] | None:
    """``(code, about)`` of the current sign-in link of this user's server at ``server``'s
    address, from the runtime files ``toolguard link`` reads; ``None`` when there is none."""
    try:
        from toolguard._http.link import running_servers  # noqa: PLC0415 - the http extra
    except ImportError:
        return None
    for running in running_servers():
        if _same_server(server, running.url):
            parts = _link_parts(running.link)
            if parts is not None:
                return parts[1], f"toolguard {running.command} (pid {running.pid})"
    return None


def _unreachable(server: Server, exc: BaseException) -> str:
    return (
        f"cannot reach {server.url}: {failure_reason(exc)}; is toolguard serve or toolguard"
        " mcp-proxy running there?"
    )


def connect(url: str, token: str | None, say: Callable[[str], None]) -> tuple[Server, str]:
    """Sign in at ``url``: the server and a line saying who is signed in.

    Raises:
        ReviewError: the server cannot be reached, is not toolguard's, or refuses the sign-in.
    """
    link = _link_parts(url)
    server = Server(link[0] if link is not None else url, token=token)
    if server.host and not server.https and token is not None and not is_loopback(server.host):
        sys.stderr.write(
            f"warning: {server.url} is plain HTTP beyond this machine: the token travels"
            " unencrypted; prefer https://\n"
        )
    if link is not None:
        _open_link(server, link[1])
    try:
        found, response = server.request("GET", "/hitl/session")
    except (OSError, http.client.HTTPException) as exc:
        raise ReviewError(_unreachable(server, exc)) from None
    if found.status == 401:
        challenge = response.headers.get("WWW-Authenticate", "")
        if token is None and link is None and challenge.startswith(_LINK_CHALLENGE):
            local = _local_link(server)
            if local is None:
                msg = (
                    f"{server.url} signs reviewers in with its sign-in link: run toolguard review"
                    " on its machine as the user who started it, or give the link as --url"
                    " (toolguard link prints it)"
                )
                raise ReviewError(msg)
            _open_link(server, local[0])
            say(
                f"Signed in with the sign-in link of {local[1]}; the link shown before is now"
                " used: toolguard link prints a new one for a browser."
            )
            return _signed_in(server)
        if token is not None:
            msg = f"the server refused the token of --token-env: {found.detail}"
            raise ReviewError(msg)
        if challenge.startswith("Bearer"):
            msg = (
                f"{server.url} signs reviewers in with tokens: give --token-env NAME, NAME being"
                " the environment variable that holds yours"
            )
            raise ReviewError(msg)
        msg = f"the server refused the sign-in: {found.detail}"
        raise ReviewError(msg)
    refused(found)
    return _identified(server, found)


def _signed_in(server: Server) -> tuple[Server, str]:
    return _identified(server, server.call("GET", "/hitl/session"))


def _identified(server: Server, session: _Answer) -> tuple[Server, str]:
    """The server and its ``signed in as`` part, once ``GET /hitl/session`` answered."""
    body = session.body
    if session.status != 200 or not isinstance(body, dict) or "reviewer" not in body:
        msg = (
            f"{server.url} does not answer like toolguard serve or toolguard mcp-proxy"
            f" (GET /hitl/session: HTTP {session.status}); check --url"
        )
        raise ReviewError(msg)
    info = server.call("GET", "/hitl/info").body
    mode = info.get("mode") if isinstance(info, dict) else None
    what = "toolguard mcp-proxy" if mode == "gateway" else "a chat"
    reviewer = body["reviewer"]
    who = (
        f"signed in as {prose(str(reviewer))}"
        if reviewer is not None
        else "no sign-in (anyone reaching the server decides)"
    )
    return server, f"{what} | {who}"


# ---------------------------------------------------------------------------- the live listing


class Live:
    """The pending reviews of ``server``, kept up to date by a thread reading its live stream.

    While :meth:`watching` a review, its disappearance from the list interrupts the prompt of
    the main thread (POSIX; elsewhere the decision is checked before it is sent).
    """

    def __init__(self, server: Server) -> None:
        self.server = server
        self.reviews: list[dict[str, Any]] | None = None
        self.problem: str | None = None
        self.changed = threading.Condition()
        self._watched: str | None = None
        self._gone = False
        self._main = threading.main_thread().ident
        self._stop = threading.Event()

    # ---------------------------------------------------------------- the thread

    def start(self) -> None:
        """Follow the stream in a daemon thread."""
        threading.Thread(target=self._follow, name="toolguard-review-live", daemon=True).start()

    def stop(self) -> None:
        """Stop following (the thread ends at its next read)."""
        self._stop.set()

    def _follow(self) -> None:
        failures, polling = 0, False
        while not self._stop.is_set():
            polling, failure = self._once(polling=polling)
            if isinstance(failure, ReviewError):
                self._fail(str(failure))
                return
            failures = failures + 1 if failure is not None else 0
            if failure is not None and failures >= _RETRIES:
                self._fail(self.server.lost(failure))
                return
            if failure is not None or polling:
                time.sleep(0.5 if failure is not None else 1)

    def _once(self, *, polling: bool) -> tuple[bool, Exception | None]:
        """Read the stream until it ends (or the listing once, ``polling``); whether to poll from
        now on, and what went wrong (``None``: nothing)."""
        try:
            if polling:
                self._poll()
                return True, None
            return self._read_stream(), None
        except (ReviewError, OSError, http.client.HTTPException, ValueError) as exc:
            return polling, exc

    def _poll(self) -> None:
        found, _ = self.server.request("GET", "/hitl/reviews")
        refused(found)
        reviews = found.body.get("reviews") if isinstance(found.body, dict) else None
        if found.status != 200 or not isinstance(reviews, list):
            msg = f"GET /hitl/reviews answered HTTP {found.status}: {found.detail}"
            raise ReviewError(msg)
        self._update(reviews)

    def _read_stream(self) -> bool:
        """Read ``GET /hitl/events`` until it ends; ``True`` when the server has no stream left."""
        with self.server.stream("/hitl/events") as response:
            if response.status == 503:
                return True
            if response.status != 200:
                raw = response.read(_MAX_BODY)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                refused(_Answer(response.status, body))
                msg = f"GET /hitl/events answered HTTP {response.status}: {_Answer(0, body).detail}"
                raise ReviewError(msg)
            event, data = "", []
            while not self._stop.is_set():
                line = response.readline(_MAX_BODY)
                if not line:
                    return False  # the stream ended (after 5 minutes): open it again
                if not line.endswith(b"\n"):
                    msg = "the live stream sent a line that is too long"
                    raise ReviewError(msg)
                text = line.decode("utf-8").rstrip("\r\n")
                if text.startswith(":"):
                    continue
                if text:
                    field, _, value = text.partition(":")
                    value = value.removeprefix(" ")
                    if field == "event":
                        event = value
                    elif field == "data":
                        data.append(value)
                    continue
                if event == "reviews" and data:
                    body = json.loads("\n".join(data))
                    reviews = body.get("reviews") if isinstance(body, dict) else None
                    if isinstance(reviews, list):
                        self._update(reviews)
                event, data = "", []
        return False

    def _update(self, reviews: list[Any]) -> None:
        items = [r for r in reviews if isinstance(r, dict) and _is_review(r)]
        with self.changed:
            if items == self.reviews:
                return
            self.reviews = items
            self.changed.notify_all()
            watched = self._watched
            if watched is not None and all(r["review_id"] != watched for r in items):
                self._gone = True
                self._interrupt()

    def _fail(self, problem: str) -> None:
        with self.changed:
            self.problem = problem
            self.changed.notify_all()
            if self._watched is not None:
                self._interrupt()

    def _interrupt(self) -> None:
        kill = getattr(signal, "pthread_kill", None)
        user1 = getattr(signal, "SIGUSR1", None)
        if kill is not None and user1 is not None and self._main is not None:
            kill(self._main, user1)

    # ---------------------------------------------------------------- the main thread

    def wait(self, ready: Callable[[list[dict[str, Any]]], bool]) -> list[dict[str, Any]]:
        """The pending reviews, once the stream has told them and ``ready`` takes them.

        Raises:
            ReviewError: the server is lost.
        """
        with self.changed:
            while True:
                if self.problem is not None:
                    raise ReviewError(self.problem)
                if self.reviews is not None and ready(self.reviews):
                    return list(self.reviews)
                self.changed.wait(0.5)

    def pending(self, review_id: str) -> bool:
        """Whether review ``review_id`` still waits, as far as the stream has told."""
        with self.changed:
            return any(r["review_id"] == review_id for r in self.reviews or [])

    @contextlib.contextmanager
    def watching(self, review_id: str) -> Iterator[None]:
        """While inside, the review's end raises :class:`GoneError` at the reviewer's prompt.

        Also when the server is lost meanwhile (the caller then finds :attr:`problem` set).
        """
        user1 = getattr(signal, "SIGUSR1", None)
        previous: Any = None

        def interrupted(number: int, frame: FrameType | None) -> None:
            del number, frame
            if self._watched is not None and (self._gone or self.problem is not None):
                self._watched = None
                raise GoneError

        if user1 is not None and threading.get_ident() == self._main:
            previous = signal.signal(user1, interrupted)
        with self.changed:
            self._watched, self._gone = review_id, False
            gone = self.problem is not None or all(
                r["review_id"] != review_id for r in self.reviews or []
            )
        try:
            if gone:
                raise GoneError
            yield
        finally:
            with self.changed:
                self._watched = None
            if previous is not None and user1 is not None:
                signal.signal(user1, previous)


def _is_review(item: Mapping[str, Any]) -> bool:
    """Whether an item of the listing has what a card needs."""
    try:
        PendingReview.model_validate(item.get("pending_review"))
    except ValidationError:
        return False
    return isinstance(item.get("thread_id"), str) and isinstance(item.get("review_id"), str)
