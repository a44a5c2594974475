"""Sign-in options shared by ``toolguard serve`` and ``toolguard mcp-proxy``, ``toolguard
token`` and ``toolguard link``.

``--auth-header NAME`` (with ``--trusted-proxy CIDR``, required) builds a
:class:`~toolguard.http.HeaderAuth`, ``--tokens FILE`` a :class:`~toolguard.http.TokenAuth`;
without either (nor ``--no-auth``) the person at the machine signs in with the server's
one-time sign-in link (:class:`~toolguard._http.link.LinkAuth`), which ``toolguard link``
prints again. ``--no-auth`` turns sign-in off, with a warning at every start. Each mistake is
one line of text for ``error: ...`` (exit code 2).
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolguard._http.auth import Authenticator

__all__ = [
    "AuthOptionError",
    "add_auth_options",
    "add_link_parser",
    "add_token_parser",
    "auth_part",
    "build_auth",
    "check_auth_options",
    "is_loopback",
    "no_auth_warning",
    "reviewers_problem",
    "sign_in_link",
]


class AuthOptionError(Exception):
    """A sign-in option cannot be used; the text (one line) says which and why."""


def add_auth_options(parser: Any) -> None:
    """``--auth-header``, ``--trusted-proxy``, ``--tokens`` and ``--no-auth`` on ``parser``."""
    parser.add_argument(
        "--auth-header",
        metavar="NAME",
        help=(
            "the reviewer is the value of header NAME (e.g. X-Forwarded-User), set by an"
            " authenticating reverse proxy; needs --trusted-proxy (default: the sign-in link)"
        ),
    )
    parser.add_argument(
        "--trusted-proxy",
        action="append",
        default=None,
        metavar="CIDR",
        help=(
            "believe --auth-header only from peers in CIDR, the proxy's addresses: every"
            " program connecting from there can name any reviewer (repeatable; required with"
            " --auth-header)"
        ),
    )
    parser.add_argument(
        "--tokens",
        metavar="FILE",
        help=(
            "reviewers sign in with tokens: lines NAME sha256:HEX (see toolguard token;"
            " default: the sign-in link)"
        ),
    )
    parser.add_argument(
        "--no-auth",
        action="store_true",
        help=(
            "no sign-in, on purpose: anyone reaching the port approves, every program on this"
            " machine too (default: off; the person at the machine signs in with the link"
            " printed at start)"
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
    if auth_header is not None and trusted_proxies is None:
        raise AuthOptionError(_needs_trusted_proxy(auth_header))
    if not is_loopback(host) and auth_header is None and tokens is None and not no_auth:
        msg = (
            f"--host {host} listens beyond this machine, so reviewers must sign in: give"
            " --auth-header NAME (an authenticating proxy) or --tokens FILE (or --no-auth to"
            " listen without sign-in on purpose)"
        )
        raise AuthOptionError(msg)


def _needs_trusted_proxy(header: str) -> str:
    return (
        f"--auth-header {header} needs --trusted-proxy CIDR, the address of the proxy that"
        " sets the header: every program connecting from a trusted address can name any"
        " reviewer"
    )


def build_auth(
    *,
    auth_header: str | None,
    trusted_proxies: Sequence[str] | None,
    tokens: str | None,
    session_secret: str | None = None,
    link: bool = False,
) -> Authenticator | None:
    """The authenticator of the options: a :class:`~toolguard.http.HeaderAuth` for
    ``--auth-header``, a :class:`~toolguard.http.TokenAuth` for ``--tokens``, else the sign-in
    link's :class:`~toolguard._http.link.LinkAuth` when ``link``, else ``None``.

    ``session_secret`` (hex) is the :class:`~toolguard.http.TokenAuth` secret
    the processes of ``serve --workers N`` share.

    Raises:
        AuthOptionError: an option's value cannot be used (the text says which).
    """
    from toolguard._http.auth import HeaderAuth, TokenAuth  # noqa: PLC0415 - the http extra
    from toolguard._http.link import LinkAuth, local_reviewer  # noqa: PLC0415

    if auth_header is not None:
        if trusted_proxies is None:
            raise AuthOptionError(_needs_trusted_proxy(auth_header))
        try:
            return HeaderAuth(auth_header, trusted_proxies=list(trusted_proxies))
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
    return LinkAuth(local_reviewer()) if link else None


def reviewers_problem(rules: str, auth: object) -> str | None:
    """Why the ``[reviewers]`` table of ``--rules`` cannot be used with ``auth``, or ``None``.

    The table names reviewers, so they must sign in by name (``--auth-header`` or ``--tokens``):
    the sign-in link signs in only the person at the machine, who is on no list.
    """
    from toolguard._http.auth import HeaderAuth, TokenAuth  # noqa: PLC0415 - the http extra

    if isinstance(auth, (HeaderAuth, TokenAuth)):
        return None
    return (
        f"--rules {rules} has a [reviewers] table, which needs reviewers who sign in by name:"
        " give --auth-header NAME or --tokens FILE"
    )


def auth_part(auth: object) -> str:
    """`` | sign-in: ...`` for a start-up line: ``header NAME``, ``tokens`` or ``link``."""
    from toolguard._http.link import LinkAuth  # noqa: PLC0415 - the http extra

    header = getattr(auth, "header", None)
    if header is not None:
        return f" | sign-in: header {header}"
    if isinstance(auth, LinkAuth):
        return " | sign-in: link"
    return " | sign-in: tokens" if auth is not None else ""


@contextlib.contextmanager
def sign_in_link(auth: object, command: str, url: str, about: str) -> Iterator[str | None]:
    """While serving with the sign-in link (``auth`` a :class:`~toolguard._http.link.LinkAuth`):
    the link kept in the runtime file, its line written on stdout; yields the link.

    Without it (another ``auth``, or none): stdout flushed, yields ``None``.
    """
    from toolguard._http.link import LinkAuth, link_lines, published  # noqa: PLC0415

    if not isinstance(auth, LinkAuth):
        sys.stdout.flush()
        yield None
        return
    with published(auth, command, url, about) as (link, problem):
        sys.stdout.write(link_lines(command, link, problem))
        sys.stdout.flush()
        yield link


def no_auth_warning(url: str) -> str:
    """The warning line of ``--no-auth``."""
    return (
        f"warning: --no-auth: nobody signs in; anyone who can reach {url} can approve every"
        " tool call and read every conversation\n"
    )


# ---------------------------------------------------------------------------- toolguard link


def add_link_parser(commands: Any) -> None:
    """The ``link`` command: the sign-in links of this user's running servers."""
    link = commands.add_parser(
        "link",
        help="print the sign-in link of each running toolguard serve and mcp-proxy",
        description=(
            "Print the current sign-in link of each toolguard serve and toolguard mcp-proxy"
            " that this user runs on this machine with the sign-in link (neither --tokens,"
            " --auth-header nor --no-auth). A link signs in one browser; once it is used, this"
            " prints the next one."
        ),
    )
    link.set_defaults(handler=_link)


def _link(args: argparse.Namespace) -> int:
    del args
    try:
        from toolguard._http.link import running_servers, runtime_dir  # noqa: PLC0415
    except ImportError as exc:
        sys.stderr.write(
            f"error: toolguard link needs the 'http' extra ({exc}):"
            " pip install 'toolguard-hitl[http]'\n"
        )
        return 2
    servers = running_servers()
    if not servers:
        sys.stderr.write(
            "no toolguard serve or mcp-proxy of this user signs in with a link now"
            f" (runtime files in {runtime_dir()})\n"
        )
        return 1
    for server in servers:
        sys.stdout.write(
            f"toolguard {server.command} (pid {server.pid}, {server.about}): {server.link}\n"
        )
    return 0


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
