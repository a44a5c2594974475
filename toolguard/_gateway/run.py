"""Running the gateway: the upstream, the approval page and the MCP server on stdio, together.

:func:`run` connects to the upstream (a command over stdio, or a
streamable-HTTP URL), closes what a previous process left open on the store,
serves the HTTP app on ``host:port`` and the proxy's MCP server on this
process's stdin/stdout until the client closes stdin.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, BinaryIO, Final

import anyio
import anyio.abc
import anyio.from_thread

from toolguard._core import telemetry
from toolguard._enforce.judge import Judge
from toolguard._enforce.shadow import (
    Candidate,
    ShadowMode,
    check_candidate,
    check_shadow,
    watch_part,
)
from toolguard._gateway.calls_info import upstream_target
from toolguard._gateway.fastlane import Channels, FastLane
from toolguard._gateway.listen import Listen, quiet_server, serve_listening
from toolguard._gateway.overrides import operator_policy
from toolguard._gateway.proxy import DEFAULT_TTL, EventHook, MCPProxy
from toolguard._gateway.relay import DEFAULT_PROGRESS_INTERVAL, Opener, Relay
from toolguard._gateway.routes import DEFAULT_MAX_BODY_BYTES, DEFAULT_PORT, build_app
from toolguard._gateway.shared import (
    Processes,
    close_store,
    is_postgres,
    open_store,
    share,
    shown_db,
)
from toolguard._gateway.starting import (
    DEFAULT_START_TIMEOUT,
    UpstreamStart,
    start_up_error,
    upstream_environment,
)
from toolguard._gateway.stdio import native_stdio
from toolguard._gateway.upstream import list_upstream
from toolguard._notify.channels import Notify
from toolguard._policy.reviewers import Reviewers
from toolguard._policy.rules import Rules

__all__ = ["DEFAULT_DB", "STDOUT_EXPORTER", "run", "stdout_problem"]

DEFAULT_DB: Final = "toolguard-mcp.sqlite3"
"""The SQLite file used when no ``--db`` is given (in the current directory)."""
STDOUT_EXPORTER: Final = (
    "the tracer provider's {exporter} writes spans to stdout, which is the MCP channel in"
    " stdio mode; export them to stderr, a file or a collector, or serve MCP with --listen"
)
"""Why the gateway does not start on stdio while a span exporter writes to stdout."""


async def run(
    command: str | None,
    args: Sequence[str],
    *,
    upstream_url: str | None = None,
    db: str = DEFAULT_DB,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    ttl: float = DEFAULT_TTL,
    on_event: EventHook | None = None,
    rules: Rules | None = None,
    notify: Notify = None,
    remind_after: float | None = None,
    allow_hosts: Sequence[str] = (),
    allow_origins: Sequence[str] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    judge: Judge | None = None,
    auth: Any = None,
    reviewers: Reviewers | None = None,
    start_timeout: float = DEFAULT_START_TIMEOUT,
    ask: Sequence[str] = (),
    allow: Sequence[str] = (),
    listen: Listen | None = None,
    progress_interval: float = DEFAULT_PROGRESS_INTERVAL,
    openapi: bool = False,
    shadow: ShadowMode = False,
    candidate: Candidate | None = None,
    ask_by_url: bool = False,
) -> int:
    """Run the gateway until the client closes stdin; return the exit code.

    The exit code is 0 when the client closed stdin, 130 after Ctrl-C (SIGINT)
    and 143 after SIGTERM, each after a clean shutdown; 2 when the upstream
    cannot be started, reached or listed (one ``error:`` line, before the
    status line) or the approval page cannot listen.

    The upstream is ``command`` with ``args`` over stdio (started with this
    process's environment, without the ``--token-env`` variable and toolguard's own
    settings: :func:`~toolguard._gateway.starting.upstream_environment`), or the
    streamable-HTTP server at ``upstream_url`` when ``command`` is ``None``. ``allow_hosts``,
    ``allow_origins`` and ``max_body_bytes`` are the HTTP app's (see
    :func:`build_app`). ``judge``: a :class:`~toolguard.Judge` for the calls
    (see :class:`~toolguard._gateway.proxy.MCPProxy`). ``auth``: the sign-in of the HTTP app
    (see :func:`build_app`; a :class:`~toolguard._http.link.LinkAuth`'s first link is in the
    status lines, and kept in this user's runtime file while the gateway runs);
    ``reviewers``: who may decide which tool (the chat's ``authorize``
    hook; the client's own answers to an elicitation are decided by ``mcp-client``).
    ``start_timeout``: seconds the upstream may take to start and list its tools.
    ``ask`` and ``allow``: tool names a person always decides / that run without review
    (see :func:`~toolguard._gateway.overrides.operator_policy`). ``listen``: serve MCP over
    streamable HTTP there (until SIGINT or SIGTERM) instead of on stdin/stdout.
    ``progress_interval``: seconds between two progress notifications of a call waiting
    for a person (see :mod:`toolguard._gateway.relay`, which also passes the upstream's
    requests and notifications to the client). ``openapi``: the HTTP app serves its OpenAPI
    document at ``/openapi.json`` (``--openapi``). ``notify``: the chat's channels (webhook,
    Slack, email); ``remind_after``: its reminders (see :class:`~toolguard.ReviewedChat`).
    ``shadow`` and ``candidate``: the chat's shadow mode and candidate policy (see
    :class:`~toolguard.ReviewedChat`); with a candidate every call goes through the chat.
    ``ask_by_url``: a client that supports URL elicitation is asked to open the review on the
    approval page even when it supports the form (``--ask-by-url``, see
    :mod:`toolguard._gateway.asking`).
    """
    from toolguard._http.auth import with_proxy_headers  # noqa: PLC0415

    start = UpstreamStart(
        command, args, upstream_url, start_timeout=start_timeout, env=_environment(listen)
    )
    store = open_store(db)
    listed: list[dict[str, Any]] | None = None
    stopped: int | None = None
    try:
        # the relay to the clients; each upstream connection's lines (for the fast lane)
        relay = Relay(
            _opener(command, args, upstream_url, (start_timeout, listen), lines := Channels())
        )
        async with start, relay.connect(start.target()) as upstream, lines.adopt(upstream, start):
            listed = await list_upstream(upstream)
            start.started()
            rules, classifier = operator_policy(listed, rules, ask=ask, allow=allow)
            proxy = MCPProxy(
                upstream,
                listed,
                store=store,
                ttl=ttl,
                on_event=on_event,
                rules=rules,
                judge=judge,
                classifier=classifier,
                ask_by_url=ask_by_url,
            )
            proxy.chat.notify = notify  # webhooks, Slack, email: review.requested / decided / ...
            proxy.chat.remind_after = remind_after
            proxy.chat.authorize = reviewers
            watch(proxy, shadow, candidate)
            relay.attach(  # sampling, elicitation, roots, list_changed; progress
                proxy, upstream, progress_interval=progress_interval, page_url=_page_url(host, port)
            )
            proxy.calls.target = upstream_target(command, args, upstream_url)
            processes = await _opened(proxy, db)
            app = build_app(
                proxy.chat,
                host=host,
                port=port,
                allow_hosts=allow_hosts,
                allow_origins=allow_origins,
                max_body_bytes=max_body_bytes,
                auth=auth,
                calls=proxy.calls,
                openapi=openapi,
            )
            http = quiet_server(  # proxy headers: with_proxy_headers keeps the peer
                with_proxy_headers(app), host=host, port=port, proxy_headers=False
            )
            async with anyio.create_task_group() as tasks:
                proxy._tasks = tasks  # the proxy's own background tasks
                failed: list[BaseException] = []

                async def serve_http() -> None:
                    try:
                        await http.serve()
                    except SystemExit as exc:  # uvicorn exits when it cannot bind
                        failed.append(exc)

                tasks.start_soon(serve_http)
                _background(tasks, proxy, processes)
                with anyio.fail_after(30):
                    while not http.started and not failed:  # noqa: ASYNC110 - no event to wait on
                        await anyio.sleep(0.02)
                if not http.started:
                    sys.stderr.write(f"error: the approval page cannot listen on {host}:{port}\n")
                    tasks.cancel_scope.cancel()
                    return 2
                upstream_part = f"upstream: {proxy.calls.target}"  # credentials hidden
                with _sign_in_link(auth, _page_url(host, port), upstream_part) as signing:
                    stopped = await _serve_mcp(
                        proxy,
                        listen,
                        (
                            f"toolguard mcp-proxy: {f'MCP {listen.url} | ' if listen else ''}"
                            f"approval page {_page_url(host, port)} | db: {shown_db(db)}"
                            f" | ttl: {ttl:g}s"
                            f" | {upstream_part}{_judge_part(judge)}{_auth_part(auth)}"
                            f"{watch_part(shadow, candidate)}"
                            f"\n{signing}"
                        ),
                        lines,
                        allow_hosts=allow_hosts,
                        allow_origins=allow_origins,
                        max_body_bytes=max_body_bytes,
                    )
                http.should_exit = True
                tasks.cancel_scope.cancel()
    except Exception as exc:
        if listed is not None and start_up_error(exc) is None:
            raise
        # The upstream did not start or did not answer (or cannot be used): one line.
        sys.stderr.write(f"error: {start.problem(exc)}\n")
        return 2
    finally:
        await close_store(store)
    return 128 + stopped if stopped is not None else 0  # 130 after Ctrl-C, 143 after SIGTERM


async def _serve_mcp(
    proxy: MCPProxy, listen: Listen | None, status: str, channels: Channels, **http_options: Any
) -> int | None:
    """Serve the proxy's MCP on stdin/stdout, or at ``listen`` (with ``http_options``), after
    the ``status`` lines; the signal that stopped it (``None``: the client closed stdin).
    Over stdio, calls that need no review take the fast lane (over ``channels``)."""
    if listen is None:
        return await _serve_until_stopped(proxy.server(), status, FastLane(proxy, channels))
    return await serve_listening(
        proxy.server(), listen, on_ready=lambda: _write_status(status), **http_options
    )


async def _serve_until_stopped(
    server: Any, status: str, lane: FastLane | None = None
) -> int | None:
    """Write the ``status`` line, then serve MCP on stdin/stdout until the client
    closes stdin or a signal stops the gateway.

    Returns the signal (SIGINT for Ctrl-C, SIGTERM) that stopped the gateway, or
    ``None`` when the client closed stdin. Signals are watched only in the main
    thread of a POSIX process (elsewhere they take their default course), from
    before the status line on.
    """
    from mcp.server.stdio import stdio_server  # noqa: PLC0415

    if threading.current_thread() is not threading.main_thread() or os.name != "posix":
        _write_status(status)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        return None
    stopped: list[int] = []
    async with anyio.from_thread.BlockingPortal() as portal, anyio.create_task_group() as serving:

        async def watch(*, task_status: anyio.abc.TaskStatus[None]) -> None:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                task_status.started()
                async for received in signals:
                    stopped.append(received)
                    serving.cancel_scope.cancel()
                    return

        await serving.start(watch)
        _write_status(status)
        async with native_stdio(lane) as native:
            if native is not None:  # read and written by the event loop; the fast lane
                if lane is not None:
                    lane.serving(native[1].send)
                async with stdio_server(stdin=native[0], stdout=native[1]) as (read, write):  # type: ignore[arg-type]
                    await server.run(read, write, server.create_initialization_options())
            else:
                lines = _StdinLines(portal)
                try:
                    async with stdio_server(stdin=lines) as (read, write):  # type: ignore[arg-type]
                        await server.run(read, write, server.create_initialization_options())
                finally:
                    lines.close()
        serving.cancel_scope.cancel()
    return stopped[0] if stopped else None


def _opener(
    command: str | None,
    args: Sequence[str],
    url: str | None,
    settings: tuple[float, Listen | None],
    channels: Channels,
) -> Opener:
    """How the relay opens the upstream connection of one MCP client: the same command (a
    process of its own) or URL, started and connected within the start timeout of
    ``settings`` (with the environment ``--listen`` leaves it), its lines kept in
    ``channels`` for the fast lane."""
    start_timeout, listen = settings

    @contextlib.asynccontextmanager
    async def opener(declared: Any, callbacks: Mapping[str, Any]) -> AsyncIterator[Any]:
        env = _environment(listen)
        start = UpstreamStart(command, args, url, start_timeout=start_timeout, env=env)
        async with start.connected(declared, callbacks) as client, channels.adopt(client, start):
            yield client

    return opener


def _environment(listen: Listen | None) -> dict[str, str]:
    """The upstream command's environment: this process's, without the ``--token-env``
    variable and toolguard's own settings."""
    return upstream_environment(os.environ, listen.token_env if listen is not None else None)


def _write_status(line: str) -> None:
    """The gateway's status line, on stderr (stdout is the MCP channel)."""
    sys.stderr.write(line)
    sys.stderr.flush()


class _StdinLines:
    """The lines of stdin for the MCP server, read by a daemon thread.

    The MCP SDK's own reader, when cancelled, waits for its read to finish, so a
    signal would wait for the client's next line; this thread's read is left
    behind instead, and ends with the process. A full buffer holds the thread
    back (the client's lines are read no faster than they are handled).
    """

    def __init__(self, portal: anyio.from_thread.BlockingPortal) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[str](16)
        # A reader of its own on a copy of fd 0, so sys.stdin's lock stays free for shutdown.
        source = open(os.dup(0), "rb")  # noqa: SIM115 - the thread reads it until the end
        self._thread = threading.Thread(
            target=self._read, args=(portal, source), name="toolguard mcp-proxy stdin", daemon=True
        )
        self._thread.start()

    def _read(self, portal: anyio.from_thread.BlockingPortal, source: BinaryIO) -> None:
        try:
            for raw in iter(source.readline, b""):
                portal.call(self._send.send, raw.decode("utf-8", errors="replace"))
            portal.call(self._send.aclose)
        except (RuntimeError, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            return  # the gateway stopped, or stdin was closed under the thread

    def __bool__(self) -> bool:
        return True

    def __aiter__(self) -> AsyncIterator[str]:
        return self._receive

    def close(self) -> None:
        """Stop taking lines: a send the thread is waiting on fails, and the thread ends."""
        self._receive.close()


async def _opened(proxy: MCPProxy, db: str) -> Processes | None:
    """The store taken over: with PostgreSQL, which several gateway processes may share, this
    process's id and first heartbeat (see :mod:`toolguard._gateway.shared`; ``None`` with
    SQLite); then the reviews a previous run left open are closed (and said so)."""
    processes = share(proxy.chat, proxy.model) if is_postgres(db) else None
    if processes is not None:
        await processes.beat()
    _report_stale(await proxy.close_stale())
    return processes


def _background(tasks: anyio.abc.TaskGroup, proxy: MCPProxy, processes: Processes | None) -> None:
    """Start the gateway's background work: the webhooks' delivery (with ``--notify-url``)
    and, in a shared store, this process's heartbeat."""
    if proxy.chat.notify is not None:
        tasks.start_soon(proxy.chat.run_notifications)
    if processes is not None:
        tasks.start_soon(processes.run)


def stdout_problem(listen: Listen | None) -> str | None:
    """Why the gateway cannot serve MCP on stdio with this tracing (a span exporter writing to
    stdout, the MCP channel: see :data:`STDOUT_EXPORTER`), or ``None``."""
    printing = telemetry.stdout_exporter() if listen is None else None
    return STDOUT_EXPORTER.format(exporter=printing) if printing is not None else None


def _report_stale(closed: Sequence[object]) -> None:
    """Say how many reviews a previous run left open (now closed), if any."""
    if closed:
        sys.stderr.write(
            f"toolguard mcp-proxy: closed {len(closed)} review(s) left open by a"
            " previous run; nothing of them ran\n"
        )


def _page_url(host: str, port: int) -> str:
    """The approval page's address, named in the progress notifications (never the sign-in
    link: its code signs a browser in, and the model reads those texts)."""
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


@contextlib.contextmanager
def _sign_in_link(auth: Any, page: str, about: str) -> Iterator[str]:
    """With the sign-in link (``auth`` a :class:`~toolguard._http.link.LinkAuth`): its start-up
    lines, the link kept in this user's runtime file while inside (``toolguard link``);
    otherwise nothing."""
    from toolguard._http.link import LinkAuth, link_lines, published  # noqa: PLC0415

    if not isinstance(auth, LinkAuth):
        yield ""
        return
    with published(auth, "mcp-proxy", page, about) as (link, problem):
        yield link_lines("mcp-proxy", link, problem)


def _auth_part(auth: Any) -> str:
    """`` | sign-in: link``, ``tokens`` or ``header NAME`` for the status line, as ``toolguard
    serve`` says it; nothing without sign-in (``--no-auth``)."""
    from toolguard._http.link import LinkAuth  # noqa: PLC0415

    if auth is None:
        return ""
    header = getattr(auth, "header", None)
    mode = "link" if isinstance(auth, LinkAuth) else f"header {header}" if header else "tokens"
    return f" | sign-in: {mode}"


def watch(proxy: MCPProxy, shadow: ShadowMode, candidate: Candidate | None) -> None:
    """Put the gateway's chat in shadow mode and give it a candidate policy (ReviewedChat's).

    With ``shadow="all"`` a call a deny rule matches goes to the chat (see
    :meth:`MCPProxy.call`), which runs it; with a candidate every call does (none takes the
    fast lane), so the candidate sees them all.
    """
    proxy.chat.runner.shadow = check_shadow(shadow)
    proxy.chat.runner.candidate = check_candidate(candidate)
    proxy.judges_every_call = proxy.judges_every_call or candidate is not None


def _judge_part(judge: Judge | None) -> str:
    """`` | judge: NAME (informs, scope guarded)`` for the startup line, or nothing."""
    if judge is None:
        return ""
    mode = "auto-approves" if judge.auto_approve else "informs"
    return f" | judge: {judge.model_name} ({mode}, scope {judge.scope})"
