"""Gateway-wide standing grants: ``{"scope": "server", ...}`` on an approve in ``mcp-proxy``.

In process: an in-memory upstream, the proxy's MCP server driven by a real
``mcp.Client``, and the gateway's HTTP app through httpx's ASGI transport (a
reviewer signs in with ``X-Forwarded-User``, believed from 127.0.0.1). One
test runs ``python -m toolguard mcp-proxy`` in a subprocess twice on the same
``--db``: a grant given on the page outlives the restart.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

mcp = pytest.importorskip("mcp")
httpx = pytest.importorskip("httpx")

from mcp import Client, StdioServerParameters, types  # noqa: E402

from toolguard import (  # noqa: E402  # noqa: E402
    MemoryStore,
    ModelResponse,
    ReviewedChat,
    Rules,
    ScriptedModel,
    SQLiteStore,
    ToolCall,
)
from toolguard._core.records import utcnow  # noqa: E402
from toolguard._gateway.grants import GRANTS_THREAD, GatewayGrants  # noqa: E402
from toolguard._gateway.proxy import MCPProxy  # noqa: E402
from toolguard._gateway.routes import DEFAULT_PORT, build_app  # noqa: E402
from toolguard._stores.protocol import Store  # noqa: E402
from toolguard.http import HeaderAuth  # noqa: E402

from .mcp_proxy_upstream import TOOLS, build_server  # noqa: E402

LIMIT = 20
ROOT = Path(__file__).resolve().parents[2]
LOGIN = {
    "name": "login",
    "description": "Log in to the mail server.",
    "inputSchema": {
        "type": "object",
        "properties": {"user": {"type": "string"}, "password": {"type": "string"}},
        "required": ["user", "password"],
    },
}
SECRET = "hunter2-very-secret"  # noqa: S105 - a test value the store must not hold


class Clock:
    """The chat's clock: real time moved on by ``offset`` (no sleeping)."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def __call__(self) -> datetime:
        return utcnow() + self.offset


class Gateway:
    """A proxy, its MCP client and its HTTP app, in one process."""

    def __init__(self, client: Client, proxy: MCPProxy, http: Any, log: Path) -> None:
        self.client = client
        self.proxy = proxy
        self.http = http
        self.log = log

    def executions(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]

    async def review(self) -> dict[str, Any]:
        """The one pending review, once the page lists it (bounded by the test's limit)."""
        while True:
            listed = (await self.http.get("/hitl/reviews")).json()["reviews"]
            if listed:
                [review] = listed
                return dict(review)
            await anyio.sleep(0.01)

    async def decided(
        self, name: str, args: dict[str, Any], decision: dict[str, Any], reviewer: str = "maria"
    ) -> tuple[types.CallToolResult, Any]:
        """Call ``name``, which must wait for a review, and decide it with ``decision``."""
        results: list[types.CallToolResult] = []

        async def call() -> None:
            results.append(await self.client.call_tool(name, args))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call)
            review = await self.review()
            answer = await self.http.post(
                "/hitl/review",
                json={
                    "thread_id": review["thread_id"],
                    "review_id": review["review_id"],
                    "decisions": [decision],
                },
                headers={"X-Forwarded-User": reviewer},
            )
            if answer.status_code != 200:
                await self.proxy.chat.cancel_review(review["thread_id"])
        return results[0], answer

    async def at_once(self, name: str, args: dict[str, Any]) -> types.CallToolResult:
        """Call ``name``; it must answer without any review being opened."""
        result = await self.client.call_tool(name, args)
        assert (await self.http.get("/hitl/reviews")).json() == {"reviews": []}
        return result

    async def asks(self, name: str, args: dict[str, Any]) -> types.CallToolResult:
        """Call ``name``; it must wait for a review (rejected here)."""
        result, answer = await self.decided(name, args, {"type": "reject", "message": "no"})
        assert answer.status_code == 200
        return result

    async def grants(self) -> list[dict[str, Any]]:
        answer = await self.http.get("/hitl/grants", headers={"X-Forwarded-User": "maria"})
        assert answer.status_code == 200
        listed: list[dict[str, Any]] = answer.json()["grants"]
        return listed

    async def threads_of_calls(self) -> list[str]:
        ids: list[str] = await self.proxy.chat.store.thread_ids()  # type: ignore[attr-defined]
        return [i for i in ids if i != GRANTS_THREAD]


@asynccontextmanager
async def gateway(
    tmp_path: Path,
    *,
    store: Store | None = None,
    rules: Rules | None = None,
    listed: list[dict[str, Any]] | None = None,
    redact: dict[str, list[str]] | None = None,
    clock: Clock | None = None,
) -> AsyncIterator[Gateway]:
    log = tmp_path / "log.jsonl"
    with anyio.fail_after(LIMIT):
        async with Client(build_server(log), mode="legacy") as upstream:
            proxy = MCPProxy(
                upstream,
                listed if listed is not None else TOOLS,
                store=store or MemoryStore(),
                ttl=3600,  # the tests move the chat's clock by a minute: reviews stay open
                rules=rules,
                redact=redact,
            )
            if clock is not None:
                proxy.chat.clock = clock
            app = build_app(proxy.chat, auth=HeaderAuth("X-Forwarded-User"))
            transport = httpx.ASGITransport(app=app)
            base_url = f"http://127.0.0.1:{DEFAULT_PORT}"
            headers = {"X-Forwarded-User": "maria"}
            async with (
                httpx.AsyncClient(transport=transport, base_url=base_url, headers=headers) as http,
                anyio.create_task_group() as tasks,
            ):
                proxy._tasks = tasks
                async with Client(proxy.server(), mode="legacy") as client:
                    yield Gateway(client, proxy, http, log)
                tasks.cancel_scope.cancel()


def texts(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


def ran(name: str, args: dict[str, Any]) -> list[str]:
    return [f"{name} done", json.dumps(args, sort_keys=True)]


def approve(**grant: Any) -> dict[str, Any]:
    return {"type": "approve", "grant": {"scope": "server", **grant}}


# ---------------------------------------------------------------------------- in process


async def test_a_tool_grant_covers_n_later_calls_then_asks_again(tmp_path: Path) -> None:
    async with gateway(tmp_path) as gw:
        first, answer = await gw.decided(
            "archive_file", {"path": "a"}, approve(match="tool", uses=2)
        )
        assert answer.status_code == 200
        assert texts(first) == ran("archive_file", {"path": "a"})
        [grant] = await gw.grants()
        second = await gw.at_once("archive_file", {"path": "b"})
        third = await gw.at_once("archive_file", {"path": "c"})
        other_tool = await gw.asks("delete_file", {"path": "b"})  # another tool: asked
        fourth = await gw.asks("archive_file", {"path": "d"})  # uses spent: asked again
        after = await gw.grants()
        threads = await gw.threads_of_calls()
        second_audit = await gw.proxy.chat.audit_trail(threads[1])
        ledger = await gw.proxy.chat.audit_trail(GRANTS_THREAD)
    assert texts(second) == ran("archive_file", {"path": "b"})
    assert texts(third) == ran("archive_file", {"path": "c"})
    assert other_tool.is_error is True
    assert fourth.is_error is True
    assert grant == {
        "id": grant["id"],
        "tool": "archive_file",
        "match": "tool",
        "args": None,
        "uses": 2,
        "uses_left": 2,
        "ttl": None,
        "granted_by": "maria",
        "granted_at": grant["granted_at"],
        "expires_at": None,
        "status": "active",
        "ended_at": None,
        "ended_by": None,
    }
    assert after == [
        {**grant, "uses_left": 0, "status": "used_up", "ended_at": after[0]["ended_at"]}
    ]
    assert after[0]["ended_at"] is not None
    assert [e.model_dump(exclude={"at", "id", "review_id"}) for e in second_audit] == [
        {
            "kind": "granted",
            "thread_id": threads[1],
            "action_id": None,
            "tool": "archive_file",
            "args": {"path": "b"},
            "actor": "maria",
            "decision": None,
            "detail": f"server grant {grant['id']}; uses left: 1",
            "digest": None,
        }
    ]
    assert [(e.kind, e.actor, e.detail) for e in ledger] == [
        (
            "grant_created",
            "maria",
            (
                f"server grant {grant['id']} from conversation {threads[0]}: match tool, uses 2,"
                " ttl none"
            ),
        ),
        ("grant_ended", "maria", f"grant {grant['id']} used up"),
    ]
    assert gw.executions() == [
        {"tool": "archive_file", "args": {"path": "a"}},
        {"tool": "archive_file", "args": {"path": "b"}},
        {"tool": "archive_file", "args": {"path": "c"}},
    ]


async def test_an_args_grant_covers_only_the_same_arguments(tmp_path: Path) -> None:
    async with gateway(tmp_path) as gw:
        await gw.decided("archive_file", {"path": "a"}, approve(match="args"))
        same = await gw.at_once("archive_file", {"path": "a"})
        again = await gw.at_once("archive_file", {"path": "a"})
        other = await gw.asks("archive_file", {"path": "b"})
        [grant] = await gw.grants()
    assert texts(same) == ran("archive_file", {"path": "a"})
    assert texts(again) == ran("archive_file", {"path": "a"})
    assert other.is_error is True
    assert {k: grant[k] for k in ("match", "args", "uses", "uses_left", "status")} == {
        "match": "args",
        "args": {"path": "a"},
        "uses": None,
        "uses_left": None,
        "status": "active",
    }
    assert gw.executions() == [{"tool": "archive_file", "args": {"path": "a"}}] * 3


async def test_a_grant_expires_at_its_ttl_by_the_chats_clock(tmp_path: Path) -> None:
    clock = Clock()
    async with gateway(tmp_path, clock=clock) as gw:
        await gw.decided("archive_file", {"path": "a"}, approve(match="tool", ttl=60))
        [grant] = await gw.grants()
        clock.offset = timedelta(seconds=59)
        inside = await gw.at_once("archive_file", {"path": "b"})
        clock.offset = timedelta(seconds=60)  # exactly at ttl it has expired
        listed = await gw.grants()
        outside = await gw.asks("archive_file", {"path": "c"})
        ended = await gw.grants()
    granted_at = datetime.fromisoformat(grant["granted_at"])
    assert datetime.fromisoformat(grant["expires_at"]) == granted_at + timedelta(seconds=60)
    assert texts(inside) == ran("archive_file", {"path": "b"})
    assert outside.is_error is True
    assert listed == [{**grant, "status": "expired"}]
    assert ended == [{**grant, "status": "expired", "ended_at": ended[0]["ended_at"]}]
    assert gw.executions() == [
        {"tool": "archive_file", "args": {"path": "a"}},
        {"tool": "archive_file", "args": {"path": "b"}},
    ]


async def test_hostile_grant_ids_get_short_answers_and_revoke_nothing(tmp_path: Path) -> None:
    """An id longer than any grant's is a short 422 (not echoed); bytes that are no UTF-8 and
    markup are an unknown grant; a path-looking id is no route; the real grant stays active."""
    async with gateway(tmp_path) as gw:
        await gw.decided("archive_file", {"path": "a"}, approve(match="tool"))
        [grant] = await gw.grants()
        long = await gw.http.delete("/hitl/grants/" + "g" * 10_000)
        odd = [
            await gw.http.delete("/hitl/grants/" + part)
            for part in ("%ED%A0%80", "%3Cscript%3E", "..%2F..%2Fgrants")
        ]
        [after] = await gw.grants()
    assert long.status_code == 422
    assert long.json()["detail"][0]["input"] == "g" * 100 + "\u2026"
    assert len(long.text) < 1_000
    assert [(r.status_code, r.json()["detail"]) for r in odd] == [
        (404, "Unknown grant '\ufffd\ufffd\ufffd': the MCP gateway has no such grant"),
        (404, "Unknown grant '<script>': the MCP gateway has no such grant"),
        (404, "Not Found"),  # the decoded slashes make it another path: no route
    ]
    assert after == grant


async def test_a_revoked_grant_stops_applying_and_revoking_again_is_a_404(tmp_path: Path) -> None:
    async with gateway(tmp_path) as gw:
        await gw.decided("archive_file", {"path": "a"}, approve(match="tool"))
        [grant] = await gw.grants()
        await gw.at_once("archive_file", {"path": "b"})
        revoked = await gw.http.delete(
            f"/hitl/grants/{grant['id']}", headers={"X-Forwarded-User": "omar"}
        )
        asked = await gw.asks("archive_file", {"path": "c"})
        twice = await gw.http.delete(f"/hitl/grants/{grant['id']}")
        unknown = await gw.http.delete("/hitl/grants/no-such-grant")
        anonymous = await gw.http.delete(
            f"/hitl/grants/{grant['id']}", headers={"X-Forwarded-User": ""}
        )
        ledger = await gw.proxy.chat.audit_trail(GRANTS_THREAD)
    assert revoked.status_code == 200
    assert revoked.json() == {
        **grant,
        "status": "revoked",
        "ended_at": revoked.json()["ended_at"],
        "ended_by": "omar",
    }
    assert asked.is_error is True
    assert (twice.status_code, twice.json()) == (
        404,
        {"detail": f"The grant {grant['id']!r} is no longer active (revoked)"},
    )
    assert (unknown.status_code, unknown.json()) == (
        404,
        {"detail": "Unknown grant 'no-such-grant': the MCP gateway has no such grant"},
    )
    assert anonymous.status_code == 401
    assert [(e.kind, e.actor, e.detail) for e in ledger][1:] == [
        ("grant_revoked", "omar", f"grant {grant['id']} revoked; uses left: unlimited")
    ]
    assert gw.executions() == [
        {"tool": "archive_file", "args": {"path": "a"}},
        {"tool": "archive_file", "args": {"path": "b"}},
    ]


async def test_a_deny_rule_beats_a_grant(tmp_path: Path) -> None:
    rules = Rules(deny=['archive_file(path="/etc/*")'])
    async with gateway(tmp_path, rules=rules) as gw:
        await gw.decided("archive_file", {"path": "/srv/a"}, approve(match="tool"))
        denied = await gw.client.call_tool("archive_file", {"path": "/etc/passwd"})
        allowed = await gw.at_once("archive_file", {"path": "/srv/b"})
        [grant] = await gw.grants()
    assert denied.is_error is True
    assert texts(denied) == [
        (
            "The call to `archive_file` is denied by the rule"
            ' `deny archive_file(path="/etc/*")`. It was not executed.'
        )
    ]
    assert texts(allowed) == ran("archive_file", {"path": "/srv/b"})
    assert grant["uses_left"] is None
    assert gw.executions() == [
        {"tool": "archive_file", "args": {"path": "/srv/a"}},
        {"tool": "archive_file", "args": {"path": "/srv/b"}},
    ]


async def test_no_grant_on_a_call_an_ask_rule_matches(tmp_path: Path) -> None:
    rules = Rules(ask=["archive_file"])
    async with gateway(tmp_path, rules=rules) as gw:
        _, refused = await gw.decided("archive_file", {"path": "a"}, approve(match="tool"))
        grants = await gw.grants()
    assert (refused.status_code, refused.json()) == (
        400,
        {
            "detail": "No grant for action 'archive_file': the rule 'archive_file' asks for a"
            " review of every such call"
        },
    )
    assert grants == []
    assert gw.executions() == []


async def test_redacted_arguments_match_by_real_value_and_are_never_kept(tmp_path: Path) -> None:
    db = tmp_path / "gateway.sqlite3"
    store = SQLiteStore(db)
    args = {"user": "ana", "password": SECRET}
    try:
        async with gateway(
            tmp_path, store=store, listed=[*TOOLS, LOGIN], redact={"login": ["password"]}
        ) as gw:
            await gw.decided("login", args, approve(match="args", uses=5))
            same = await gw.at_once("login", args)
            other_secret = await gw.asks("login", {"user": "ana", "password": "guess"})
            listed = (await gw.http.get("/hitl/grants")).text
            [grant] = await gw.grants()
    finally:
        store.close()
    assert texts(same) == ran("login", args)
    assert other_secret.is_error is True
    assert {k: grant[k] for k in ("match", "args", "uses_left")} == {
        "match": "args",
        "args": {"user": "ana", "password": "[redacted]"},
        "uses_left": 4,
    }
    assert SECRET not in listed
    with sqlite3.connect(db) as raw:
        [(key, state)] = raw.execute(
            "SELECT thread_key, state FROM toolguard_threads WHERE thread_id = ?", (GRANTS_THREAD,)
        ).fetchall()
        items = [
            body
            for (body,) in raw.execute(
                "SELECT body FROM toolguard_items WHERE thread_key = ?", (key,)
            )
        ]
    assert GRANTS_THREAD in state
    assert all(SECRET not in text for text in [state, *items])


@pytest.mark.parametrize("store_kind", ["memory", "sqlite"])
async def test_calls_racing_for_the_last_uses_run_exactly_n_times(
    tmp_path: Path, store_kind: str
) -> None:
    store: Any = MemoryStore() if store_kind == "memory" else SQLiteStore(tmp_path / "r.sqlite3")
    try:
        async with gateway(tmp_path, store=store) as gw:
            await gw.decided("archive_file", {"path": "first"}, approve(match="tool", uses=3))
            keeper = gw.proxy.chat.shared_grants
            assert isinstance(keeper, GatewayGrants)
            toolset = gw.proxy.toolset
            calls = [
                ToolCall(id=f"c{i}", name="archive_file", args={"path": str(i)}) for i in range(8)
            ]
            covered: list[set[str]] = []

            async def race(call: ToolCall) -> None:
                spent, _ = await keeper.spend("t", [call], toolset, gw.proxy.chat.clock())
                covered.append(spent)

            async with anyio.create_task_group() as tasks:
                for call in calls:
                    tasks.start_soon(race, call)
            [grant] = await gw.grants()
    finally:
        if store_kind == "sqlite":
            store.close()
    assert sum(len(s) for s in covered) == 3
    assert (grant["uses_left"], grant["status"]) == (0, "used_up")


async def test_concurrent_mcp_calls_spend_exactly_the_uses_left(tmp_path: Path) -> None:
    async with gateway(tmp_path) as gw:
        await gw.decided("archive_file", {"path": "first"}, approve(match="tool", uses=2))
        results: dict[int, types.CallToolResult] = {}

        async def call(i: int) -> None:
            results[i] = await gw.client.call_tool("archive_file", {"path": str(i)})

        async with anyio.create_task_group() as tasks:
            for i in range(4):
                tasks.start_soon(call, i)
            waiting: list[dict[str, Any]] = []
            while len(waiting) < 2:  # the two calls no use was left for
                waiting = (await gw.http.get("/hitl/reviews")).json()["reviews"]
                await anyio.sleep(0.01)
            for review in waiting:
                await gw.proxy.chat.cancel_review(review["thread_id"])
        [grant] = await gw.grants()
    ran_at_once = [i for i, r in results.items() if not r.is_error]
    assert len(ran_at_once) == 2
    assert (grant["uses_left"], grant["status"]) == (0, "used_up")
    assert len(gw.executions()) == 1 + 2


async def test_thread_scope_is_refused_in_the_gateway(tmp_path: Path) -> None:
    async with gateway(tmp_path) as gw:
        thread = {"type": "approve", "grant": {"scope": "thread", "match": "tool"}}
        _, refused = await gw.decided("archive_file", {"path": "a"}, thread)
        grants = await gw.grants()
    assert (refused.status_code, refused.json()) == (
        400,
        {
            "detail": "The 'scope' of a grant must be 'server' in the MCP gateway, got 'thread':"
            " each call through the gateway is its own conversation, so a 'thread' grant would"
            " cover nothing"
        },
    )
    assert grants == []
    assert gw.executions() == []


async def test_server_scope_is_refused_by_a_reviewed_chat() -> None:
    def archive_file(path: str) -> str:
        """Archive a file."""
        return path

    call = ToolCall(id="1", name="archive_file", args={"path": "a"})
    chat = ReviewedChat(ScriptedModel([ModelResponse(tool_calls=[call]), "done"]), [archive_file])
    turn = await chat.send_message("archive it")
    with pytest.raises(Exception) as caught:  # noqa: PT011 - the exact text is checked
        await chat.submit_review([approve(match="tool")], turn.thread_id, review_id=turn.review_id)
    assert type(caught.value).__name__ == "InvalidReviewDecisionError"
    assert str(caught.value) == (
        "The 'scope' of a grant must be 'thread', got 'server': scope 'server' is the MCP"
        " gateway's (toolguard mcp-proxy), where it covers later calls through the gateway"
    )
    state = await chat.get_thread(turn.thread_id)
    assert (state.status, state.grants) == ("awaiting_review", [])


async def test_elicitation_answers_carry_no_grant(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    approve_it = types.ElicitResult(action="accept", content={"decision": "approve"})

    async def ask(ctx: Any, params: Any) -> types.ElicitResult:
        return approve_it

    callback: Any = ask
    with anyio.fail_after(LIMIT):
        async with Client(build_server(log), mode="legacy") as upstream:
            proxy = MCPProxy(upstream, TOOLS, store=MemoryStore(), ttl=60)
            async with Client(
                proxy.server(), mode="legacy", elicitation_callback=callback
            ) as client:
                await client.call_tool("archive_file", {"path": "a"})
                keeper = proxy.chat.shared_grants
                assert isinstance(keeper, GatewayGrants)
                assert await keeper.grants() == []


# ---------------------------------------------------------------------------- end to end


def _params(db: Path, port: int, log: Path) -> StdioServerParameters:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(ROOT),
        "TOOLGUARD_MCP_LOG": str(log),
    }
    args = ["-m", "toolguard", "mcp-proxy", "--db", str(db), "--port", str(port), "--ttl", "60"]
    args.append("--no-auth")  # the test's own HTTP client decides on the page
    upstream = [sys.executable, "-m", "tests.integrations.mcp_proxy_upstream"]
    return StdioServerParameters(
        command=sys.executable, args=[*args, "--", *upstream], env=env, cwd=str(ROOT)
    )


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_a_grant_given_on_the_page_survives_a_restart(tmp_path: Path) -> None:
    db, log, port = tmp_path / "proxy.sqlite3", tmp_path / "log.jsonl", _free_port()
    url = f"http://127.0.0.1:{port}"
    with anyio.fail_after(60):
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            async with Client(_params(db, port, log), mode="legacy") as client:
                results: list[types.CallToolResult] = []

                async def first() -> None:
                    results.append(await client.call_tool("archive_file", {"path": "a"}))

                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(first)
                    reviews: list[dict[str, Any]] = []
                    while not reviews:  # the page lists the call once the proxy holds it
                        await anyio.sleep(0.05)
                        reviews = (await http.get("/hitl/reviews")).json()["reviews"]
                    [review] = reviews
                    decided = await http.post(
                        "/hitl/review",
                        json={
                            "thread_id": review["thread_id"],
                            "review_id": review["review_id"],
                            "decisions": [approve(match="tool", uses=3, ttl=3600)],
                        },
                    )
                assert decided.status_code == 200
                second = await client.call_tool("archive_file", {"path": "b"})
            async with Client(_params(db, port, log), mode="legacy") as client:
                third = await client.call_tool("archive_file", {"path": "c"})
                listed = (await http.get("/hitl/grants")).json()["grants"]
    assert [texts(r) for r in (*results, second, third)] == [
        ran("archive_file", {"path": p}) for p in "abc"
    ]
    assert [(g["tool"], g["uses_left"], g["status"], g["ttl"]) for g in listed] == [
        ("archive_file", 1, "active", 3600.0)
    ]
    assert [json.loads(line)["args"]["path"] for line in log.read_text().splitlines()] == [
        "a",
        "b",
        "c",
    ]
