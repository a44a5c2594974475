"""``toolguard mcp-proxy``: the command line of the MCP approval gateway.

Checks the options (each mistake is one ``error: ...`` line and exit code 2,
before anything starts), then runs :func:`toolguard._gateway.run.run` until
the client closes stdin. The gateway itself is :mod:`toolguard._gateway`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from toolguard._chat.chat import ReviewedChat
from toolguard._cli.auth import (
    AuthOptionError,
    add_auth_options,
    build_auth,
    check_auth_options,
    no_auth_warning,
    reviewers_problem,
)
from toolguard._cli.gateway_options import (
    add_gateway_options,
    address_problem,
    gateway_options,
    port_holder,
)
from toolguard._cli.judge import JudgeOptionError, add_judge_options, build_judge
from toolguard._cli.metrics_options import add_metrics_options
from toolguard._cli.notify_options import (
    add_notify_options,
    build_channels,
    notify_arguments,
    notify_settings,
)
from toolguard._cli.options import port_number, positive_int
from toolguard._cli.serve_db import ServeError, check_store
from toolguard._cli.startup import (
    ListenError,
    listening_socket,
    sqlite_problem,
    upstream_command_problem,
)
from toolguard._cli.watch_options import add_watch_options, build_watch, watch_settings
from toolguard._core.errors import RuleSyntaxError
from toolguard._core.llm import close_client
from toolguard._enforce.judge import Judge
from toolguard._gateway.proxy import CallModel
from toolguard._gateway.routes import DEFAULT_MAX_BODY_BYTES, build_app
from toolguard._gateway.run import DEFAULT_DB, run, stdout_problem
from toolguard._gateway.shared import is_postgres
from toolguard._policy.reviewers import Reviewers
from toolguard._policy.rules import Rules
from toolguard._stores.outbox import Webhook

__all__ = ["add_parser", "judge_of", "run_command"]


def add_parser(commands: Any) -> None:
    """The ``mcp-proxy`` command, on the ``toolguard`` parser's subcommands."""
    proxy = commands.add_parser(
        "mcp-proxy",
        help="put human approval in front of any MCP server (an MCP gateway)",
        description=(
            "Serve the tools of the MCP server started by UPSTREAM_COMMAND on stdin/stdout;"
            " calls that need approval ask the client's user (elicitation) or wait for the"
            " approval page. Needs the 'mcp' and 'http' extras."
        ),
        usage=(
            "toolguard mcp-proxy [options] -- UPSTREAM_COMMAND [ARGS...]"
            " | toolguard mcp-proxy [options] --upstream-url URL"
        ),
    )
    proxy.add_argument(
        "--db",
        metavar="PATH",
        help=(
            "the SQLite file of the reviews, or a postgresql:// URL that several gateway"
            " processes share (default: toolguard-mcp.sqlite3)"
        ),
    )
    proxy.add_argument(
        "--host", default="127.0.0.1", help="the approval page's address (default: %(default)s)"
    )
    proxy.add_argument(
        "--port",
        type=port_number,
        default=8765,
        help="the approval page's port; 0: any free port (default: %(default)s)",
    )
    proxy.add_argument(
        "--ttl",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="seconds a call waits for a decision (default: 300)",
    )
    proxy.add_argument(
        "--progress-interval",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help=(
            "seconds between two progress notifications of a call waiting for a decision,"
            " sent when the client's request carries a progressToken (default: 2)"
        ),
    )
    proxy.add_argument(
        "--max-body-bytes",
        type=positive_int,
        default=1024 * 1024,
        metavar="N",
        help="refuse request bodies larger than N bytes with a 413 (default: 1048576)",
    )
    proxy.add_argument(
        "--openapi",
        action="store_true",
        help=(
            "serve the API's OpenAPI document as JSON at /openapi.json (default: off; no /docs"
            " page is ever served: its Swagger UI would load scripts from a CDN)"
        ),
    )
    proxy.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="let pages of ORIGIN (scheme://host[:port]) send requests (repeatable; default: none)",
    )
    proxy.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST",
        help=(
            "also answer requests for HOST or HOST:PORT besides the bound address and"
            " loopback; '*' answers any Host (repeatable; default: none)"
        ),
    )
    proxy.add_argument(
        "--upstream-url",
        metavar="URL",
        help="a streamable-HTTP upstream instead of a command (default: none)",
    )
    proxy.add_argument(
        "--rules",
        metavar="FILE",
        help=(
            "a TOML file of allow/ask/deny rules applied before the classifier and annotations"
            " (default: none)"
        ),
    )
    proxy.add_argument(
        "--notify-url",
        metavar="URL",
        help=(
            "POST review.* webhooks (requested, decided, expired, cancelled) to URL (default: none)"
        ),
    )
    proxy.add_argument(
        "--notify-secret",
        metavar="S",
        help=(
            "the secret of the X-Toolguard-Signature HMAC of each webhook body;"
            " required with --notify-url"
        ),
    )
    add_gateway_options(proxy)
    add_judge_options(proxy)
    add_watch_options(proxy)
    add_auth_options(proxy)
    add_notify_options(proxy)
    proxy.add_argument(
        "upstream", nargs=argparse.REMAINDER, help="the upstream server's command, after --"
    )
    proxy.set_defaults(handler=run_command)
    add_metrics_options(proxy)  # after the handler: it wraps it


def run_command(args: argparse.Namespace) -> int:
    """``toolguard mcp-proxy`` (the parsed arguments of the subcommand); the exit code."""
    command = list(args.upstream or [])
    if command and command[0] == "--":
        command = command[1:]
    url = getattr(args, "upstream_url", None)
    notify = _webhook_of(args)
    problem = (
        _upstream_problem(command, url)
        or _timing_problem(args.ttl, getattr(args, "progress_interval", 2.0))
        or (notify if isinstance(notify, str) else None)
    )
    if problem is not None or isinstance(notify, str):
        sys.stderr.write(f"error: {problem}\n")
        return 2
    rules_file = getattr(args, "rules", None)
    try:
        rules, reviewers = _rules_of(rules_file)
        # --shadow, --shadow-all and the candidate options (one statement: the function is long)
        judge, (shadow, candidate) = judge_of(args), build_watch(**(watch_settings(args) or {}))
        gateway = gateway_options(args)
        reach = notify_settings(notify_arguments(args), rules=rules_file, webhook=bool(notify))
    except (ValueError, JudgeOptionError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    try:
        import fastapi  # noqa: F401, PLC0415
        import mcp  # noqa: F401, PLC0415
        import uvicorn  # noqa: F401, PLC0415
    except ImportError as exc:
        sys.stderr.write(
            f"error: toolguard mcp-proxy needs the 'mcp' and 'http' extras ({exc}):"
            " pip install 'toolguard-hitl[mcp,http]'\n"
        )
        return 2
    try:
        auth = _sign_in(args, rules_file if reviewers is not None else None)
    except ValueError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    http_options: dict[str, Any] = {
        "allow_hosts": list(getattr(args, "allow_host", None) or []),
        "allow_origins": list(getattr(args, "allow_origin", None) or []),
        "max_body_bytes": getattr(args, "max_body_bytes", DEFAULT_MAX_BODY_BYTES),
        "openapi": bool(getattr(args, "openapi", False)),
    }
    problem = (
        stdout_problem(gateway["listen"])  # spans written to stdout would break the MCP channel
        or _address_problem(args, gateway["listen"])  # --port 0 becomes the port picked
        or _http_problem(args.host, args.port, http_options)
        or _start_up_problem(command, args.db or DEFAULT_DB)
    )
    if problem is not None:
        sys.stderr.write(f"error: {problem}\n")
        return 2
    where = f"[{args.host}]" if ":" in args.host else args.host
    if getattr(args, "no_auth", False):
        sys.stderr.write(no_auth_warning(f"http://{where}:{args.port}/"))
    page = f"http://{where}:{args.port}/"  # --port 0: the port picked
    channels = build_channels(
        reach, rules=rules_file, page_url=page, reviewers=reviewers, take_secrets=True
    )
    try:
        return anyio.run(
            lambda: _closing_judge(
                judge,
                command[0] if command else None,
                command[1:],
                upstream_url=url,
                db=args.db or DEFAULT_DB,
                host=args.host,
                port=args.port,
                ttl=args.ttl,
                progress_interval=getattr(args, "progress_interval", 2.0),
                rules=rules,
                notify=[*([notify] if notify else []), *channels] or None,
                remind_after=reach.get("remind_after"),
                auth=auth,
                reviewers=reviewers,
                shadow=shadow,
                candidate=candidate,
                **gateway,
                **http_options,
            )
        )
    except KeyboardInterrupt:  # Ctrl-C before the gateway watches for it
        return 130


def _upstream_problem(command: list[str], url: str | None) -> str | None:
    """What is wrong with the upstream given (twice, not at all, a URL of another scheme)."""
    if command and url:
        return "give either --upstream-url or the upstream MCP server's command after --, not both"
    if not command and not url:
        return (
            "give the upstream MCP server's command after --, e.g."
            " toolguard mcp-proxy -- npx -y @modelcontextprotocol/server-filesystem /tmp"
            " (or --upstream-url URL)"
        )
    if url and not url.startswith(("http://", "https://")):
        return f"--upstream-url must be an http:// or https:// URL, got {url!r}"
    return None


def _webhook_of(args: argparse.Namespace) -> Webhook | str | None:
    """The webhook of ``--notify-url``/``--notify-secret``, or what is wrong with them."""
    notify_url = getattr(args, "notify_url", None)
    notify_secret = getattr(args, "notify_secret", None)
    if (notify_url is None) != (notify_secret is None):
        return "--notify-url and --notify-secret go together: give both"
    if notify_url is None:
        return None
    try:
        return Webhook(notify_url, secret=str(notify_secret))
    except (TypeError, ValueError) as exc:
        return f"--notify-url/--notify-secret: {exc}"


async def _closing_judge(judge: Judge | None, *args: Any, **options: Any) -> int:
    """:func:`run` the gateway, then close the judge model's HTTP client (its connections)."""
    candidate = options.get("candidate")  # --candidate-judge-model's client too
    judges = [j for j in (judge, candidate.judge if candidate else None) if j is not None]
    try:
        return await run(*args, judge=judge, **options)
    finally:
        for closing in judges:
            with anyio.CancelScope(shield=True):
                await close_client(closing.model)


def _timing_problem(ttl: float, progress_interval: float) -> str | None:
    """Why ``--ttl`` or ``--progress-interval`` cannot be used (one line), or ``None``."""
    if not ttl > 0:
        return f"--ttl must be a positive number of seconds, got {ttl}"
    if not 0 < progress_interval < float("inf"):
        return f"--progress-interval must be a positive number of seconds, got {progress_interval}"
    return None


def _start_up_problem(command: list[str], db: str) -> str | None:
    """Why the upstream command cannot start or the store not open (one line), or ``None``."""
    if command:
        problem = upstream_command_problem(command[0], command[1:])
        if problem is not None:
            return problem
    if is_postgres(db):  # shared by several gateway processes
        try:
            check_store(db)
        except ServeError as exc:
            return str(exc)
        return None
    problem = sqlite_problem(db, keep=False)  # the gateway makes it when it starts
    return f"--db {db}: {problem}" if problem is not None else None


def _address_problem(args: argparse.Namespace, listen: Any) -> str | None:
    """Why the approval page or the ``--listen`` server cannot listen (one line), or ``None``.

    ``--port 0``: ``args.port`` becomes the free port the system picked.
    """
    try:
        with listening_socket(args.host, args.port) as probe:
            args.port = probe.getsockname()[1]
    except ListenError as exc:
        where = f"[{args.host}]:{args.port}" if ":" in args.host else f"{args.host}:{args.port}"
        if exc.option == "--host":
            return (
                f"--host {args.host}: the approval page cannot listen on {where}: {exc.reason};"
                " give one of its addresses, e.g. 127.0.0.1 (this machine only)"
            )
        return (
            f"--port {args.port}: the approval page cannot listen on {where}:"
            f" {exc.reason}{port_holder(args.host, args.port)}; choose another --port (or --host)"
        )
    problem = address_problem(listen.host, listen.port) if listen is not None else None
    if problem is not None:
        return (
            f"--listen {listen.url}: cannot listen on {listen.host}:{listen.port}: {problem};"
            " choose another port (or address)"
        )
    return None


def _sign_in(args: argparse.Namespace, reviewers_file: str | None) -> Any:
    """The authenticator of the sign-in options (or ``None`` with ``--no-auth``); without
    any, the sign-in link's. ``ValueError``: the error line.

    ``reviewers_file``: the ``--rules`` file when it has a ``[reviewers]`` table, which
    needs reviewers who sign in by name.
    """
    sign_in: dict[str, Any] = {
        "auth_header": getattr(args, "auth_header", None),
        "trusted_proxies": getattr(args, "trusted_proxy", None),
        "tokens": getattr(args, "tokens", None),
    }
    no_auth = bool(getattr(args, "no_auth", False))
    try:
        check_auth_options(args.host, no_auth=no_auth, **sign_in)
        auth = build_auth(**sign_in, link=not no_auth)
    except AuthOptionError as exc:
        raise ValueError(str(exc)) from None
    problem = reviewers_problem(reviewers_file, auth) if reviewers_file is not None else None
    if problem is not None:
        raise ValueError(problem)
    return auth


def _rules_of(path: str | None) -> tuple[Rules | None, Reviewers | None]:
    """The rules and the ``[reviewers]`` table of ``--rules``; ``ValueError``: the error line."""
    if path is None:
        return None, None
    try:
        return Rules.from_toml(Path(path)), Reviewers.from_toml(Path(path))
    except OSError as exc:
        msg = f"--rules {path}: cannot read the file: {exc.strerror}"
        raise ValueError(msg) from None
    except RuleSyntaxError as exc:
        msg = f"--rules {path}: {exc}"
        raise ValueError(msg) from None


def judge_of(args: argparse.Namespace) -> Judge | None:
    """The :class:`~toolguard.Judge` of ``--judge-model``, ``--judge-auto-approve`` and
    ``--judge-scope``, or ``None`` without ``--judge-model``.

    Raises:
        JudgeOptionError: an option cannot be used (see
            :func:`toolguard._cli.judge.build_judge`).
    """
    return build_judge(
        getattr(args, "judge_model", None),
        auto_approve=bool(getattr(args, "judge_auto_approve", False)),
        scope=getattr(args, "judge_scope", None),
    )


def _http_problem(host: str, port: int, options: Mapping[str, Any]) -> str | None:
    """Why the HTTP app cannot be built with these options (in the CLI's words), or ``None``."""
    chat = ReviewedChat(CallModel(), [])
    try:
        build_app(chat, host=host, port=port, **options)
    except (TypeError, ValueError) as exc:
        text = str(exc)
        for name, option in (
            ("allowed_hosts", "--allow-host"),
            ("allowed_origins", "--allow-origin"),
            ("max_body_bytes", "--max-body-bytes"),
        ):
            text = text.replace(name, option)
        return text
    return None
