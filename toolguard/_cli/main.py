"""The ``toolguard`` command line: ``demo``, ``serve``, ``mcp-proxy``, ``tools``, ``token``,
``link`` and ``review``.

Each command has its parser and its handler: ``demo`` in
:mod:`toolguard._cli.demo`, ``mcp-proxy`` in :mod:`toolguard._cli.mcp_proxy`,
``token`` and ``link`` in :mod:`toolguard._cli.auth`, ``review`` in
:mod:`toolguard._cli.review`, ``serve`` and ``tools`` here (``serve`` itself
is :mod:`toolguard._cli.serve`, imported only when it runs, since it needs the ``http``
extra).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from toolguard._cli import demo, mcp_proxy, replay, review, stats
from toolguard._cli.auth import add_auth_options, add_link_parser, add_token_parser
from toolguard._cli.judge import add_judge_options
from toolguard._cli.metrics_options import add_metrics_options
from toolguard._cli.notify_options import add_notify_options, notify_arguments
from toolguard._cli.options import port_number, positive_int
from toolguard._cli.watch_options import (
    add_shadow_options,
    add_watch_options,
    shadow_lines,
    watch_settings,
)
from toolguard._tools.toolset import Toolset, guard
from toolguard._version import __version__

__all__ = ["load_object", "main"]


# ---------------------------------------------------------------------------- serve


def _serve(args: argparse.Namespace) -> int:
    try:
        module = importlib.import_module("toolguard._cli.serve")
    except ModuleNotFoundError as exc:
        if exc.name in ("toolguard._cli.serve", "toolguard"):
            sys.stderr.write(
                "error: this installation of toolguard has no HTTP server"
                " (the module toolguard._cli.serve is missing).\n"
            )
        else:
            sys.stderr.write(
                f"error: toolguard serve needs the 'http' extra ({exc.name} is not installed):"
                " pip install 'toolguard-hitl[http]'\n"
            )
        return 2
    serve: Callable[..., Any] = module.serve
    result = serve(
        tools=args.tools,
        model=args.model,
        base_url=args.base_url,
        db=args.db,
        host=args.host,
        port=args.port,
        max_body_bytes=args.max_body_bytes,
        allow_origins=args.allow_origin,
        allow_hosts=args.allow_host,
        **({"workers": args.workers} if args.workers != 1 else {}),
        **({"rules": args.rules} if args.rules is not None else {}),
        **({"notify_url": args.notify_url} if args.notify_url is not None else {}),
        **({"notify_secret": args.notify_secret} if args.notify_secret is not None else {}),
        **({"judge_model": args.judge_model} if args.judge_model is not None else {}),
        **({"judge_auto_approve": True} if args.judge_auto_approve else {}),
        **({"judge_scope": args.judge_scope} if args.judge_scope is not None else {}),
        **({"auth_header": args.auth_header} if args.auth_header is not None else {}),
        **({"trusted_proxies": args.trusted_proxy} if args.trusted_proxy is not None else {}),
        **({"tokens": args.tokens} if args.tokens is not None else {}),
        **({"no_auth": True} if args.no_auth else {}),
        **({"openapi": True} if args.openapi else {}),
        **({"watch": watch_settings(args)} if watch_settings(args) else {}),
        **({"channels": reach} if (reach := notify_arguments(args)) else {}),
    )
    return result if isinstance(result, int) else 0


def _workers(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        msg = f"expected a positive number of processes, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def _add_serve(commands: Any) -> None:
    """The ``serve`` command."""
    serve = commands.add_parser(
        "serve",
        help="serve a chat with human review over HTTP",
        description="Serve the reviewed chat over HTTP (needs the 'http' extra).",
    )
    serve.add_argument(
        "--tools", metavar="MODULE:ATTR", help="the tool registry (default: the demo tools)"
    )
    serve.add_argument(
        "--model",
        metavar="NAME",
        help="the model name (default: TOOLGUARD_MODEL, else gpt-4o-mini)",
    )
    serve.add_argument(
        "--base-url",
        metavar="URL",
        help="an OpenAI-compatible server's URL (default: OPENAI_BASE_URL, else OpenAI)",
    )
    serve.add_argument(
        "--db",
        metavar="PATH",
        help=(
            "keep conversations in this SQLite file, or in PostgreSQL at a postgresql:// URL"
            " (default: toolguard.sqlite3)"
        ),
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="the address to listen on (default: %(default)s)"
    )
    serve.add_argument(
        "--port",
        type=port_number,
        default=8000,
        help="the port to listen on; 0: any free port (default: %(default)s)",
    )
    serve.add_argument(
        "--max-body-bytes",
        type=positive_int,
        default=1024 * 1024,
        metavar="N",
        help="refuse request bodies larger than N bytes with a 413 (default: 1048576)",
    )
    serve.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="let pages of ORIGIN (scheme://host[:port]) send requests (repeatable; default: none)",
    )
    serve.add_argument(
        "--openapi",
        action="store_true",
        help=(
            "serve the API's OpenAPI document as JSON at /openapi.json (default: off; no /docs"
            " page is ever served: its Swagger UI would load scripts from a CDN)"
        ),
    )
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST",
        help=(
            "also answer requests for HOST or HOST:PORT, e.g. the server's name when"
            " listening on 0.0.0.0; '*' answers any Host (repeatable; default: none)"
        ),
    )
    serve.add_argument(
        "--rules",
        metavar="FILE",
        help=(
            "a TOML file of allow/ask/deny rules applied before each tool's own policy"
            " (default: none)"
        ),
    )
    serve.add_argument(
        "--notify-url",
        metavar="URL",
        help=(
            "POST review.* webhooks (requested, decided, expired, cancelled) to URL (default: none)"
        ),
    )
    serve.add_argument(
        "--notify-secret",
        metavar="S",
        help=(
            "the secret that signs the webhooks (X-Toolguard-Signature: sha256=HMAC);"
            " required with --notify-url"
        ),
    )
    serve.add_argument(
        "--workers",
        type=_workers,
        default=1,
        metavar="N",
        help="run N server processes on the one --db (default: 1)",
    )
    add_judge_options(serve)
    add_watch_options(serve)
    add_auth_options(serve)
    add_notify_options(serve)
    serve.set_defaults(handler=_serve)
    add_metrics_options(serve)  # after the handler: it wraps it


# ---------------------------------------------------------------------------- tools


def load_object(spec: str) -> object:
    """Import ``MODULE:ATTR`` (ATTR may be dotted), looking in the current directory too.

    Raises:
        ValueError: ``spec`` is not ``MODULE:ATTR``, or the attribute does not exist.
        ImportError: the module cannot be imported.
    """
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        msg = f"expected MODULE:ATTR (e.g. myapp.tools:registry), got {spec!r}"
        raise ValueError(msg)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    obj: object = importlib.import_module(module_name)
    for part in attr.split("."):
        if not hasattr(obj, part):
            msg = f"{module_name!r} has no attribute {attr!r}"
            raise ValueError(msg)
        obj = getattr(obj, part)
    return obj


def _tools(args: argparse.Namespace) -> int:
    try:
        registry: Any = load_object(args.registry)
        toolset = registry if isinstance(registry, Toolset) else guard(registry)
    except (ImportError, ValueError, TypeError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    sys.stdout.write(shadow_lines(args, toolset.guarded) + toolset.table() + "\n")
    return 0


def _add_tools(commands: Any) -> None:
    """The ``tools`` command."""
    tools = commands.add_parser(
        "tools",
        help="show which tools of a registry need approval, and why",
        description="Print the classification table of a tool registry.",
    )
    tools.add_argument("registry", metavar="MODULE:ATTR", help="a list, mapping or toolset")
    add_shadow_options(tools)
    tools.set_defaults(handler=_tools)


# ---------------------------------------------------------------------------- the parser


class _Parser(argparse.ArgumentParser):
    """An argument parser whose mistakes are one line: ``PROG: error: MESSAGE``, exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="toolguard",
        description="Human-in-the-loop approval for LLM agent tools.",
    )
    parser.add_argument("--version", action="version", version=f"toolguard {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo.add_parser(commands)
    _add_serve(commands)
    mcp_proxy.add_parser(commands)
    _add_tools(commands)
    add_token_parser(commands)
    add_link_parser(commands)
    review.add_parser(commands)
    stats.add_parser(commands)
    replay.add_parser(commands)
    return parser


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands' parsers by name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    """`` (did you mean CHOICE?)`` for the choice closest to ``word``, or nothing."""
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def _unknown_command(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str | None:
    """The error of a first argument that is no command (nor an option), or ``None``."""
    if not argv or argv[0].startswith("-"):
        return None
    names = list(_commands(parser))
    if argv[0] in names:
        return None
    return (
        f"unknown command {argv[0]!r}{_did_you_mean(argv[0], names)};"
        f" the commands are {', '.join(names)}"
    )


def _unrecognized(command: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """The error of the arguments ``command`` does not know, each option with its close match."""
    options = [o for action in command._actions for o in action.option_strings]
    flags = [word.partition("=")[0] for word in extras if word.startswith("-")]
    if flags:  # the words after an unknown option are its values: it names the mistake
        shown, kind = [flag + _did_you_mean(flag, options) for flag in flags], "option"
    else:
        shown, kind = [repr(word) for word in extras], "argument"
    plural = "s" if len(shown) > 1 else ""
    return f"unknown {kind}{plural} {', '.join(shown)}; {command.prog} --help lists the options"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line.

    A mistake in the arguments is one line, ``toolguard COMMAND: error: ...`` (an unknown
    option or command names the close match), and exit code 2.

    Args:
        argv: the arguments after the program name; ``sys.argv[1:]`` by default.

    Returns:
        The exit code: 0 on success, 2 on a usage or setup error.
    """
    parser = _parser()
    arguments = list(sys.argv[1:] if argv is None else argv)
    problem = _unknown_command(parser, arguments)
    if problem is not None:
        parser.error(problem)
    args, extras = parser.parse_known_args(arguments)
    if extras:
        command = _commands(parser).get(getattr(args, "command", None) or "", parser)
        command.error(_unrecognized(command, extras))
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    return handler(args)
