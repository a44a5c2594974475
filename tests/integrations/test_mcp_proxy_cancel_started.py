"""A call approved on the page runs in its client's name: the reviewer's decision answers as soon
as it is recorded, and a client that gives up while the call runs cancels it on the upstream.

The upstream is ``tests/integrations/mcp_roots_upstream.py``: its ``slow_write`` sleeps, and
logs whether it finished or was cancelled (``notifications/cancelled``). The first tests run
the gateway in process (a real ``mcp.Client``, the HTTP app through ASGI); the last runs
``toolguard mcp-proxy`` over stdio, a real client timing out, the page's API on 127.0.0.1 and
a webhook receiver. Every wait is bounded; nothing asserts how long anything takes, only the
order of what happened.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

mcp = pytest.importorskip("mcp")
httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from tests.helpers import (  # noqa: E402, F401 - receiver is a fixture
    WEBHOOK_SECRET,
    Receiver,
    command_env,
    free_port,
    receiver,
)
from toolguard import SQLiteStore, Webhook  # noqa: E402
from toolguard._gateway.handoff import CANCELLED_AFTER_START  # noqa: E402
from toolguard._gateway.proxy import MCPProxy  # noqa: E402
from toolguard._gateway.relay import Relay  # noqa: E402
from toolguard._gateway.routes import DEFAULT_PORT, build_app  # noqa: E402
from toolguard._gateway.upstream import list_upstream, upstream_client  # noqa: E402

from .mcp_roots_upstream import Log, build_server, read_log  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 30  # seconds: the bound of every wait
HOST = f"http://127.0.0.1:{DEFAULT_PORT}"  # a Host the approval page answers by default
SLOW = {"seconds": 60}  # never finishes within a test


async def until(check: Callable[[], bool]) -> None:
    """Wait until ``check()`` holds (bounded by the test's ``fail_after``)."""
    while True:
        if check():
            return
        await anyio.sleep(0.01)


async def listed(http: httpx.AsyncClient, count: int) -> list[dict[str, Any]]:
    """The pending reviews of the approval page's API, once there are ``count``."""
    while True:
        reviews: list[dict[str, Any]] = (await http.get("/hitl/reviews")).json()["reviews"]
        if len(reviews) == count:
            return reviews
        await anyio.sleep(0.01)


async def idle(http: httpx.AsyncClient, thread_id: str) -> dict[str, Any]:
    """The thread as the page reads it, once it is idle again."""
    while True:
        thread: dict[str, Any] = (await http.get(f"/hitl/threads/{thread_id}")).json()
        if thread["status"] == "idle":
            return thread
        await anyio.sleep(0.01)


class Gateway:
    """The proxy in process, its HTTP app and what its event hook was told."""

    def __init__(self, proxy: MCPProxy, log: Log) -> None:
        self.proxy = proxy
        self.log = log
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=build_app(proxy.chat)), base_url=HOST
        )

    async def record(self, event: str, payload: dict[str, Any]) -> None:
        self.events.append((event, payload))

    async def pending(self) -> dict[str, Any]:
        """The one pending review, once it is listed."""
        [review] = await listed(self.http, 1)
        return review

    async def approve(self, review: dict[str, Any]) -> httpx.Response:
        body = {
            "thread_id": review["thread_id"],
            "review_id": review["review_id"],
            "decisions": [{"type": "approve"}],
        }
        return await self.http.post("/hitl/review", json=body)

    async def until_logged(self, item: list[Any]) -> None:
        await until(lambda: item in self.log.items)

    async def ended(self, thread_id: str) -> dict[str, Any]:
        return await idle(self.http, thread_id)


@asynccontextmanager
async def gateway(tmp_path: Path) -> AsyncIterator[Gateway]:
    """The proxy over the roots upstream (each client that declares a capability gets its own
    in-memory connection to it); webhooks wait in the store's outbox."""
    log = Log()

    def opener(declared: Any, callbacks: Any) -> Any:
        return upstream_client(build_server(log), declared, callbacks, mode="legacy")

    relay = Relay(opener)
    store = SQLiteStore(tmp_path / "proxy.sqlite3")
    with anyio.fail_after(LIMIT):
        async with relay.connect(build_server(log), mode="legacy") as up:
            proxy = MCPProxy(up, await list_upstream(up), store=store, ttl=60)
            proxy.chat.notify = Webhook("http://127.0.0.1:9/hooks", secret="s")  # noqa: S106
            relay.attach(proxy, up)
            running = Gateway(proxy, log)
            proxy.on_event = running.record
            async with anyio.create_task_group() as tasks, running.http:
                proxy._tasks = tasks
                yield running
                tasks.cancel_scope.cancel()
    store.close()


def check_cancelled_after_start(gate: Gateway, thread: dict[str, Any], review_id: str) -> None:
    """The approved call ended ``cancelled``, audited and told as cancelled after it started."""
    [action] = thread["actions"]
    assert (action["name"], action["args"], action["status"]) == ("slow_write", SLOW, "cancelled")
    assert action["result"] == {
        "call_id": action["call_id"],
        "name": "slow_write",
        "status": "error",
        "content": CANCELLED_AFTER_START,
        "value": None,
        "outcome": "cancelled",
    }
    assert [event[0] for event in gate.events] == ["review.requested", "review.decided"]
    assert gate.events[1][1] == {
        "thread_id": thread["thread_id"],
        "review_id": review_id,
        "tool": "slow_write",
        "args": SLOW,
        "status": "cancelled",
    }


async def test_a_decision_answers_once_the_call_started_and_the_page_shows_it_running(
    tmp_path: Path,
) -> None:
    """The reviewer's request does not wait for the tool: it answers while the call runs,
    the thread reads ``running`` (the action ``approved``), then the result."""
    async with gateway(tmp_path) as gate, Client(gate.proxy.server(), mode="legacy") as client:
        results: list[Any] = []

        async def call() -> None:
            results.append(await client.call_tool("slow_write", {"seconds": 1}))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call)
            review = await gate.pending()
            answer = await gate.approve(review)
            during = (await gate.http.get(f"/hitl/threads/{review['thread_id']}")).json()
            finished_then = ["write finished"] in gate.log.items
        thread = await gate.ended(review["thread_id"])
    assert (answer.status_code, answer.json()) == (
        200,
        {
            "thread_id": review["thread_id"],
            "reply": None,
            "pending_review": None,
            "review_id": None,
        },
    )
    assert finished_then is False  # the answer came while the tool was still running
    assert (during["status"], [a["status"] for a in during["actions"]]) == ("running", ["approved"])
    assert [a["status"] for a in thread["actions"]] == ["executed"]
    assert [block.text for block in results[0].content] == ["written"]
    assert gate.log.items == [["write started", 1], ["write finished"]]


async def test_a_client_that_times_out_after_the_approval_cancels_the_running_call(
    tmp_path: Path,
) -> None:
    """The mcp SDK's client gives up (read timeout) while the approved call runs: the upstream
    gets notifications/cancelled and stops; the call ends cancelled, not executed."""
    async with gateway(tmp_path) as gate, Client(gate.proxy.server(), mode="legacy") as client:
        failures: list[MCPError] = []

        async def call() -> None:
            try:
                await client.call_tool("slow_write", SLOW, read_timeout_seconds=3)
            except MCPError as exc:
                failures.append(exc)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call)
            review = await gate.pending()
            answer = await gate.approve(review)
            await gate.until_logged(["write started", 60])
        await gate.until_logged(["write cancelled"])
        thread = await gate.ended(review["thread_id"])
        audit = (await gate.http.get(f"/hitl/threads/{review['thread_id']}/audit")).text
        state = await gate.proxy.chat.get_thread(review["thread_id"])
    assert answer.status_code == 200
    assert [f.error.message for f in failures] == ["Request 'tools/call' timed out"]
    assert gate.log.items == [["write started", 60], ["write cancelled"]]
    check_cancelled_after_start(gate, thread, review["review_id"])
    assert [(e.kind, e.action_id) for e in state.audit] == [
        ("requested", state.actions[0].id),
        ("decided", state.actions[0].id),
        ("cancelled", state.actions[0].id),
    ]
    assert state.audit[-1].detail == CANCELLED_AFTER_START
    assert [json.loads(line)["kind"] for line in audit.splitlines()] == [
        "requested",
        "decided",
        "cancelled",
    ]
    [*_, cancelled] = [item.body for item in state.outbox]
    assert cancelled == {
        "id": cancelled["id"],
        "event": "review.cancelled",
        "created_at": cancelled["created_at"],
        "thread_id": review["thread_id"],
        "review_id": review["review_id"],
        "reviewer": None,  # who approved it (nobody signed in here)
        "reason": CANCELLED_AFTER_START,
        "statuses": {state.actions[0].id: "cancelled"},
    }


async def test_a_client_that_disconnects_while_the_call_runs_cancels_it(tmp_path: Path) -> None:
    async with gateway(tmp_path) as gate:
        async with (
            Client(gate.proxy.server(), mode="legacy") as client,
            anyio.create_task_group() as tasks,
        ):
            tasks.start_soon(client.call_tool, "slow_write", SLOW)
            review = await gate.pending()
            await gate.approve(review)
            await gate.until_logged(["write started", 60])
            tasks.cancel_scope.cancel()  # the client goes away with its call
        await gate.until_logged(["write cancelled"])
        thread = await gate.ended(review["thread_id"])
    check_cancelled_after_start(gate, thread, review["review_id"])


async def test_the_gateway_process_cancels_a_started_call_its_client_timed_out_on(
    tmp_path: Path,
    receiver: Receiver,  # noqa: F811 - the fixture
) -> None:
    """The issue's run, end to end: a slow tool approved on the page, its client (the mcp SDK
    over stdio) timing out while it runs. The reviewer's request answers while the tool runs;
    the upstream is told to stop; the audit, the page and the webhook say cancelled."""
    port = free_port()
    log = tmp_path / "upstream.jsonl"
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m", "toolguard", "mcp-proxy", "--db", str(tmp_path / "proxy.sqlite3"),
            "--port", str(port), "--no-auth", "--notify-url", receiver.url,
            "--notify-secret", WEBHOOK_SECRET,
            "--", sys.executable, "-m", "tests.integrations.mcp_roots_upstream",
        ],
        env={**command_env(), "TOOLGUARD_MCP_LOG": str(log)},
        cwd=str(ROOT),
    )  # fmt: skip
    failures: list[MCPError] = []
    with anyio.fail_after(LIMIT):
        async with (
            Client(params, mode="legacy") as client,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=LIMIT) as http,
        ):

            async def call() -> None:
                try:
                    await client.call_tool("slow_write", SLOW, read_timeout_seconds=4)
                except MCPError as exc:
                    failures.append(exc)

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(call)
                [review] = await listed(http, 1)
                body = {
                    "thread_id": review["thread_id"],
                    "review_id": review["review_id"],
                    "decisions": [{"type": "approve"}],
                }
                answer = await http.post("/hitl/review", json=body)
                upstream_then = read_log(log)
                page_then = (await http.get(f"/hitl/threads/{review['thread_id']}")).json()
            await until(lambda: ["write cancelled"] in read_log(log))
            thread = await idle(http, review["thread_id"])
            audit = await http.get(f"/hitl/threads/{review['thread_id']}/audit")
            await until(
                lambda: "review.cancelled" in [r["body"]["event"] for r in receiver.received]
            )
    assert answer.status_code == 200
    assert ["write finished"] not in upstream_then  # it answered while the tool ran
    assert page_then["status"] == "running"
    assert [f.error.message for f in failures] == ["Request 'tools/call' timed out"]
    assert read_log(log) == [["write started", 60], ["write cancelled"]]
    assert [a["status"] for a in thread["actions"]] == ["cancelled"]
    trail = [json.loads(line) for line in audit.text.splitlines()]
    assert [e["kind"] for e in trail] == ["requested", "decided", "cancelled"]
    assert trail[-1]["detail"] == CANCELLED_AFTER_START
    events = [r["body"] for r in receiver.received]
    assert [e["event"] for e in events] == [
        "review.requested",
        "review.decided",
        "review.cancelled",
    ]
    assert (events[2]["reason"], events[2]["statuses"]) == (
        CANCELLED_AFTER_START,
        {thread["actions"][0]["id"]: "cancelled"},
    )
    assert all(r["signed"] for r in receiver.received)
