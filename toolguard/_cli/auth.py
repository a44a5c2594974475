"""Sign-in options shared by ``toolguard serve`` and ``toolguard mcp-proxy``, and ``toolguard
token``.

``--auth-header NAME`` (with ``--trusted-proxy CIDR``) builds a
:class:`~toolguard.http.HeaderAuth`, ``--tokens FILE`` a :class:`~toolguard.http.TokenAuth`;
``--no-auth`` lets a server listen beyond loopback without either, with a warning at every
start. Each mistake is one line of text for ``error: ...`` (exit code 2).
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolguard._http.auth import Authenticator

__all__ = [
    "AuthOptionError",
    "add_auth_options",
    "add_token_parser",
    "build_auth",
    "check_auth_options",
    "is_loopback",
    "no_auth_warning",
]

DEFAULT_TRUSTED = ("127.0.0.1/32", "::1/128")


class AuthOptionError(Exception):
    """A sign-in option cannot be used; the text (one line) says which and why."""


def add_auth_options(parser: Any) -> None:
    """``--auth-header``, ``--trusted-proxy``, ``--tokens`` and ``--no-auth`` on ``parser``."""
    parser.add_argument(
        "--auth-header",
        metavar="NAME",
        help=(
            "the reviewer is the value of header NAME (e.g. X-Forwarded-User), set by an"
            " authenticating reverse proxy (default: nobody signs in)"
        ),
    )
    parser.add_argument(
        "--trusted-proxy",
        action="append",
        default=None,
        metavar="CIDR",
        help=(
            "believe --auth-header only from peers in CIDR (repeatable; default: 127.0.0.1/32"
            " and ::1/128)"
        ),
    )
    parser.add_argument(
        "--tokens",
        metavar="FILE",
        help=(
            "reviewers sign in with tokens: lines NAME sha256:HEX (see toolguard token;"
            " default: nobody signs in)"
        ),
    )
    parser.add_argument(
        "--no-auth",
        action="store_true",
        help=(
            "listen beyond loopback without sign-in, on purpose (anyone reaching it approves;"
            " default: off)"
        ),
    )


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback address (``127.0.0.0/8``, ``::1``)."""
    if host.strip().lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def check_auth_options(
    host: str,
    *,
    auth_header: str | None,
    trusted_proxies: Sequence[str] | None,
    tokens: str | None,
    no_auth: bool,
) -> None:
    """Refuse sign-in options that do not go together, and listening beyond loopback unsigned.

    Raises:
        AuthOptionError: the one line to print after ``error:``.
    """
    if auth_header is not None and tokens is not None:
        msg = "give --auth-header or --tokens, not both"
        raise AuthOptionError(msg)
    if no_auth and (auth_header is not None or tokens is not None):
        msg = "--no-auth turns sign-in off: give it without --auth-header and --tokens"
        raise AuthOptionError(msg)
    if trusted_proxies is not None and auth_header is None:
        msg = "--trusted-proxy says whose --auth-header to believe: give --auth-header NAME too"
        raise AuthOptionError(msg)
    if not is_loopback(host) and auth_header is None and tokens is None and not no_auth:
        msg = (
            f"--host {host} listens beyond this machine, so reviewers must sign in: give"
            " --auth-header NAME (an authenticating proxy) or --tokens FILE (or --no-auth to"
            " listen without sign-in on purpose)"
        )
        raise AuthOptionError(msg)


def build_auth(
    *,
    auth_header: str | None,
    trusted_proxies: Sequence[str] | None,
    tokens: str | None,
    session_secret: str | None = None,
) -> Authenticator | None:
    """The authenticator of the options, or ``None`` without ``--auth-header`` and ``--tokens``.

    ``session_secret`` (hex) is the :class:`~toolguard.http.TokenAuth` secret
    the processes of ``serve --workers N`` share.

    Raises:
        AuthOptionError: an option's value cannot be used (the text says which).
    """
    from toolguard._http.auth import HeaderAuth, TokenAuth  # noqa: PLC0415 - the http extra

    if auth_header is not None:
        proxies = list(trusted_proxies) if trusted_proxies is not None else list(DEFAULT_TRUSTED)
        try:
            return HeaderAuth(auth_header, trusted_proxies=proxies)
        except ValueError as exc:
            text = (
                str(exc)
                .replace("trusted_proxies: ", "--trusted-proxy ")
                .replace("header: ", "--auth-header ")
            )
            raise AuthOptionError(text) from None
    if tokens is not None:
        secret = bytes.fromhex(session_secret) if session_secret is not None else None
        try:
            return TokenAuth.from_file(tokens, secret=secret)
        except OSError as exc:
            msg = f"--tokens {tokens}: cannot read the file: {exc.strerror or exc}"
            raise AuthOptionError(msg) from None
        except (ValueError, UnicodeError) as exc:
            msg = f"--tokens {exc}" if str(exc).startswith(tokens) else f"--tokens {tokens}: {exc}"
            raise AuthOptionError(msg) from None
    return None


def no_auth_warning(url: str) -> str:
    """The warning line of ``--no-auth``."""
    return (
        f"warning: --no-auth: nobody signs in; anyone who can reach {url} can approve every"
        " tool call and read every conversation\n"
    )


# ---------------------------------------------------------------------------- toolguard token


def add_token_parser(commands: Any) -> None:
    """The ``token`` command: a new random token for a reviewer and its tokens-file line."""
    token = commands.add_parser(
        "token",
        help="make a reviewer's sign-in token and its line for the --tokens file",
        description=(
            "Print a new random token for reviewer NAME (shown only this once) and the line"
            " to add to the file of --tokens (it holds only the token's hash)."
        ),
    )
    token.add_argument("name", metavar="NAME", help="the reviewer's name, e.g. alice")
    token.set_defaults(handler=_token)


def _token(args: argparse.Namespace) -> int:
    try:
        from toolguard._http.auth import new_token  # noqa: PLC0415 - the http extra
    except ImportError as exc:
        sys.stderr.write(
            f"error: toolguard token needs the 'http' extra ({exc}):"
            " pip install 'toolguard-hitl[http]'\n"
        )
        return 2
    try:
        token, line = new_token(args.name)
    except ValueError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    sys.stdout.write(
        f"token for {args.name} (shown only this once; give it to {args.name}): {token}\n"
        f"line for the --tokens file: {line}\n"
    )
    return 0
