"""Who is asking: the sign-in of toolguard's apps (:class:`HeaderAuth`, :class:`TokenAuth`).

Given to :func:`~toolguard.http.create_app` or :func:`~toolguard.http.create_router` as
``auth=``, an authenticator makes every route under the prefix require an identity (401
otherwise, with ``WWW-Authenticate``), and that identity is the reviewer of every decision,
refusal and grant. The approval page and its files stay reachable, so the page can show its
sign-in form.

* :class:`HeaderAuth`: an authenticating reverse proxy (oauth2-proxy, Pomerium, Cloudflare
  Access, Tailscale serve, nginx with basic authentication) names the user in a header; the
  header is believed only from the proxy's own addresses.
* :class:`TokenAuth`: each reviewer has a random token, and the server knows only its SHA-256
  hash. API clients send ``Authorization: Bearer TOKEN``; the page exchanges the token for a
  signed session cookie at ``POST /hitl/session``.

Neither ever logs or stores a token or a cookie: the audit trail gets the reviewer's name.
"""

# No ``from __future__ import annotations`` here: FastAPI reads the routes' annotations.

import hashlib
import hmac
import ipaddress
import logging
import os
import re
import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final

from fastapi import APIRouter, Body, Request, Response, status
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from toolguard._http.answers import Refusal

__all__ = ["HeaderAuth", "TokenAuth", "new_token"]

_log = logging.getLogger("toolguard.http")

PEER_KEY: Final = "toolguard.peer"
"""The ASGI scope key where :func:`keep_peer` keeps the TCP peer's address."""

SESSION_COOKIE: Final = "toolguard_session"
"""The name of the session cookie of :class:`TokenAuth`."""

DEFAULT_TRUSTED_PROXIES: Final = ("127.0.0.1/32", "::1/128")
"""The peers whose identity header :class:`HeaderAuth` believes by default: this machine."""

DEFAULT_SESSION_SECONDS: Final = 12 * 60 * 60
"""How long a session cookie of :class:`TokenAuth` stays valid by default: 12 hours."""

_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}\Z")
_HEADER_NAME: Final = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+\Z")
_HASH: Final = re.compile(r"sha256:([0-9a-fA-F]{64})\Z")
_CREDENTIAL_HEADERS: Final = frozenset({"authorization", "proxy-authorization", "cookie"})
_MAX_IDENTITY: Final = 256
_MAX_TOKEN: Final = 1024
_NAME_RULE: Final = (
    "1 to 128 characters: letters, digits and . _ @ + -, starting with a letter or digit"
)


def _refuse(detail: str, challenge: str) -> Refusal:
    return Refusal(
        status_code=status.HTTP_401_UNAUTHORIZED,
        detail=detail,
        headers={"WWW-Authenticate": challenge},
    )


class _Authenticator:
    """What :func:`~toolguard.http.create_router` needs of a sign-in: who asks, or a 401."""

    challenge = 'Bearer realm="toolguard"'

    def identify(self, request: Request) -> str:
        """The reviewer of ``request``; raises the 401 :class:`Refusal` when there is none."""
        raise NotImplementedError

    def add_session_routes(self, router: APIRouter) -> None:
        """``GET /session`` (who is signed in); :class:`TokenAuth` adds sign-in and sign-out."""

        @router.get("/session", responses={401: {"description": "Nobody is signed in."}})
        async def get_session(request: Request) -> dict[str, str]:
            """Who is signed in: ``{"reviewer": NAME}``, or a 401."""
            return {"reviewer": self.identify(request)}


def _peer(request: Request) -> str | None:
    """The address of the TCP peer: kept by :func:`keep_peer`, else the scope's ``client``."""
    kept = request.scope.get(PEER_KEY)
    if isinstance(kept, str):
        return kept
    client = request.client
    return client.host if client is not None else None


def _networks(
    entries: Iterable[str],
) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    if isinstance(entries, str):
        msg = f"trusted_proxies must be a list of networks, not one string: [{entries!r}]"
        raise TypeError(msg)
    networks = []
    for entry in entries:
        item: object = entry
        if not isinstance(item, str):
            msg = f"trusted_proxies entries must be text, got {type(item).__name__}"
            raise TypeError(msg)
        try:
            networks.append(ipaddress.ip_network(entry.strip(), strict=True))
        except ValueError:
            msg = (
                f"trusted_proxies: {entry!r} is not an IP network; write ADDRESS/BITS with the"
                " host bits zero, e.g. '10.0.0.0/8', '192.168.1.7/32' or '::1/128'"
            )
            raise ValueError(msg) from None
    return tuple(networks)


class HeaderAuth(_Authenticator):
    """The reviewer is the value of a header that an authenticating reverse proxy sets.

    ``HeaderAuth("X-Forwarded-User")`` believes the header only from a TCP peer
    in ``trusted_proxies`` (by default this machine: ``127.0.0.1/32`` and
    ``::1/128``): the proxy must listen where reviewers connect and reach
    toolguard from those addresses, and toolguard must not be reachable from
    anywhere else untrusted. A request from another peer, without the header,
    with it twice or with an empty value gets a 401 and changes nothing.

    The proxy must *set* the header (replace what the client sent), never pass
    a client's own header through: nginx ``proxy_set_header X-Forwarded-User
    $remote_user;`` does.

    Args:
        header: the header's name, e.g. ``"X-Forwarded-User"`` (not
            ``Authorization`` or ``Cookie``: their values are secrets).
        trusted_proxies: the networks of the proxies, as ``ADDRESS/BITS``.

    Raises:
        TypeError, ValueError: an argument is invalid (the text says which).
    """

    def __init__(
        self, header: str, *, trusted_proxies: Iterable[str] = DEFAULT_TRUSTED_PROXIES
    ) -> None:
        name: object = header
        if not isinstance(name, str):
            msg = f"header must be text, got {type(name).__name__}"
            raise TypeError(msg)
        if not _HEADER_NAME.match(header):
            msg = f"header: {header!r} is not a header name, e.g. 'X-Forwarded-User'"
            raise ValueError(msg)
        if header.lower() in _CREDENTIAL_HEADERS:
            msg = (
                f"header: {header!r} carries secrets, not a name; use the header your proxy"
                " sets to the signed-in user, e.g. 'X-Forwarded-User'"
            )
            raise ValueError(msg)
        self.header = header
        self.trusted_proxies = _networks(trusted_proxies)
        self.challenge = f'{header} realm="toolguard"'

    def __repr__(self) -> str:
        proxies = [str(network) for network in self.trusted_proxies]
        return f"HeaderAuth({self.header!r}, trusted_proxies={proxies!r})"

    def trusted(self, address: str | None) -> bool:
        """Whether ``address`` is in one of the trusted networks."""
        if address is None:
            return False
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return any(ip in network for network in self.trusted_proxies)

    def identify(self, request: Request) -> str:
        if not self.trusted(_peer(request)):
            msg = (
                f"Sign-in required: the {self.header} header is believed only from the trusted"
                " proxies (trusted_proxies, or --trusted-proxy of toolguard serve or"
                " mcp-proxy); sign in through the proxy."
            )
            raise _refuse(
                msg,
                self.challenge,
            )
        values = request.headers.getlist(self.header)
        name = _header_text(values[0]) if len(values) == 1 else None
        if not name:
            msg = (
                f"Sign-in required: the request has no {self.header} header naming the"
                " reviewer; sign in through the proxy."
            )
            raise _refuse(
                msg,
                self.challenge,
            )
        return name


def _header_text(value: str) -> str | None:
    """A header's value as text (UTF-8 when its bytes are), stripped; ``None`` if unusable."""
    try:
        text = value.encode("latin-1").decode("utf-8")
    except UnicodeError:
        text = value
    text = text.strip()
    if len(text) > _MAX_IDENTITY or any(ord(c) < 32 or ord(c) == 127 for c in text):
        return None
    return text


def token_hash(token: str) -> str:
    """The hex SHA-256 of ``token`` (UTF-8), as the tokens file holds it after ``sha256:``."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def new_token(name: str) -> tuple[str, str]:
    """A new random token for reviewer ``name``, and the line of the tokens file for it.

    ``token, line = new_token("alice")``: give ``token`` (43 characters of
    ``secrets.token_urlsafe(32)``) to alice and add ``line`` (``alice
    sha256:HEX``) to the tokens file; the file never holds the token itself.

    Raises:
        ValueError: ``name`` is not a reviewer name (1 to 128 letters, digits
            and ``. _ @ + -``, starting with a letter or digit).
    """
    _check_name(name)
    token = secrets.token_urlsafe(32)
    return token, f"{name} sha256:{token_hash(token)}"


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        msg = f"{name!r} is not a reviewer name: {_NAME_RULE}"
        raise ValueError(msg)
    return name


def read_tokens(text: str, source: str) -> dict[str, str]:
    """The reviewers of a tokens file's text: name → hex SHA-256 of the token.

    Raises:
        ValueError: a line is neither blank, a ``#`` comment nor ``NAME
            sha256:HEX``, or repeats a name or a hash; the text names the line
            but never repeats it (it might hold a token pasted by mistake).
    """
    reviewers: dict[str, str] = {}
    seen: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{source}, line {number}"
        parts = line.split()
        if len(parts) != 2:
            msg = (
                f"{where}: expected NAME sha256:HEX (two fields), got {len(parts)} fields;"
                " make a line with toolguard token NAME"
            )
            raise ValueError(msg)
        name, digest = parts
        if not _NAME.match(name):
            msg = f"{where}: the name is not a reviewer name ({_NAME_RULE})"
            raise ValueError(msg)
        found = _HASH.match(digest)
        if found is None:
            msg = (
                f"{where}: the second field must be sha256: and 64 hex digits (the hash of the"
                " token, never the token itself); make a line with toolguard token NAME"
            )
            raise ValueError(msg)
        hexdigest = found.group(1).lower()
        if name in reviewers:
            msg = f"{where}: the reviewer {name!r} is named twice"
            raise ValueError(msg)
        if hexdigest in seen:
            msg = f"{where}: {name!r} has the same token as {seen[hexdigest]!r}"
            raise ValueError(msg)
        reviewers[name] = hexdigest
        seen[hexdigest] = name
    return reviewers


@dataclass(frozen=True, slots=True)
class _FileState:
    stamp: tuple[int, int, int] | None
    reviewers: Mapping[str, str]


class TokenAuth(_Authenticator):
    """Reviewers sign in with a token; the server knows only each token's SHA-256 hash.

    ``TokenAuth({"alice": "sha256:…"})`` or ``TokenAuth.from_file(path)`` (lines
    ``NAME sha256:HEX``; make them with :func:`new_token` or ``toolguard token
    NAME``). A presented token is hashed and compared with every reviewer's
    hash by :func:`hmac.compare_digest`.

    * API clients send ``Authorization: Bearer TOKEN`` on every request.
    * The page signs in at ``POST /hitl/session`` with ``{"token": "..."}``
      and gets ``{"reviewer": NAME}`` and a session cookie (``HttpOnly``,
      ``SameSite=Strict``, ``Path=/``, ``Secure`` over https); ``GET
      /hitl/session`` says who is signed in (401 when nobody) and ``DELETE
      /hitl/session`` signs out (clears the cookie).

    The cookie holds the reviewer's name, its expiry and an HMAC-SHA256 of both
    under a key derived from ``secret`` and the reviewer's token hash: it
    never holds the token, it cannot be forged without ``secret``, and it stops
    working when the reviewer's line is removed or their token replaced, when
    it expires (``session_seconds``), or when ``secret`` changes. Processes
    serving the same reviewers must share ``secret`` (``toolguard serve
    --workers N`` does); the default is random per process, so a restart signs
    everyone out. Signing out clears the browser's cookie; a copy taken
    earlier stays valid until it expires (remove the line to end it at once).

    Args:
        reviewers: reviewer name → ``"sha256:HEX"``, the hash of their token.
        secret: the key material of the session cookies (at least 32 bytes);
            ``None``: 32 random bytes.
        session_seconds: how long a session lasts (default 12 hours).

    Raises:
        TypeError, ValueError: an argument is invalid (the text says which).
    """

    def __init__(
        self,
        reviewers: Mapping[str, str],
        *,
        secret: bytes | None = None,
        session_seconds: int = DEFAULT_SESSION_SECONDS,
    ) -> None:
        given: object = reviewers
        if not isinstance(given, Mapping):
            msg = f"reviewers must be a mapping of name to 'sha256:HEX', got {type(given).__name__}"
            raise TypeError(msg)
        lines = "\n".join(f"{_check_name(name)} {digest}" for name, digest in reviewers.items())
        self._state = _FileState(None, read_tokens(lines, "reviewers"))
        self._path: Path | None = None
        key: object = secrets.token_bytes(32) if secret is None else secret
        if not isinstance(key, bytes) or len(key) < 32:
            msg = "secret must be at least 32 bytes, e.g. secrets.token_bytes(32)"
            raise ValueError(msg)
        self._secret = key
        seconds: object = session_seconds
        if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 1:
            msg = f"session_seconds must be a positive int, got {session_seconds!r}"
            raise ValueError(msg)
        self.session_seconds = seconds

    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str],
        *,
        secret: bytes | None = None,
        session_seconds: int = DEFAULT_SESSION_SECONDS,
    ) -> "TokenAuth":
        """The reviewers of a tokens file: one ``NAME sha256:HEX`` per line.

        Blank lines and lines starting with ``#`` are skipped. The file is read
        again whenever it changes, so adding or removing a line takes effect
        at the next request without a restart (a removed line ends that
        reviewer's sessions); a change that makes it unreadable signs everyone
        out until it is fixed (logged on the ``toolguard.http`` logger).

        Raises:
            OSError: the file cannot be read.
            ValueError: a line is invalid (the text names it), or the file
                names no reviewer.
        """
        file = Path(path)
        stamp = _stamp(file)
        reviewers = read_tokens(file.read_text(encoding="utf-8"), str(file))
        if not reviewers:
            msg = f"{file} names no reviewer: add a line made by toolguard token NAME"
            raise ValueError(msg)
        auth = cls({}, secret=secret, session_seconds=session_seconds)
        auth._state = _FileState(stamp, reviewers)
        auth._path = file
        return auth

    def __repr__(self) -> str:
        where = (
            f"from_file({str(self._path)!r})" if self._path else f"{len(self.reviewers)} reviewers"
        )
        return f"TokenAuth({where})"

    @property
    def reviewers(self) -> Mapping[str, str]:
        """The reviewers now: name → hex SHA-256 of their token (the file is read if changed)."""
        path = self._path
        if path is None:
            return self._state.reviewers
        try:
            stamp: tuple[int, int, int] | None = _stamp(path)
        except OSError:
            stamp = None
        if stamp == self._state.stamp:
            return self._state.reviewers
        try:
            reviewers: Mapping[str, str] = read_tokens(path.read_text(encoding="utf-8"), str(path))
        except (OSError, ValueError, UnicodeError) as exc:
            _log.error("toolguard.http: nobody can sign in until the tokens file is fixed: %s", exc)
            reviewers = {}
        self._state = _FileState(stamp, reviewers)
        return reviewers

    def reviewer_of(self, token: str) -> str | None:
        """The reviewer whose token is ``token``, or ``None``; every hash is compared."""
        presented = token_hash(token)
        found = None
        for name, digest in self.reviewers.items():
            if hmac.compare_digest(presented, digest):
                found = name
        return found

    # ---------------------------------------------------------------- session cookies

    def _key(self, name: str, digest: str) -> bytes:
        material = b"toolguard-session\x00" + name.encode() + b"\x00" + digest.encode()
        return hmac.new(self._secret, material, hashlib.sha256).digest()

    def session_cookie(self, name: str, *, now: float | None = None) -> str:
        """The value of a session cookie for reviewer ``name``: ``NAME.EXPIRY.MAC``."""
        expiry = int(now if now is not None else time.time()) + self.session_seconds
        digest = self.reviewers[name]
        mac = hmac.new(self._key(name, digest), f"{name}.{expiry}".encode(), hashlib.sha256)
        return f"{name}.{expiry}.{mac.hexdigest()}"

    def session_reviewer(self, value: str, *, now: float | None = None) -> str | None:
        """The reviewer of a session cookie's value, or ``None`` (forged, expired, revoked)."""
        parts = value.rsplit(".", 2)
        if len(parts) != 3:
            return None
        name, expiry, mac = parts
        digest = self.reviewers.get(name)
        if digest is None or not expiry.isascii() or not expiry.isdigit() or len(expiry) > 12:
            return None
        expected = hmac.new(self._key(name, digest), f"{name}.{expiry}".encode(), hashlib.sha256)
        if not hmac.compare_digest(mac.encode(), expected.hexdigest().encode()):
            return None
        if int(expiry) <= (now if now is not None else time.time()):
            return None
        return name

    def _set_cookie(self, response: Response, request: Request, value: str, age: int) -> None:
        secure = "; Secure" if request.url.scheme == "https" else ""
        response.headers.append(
            "Set-Cookie",
            f"{SESSION_COOKIE}={value}; Path=/; Max-Age={age}; HttpOnly; SameSite=Strict{secure}",
        )

    # ---------------------------------------------------------------- requests

    def identify(self, request: Request) -> str:
        authorization = request.headers.getlist("authorization")
        if authorization:
            scheme, _, token = authorization[0].strip().partition(" ")
            token = token.strip()
            if len(authorization) == 1 and scheme.lower() == "bearer" and token:
                name = self.reviewer_of(token) if len(token) <= _MAX_TOKEN else None
                if name is not None:
                    return name
            msg = (
                "Sign-in failed: the bearer token is not valid; send Authorization: Bearer TOKEN"
                " with a reviewer's token."
            )
            raise _refuse(
                msg,
                'Bearer realm="toolguard", error="invalid_token"',
            )
        cookie = request.cookies.get(SESSION_COOKIE)
        if cookie:
            name = self.session_reviewer(cookie)
            if name is not None:
                return name
            msg = (
                "Sign-in required: the session has ended (expired, signed out, or the"
                " reviewer's token was replaced or removed); sign in again."
            )
            raise _refuse(
                msg,
                self.challenge,
            )
        msg = (
            "Sign-in required: send Authorization: Bearer TOKEN, or sign in with your token on"
            " the approval page."
        )
        raise _refuse(
            msg,
            self.challenge,
        )

    def add_session_routes(self, router: APIRouter) -> None:
        super().add_session_routes(router)

        @router.post(
            "/session",
            responses={401: {"description": "The token is not a reviewer's."}},
        )
        async def sign_in(
            token: Annotated[str, Body(embed=True, min_length=1, max_length=_MAX_TOKEN)],
            request: Request,
            response: Response,
        ) -> dict[str, str]:
            """Sign in with a token: ``{"reviewer": NAME}`` and the session cookie."""
            name = self.reviewer_of(token)
            if name is None:
                msg = "Sign-in failed: the token is not a reviewer's token."
                raise _refuse(msg, self.challenge)
            self._set_cookie(response, request, self.session_cookie(name), self.session_seconds)
            return {"reviewer": name}

        @router.delete("/session")
        async def sign_out(request: Request, response: Response) -> dict[str, None]:
            """Sign out: the session cookie is cleared; answers ``{"reviewer": null}``."""
            self._set_cookie(response, request, "", 0)
            return {"reviewer": None}


def _stamp(path: Path) -> tuple[int, int, int]:
    info = path.stat()
    return info.st_mtime_ns, info.st_size, info.st_ino


Authenticator = _Authenticator
"""The type of ``auth=``: :class:`HeaderAuth` or :class:`TokenAuth`."""


def check_auth(auth: object, reviewer: object) -> "_Authenticator | None":
    """``auth`` when it is an authenticator (or ``None``); refuses ``auth`` with ``reviewer``."""
    if auth is None:
        return None
    if not isinstance(auth, _Authenticator):
        msg = f"auth must be a toolguard.http.HeaderAuth or TokenAuth, got {type(auth).__name__}"
        raise TypeError(msg)
    if reviewer is not None:
        msg = (
            "give auth= or reviewer=, not both: with auth= the signed-in reviewer is the"
            " identity of every request"
        )
        raise ValueError(msg)
    return auth


def session_router(auth: _Authenticator, prefix: str, route_class: type[APIRoute]) -> APIRouter:
    """The session routes of ``auth`` under ``prefix``, checked like the chat's routes."""
    router = APIRouter(prefix=prefix, tags=["toolguard"], route_class=route_class)
    auth.add_session_routes(router)
    return router


def identity_dependency(auth: _Authenticator) -> Any:
    """A FastAPI dependency: the signed-in reviewer of the request, or the 401."""

    async def signed_in(request: Request) -> str:
        return auth.identify(request)

    return signed_in


def keep_peer(app: ASGIApp) -> ASGIApp:
    """``app``, told the TCP peer's address before a proxy-headers middleware rewrites it.

    uvicorn's ``--proxy-headers`` replaces the request's client address by the one
    in ``X-Forwarded-For`` when the peer is trusted, so :class:`HeaderAuth` would
    see the browser's address instead of its proxy's. ``toolguard serve`` and
    ``toolguard mcp-proxy`` run uvicorn without it and wrap their app as
    ``keep_peer(ProxyHeadersMiddleware(app))``: the scheme and the client
    address are still the forwarded ones, and the peer is kept for the sign-in.
    """

    async def kept(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            client = scope.get("client")
            scope[PEER_KEY] = client[0] if client else None
        await app(scope, receive, send)

    return kept


def with_proxy_headers(app: Any) -> Any:
    """``app`` behind uvicorn's proxy-headers middleware, keeping the TCP peer for sign-in.

    For uvicorn run with ``proxy_headers=False`` (``toolguard serve`` and
    ``toolguard mcp-proxy``): the forwarded scheme and client address work as
    with uvicorn's own middleware (trusting ``FORWARDED_ALLOW_IPS``, default
    ``127.0.0.1``), and :class:`HeaderAuth` still checks the real peer.
    """
    from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware  # noqa: PLC0415

    trusted = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")
    forwarded: Any = ProxyHeadersMiddleware(app, trusted_hosts=trusted)
    return keep_peer(forwarded)
