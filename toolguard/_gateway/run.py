"""Running the gateway: the upstream, the approval page and the MCP server on stdio, together.

:func:`run` connects to the upstream (a command over stdio, or a
streamable-HTTP URL), closes what a previous process left open on the store,
serves the HTTP app on ``host:port`` and the proxy's MCP server on this
process's stdin/stdout until the client closes stdin.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any, Final

import anyio

from toolguard._enforce.judge import Judge
from toolguard._gateway.proxy import DEFAULT_TTL, EventHook, MCPProxy
from toolguard._gateway.routes import DEFAULT_MAX_BODY_BYTES, DEFAULT_PORT, build_app
from toolguard._gateway.upstream import list_upstream
from toolguard._policy.reviewers import Reviewers
from toolguard._policy.rules import Rules
from toolguard._stores.outbox import Webhook
from toolguard._stores.sqlite import SQLiteStore

__all__ = ["DEFAULT_DB", "run"]

DEFAULT_DB: Final = "toolguard-mcp.sqlite3"
"""The SQLite file used when no ``--db`` is given (in the current directory)."""


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
    notify: Webhook | None = None,
    allow_hosts: Sequence[str] = (),
    allow_origins: Sequence[str] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    judge: Judge | None = None,
    auth: Any = None,
    reviewers: Reviewers | None = None,
) -> int:
    """Run the gateway until the client closes stdin; return the exit code.

    The upstream is ``command`` with ``args`` over stdio (started with this
    process's whole environment), or the streamable-HTTP server at
    ``upstream_url`` when ``command`` is ``None``. ``allow_hosts``,
    ``allow_origins`` and ``max_body_bytes`` are the HTTP app's (see
    :func:`build_app`). ``judge``: a :class:`~toolguard.Judge` for the calls
    (see :class:`~toolguard._gateway.proxy.MCPProxy`). ``auth``: the sign-in of the HTTP app
    (see :func:`build_app`); ``reviewers``: who may decide which tool (the chat's ``authorize``
    hook; the client's own answers to an elicitation are decided by ``mcp-client``).
    """
    import uvicorn  # noqa: PLC0415
    from mcp import Client, StdioServerParameters  # noqa: PLC0415
    from mcp.server.stdio import stdio_server  # noqa: PLC0415

    from toolguard._http.auth import with_proxy_headers  # noqa: PLC0415

    target: Any = upstream_url
    if command is not None:
        target = StdioServerParameters(command=command, args=list(args), env=dict(os.environ))
    store = SQLiteStore(db)
    try:
        async with Client(target) as upstream:
            listed = await list_upstream(upstream)
            proxy = MCPProxy(
                upstream,
                listed,
                store=store,
                ttl=ttl,
                on_event=on_event,
                rules=rules,
                judge=judge,
            )
            proxy.chat.notify = notify  # webhooks: review.requested / decided / expired
            proxy.chat.authorize = reviewers
            closed = await proxy.close_stale()
            if closed:
                sys.stderr.write(
                    f"toolguard mcp-proxy: closed {len(closed)} review(s) left open by a"
                    " previous run; nothing of them ran\n"
                )
            app = build_app(
                proxy.chat,
                host=host,
                port=port,
                allow_hosts=allow_hosts,
                allow_origins=allow_origins,
                max_body_bytes=max_body_bytes,
                auth=auth,
            )
            config = uvicorn.Config(
                with_proxy_headers(app),
                host=host,
                port=port,
                log_config=None,
                access_log=False,
                lifespan="off",
                proxy_headers=False,  # with_proxy_headers keeps the peer for --auth-header
            )
            http = uvicorn.Server(config)
            async with anyio.create_task_group() as tasks:
                proxy._tasks = tasks  # the proxy's own background tasks
                failed: list[BaseException] = []

                async def serve_http() -> None:
                    try:
                        await http.serve()
                    except SystemExit as exc:  # uvicorn exits when it cannot bind
                        failed.append(exc)

                tasks.start_soon(serve_http)
                if notify is not None:
                    tasks.start_soon(proxy.chat.run_notifications)
                with anyio.fail_after(30):
                    while not http.started and not failed:  # noqa: ASYNC110 - no event to wait on
                        await anyio.sleep(0.02)
                if not http.started:
                    sys.stderr.write(f"error: the approval page cannot listen on {host}:{port}\n")
                    tasks.cancel_scope.cancel()
                    return 2
                where = f"[{host}]" if ":" in host else host
                sys.stderr.write(
                    f"toolguard mcp-proxy: approval page http://{where}:{port}/ | db: {db}"
                    f" | ttl: {ttl:g}s | upstream: {command or upstream_url}{_judge_part(judge)}\n"
                )
                sys.stderr.flush()
                server = proxy.server()
                async with stdio_server() as (read, write):
                    await server.run(read, write, server.create_initialization_options())
                http.should_exit = True
                tasks.cancel_scope.cancel()
    finally:
        store.close()
    return 0


def _judge_part(judge: Judge | None) -> str:
    """`` | judge: NAME (informs, scope guarded)`` for the startup line, or nothing."""
    if judge is None:
        return ""
    mode = "auto-approves" if judge.auto_approve else "informs"
    return f" | judge: {judge.model_name} ({mode}, scope {judge.scope})"
