"""``toolguard serve``'s app and ``toolguard mcp-proxy``'s app get the same defences.

Both are built by toolguard's one app factory (``toolguard._http.app.protected_app``).
Each test runs against both apps, in process (``httpx.ASGITransport``), with
a review waiting in them: a DNS-rebinding ``Host`` gets a 421 on every route
of the app and changes nothing, a cross-site write a 403, a body over the
limit a 413, every answer carries the security headers, and the allowed
Hosts are served.
"""

from __future__ import annotations

import ast
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from fastapi import FastAPI

from tests.helpers import (
    CROSS_SITE,
    MISDIRECTED,
    MODEL_ENV_VARS,
    security_headers,
    security_headers_once,
    too_large,
)
from toolguard import ReviewedChat, SQLiteStore
from toolguard._cli.serve import build_app as build_serve_app
from toolguard._core.hosts import default_hosts

mcp = pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from tests.integrations.mcp_proxy_upstream import TOOLS, build_server  # noqa: E402
from toolguard._gateway.proxy import MCPProxy  # noqa: E402
from toolguard._gateway.routes import build_app as build_proxy_app  # noqa: E402

ASK = "email alice that the meeting moved to 11"
ONCE = security_headers_once()
"""The security headers, each sent exactly once."""
ROOT = Path(__file__).resolve().parents[2]
LIMIT = 2000  # the body limit both apps get here
EVIL = "evil.example"
LIMIT_SECONDS = 20


@dataclass
class Served:
    """One app with a review waiting in it."""

    app: FastAPI
    base_url: str  # its allowed Host
    thread_id: str
    review_id: str
    ran: Callable[[], list[Any]]  # what the guarded tool really did

    @property
    def chat(self) -> ReviewedChat:
        chat: ReviewedChat = self.app.state.chat
        return chat

    async def snapshot(self) -> tuple[str, int, str | None]:
        """The thread's status, version and current review."""
        state = await self.chat.get_thread(self.thread_id)
        return state.status, state.version, state.review_id

    def decision(self) -> dict[str, Any]:
        """An approval of the waiting review."""
        return {
            "thread_id": self.thread_id,
            "review_id": self.review_id,
            "decisions": [{"type": "approve"}],
        }


@contextlib.asynccontextmanager
async def serve_app(tmp_path: Path) -> AsyncIterator[Served]:
    """``toolguard serve``'s app (demo tools and model) as it runs on 127.0.0.1:8000."""
    app = build_serve_app(
        db=str(tmp_path / "serve.sqlite3"),
        max_body_bytes=LIMIT,
        allowed_hosts=default_hosts("127.0.0.1", 8000),
    )
    base_url = "http://127.0.0.1:8000"
    try:
        async with client(app, base_url) as http:
            body = (await http.post("/hitl/chat", json={"message": ASK})).json()
        chat: ReviewedChat = app.state.chat

        def sent() -> list[Any]:
            state = anyio.from_thread.run(chat.get_thread, body["thread_id"])
            return [m["content"] for m in state.messages if m["role"] == "tool"]

        yield Served(app, base_url, body["thread_id"], body["review_id"], sent)
    finally:
        app.state.chat.store.close()


@contextlib.asynccontextmanager
async def proxy_app(tmp_path: Path) -> AsyncIterator[Served]:
    """``toolguard mcp-proxy``'s app as it runs on 127.0.0.1:8765, over a real upstream."""
    log = tmp_path / "executions.jsonl"
    store = SQLiteStore(tmp_path / "proxy.sqlite3")
    try:
        with anyio.fail_after(LIMIT_SECONDS):
            async with Client(build_server(log), mode="legacy") as upstream:
                proxy = MCPProxy(upstream, TOOLS, store=store, ttl=60)
                opened = await proxy._open("delete_file", {"path": "d"})
                assert not isinstance(opened, str)
                thread_id, review_id, _, _ = opened
                app = build_proxy_app(proxy.chat, max_body_bytes=LIMIT)

                def ran() -> list[Any]:
                    text = log.read_text(encoding="utf-8") if log.exists() else ""
                    return [json.loads(line) for line in text.splitlines()]

                yield Served(app, "http://127.0.0.1:8765", thread_id, review_id, ran)
    finally:
        store.close()


APPS = {"serve": serve_app, "mcp-proxy": proxy_app}


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """serve's offline demo model, whatever the environment says."""
    for name in MODEL_ENV_VARS:
        monkeypatch.delenv(name, raising=False)


each_app = pytest.mark.parametrize("kind", sorted(APPS))


def headed(response: httpx.Response) -> bool:
    """Whether each security header is there once, with its value."""
    return security_headers(response) == ONCE


@contextlib.asynccontextmanager
async def client(app: FastAPI, base_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """An in-process client; a 500 comes back as a response."""
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url=base_url) as http:
        yield http


PAGES = [("GET", p) for p in ("/", "/static/app.js", "/docs", "/redoc", "/openapi.json")]
"""The app's answers outside its OpenAPI schema: the page, its files and the docs."""


def every_route(served: Served) -> list[tuple[str, str]]:
    """``(method, path)`` of every route of the app, path parameters filled in."""
    found = list(PAGES)
    for path, operations in served.app.openapi()["paths"].items():
        filled = path.replace("{thread_id}", served.thread_id).replace("{grant_id}", "g1")
        found += [(method.upper(), filled) for method in sorted(operations)]
    return found


@each_app
async def test_every_route_answers_a_foreign_host_421_and_changes_nothing(
    tmp_path: Path, kind: str
) -> None:
    """DNS rebinding: list, decide, cancel, audit, page, events, docs: 421, nothing happens."""
    async with APPS[kind](tmp_path) as served:
        routes = every_route(served)
        paths = {path for _, path in routes}
        assert {"/", "/hitl/reviews", "/hitl/review", "/hitl/cancel", "/hitl/events"} <= paths
        before = await served.snapshot()
        answers = []
        async with client(served.app, served.base_url) as http:
            for host in (EVIL, f"{EVIL}:8000", f"{EVIL}:8765", f"127.0.0.1.{EVIL}"):
                for method, path in [*routes, ("GET", "/not-a-route")]:
                    body = served.decision() if method in ("POST", "DELETE") else None
                    response = await http.request(method, path, json=body, headers={"Host": host})
                    answers.append(
                        (method, path, response.status_code, response.json(), headed(response))
                    )
        assert answers == [(m, p, 421, MISDIRECTED, True) for m, p, *_ in answers]
        assert len(answers) == 4 * (len(routes) + 1)
        assert await served.snapshot() == before == ("awaiting_review", before[1], served.review_id)
        assert await anyio.to_thread.run_sync(served.ran) == []


async def test_the_two_apps_differ_only_by_the_gateway_audit_route(tmp_path: Path) -> None:
    """The same API in both; the gateway adds GET /hitl/audit and its grants' routes (the Host
    test above covers them) and takes no chat messages (its POST /hitl/chat answers 404,
    outside the schema)."""
    async with proxy_app(tmp_path) as proxied, serve_app(tmp_path) as served_app:
        proxy_paths = set(proxied.app.openapi()["paths"])
        serve_paths = set(served_app.app.openapi()["paths"])
    assert proxy_paths - serve_paths == {"/hitl/audit", "/hitl/grants", "/hitl/grants/{grant_id}"}
    # serve also speaks the chat UIs' protocols: the AI SDK's useChat stream and AG-UI
    assert serve_paths - proxy_paths == {"/hitl/chat", "/hitl/ai-sdk/chat", "/hitl/ag-ui"}


@each_app
async def test_a_cross_site_write_is_403_and_changes_nothing(tmp_path: Path, kind: str) -> None:
    """A page of another origin cannot approve, cancel or post to any route, even a GET-only one."""
    async with APPS[kind](tmp_path) as served:
        before = await served.snapshot()
        foreign = [
            {"Origin": f"http://{EVIL}"},
            {"Origin": "null"},
            {"Sec-Fetch-Site": "cross-site"},
        ]
        answers = []
        async with client(served.app, served.base_url) as http:
            for headers in foreign:
                for method, path in [
                    ("POST", "/hitl/review"),
                    ("POST", "/hitl/cancel"),
                    ("DELETE", f"/hitl/threads/{served.thread_id}/grants/g1"),
                    ("POST", "/hitl/reviews"),  # a GET-only route: refused before routing
                    ("PUT", "/not-a-route"),
                ]:
                    response = await http.request(
                        method, path, json=served.decision(), headers=headers
                    )
                    answers.append(
                        (response.status_code, response.json(), security_headers(response))
                    )
        assert answers == [(403, CROSS_SITE, ONCE)] * 15
        assert await served.snapshot() == before
        assert await anyio.to_thread.run_sync(served.ran) == []


@each_app
async def test_a_body_over_the_limit_is_413_on_any_route(tmp_path: Path, kind: str) -> None:
    """Declared or streamed, a body past --max-body-bytes is refused before it is used."""
    async with APPS[kind](tmp_path) as served:
        before = await served.snapshot()
        big = json.dumps({**served.decision(), "pad": "x" * LIMIT}).encode()

        async def chunks() -> AsyncIterator[bytes]:
            for start in range(0, len(big), 500):
                yield big[start : start + 500]

        headers = {"Content-Type": "application/json"}
        async with client(served.app, served.base_url) as http:
            answers = [
                await http.post("/hitl/review", content=big, headers=headers),
                await http.post("/hitl/review", content=chunks(), headers=headers),
                await http.post("/hitl/audit", content=big, headers=headers),
            ]
        assert [(a.status_code, a.json(), security_headers(a)) for a in answers] == [
            (413, too_large(LIMIT), ONCE)
        ] * 3
        assert await served.snapshot() == before


@each_app
async def test_the_allowed_hosts_are_served_with_the_headers(tmp_path: Path, kind: str) -> None:
    """127.0.0.1, localhost and [::1] with the port: the page, the list, then an approval runs."""
    async with APPS[kind](tmp_path) as served:
        port = served.base_url.rsplit(":", 1)[1]
        async with client(served.app, served.base_url) as http:
            pages = [
                await http.get("/", headers={"Host": f"{name}:{port}"})
                for name in ("127.0.0.1", "localhost", "[::1]")
            ]
            listed = await http.get("/hitl/reviews")
            docs = [await http.get(path) for path in ("/openapi.json", "/docs", "/redoc")]
            same_origin = {"Origin": served.base_url}
            decided = await http.post("/hitl/review", json=served.decision(), headers=same_origin)
            after = await http.get("/hitl/reviews")
        assert [(p.status_code, security_headers(p)) for p in pages] == [(200, ONCE)] * 3
        assert (listed.status_code, security_headers(listed)) == (200, ONCE)
        # No API docs by default (--openapi serves the document; no page ever runs CDN scripts)
        assert [(d.status_code, d.json(), security_headers(d)) for d in docs] == [
            (404, {"detail": "Not Found"}, ONCE)
        ] * 3
        assert [(r["thread_id"], r["review_id"]) for r in listed.json()["reviews"]] == [
            (served.thread_id, served.review_id)
        ]
        assert (decided.status_code, security_headers(decided)) == (200, ONCE)
        assert after.json() == {"reviews": []}
        assert len(await anyio.to_thread.run_sync(served.ran)) == 1


async def test_allow_host_and_allow_origin_widen_the_proxy_app(tmp_path: Path) -> None:
    """mcp-proxy's --allow-host / --allow-origin, as serve's: that name, that origin only."""
    async with proxy_app(tmp_path) as proxied:
        app = build_proxy_app(
            proxied.chat,
            host="0.0.0.0",  # noqa: S104 - the address in the Host list, nothing listens
            port=9000,
            allow_hosts=["gateway.lan"],
            allow_origins=["https://admin.example"],
        )
        async with client(app, "http://gateway.lan:9000") as http:
            named = await http.get("/hitl/reviews")
            bound = await http.get("/hitl/reviews", headers={"Host": "0.0.0.0:9000"})
            other = await http.get("/hitl/reviews", headers={"Host": "gateway.lan.evil.example"})
            refused = await http.post(
                "/hitl/review",
                json=proxied.decision(),
                headers={"Origin": "https://other.example"},
            )
            admin = await http.post(
                "/hitl/review",
                json=proxied.decision(),
                headers={"Origin": "https://admin.example"},
            )
        ran = await anyio.to_thread.run_sync(proxied.ran)
    assert [named.status_code, bound.status_code, other.status_code] == [200, 200, 421]
    assert (refused.status_code, refused.json()) == (403, CROSS_SITE)
    assert admin.status_code == 200
    assert ran == [{"tool": "delete_file", "args": {"path": "d"}}]


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (
            ["--allow-host", "::1"],
            (
                "error: --allow-host: '::1' is not a host; write HOST, HOST:PORT or"
                " [IPv6]:PORT, e.g. 'localhost:8000', or '*' for any host\n"
            ),
        ),
        (
            ["--allow-origin", "null"],
            (
                "error: --allow-origin: 'null' is not an origin; write scheme://host[:port],"
                " e.g. 'https://admin.example.com' (no path; 'null' is never allowed)\n"
            ),
        ),
    ],
)
def test_the_proxy_refuses_invalid_http_options_before_starting(
    options: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad --allow-host / --allow-origin stops mcp-proxy with exit status 2, nothing started."""
    from toolguard._cli.main import main

    assert main(["mcp-proxy", *options, "--", "no-such-upstream-command"]) == 2
    assert capsys.readouterr() == ("", error)


def test_only_the_factory_builds_a_fastapi_app() -> None:
    """No app of toolguard is built around the factory: one FastAPI(...) call in the package."""
    calls = []
    for path in sorted((ROOT / "toolguard").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                calls += [
                    (path.relative_to(ROOT).as_posix(), function.name)
                    for node in ast.walk(function)
                    if isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id in ("FastAPI", "Starlette")
                ]
    assert sorted(set(calls)) == [("toolguard/_http/app.py", "protected_app")]


def test_every_app_and_server_of_toolguard_is_built_behind_the_guards() -> None:
    """Where toolguard builds an ASGI app or starts a server, found by name (``FastAPI(...)``,
    ``fastapi.FastAPI(...)``, ``Starlette``, ``Protect``, ``add_middleware``, uvicorn's
    ``Config``, ``quiet_server``): the FastAPI app only in the factory, which adds ``Protect``;
    ``Protect`` built only around the MCP endpoint of ``mcp-proxy --listen``; servers only for
    ``serve`` (its factory's apps), the gateway's page app (``build_app``, the factory) and the
    listen app. A new app or server elsewhere fails here until it is built behind the guards."""
    watched = {"FastAPI", "Starlette", "Protect", "add_middleware", "Config", "quiet_server"}
    found = []
    for path in sorted((ROOT / "toolguard").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if not isinstance(node, ast.Call):
                    continue
                callee = node.func
                name = (
                    callee.id
                    if isinstance(callee, ast.Name)
                    else callee.attr
                    if isinstance(callee, ast.Attribute)
                    else None
                )
                if name in watched:
                    first = ast.unparse(node.args[0]) if node.args else ""
                    found.append((path.relative_to(ROOT).as_posix(), function.name, name, first))
    assert sorted(set(found)) == [
        ("toolguard/_cli/running.py", "run_uvicorn", "Config", "app"),
        # A header naming the worker process, around the factory's app (TOOLGUARD_WORKER_HEADER).
        ("toolguard/_cli/serve.py", "app_from_env", "add_middleware", "_NameWorker"),
        ("toolguard/_gateway/listen.py", "listen_app", "Protect", "app"),
        ("toolguard/_gateway/listen.py", "quiet_server", "Config", "app"),
        ("toolguard/_gateway/listen.py", "serve_listening", "quiet_server", "app"),
        ("toolguard/_gateway/run.py", "run", "quiet_server", "with_proxy_headers(app)"),
        ("toolguard/_http/app.py", "protected_app", "FastAPI", ""),
        ("toolguard/_http/app.py", "protected_app", "add_middleware", "Protect"),
    ]
