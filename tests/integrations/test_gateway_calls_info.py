"""What the gateway's page reads about its calls: ``GET /hitl/info``, each waiting call's server
and client in ``GET /hitl/reviews``, and ``POST /hitl/chat`` refused with a 404.

In one process: an in-memory MCP client (with its own ``clientInfo``), the proxy's server and
the upstream test server; the HTTP app is called in-process.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

mcp = pytest.importorskip("mcp")
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from mcp import Client, types  # noqa: E402

from toolguard import MemoryStore  # noqa: E402
from toolguard._gateway.calls_info import (  # noqa: E402
    MAX_TEXT,
    CallsInfo,
    implementation,
    upstream_target,
)
from toolguard._gateway.proxy import MCPProxy  # noqa: E402
from toolguard._gateway.routes import DEFAULT_PORT, build_app  # noqa: E402
from toolguard._http.routes import NO_MESSAGES  # noqa: E402
from toolguard.http import TokenAuth, new_token  # noqa: E402

from .mcp_proxy_upstream import TOOLS, build_server  # noqa: E402

LIMIT = 20
BASE_URL = f"http://127.0.0.1:{DEFAULT_PORT}"  # a Host the gateway's app answers by default
SERVER = {
    "target": "python -m upstream",
    "name": "toolguard-proxy-upstream",
    "version": None,  # the test server gives an empty version
    "title": None,
}
CLIENT = {"name": "probe-client", "version": "2.5.0", "title": "Probe Client"}


@asynccontextmanager
async def gateway(log: Path) -> AsyncIterator[tuple[Client, MCPProxy, httpx.AsyncClient]]:
    """The proxy between an in-memory client and upstream, and an HTTP client of its app."""
    info = types.Implementation(name="probe-client", version="2.5.0", title="Probe Client")
    with anyio.fail_after(LIMIT):
        async with Client(build_server(log), mode="legacy") as upstream:
            proxy = MCPProxy(upstream, TOOLS, store=MemoryStore(), ttl=60)
            proxy.calls.target = upstream_target("python", ["-m", "upstream"])
            app = build_app(proxy.chat, calls=proxy.calls)
            transport = httpx.ASGITransport(app=app)
            async with (
                Client(proxy.server(), mode="legacy", client_info=info) as client,
                httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http,
            ):
                yield client, proxy, http


async def waiting(http: httpx.AsyncClient) -> list[dict[str, Any]]:
    """The pending reviews, once there is one."""
    while True:
        reviews: list[dict[str, Any]] = (await http.get("/hitl/reviews")).json()["reviews"]
        if reviews:
            return reviews
        await anyio.sleep(0.01)


async def test_a_waiting_call_names_its_server_and_its_client(tmp_path: Path) -> None:
    async with gateway(tmp_path / "log.jsonl") as (client, proxy, http):
        info = await http.get("/hitl/info")
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(client.call_tool, "delete_file", {"path": "notes.txt"})
            [review] = await waiting(http)
            await proxy.chat.cancel_review(review["thread_id"], reason="the test ends")
    assert (info.status_code, info.json()) == (200, {"mode": "gateway", "server": SERVER})
    assert review == {
        "thread_id": review["thread_id"],
        "review_id": review["review_id"],
        "pending_review": {
            "action_requests": [
                {
                    "name": "delete_file",
                    "args": {"path": "notes.txt"},
                    "description": "Tool `delete_file` is awaiting approval",
                }
            ],
            "review_configs": [
                {"action_name": "delete_file", "allowed_decisions": ["approve", "edit", "reject"]}
            ],
        },
        "call": {"server": SERVER, "client": CLIENT},
        "grantable": [True],  # an approve may grant for the whole gateway
    }
    assert proxy.calls.client(review["thread_id"]) == CLIENT


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        ('{"message": "hello"}', {"Content-Type": "application/json"}),
        ("{}", {"Content-Type": "application/json"}),
        ("not json", {"Content-Type": "text/plain"}),
        ("", {}),
    ],
)
async def test_post_chat_answers_404_whatever_it_is_sent(
    tmp_path: Path, body: str, headers: dict[str, str]
) -> None:
    """No thread is made: the gateway's threads are MCP calls, never conversations."""
    async with gateway(tmp_path / "log.jsonl") as (_, proxy, http):
        answer = await http.post("/hitl/chat", content=body, headers=headers)
        threads = await proxy.chat.store.thread_ids()  # type: ignore[attr-defined]
    assert (answer.status_code, answer.json()) == (404, {"detail": NO_MESSAGES})
    assert answer.headers["x-frame-options"] == "DENY"
    assert threads == []


async def test_info_is_behind_the_sign_in_like_every_hitl_route() -> None:
    token, line = new_token("alice")
    auth = TokenAuth({"alice": line.split(" ", 1)[1]})
    app = build_app(MCPProxy(None, TOOLS, store=MemoryStore()).chat, auth=auth)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http:
        anonymous = await http.get("/hitl/info")
        signed_in = await http.get("/hitl/info", headers={"Authorization": f"Bearer {token}"})
        chat = await http.post("/hitl/chat", json={"message": "hi"})
        foreign = await http.get("/hitl/info", headers={"Host": "evil.example"})
    unknown = {"target": None, "name": None, "version": None, "title": None}
    assert anonymous.status_code == 401
    assert (signed_in.status_code, signed_in.json()) == (
        200,
        {"mode": "gateway", "server": unknown},
    )
    assert chat.status_code == 401
    assert foreign.status_code == 421


async def test_toolguard_serve_s_app_says_it_is_a_chat() -> None:
    from tests.helpers import make_mail_chat
    from toolguard.http import create_app

    transport = httpx.ASGITransport(app=create_app(make_mail_chat([], [])))
    async with httpx.AsyncClient(transport=transport, base_url="http://t.test") as http:
        answer = await http.get("/hitl/info")
    assert (answer.status_code, answer.json()) == (200, {"mode": "chat"})


@pytest.mark.parametrize(
    ("command", "args", "url", "shown"),
    [
        ("npx", ["-y", "@scope/server", "/srv/a b"], None, "npx -y @scope/server '/srv/a b'"),
        (
            "server-postgres",
            ["postgresql://app:s3cret@db.internal:5432/app?sslmode=require"],
            None,
            "server-postgres 'postgresql://***@db.internal:5432/app?***'",
        ),
        (
            "srv",
            ["--api-key", "k-123", "--token=t-456", "--verbose", "--password", "p"],
            None,
            "srv --api-key '***' '--token=***' --verbose --password '***'",
        ),
        (
            None,
            [],
            "https://bob:pw@mcp.example.com:8443/mcp?key=1#x",
            "https://***@mcp.example.com:8443/mcp?***",
        ),
        (None, [], "http://[::1]:9000/mcp", "http://[::1]:9000/mcp"),
        (None, [], "http://[::1/mcp", "***"),
        ("x", ["y" * 300], None, "x " + "y" * (MAX_TEXT - 3) + "…"),
    ],
)
def test_the_upstream_is_shown_without_its_credentials(
    command: str | None, args: list[str], url: str | None, shown: str
) -> None:
    assert upstream_target(command, args, url) == shown


def test_names_from_other_programs_are_one_short_line() -> None:
    long = SimpleNamespace(name="a\nb\t" + "c" * 400, version=" 1.0 ", title=7)
    assert implementation(long) == {
        "name": "a b " + "c" * (MAX_TEXT - 5) + "…",
        "version": "1.0",
        "title": None,
    }
    assert implementation(SimpleNamespace(name="  ", version="1")) is None
    assert implementation(None) is None


def test_only_the_latest_calls_clients_are_remembered() -> None:
    calls = CallsInfo(limit=2)

    def ctx(name: str) -> Any:
        params = SimpleNamespace(client_info=SimpleNamespace(name=name, version="1"))
        return SimpleNamespace(session=SimpleNamespace(client_params=params))

    for thread_id in ("t1", "t2", "t3"):
        calls.opened(thread_id, ctx(f"client {thread_id}"))
    calls.opened("t4", SimpleNamespace(session=SimpleNamespace(client_params=None)))
    assert [calls.client(t) for t in ("t1", "t2", "t3", "t4")] == [
        None,
        None,
        {"name": "client t3", "version": "1", "title": None},
        None,
    ]
