"""Who may revoke a gateway grant: the ``[reviewers]`` table, as for a decision on its tool.

Over real HTTP: the gateway's app served by uvicorn on a 127.0.0.1 socket in
this event loop (as ``mcp-proxy`` serves it), the proxy's MCP server driven by
a real ``mcp.Client`` over an in-memory upstream, and the chat's ``authorize``
hook the :class:`~toolguard._policy.reviewers.Reviewers` of a rules file's
``[reviewers]`` table, as ``mcp-proxy --rules`` installs it. One test runs
``python -m toolguard mcp-proxy --rules FILE --auth-header ...`` in a
subprocess.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

mcp = pytest.importorskip("mcp")
httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from mcp import Client, StdioServerParameters, types  # noqa: E402

from toolguard import MemoryStore  # noqa: E402
from toolguard._chat.access import REFUSED_DETAIL  # noqa: E402
from toolguard._core.standing import StandingGrant  # noqa: E402
from toolguard._gateway.grants import GRANTS_THREAD, GatewayGrants  # noqa: E402
from toolguard._gateway.listen import quiet_server  # noqa: E402
from toolguard._gateway.proxy import MCPProxy  # noqa: E402
from toolguard._gateway.routes import build_app  # noqa: E402
from toolguard._http.auth import with_proxy_headers  # noqa: E402
from toolguard._policy.reviewers import Reviewers  # noqa: E402
from toolguard.http import HeaderAuth  # noqa: E402

from .mcp_proxy_upstream import TOOLS, build_server  # noqa: E402

LIMIT = 30
ROOT = Path(__file__).resolve().parents[2]
USER = "X-Forwarded-User"
RULES = """\
[reviewers]
archive_file = ["maria"]
"*" = ["admin"]
"""
APPROVE_FOR_THE_GATEWAY = {"type": "approve", "grant": {"scope": "server", "match": "tool"}}


class Gateway:
    """The proxy, its MCP client and an HTTP client of its served app."""

    def __init__(self, proxy: MCPProxy, client: Client, http: Any) -> None:
        self.proxy = proxy
        self.client = client
        self.http = http

    async def granted(self) -> dict[str, Any]:
        """Call ``archive_file``; maria approves it with a gateway grant; the grant."""
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self.client.call_tool, "archive_file", {"path": "a"})
            reviews: list[dict[str, Any]] = []
            while not reviews:
                await anyio.sleep(0.01)
                reviews = (await self.http.get("/hitl/reviews", headers=MARIA)).json()["reviews"]
            [review] = reviews
            decided = await self.http.post(
                "/hitl/review",
                json={
                    "thread_id": review["thread_id"],
                    "review_id": review["review_id"],
                    "decisions": [APPROVE_FOR_THE_GATEWAY],
                },
                headers=MARIA,
            )
            assert decided.status_code == 200, decided.text
        [grant] = await self.grants()
        return grant

    async def grants(self) -> list[dict[str, Any]]:
        listed = await self.http.get("/hitl/grants", headers=MARIA)
        assert listed.status_code == 200
        grants: list[dict[str, Any]] = listed.json()["grants"]
        return grants

    async def stored(self) -> list[StandingGrant]:
        keeper = self.proxy.chat.shared_grants
        assert isinstance(keeper, GatewayGrants)
        return await keeper.grants()

    async def ledger(self) -> list[tuple[str, str | None, str | None, str | None, str | None]]:
        """The grants thread's events after the grant's ``grant_created``."""
        events = await self.proxy.chat.audit_trail(GRANTS_THREAD)
        assert events[0].kind == "grant_created"
        return [(e.kind, e.actor, e.tool, e.review_id, e.detail) for e in events[1:]]


MARIA = {USER: "maria"}
EVE = {USER: "eve"}


def _loopback_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    return sock


@asynccontextmanager
async def gateway(tmp_path: Path, *, auth: Any, authorize: Any) -> AsyncIterator[Gateway]:
    """The gateway's app served on a free 127.0.0.1 port, ``authorize`` its chat's hook."""
    with _loopback_socket() as sock, anyio.fail_after(LIMIT):
        port: int = sock.getsockname()[1]
        async with Client(build_server(tmp_path / "log.jsonl"), mode="legacy") as upstream:
            proxy = MCPProxy(upstream, TOOLS, store=MemoryStore(), ttl=3600)
            proxy.chat.authorize = authorize
            app = build_app(proxy.chat, host="127.0.0.1", port=port, auth=auth)
            served = quiet_server(
                with_proxy_headers(app), host="127.0.0.1", port=port, proxy_headers=False
            )
            async with anyio.create_task_group() as tasks:
                proxy._tasks = tasks
                tasks.start_soon(lambda: served.serve(sockets=[sock]))
                while not served.started:  # noqa: ASYNC110 - uvicorn sets a flag, no event
                    await anyio.sleep(0.01)
                base_url = f"http://127.0.0.1:{port}"
                async with (
                    httpx.AsyncClient(base_url=base_url, timeout=10) as http,
                    Client(proxy.server(), mode="legacy") as client,
                ):
                    yield Gateway(proxy, client, http)
                served.should_exit = True


def refused(reviewer: str | None) -> dict[str, str]:
    """The 403 body of the review routes for a reviewer the hook refused."""
    return {
        "detail": f"Reviewer {reviewer!r} may not review conversation {GRANTS_THREAD!r}",
    }


async def test_an_unlisted_reviewer_cannot_revoke_a_listed_one_can(tmp_path: Path) -> None:
    async with gateway(tmp_path, auth=HeaderAuth(USER), authorize=Reviewers.from_toml(RULES)) as gw:
        grant = await gw.granted()
        by_eve = await gw.http.delete(f"/hitl/grants/{grant['id']}", headers=EVE)
        after_eve = await gw.grants()
        ledger_after_eve = await gw.ledger()
        by_maria = await gw.http.delete(f"/hitl/grants/{grant['id']}", headers=MARIA)
        ledger = await gw.ledger()
        after_maria = await gw.grants()
        [stored] = await gw.stored()
    assert grant["status"] == "active"
    assert (by_eve.status_code, by_eve.json()) == (403, refused("eve"))
    assert after_eve == [grant]
    assert ledger_after_eve == [
        ("refused", "eve", "archive_file", None, f"{REFUSED_DETAIL} (revoking grant {grant['id']})")
    ]
    assert by_maria.status_code == 200
    assert by_maria.json() == {
        **grant,
        "status": "revoked",
        "ended_at": by_maria.json()["ended_at"],
        "ended_by": "maria",
    }
    assert ledger == [
        *ledger_after_eve,
        (
            "grant_revoked",
            "maria",
            "archive_file",
            stored.review_id,
            f"grant {grant['id']} revoked; uses left: unlimited",
        ),
    ]
    assert after_maria == [by_maria.json()]


async def test_an_anonymous_reviewer_cannot_revoke_when_a_list_is_set(tmp_path: Path) -> None:
    """Without sign-in every reviewer is anonymous: a reviewer list allows none of them."""
    listed = Reviewers({"*": ["maria"]})

    async def anyone_decides_but_revoking_asks_the_list(
        reviewer: str | None, thread: Any, actions: list[Any]
    ) -> bool:
        return thread.thread_id != GRANTS_THREAD or listed(reviewer, thread, actions)

    async with gateway(
        tmp_path, auth=None, authorize=anyone_decides_but_revoking_asks_the_list
    ) as gw:
        grant = await gw.granted()
        anonymous = await gw.http.delete(f"/hitl/grants/{grant['id']}")
        after = await gw.grants()
        ledger = await gw.ledger()
    assert (anonymous.status_code, anonymous.json()) == (403, refused(None))
    assert after == [grant]
    assert ledger == [
        ("refused", None, "archive_file", None, f"{REFUSED_DETAIL} (revoking grant {grant['id']})")
    ]


async def test_a_flood_of_refused_revocations_records_a_bounded_number(tmp_path: Path) -> None:
    """Every attempt is a 403; the grants thread records the first 20 refusals, no more."""
    async with gateway(tmp_path, auth=HeaderAuth(USER), authorize=Reviewers.from_toml(RULES)) as gw:
        grant = await gw.granted()
        codes = {
            (await gw.http.delete(f"/hitl/grants/{grant['id']}", headers=EVE)).status_code
            for _ in range(25)
        }
        after = await gw.grants()
        ledger = await gw.ledger()
    detail = f"{REFUSED_DETAIL} (revoking grant {grant['id']})"
    last = f"{detail}; later refusals for this review are not recorded"
    assert codes == {403}
    assert after == [grant]
    assert ledger == [
        *[("refused", "eve", "archive_file", None, detail)] * 19,
        ("refused", "eve", "archive_file", None, last),
    ]


async def test_the_hook_is_asked_with_the_grants_tool(tmp_path: Path) -> None:
    """The hook sees one action: the grant's tool, the action whose approve made it."""
    seen: list[tuple[str | None, str, list[tuple[str, str, dict[str, Any]]]]] = []

    def watch(reviewer: str | None, thread: Any, actions: list[Any]) -> bool:
        seen.append((reviewer, thread.thread_id, [(a.id, a.name, a.args) for a in actions]))
        return True

    async with gateway(tmp_path, auth=HeaderAuth(USER), authorize=watch) as gw:
        grant = await gw.granted()
        revoked = await gw.http.delete(f"/hitl/grants/{grant['id']}", headers=EVE)
        stored = await gw.stored()
    assert revoked.status_code == 200
    assert revoked.json()["ended_by"] == "eve"
    assert seen[-1] == ("eve", GRANTS_THREAD, [(stored[0].action_id, "archive_file", {})])


async def test_a_hook_that_answers_no_bool_revokes_nothing(tmp_path: Path) -> None:
    """Fails closed, as for a review: a 500, nothing recorded or revoked."""

    def odd(reviewer: str | None, thread: Any, actions: list[Any]) -> Any:
        return "yes" if thread.thread_id == GRANTS_THREAD else True

    async with gateway(tmp_path, auth=HeaderAuth(USER), authorize=odd) as gw:
        grant = await gw.granted()
        answer = await gw.http.delete(f"/hitl/grants/{grant['id']}", headers=MARIA)
        after = await gw.grants()
        ledger = await gw.ledger()
    assert answer.status_code == 500
    assert after == [grant]
    assert ledger == []


# ---------------------------------------------------------------------------- end to end


def _params(tmp_path: Path, port: int) -> StdioServerParameters:
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES, encoding="utf-8")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(ROOT),
        "TOOLGUARD_MCP_LOG": str(tmp_path / "log.jsonl"),
    }
    args = [
        *("-m", "toolguard", "mcp-proxy", "--db", str(tmp_path / "proxy.sqlite3")),
        *("--port", str(port), "--ttl", "60", "--rules", str(rules)),
        *("--auth-header", USER, "--trusted-proxy", "127.0.0.1/32"),
    ]
    upstream = [sys.executable, "-m", "tests.integrations.mcp_proxy_upstream"]
    return StdioServerParameters(
        command=sys.executable, args=[*args, "--", *upstream], env=env, cwd=str(ROOT)
    )


async def test_mcp_proxy_rules_reviewers_decide_who_revokes(tmp_path: Path) -> None:
    with _loopback_socket() as sock:
        port: int = sock.getsockname()[1]
    with anyio.fail_after(60):
        async with (
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http,
            Client(_params(tmp_path, port), mode="legacy") as client,
        ):
            results: list[types.CallToolResult] = []

            async def call() -> None:
                results.append(await client.call_tool("archive_file", {"path": "a"}))

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(call)
                reviews: list[dict[str, Any]] = []
                while not reviews:
                    await anyio.sleep(0.05)
                    reviews = (await http.get("/hitl/reviews", headers=MARIA)).json()["reviews"]
                [review] = reviews
                decided = await http.post(
                    "/hitl/review",
                    json={
                        "thread_id": review["thread_id"],
                        "review_id": review["review_id"],
                        "decisions": [APPROVE_FOR_THE_GATEWAY],
                    },
                    headers=MARIA,
                )
            [grant] = (await http.get("/hitl/grants", headers=MARIA)).json()["grants"]
            by_eve = await http.delete(f"/hitl/grants/{grant['id']}", headers=EVE)
            after_eve = (await http.get("/hitl/grants", headers=MARIA)).json()["grants"]
            by_maria = await http.delete(f"/hitl/grants/{grant['id']}", headers=MARIA)
            audit = (await http.get("/hitl/audit", headers=MARIA)).text
    assert decided.status_code == 200
    assert (by_eve.status_code, by_eve.json()) == (403, refused("eve"))
    assert after_eve == [grant]
    assert by_maria.status_code == 200
    assert (by_maria.json()["status"], by_maria.json()["ended_by"]) == ("revoked", "maria")
    ledger = [
        (e["kind"], e["actor"], e["tool"], e["detail"])
        for e in map(json.loads, audit.splitlines())
        if e["thread_id"] == GRANTS_THREAD
    ]
    assert ledger[1:] == [
        ("refused", "eve", "archive_file", f"{REFUSED_DETAIL} (revoking grant {grant['id']})"),
        (
            "grant_revoked",
            "maria",
            "archive_file",
            f"grant {grant['id']} revoked; uses left: unlimited",
        ),
    ]
