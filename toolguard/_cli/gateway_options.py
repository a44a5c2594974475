"""``toolguard mcp-proxy``'s options for the upstream's start, single tools and ``--listen``.

``--start-timeout SECONDS`` bounds the upstream's start; ``--ask TOOL`` and
``--allow TOOL`` correct a server's annotations for one tool;
``--listen URL`` (with ``--token-env NAME``) serves MCP over streamable HTTP to
many clients instead of stdio. :func:`gateway_options` checks them into the
keyword arguments of :func:`toolguard._gateway.run.run`;
:func:`address_problem` finds a port another process holds before anything
starts.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from toolguard._cli.startup import ListenError, listening_socket
from toolguard._gateway.listen import parse_listen
from toolguard._gateway.starting import DEFAULT_START_TIMEOUT

__all__ = ["add_gateway_options", "address_problem", "gateway_options", "port_holder"]


def add_gateway_options(proxy: argparse.ArgumentParser) -> None:
    """``--start-timeout``, ``--ask``, ``--allow``, ``--listen``, ``--ask-by-url`` and
    ``--token-env``."""
    proxy.add_argument(
        "--start-timeout",
        type=float,
        default=DEFAULT_START_TIMEOUT,
        metavar="SECONDS",
        help=("seconds the upstream may take to start and list its tools (default: %(default)g)"),
    )
    proxy.add_argument(
        "--ask",
        action="append",
        default=[],
        metavar="TOOL",
        help=(
            "a person decides every call to TOOL, whatever the server's annotations say"
            " (repeatable; default: none)"
        ),
    )
    proxy.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="TOOL",
        help=(
            "calls to TOOL run without review, whatever the server's annotations say; a deny or"
            " ask rule of --rules, and --ask, still win (repeatable; default: none)"
        ),
    )
    proxy.add_argument(
        "--listen",
        metavar="URL",
        help=(
            "serve MCP over streamable HTTP at URL (http://HOST:PORT/PATH) to many clients"
            " instead of on stdin/stdout (default: stdio)"
        ),
    )
    proxy.add_argument(
        "--ask-by-url",
        action="store_true",
        help=(
            "ask an MCP client that supports URL elicitation to open the review on the approval"
            " page, even when it supports the form too (default: the form for such clients)"
        ),
    )
    proxy.add_argument(
        "--token-env",
        metavar="NAME",
        help=(
            "with --listen, clients must send Authorization: Bearer TOKEN, TOKEN being the value"
            " of the environment variable NAME; required beyond loopback (default: none)"
        ),
    )


def gateway_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``start_timeout``, ``ask``, ``allow``, ``listen`` and ``ask_by_url`` arguments of the
    gateway's run.

    Raises:
        ValueError: an option cannot be used (the text is the error line).
    """
    seconds = getattr(args, "start_timeout", DEFAULT_START_TIMEOUT)
    if not (math.isfinite(seconds) and seconds > 0):
        msg = f"--start-timeout must be a positive number of seconds, got {seconds:g}"
        raise ValueError(msg)
    url = getattr(args, "listen", None)
    token_env = getattr(args, "token_env", None)
    if token_env is not None and url is None:
        msg = "--token-env goes with --listen: it names the token of the MCP clients over HTTP"
        raise ValueError(msg)
    listen = parse_listen(url, token_env) if url is not None else None
    if listen is not None and listen.port == args.port and _same_address(listen.host, args.host):
        msg = (
            f"--listen {url} and --port {args.port} name the same address: give the MCP"
            " server and the approval page different ports"
        )
        raise ValueError(msg)
    return {
        "start_timeout": seconds,
        "ask": list(getattr(args, "ask", None) or []),
        "allow": list(getattr(args, "allow", None) or []),
        "listen": listen,
        "ask_by_url": bool(getattr(args, "ask_by_url", False)),
    }


def _same_address(one: str, other: str) -> bool:
    wildcard = {"0.0.0.0", "::", ""}  # noqa: S104 - names of the wildcard address
    return one == other or one in wildcard or other in wildcard


def address_problem(host: str, port: int) -> str | None:
    """Why nothing can listen on ``host:port`` now (one line), or ``None`` when it can.

    Binds the address (as the server will, with ``SO_REUSEADDR``) and lets it
    go at once.
    """
    try:
        listening_socket(host, port).close()
    except ListenError as exc:
        return exc.reason
    return None


def port_holder(host: str, port: int) -> str:
    """What to say of another ``toolguard mcp-proxy`` of this user whose approval page is on
    ``host:port`` (from its sign-in link's runtime file), or ``""`` when none is known.

    An MCP client that keeps its stdio server running after it closes (fastmcp's
    ``StdioTransport`` does, unless ``keep_alive=False``) sends nothing when it closes:
    that gateway runs until the client's transport is closed or its process ends.
    """
    from toolguard._http.link import running_servers  # noqa: PLC0415

    where = f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"
    for server in running_servers():
        if server.command == "mcp-proxy" and server.url == where:
            return (
                f" (by another toolguard mcp-proxy, pid {server.pid}, {server.about}: an MCP"
                " client that keeps its stdio server running after it closes, as fastmcp's"
                " StdioTransport does unless keep_alive=False, keeps it running until the"
                " client's transport is closed; --port 0 picks a free port)"
            )
    return ""
