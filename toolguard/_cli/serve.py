"""``toolguard serve``: the chat API and the approval page in one process.

:func:`build_app` assembles the pieces — a tool registry (``--tools
MODULE:ATTR``, else the demo workspace), a model (an OpenAI-compatible one
when ``--model``, ``--base-url``, ``OPENAI_API_KEY`` or ``OPENAI_BASE_URL``
is given, else the offline scripted :class:`~toolguard.demo.DemoModel`) and
a :class:`~toolguard.SQLiteStore` (or a PostgreSQL store for ``--db
postgresql://...``) — into an app of toolguard's one app factory (the one
behind :func:`toolguard.http.create_app`); :func:`serve` runs it with
uvicorn. So ``toolguard serve`` alone works offline, and conversations
survive restarts.

With ``--workers N`` (N > 1) uvicorn runs N processes, each building its own
app with :func:`app_from_env` from the options the command put in the
environment; they share the one SQLite file or PostgreSQL database, whose
compare-and-set saves keep a review from being applied twice.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import secrets
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from toolguard._chat.chat import ReviewedChat
from toolguard._cli.auth import (
    AuthOptionError,
    auth_part,
    build_auth,
    check_auth_options,
    no_auth_warning,
    reviewers_problem,
    sign_in_link,
)
from toolguard._cli.judge import JudgeOptionError, build_judge, describe_judge
from toolguard._cli.notify_options import attach_channels, served_channels
from toolguard._cli.running import run_uvicorn
from toolguard._cli.serve_db import DEFAULT_DB, ServeError, check_store, open_store, shown_db
from toolguard._cli.startup import ListenError, listening_socket, one_line
from toolguard._cli.watch_options import attach_watch
from toolguard._core.errors import RuleSyntaxError
from toolguard._core.hosts import default_hosts
from toolguard._core.llm import ChatModel, close_client
from toolguard._enforce.judge import Judge
from toolguard._enforce.shadow import watch_part
from toolguard._policy.reviewers import Reviewers
from toolguard._policy.rules import Rules
from toolguard._stores.outbox import Webhook
from toolguard._tools.toolset import Tools, Toolset, guard
from toolguard.demo import DemoModel, build_demo_chat

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = [
    "DEFAULT_DB",
    "OPTIONS_ENV",
    "WORKER_HEADER",
    "WORKER_HEADER_ENV",
    "ServeError",
    "app_from_env",
    "build_app",
    "build_chat",
    "check_store",
    "choose_model",
    "load_reviewers",
    "load_tools",
    "open_store",
    "serve",
    "served_app_from_env",
    "shown_db",
]

DEFAULT_MAX_BODY_BYTES = 1024 * 1024
"""``--max-body-bytes`` when not given: 1 MiB (as :data:`toolguard.http.DEFAULT_MAX_BODY_BYTES`)."""

_OPTION_NAMES = (
    ("max_body_bytes", "--max-body-bytes"),
    ("allowed_origins", "--allow-origin"),
    ("allowed_hosts", "--allow-host"),
)

OPTIONS_ENV = "TOOLGUARD_SERVE_OPTIONS"
"""The environment variable through which ``serve --workers N`` hands its options to the workers."""

WORKER_HEADER_ENV = "TOOLGUARD_SERVE_WORKER_HEADER"
"""Set to ``1`` (for tests and debugging) to make every answer name its worker process."""

WORKER_HEADER = "x-toolguard-worker"
"""The response header carrying the answering process's id when :data:`WORKER_HEADER_ENV` is set."""

_PRIVATE_DBS = frozenset({":memory:"})  # a database each process would have to itself

_LOCAL_API_KEY = "not-needed"  # local OpenAI-compatible servers want some key, not a real one


def load_tools(spec: str) -> Any:
    """Import the tool registry named by ``MODULE:ATTR`` (``ATTR`` may be dotted).

    The current directory is searched too, so ``--tools myapp:tools`` finds
    ``./myapp.py``.

    Raises:
        ServeError: ``spec`` is not ``MODULE:ATTR``, the module cannot be
            imported, or it has no such attribute.
    """
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        msg = f"--tools expects MODULE:ATTR (e.g. myapp.tools:registry), got {spec!r}"
        raise ServeError(msg)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        msg = f"--tools {spec}: cannot import {module_name!r}: {exc}"
        raise ServeError(msg) from exc
    except Exception as exc:  # the module itself failed: a syntax error, an exception it raised
        msg = (
            f"--tools {spec}: importing {module_name!r} failed: {type(exc).__name__}:"
            f" {one_line(exc)}; run python -c 'import {module_name}' to see where"
        )
        raise ServeError(msg) from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            msg = f"--tools {spec}: {module_name!r} has no attribute {attr!r}"
            raise ServeError(msg)
        obj = getattr(obj, part)
    return obj


def choose_model(model: str | None = None, base_url: str | None = None) -> ChatModel:
    """The model to serve: OpenAI-compatible when configured, else the offline demo model.

    A real model is used when ``model`` or ``base_url`` is given, or when
    ``OPENAI_API_KEY`` or ``OPENAI_BASE_URL`` is set. Its name is ``model``,
    else ``TOOLGUARD_MODEL``, else ``gpt-4o-mini``; its server is
    ``base_url``, else ``OPENAI_BASE_URL``, else OpenAI. A server given by
    URL without ``OPENAI_API_KEY`` gets a placeholder key (local servers
    need none).

    Raises:
        ServeError: the ``openai`` extra is missing, or OpenAI itself was
            chosen without an API key.
    """
    env_key = os.environ.get("OPENAI_API_KEY") or None
    env_url = os.environ.get("OPENAI_BASE_URL") or None
    if model is None and base_url is None and env_key is None and env_url is None:
        return DemoModel()
    try:
        import openai  # noqa: PLC0415 - the openai extra is optional

        from toolguard.openai import DEFAULT_MODEL, OpenAIChatModel  # noqa: PLC0415
    except ImportError as exc:
        msg = f"a real model needs the 'openai' extra ({exc}): pip install 'toolguard-hitl[openai]'"
        raise ServeError(msg) from exc
    url = base_url or env_url
    api_key = env_key or (_LOCAL_API_KEY if url is not None else None)
    if api_key is None:
        msg = (
            "--model needs an API key: set OPENAI_API_KEY, or give --base-url for a local"
            " OpenAI-compatible server"
        )
        raise ServeError(msg)
    name = model or os.environ.get("TOOLGUARD_MODEL") or DEFAULT_MODEL
    return OpenAIChatModel(openai.AsyncOpenAI(api_key=api_key, base_url=url), model=name)


_Read = TypeVar("_Read")


def load_rules(path: str) -> Rules:
    """The :class:`~toolguard.Rules` in the TOML file at ``path`` (``toolguard serve --rules``).

    Raises:
        ServeError: the file cannot be read or holds no valid rules; the text
            says which.
    """
    return _from_rules_file(Rules.from_toml, path)


def load_reviewers(path: str) -> Reviewers | None:
    """The ``[reviewers]`` table of the rules file at ``path``, or ``None`` without one.

    Raises:
        ServeError: the file cannot be read or its table is invalid.
    """
    return _from_rules_file(Reviewers.from_toml, path)


def _from_rules_file(read: Callable[[Path], _Read], path: str) -> _Read:
    """``read(path)``, its errors as one :class:`ServeError` line naming ``--rules``."""
    try:
        return read(Path(path))
    except OSError as exc:
        msg = f"--rules {path}: cannot read the file: {exc.strerror or exc}"
        raise ServeError(msg) from exc
    except (RuleSyntaxError, TypeError) as exc:
        msg = f"--rules {path}: {exc}"
        raise ServeError(msg) from exc


def build_chat(
    *,
    tools: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    db: str | None = None,
    rules: str | None = None,
    notify_url: str | None = None,
    notify_secret: str | None = None,
    judge_model: str | None = None,
    judge_auto_approve: bool = False,
    judge_scope: str | None = None,
) -> ReviewedChat:
    """The chat ``toolguard serve`` runs (arguments as in :func:`serve`).

    Raises:
        ServeError: a setting cannot be used (see :func:`load_tools`,
            :func:`load_rules`, :func:`choose_model` and
            :func:`toolguard._cli.judge.build_judge`), or the registry is not
            a list, mapping or toolset of tools.
    """
    webhook = _webhook(notify_url, notify_secret)
    try:
        judge = build_judge(judge_model, auto_approve=judge_auto_approve, scope=judge_scope)
    except JudgeOptionError as exc:
        raise ServeError(str(exc)) from exc
    reviewers = load_reviewers(rules) if rules is not None else None
    chat = _build_chat(tools, model, base_url, db, rules, judge)
    chat.notify = webhook
    chat.authorize = reviewers
    return chat


def _webhook(url: str | None, secret: str | None) -> Webhook | None:
    """The :class:`~toolguard.Webhook` of ``--notify-url`` and ``--notify-secret``, if given."""
    if url is None and secret is None:
        return None
    if url is None or secret is None:
        msg = "--notify-url and --notify-secret go together: give both or neither"
        raise ServeError(msg)
    try:
        return Webhook(url, secret=secret)
    except ValueError as exc:
        msg = f"--notify-url/--notify-secret: {exc}"
        raise ServeError(msg) from exc


def _build_chat(  # noqa: PLR0917 - the settings of one chat
    tools: str | None,
    model: str | None,
    base_url: str | None,
    db: str | None,
    rules: str | None,
    judge: Judge | None,
) -> ReviewedChat:
    registry: Tools | None = load_tools(tools) if tools is not None else None
    argument_rules = load_rules(rules) if rules is not None else None
    chat_model = choose_model(model, base_url)
    store = open_store(db)
    if registry is None:
        chat = build_demo_chat(store=store, model=chat_model)
        if argument_rules is None and judge is None:
            return chat
        return ReviewedChat(
            chat_model,
            Toolset(chat.toolset, rules=argument_rules),
            store=store,
            system_prompt=chat.system_prompt,
            sync_in_thread=False,  # as the demo chat: its in-memory tools run on the event loop
            judge=judge,
        )
    try:
        return ReviewedChat(
            chat_model, guard(registry, rules=argument_rules), store=store, judge=judge
        )
    except (TypeError, ValueError) as exc:
        msg = f"--tools {tools}: {exc}"
        raise ServeError(msg) from exc


def build_app(
    *,
    tools: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    db: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    allowed_origins: Iterable[str] = (),
    allowed_hosts: Iterable[str] | None = None,
    rules: str | None = None,
    notify_url: str | None = None,
    notify_secret: str | None = None,
    judge_model: str | None = None,
    judge_auto_approve: bool = False,
    judge_scope: str | None = None,
    auth_header: str | None = None,
    trusted_proxies: Sequence[str] | None = None,
    tokens: str | None = None,
    session_secret: str | None = None,
    link_sign_in: bool = False,
    openapi: bool = False,
    channels: dict[str, Any] | None = None,
    watch: dict[str, Any] | None = None,
) -> FastAPI:
    """The app ``toolguard serve`` runs: the chat API under ``/hitl`` and the page at ``/``.

    Built by toolguard's one app factory, as :func:`toolguard.http.create_app`
    and the ``mcp-proxy`` app are: ``max_body_bytes``, ``allowed_origins`` and
    ``allowed_hosts`` are its protections (``allowed_hosts=None``: no Host
    check; :func:`serve` passes :func:`default_hosts` plus ``--allow-host``).
    ``auth_header`` (with ``trusted_proxies``) or ``tokens`` sign reviewers in
    (:func:`toolguard._cli.auth.build_auth`; ``session_secret``: the hex secret
    of the session cookies, shared by the workers); without them ``link_sign_in``
    signs the person at the machine in with the sign-in link. A ``[reviewers]`` table in
    ``rules`` is the chat's ``authorize`` hook and needs ``auth_header`` or ``tokens``.
    ``openapi`` (``--openapi``) serves the OpenAPI document at ``/openapi.json``.
    ``channels``: Slack, email and reminders (:mod:`toolguard._cli.notify_options`).
    ``watch``: shadow mode and a candidate (:mod:`toolguard._cli.watch_options`).
    The chat is ``app.state.chat``; close its store
    (``app.state.chat.store.close()``) when done.

    Raises:
        ServeError: a setting cannot be used.
    """
    from toolguard._http.ag_ui import served_ag_ui_routes  # noqa: PLC0415 - POST /hitl/ag-ui
    from toolguard._http.ai_sdk import served_ai_sdk_routes  # noqa: PLC0415 - POST /hitl/ai-sdk/chat
    from toolguard._http.app import protected_app  # noqa: PLC0415 - the http extra is optional

    try:
        auth = build_auth(
            auth_header=auth_header,
            trusted_proxies=trusted_proxies,
            tokens=tokens,
            session_secret=session_secret,
            link=link_sign_in,
        )
    except AuthOptionError as exc:
        raise ServeError(str(exc)) from exc
    problem = reviewers_problem(rules, auth) if rules and load_reviewers(rules) else None
    if problem is not None:
        raise ServeError(problem)
    chat = build_chat(
        tools=tools,
        model=model,
        base_url=base_url,
        db=db,
        rules=rules,
        notify_url=notify_url,
        notify_secret=notify_secret,
        judge_model=judge_model,
        judge_auto_approve=judge_auto_approve,
        judge_scope=judge_scope,
    )
    attach_channels(chat, channels, rules)
    attach_watch(chat, watch)
    try:
        app = protected_app(
            chat,
            openapi=openapi,
            max_body_bytes=max_body_bytes,
            allowed_origins=allowed_origins,
            allowed_hosts=allowed_hosts,
            auth=auth,
            routers=[served_ai_sdk_routes(chat, auth), served_ag_ui_routes(chat, auth)],
        )
    except (TypeError, ValueError) as exc:
        close = getattr(chat.store, "close", None)
        if close is not None:
            close()
        raise ServeError(str(exc)) from exc
    if chat.notify is not None:
        _deliver_in_background(app, chat)
    _close_clients_at_shutdown(app, chat)
    return app


def _at_shutdown(app: FastAPI, closing: Callable[[], Awaitable[None]]) -> None:
    """Await ``closing()`` when the app stops, after its own lifespan ends (even when it fails)."""
    starting = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(app_: Any) -> AsyncIterator[Any]:
        try:
            async with starting(app_) as state:
                yield state
        finally:
            await closing()

    app.router.lifespan_context = lifespan


def _close_clients_at_shutdown(app: FastAPI, chat: ReviewedChat) -> None:
    """Close the HTTP clients of the chat's model and judge model when the app stops."""

    async def close() -> None:
        candidate = chat.runner.candidate  # --candidate-judge-model's client too
        judges = (chat.runner.judge, candidate.judge if candidate is not None else None)
        for model in (chat.model, *(judge.model for judge in judges if judge is not None)):
            await close_client(model)

    _at_shutdown(app, close)


def _deliver_in_background(app: FastAPI, chat: ReviewedChat) -> None:
    """Run :meth:`ReviewedChat.run_notifications` while the app runs (its lifespan)."""
    starting = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(app_: Any) -> AsyncIterator[Any]:
        async with starting(app_) as state, anyio.create_task_group() as group:
            group.start_soon(chat.run_notifications)
            try:
                yield state
            finally:
                group.cancel_scope.cancel()

    app.router.lifespan_context = lifespan


def app_from_env() -> FastAPI:
    """The app of one ``toolguard serve --workers N`` worker (a factory for uvicorn).

    Reads the options :func:`serve` put in :data:`OPTIONS_ENV` (JSON: the
    keyword arguments of :func:`build_app`) and builds the app; its store is
    closed when the worker shuts down. When :data:`WORKER_HEADER_ENV` is
    ``1``, every answer carries :data:`WORKER_HEADER` with this process's id.

    Raises:
        ServeError: :data:`OPTIONS_ENV` is missing or not a JSON object, or a
            setting cannot be used.
    """
    text = os.environ.get(OPTIONS_ENV)
    try:
        options: Any = json.loads(text) if text is not None else None
    except ValueError:
        options = None
    if not isinstance(options, dict):
        msg = (
            f"{OPTIONS_ENV} must hold the options of toolguard serve as a JSON object"
            " (toolguard serve --workers N sets it); run toolguard serve instead"
        )
        raise ServeError(msg)
    app = build_app(**options)
    chat: ReviewedChat = app.state.chat

    async def close_store() -> None:
        aclose = getattr(chat.store, "aclose", None)
        if aclose is not None:
            await aclose()

    _at_shutdown(app, close_store)
    if os.environ.get(WORKER_HEADER_ENV) == "1":
        app.add_middleware(_NameWorker)
    return app


def served_app_from_env() -> Any:
    """The app of :func:`app_from_env` behind the proxy headers (the workers' factory).

    uvicorn runs without its own proxy-headers middleware (``proxy_headers=False``):
    this one keeps the TCP peer, which ``--auth-header`` checks against ``--trusted-proxy``.
    """
    from toolguard._http.auth import with_proxy_headers  # noqa: PLC0415 - the http extra

    return with_proxy_headers(app_from_env())


class _NameWorker:
    """ASGI middleware: every HTTP answer carries :data:`WORKER_HEADER` (this process's id)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.header = (WORKER_HEADER.encode("ascii"), str(os.getpid()).encode("ascii"))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_named(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), self.header]}
            await send(message)

        await self.app(scope, receive, send_named)


def _close_store(chat: ReviewedChat) -> None:
    """Close the chat's store (a PostgreSQL store has only ``aclose``; unused, it holds nothing)."""
    close = getattr(chat.store, "close", None)
    if close is not None:
        close()


def _describe(model: ChatModel) -> str:
    """A short name for the model in the startup line."""
    if isinstance(model, DemoModel):
        return "built-in scripted demo model (offline)"
    name = getattr(model, "model", None)
    base_url = getattr(getattr(model, "client", None), "base_url", None)
    if isinstance(name, str) and base_url is not None:
        return f"{name} at {base_url}"
    return repr(model)


def _judge_part(chat: ReviewedChat) -> str:
    """`` | judge: ...`` for the startup line of a chat with a judge, else nothing."""
    judge = chat.runner.judge
    judged = f" | judge: {describe_judge(judge)}" if judge is not None else ""
    return judged + watch_part(chat.runner.shadow, chat.runner.candidate)  # said loudly


def serve(
    *,
    tools: str | None,
    model: str | None,
    base_url: str | None,
    db: str | None,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    allow_origins: Sequence[str] = (),
    allow_hosts: Sequence[str] = (),
    workers: int = 1,
    rules: str | None = None,
    notify_url: str | None = None,
    notify_secret: str | None = None,
    judge_model: str | None = None,
    judge_auto_approve: bool = False,
    judge_scope: str | None = None,
    auth_header: str | None = None,
    trusted_proxies: Sequence[str] | None = None,
    tokens: str | None = None,
    no_auth: bool = False,
    openapi: bool = False,
    channels: dict[str, Any] | None = None,
    watch: dict[str, Any] | None = None,
) -> int:
    """Serve the chat API and the approval page until interrupted.

    Args:
        tools: ``MODULE:ATTR`` of a tool registry; ``None`` serves the demo tools.
        model: an OpenAI-compatible model name (see :func:`choose_model`).
        base_url: an OpenAI-compatible server's URL.
        db: the SQLite file for conversations (:data:`DEFAULT_DB` by default),
            or a ``postgresql://`` URL (see :func:`open_store`).
        host: the address to listen on.
        port: the port to listen on.
        max_body_bytes: the largest request body; larger ones get a 413.
        allow_origins: other origins whose pages may send ``POST`` requests.
        allow_hosts: ``Host`` headers answered besides :func:`default_hosts`
            (e.g. the server's name when listening on ``0.0.0.0``); ``"*"``
            turns the check off. Any other Host gets a 421.
        rules: a TOML file of allow/ask/deny rules (:meth:`toolguard.Rules.from_toml`)
            applied before each tool's own policy.
        notify_url: POST webhooks of review events here (with ``notify_secret``;
            see :class:`toolguard.Webhook`); a background task delivers them.
        notify_secret: the secret that signs the webhooks.
        judge_model: let this OpenAI-compatible model (on the server of
            ``OPENAI_BASE_URL``, else OpenAI, with ``OPENAI_API_KEY``) judge
            the calls: a :class:`~toolguard.Judge` (see docs/judge.md).
        judge_auto_approve: the judge's ``auto_approve``.
        judge_scope: the judge's ``scope``: ``guarded`` (when ``None``) or ``all``.
        auth_header: the reviewer is this header's value, believed from
            ``trusted_proxies`` only (required with it).
        trusted_proxies: the networks of the proxies setting ``auth_header``.
        tokens: a tokens file (``NAME sha256:HEX`` lines): reviewers sign in
            with their token.
        no_auth: no sign-in (a warning is printed). Without ``auth_header``,
            ``tokens`` and ``no_auth`` the person at the machine signs in with
            the one-time link printed at start (one process only).
        workers: how many server processes uvicorn runs; more than 1 needs a
            database the processes share (a SQLite file or PostgreSQL, not
            ``":memory:"``). Each worker builds its app with :func:`app_from_env`.
        openapi: serve the OpenAPI document at ``/openapi.json`` (``--openapi``).
        channels: the Slack, email and reminder options (``--slack-channel``, ...).
        watch: ``--shadow``, ``--shadow-all`` and the candidate options.

    Returns:
        The exit code: 130 after Ctrl-C, 2 for a setting that cannot be
        used (the address and port too: they are bound before the first line
        is printed; ``port`` 0 binds a free port, which the first line names).
        SIGTERM stops the server gracefully and then the process, as uvicorn
        does.
    """
    try:
        import uvicorn  # noqa: F401, PLC0415 - the http extra is optional: checked here
    except ImportError as exc:
        sys.stderr.write(
            f"error: toolguard serve needs the 'http' extra ({exc}):"
            " pip install 'toolguard-hitl[http]'\n"
        )
        return 2
    listening: socket.socket | None = None
    refused: ListenError | None = None
    try:
        listening = listening_socket(host, port)
    except ListenError as exc:
        refused = exc  # said after the mistakes of the other options
    else:
        port = listening.getsockname()[1]  # the port bound, also when --port 0 let the system pick
    try:
        app = _checked_app(
            {
                "tools": tools,
                "model": model,
                "base_url": base_url,
                "db": db,
                "max_body_bytes": max_body_bytes,
                "allowed_origins": list(allow_origins),
                "allowed_hosts": [*default_hosts(host, port), *allow_hosts],
            },
            {
                "rules": rules,
                "notify_url": notify_url,
                "notify_secret": notify_secret,
                "judge_model": judge_model,
                "judge_auto_approve": judge_auto_approve or None,
                "judge_scope": judge_scope,
                "auth_header": auth_header,
                "trusted_proxies": list(trusted_proxies) if trusted_proxies is not None else None,
                "tokens": tokens,
                # The secret of the session cookies, the same in every worker.
                "session_secret": secrets.token_hex(32) if tokens is not None else None,
                "link_sign_in": (auth_header is None and tokens is None and not no_auth) or None,
                "openapi": openapi or None,
                "channels": served_channels(channels, rules, notify_url, _page(host, port)),
                "watch": watch,
            },
            host=host,
            workers=workers,
            no_auth=no_auth,
            refused=_listen_error_line(refused, host, port) if refused is not None else None,
        )
    except ServeError as exc:
        if listening is not None:
            listening.close()
        text = str(exc)
        for name, option in _OPTION_NAMES:
            text = text.replace(name, option)
        sys.stderr.write(f"error: {text}\n")
        return 2
    assert listening is not None  # refused is raised by _checked_app  # noqa: S101
    return _run(app, listening, host=host, port=port, workers=workers, no_auth=no_auth)


def _page(host: str, port: int) -> str:
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def _listen_error_line(exc: ListenError, host: str, port: int) -> str:
    """The error line of an address ``toolguard serve`` cannot listen on."""
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if exc.option == "--host":
        return (
            f"--host {host}: cannot listen on {where}: {exc.reason}; give one of its addresses,"
            " e.g. 127.0.0.1 (this machine only) or 0.0.0.0 (all of its addresses)"
        )
    return f"--port {port}: cannot listen on {where}: {exc.reason}; choose another --port"


def _checked_app(
    options: dict[str, Any],
    given: dict[str, Any],
    *,
    host: str,
    workers: int,
    no_auth: bool,
    refused: str | None,
) -> FastAPI:
    """The app of ``options`` (and the ``given`` ones that are not ``None``) once every setting
    is checked: the options first, then the address (``refused``: why it cannot be listened
    on), then the store (opened once, its tables made).

    Raises:
        ServeError: a setting cannot be used.
    """
    options.update({name: value for name, value in given.items() if value is not None})
    db = options["db"]
    try:
        check_auth_options(
            host,
            auth_header=given["auth_header"],
            trusted_proxies=given["trusted_proxies"],
            tokens=given["tokens"],
            no_auth=no_auth,
        )
    except AuthOptionError as exc:
        raise ServeError(str(exc)) from exc
    if workers < 1:
        msg = f"--workers must be at least 1, got {workers}"
        raise ServeError(msg)
    if workers > 1 and "link_sign_in" in options:
        msg = (
            f"--workers {workers} needs --tokens FILE or --auth-header NAME (or --no-auth):"
            " the sign-in link works with one server process"
        )
        raise ServeError(msg)
    if workers > 1 and db in _PRIVATE_DBS:
        msg = (
            f"--workers {workers} needs a database the workers share, but --db {db} gives"
            " each process a private one: use a SQLite file or a postgresql:// URL"
        )
        raise ServeError(msg)
    app = build_app(**options)
    try:
        if refused is not None:
            raise ServeError(refused)
        check_store(db)
    except ServeError:
        _close_store(app.state.chat)
        raise
    app.state.serve_options = options
    return app


def _run(
    app: FastAPI, listening: socket.socket, *, host: str, port: int, workers: int, no_auth: bool
) -> int:
    """Print the start-up lines and run ``app`` on the ``listening`` socket until stopped."""
    from toolguard._http.auth import with_proxy_headers as served  # noqa: PLC0415

    chat: ReviewedChat = app.state.chat
    db = app.state.serve_options["db"]
    where = f"[{host}]" if ":" in host else host
    url = f"http://{where}:{port}/"
    if no_auth:
        sys.stderr.write(no_auth_warning(url))
        sys.stderr.flush()
    if workers > 1:
        try:
            return _serve_workers(
                app, app.state.serve_options, listening=listening, url=url, workers=workers
            )
        finally:
            listening.close()
    sys.stdout.write(
        f"toolguard serve: {url} | model: {_describe(chat.model)} | db: {shown_db(db)}"
        f"{_judge_part(chat)}{auth_part(app.state.auth)}\n"
    )
    try:
        with sign_in_link(app.state.auth, "serve", url, f"db: {shown_db(db)}"):
            return run_uvicorn(served(app), host=host, port=port, sock=listening)
    finally:
        listening.close()
        _close_store(chat)


def _serve_workers(
    chat_app: FastAPI,
    options: dict[str, Any],
    *,
    listening: socket.socket,
    url: str,
    workers: int,
) -> int:
    """Run ``workers`` uvicorn processes on the ``listening`` socket, each with the app of
    :func:`app_from_env` (built from ``options``).

    ``chat_app`` is the one :func:`serve` built to check the settings (and
    :func:`check_store` opened the database once, so the tables exist before
    the workers start); its chat's store is closed here unused.
    """
    chat: ReviewedChat = chat_app.state.chat
    _close_store(chat)  # each worker opens its own
    os.environ[OPTIONS_ENV] = json.dumps(options)
    sys.stdout.write(
        f"toolguard serve: {url} | model: {_describe(chat.model)}"
        f" | db: {shown_db(options['db'])}{_judge_part(chat)}{auth_part(chat_app.state.auth)}"
        f" | workers: {workers}\n"
    )
    sys.stdout.flush()
    host, port = listening.getsockname()[:2]
    return run_uvicorn(
        "toolguard._cli.serve:served_app_from_env",
        host=host,
        port=port,
        workers=workers,
        sock=listening,
    )
