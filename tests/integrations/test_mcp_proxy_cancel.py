"""A call its MCP client gives up on is cancelled: it never runs, even if a reviewer approves later.

The gateway runs in process on memory streams, in front of the real upstream
of ``mcp_proxy_upstream.py`` (every execution is appended to a log file). A
client gives up in three ways: the mcp SDK's ``ClientSession`` times out
(it then sends ``notifications/cancelled`` itself), a client sends
``notifications/cancelled`` for the call's request id, or its connection
closes. Each time the review ends ``cancelled`` (audited, the event hook
told, a ``review.cancelled`` webhook queued), leaves ``GET /hitl/reviews``,
and a later approval on the HTTP API is refused; the upstream never sees the
call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

mcp = pytest.importorskip("mcp")
httpx = pytest.importorskip("httpx")

from mcp import Client, ClientSession, types  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from mcp.shared.memory import create_client_server_memory_streams  # noqa: E402
from mcp.shared.message import SessionMessage  # noqa: E402
from mcp_types import JSONRPCNotification, JSONRPCRequest  # noqa: E402

from toolguard import SQLiteStore, Webhook  # noqa: E402
from toolguard._gateway.proxy import ABANDONED, MCPProxy  # noqa: E402
from toolguard._gateway.routes import DEFAULT_PORT, build_app  # noqa: E402
from toolguard._stores.protocol import ThreadState  # noqa: E402

from .mcp_proxy_upstream import TOOLS, build_server  # noqa: E402

LIMIT = 20  # seconds: the bound of every test
HOST = f"http://127.0.0.1:{DEFAULT_PORT}"  # a Host the approval page answers by default
CANCELLED = f"The review of this action was cancelled: {ABANDONED}. It was not executed."


@dataclass
class Gateway:
    """A running gateway: the proxy, its client-side streams and what it told its event hook."""

    proxy: MCPProxy
    log: Path
    read: Any
    write: Any
    sent: list[dict[str, Any]] = field(default_factory=list)
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    held: anyio.Event = field(default_factory=anyio.Event)

    async def pending(self) -> ThreadState:
        """The one thread, once its review waits for a decision."""
        while True:
            threads = await self.proxy.chat.store.thread_ids()  # type: ignore[attr-defined]
            if threads:
                state = await self.proxy.chat.get_thread(threads[0])
                if state.status == "awaiting_review":
                    return state
            await anyio.sleep(0.01)

    async def ended(self, thread_id: str) -> ThreadState:
        """The thread, once its review is closed."""
        while True:
            state = await self.proxy.chat.get_thread(thread_id)
            if state.status == "idle":
                return state
            await anyio.sleep(0.01)

    async def send(self, message: dict[str, Any]) -> None:
        """Write one raw JSON-RPC message to the gateway, as a client would."""
        self.sent.append(message)
        parsed = (JSONRPCRequest if "id" in message else JSONRPCNotification).model_validate(
            message
        )
        await self.write.send(SessionMessage(message=parsed))

    async def handshake(self) -> None:
        """``initialize`` and ``notifications/initialized`` by hand (protocol 2025-06-18)."""
        await self.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            }
        )
        answer = await self.read.receive()
        assert answer.message.id == 1
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


@asynccontextmanager
async def gateway(tmp_path: Path, *, hold: bool = False) -> AsyncIterator[Gateway]:
    """The gateway's MCP server on memory streams; the test plays its client.

    With ``hold``, the event hook never returns from ``review.requested``.
    """
    log = tmp_path / "executions.jsonl"
    store = SQLiteStore(tmp_path / "proxy.sqlite3")
    with anyio.fail_after(LIMIT):
        async with Client(build_server(log), mode="legacy") as upstream:
            proxy = MCPProxy(upstream, TOOLS, store=store, ttl=60)
            # Webhooks wait in the outbox: nothing is delivered here, the tests read them.
            proxy.chat.notify = Webhook("http://127.0.0.1:9/hooks", secret="s")  # noqa: S106
            server = proxy.server()
            async with (
                create_client_server_memory_streams() as (client_side, server_side),
                anyio.create_task_group() as tasks,
            ):
                running = Gateway(proxy, log, *client_side)

                async def record(event: str, payload: dict[str, Any]) -> None:
                    running.events.append((event, payload))
                    if hold and event == "review.requested":
                        running.held.set()
                        await anyio.sleep_forever()

                proxy.on_event = record
                proxy._tasks = tasks
                tasks.start_soon(server.run, *server_side, server.create_initialization_options())
                yield running
                tasks.cancel_scope.cancel()
    store.close()


async def late_approvals(
    gate: Gateway, thread_id: str, review_id: str
) -> list[tuple[int, dict[str, Any]]]:
    """A reviewer approves the closed review on the HTTP API, with and without its id."""
    transport = httpx.ASGITransport(app=build_app(gate.proxy.chat))
    approve = [{"type": "approve"}]
    async with httpx.AsyncClient(transport=transport, base_url=HOST) as http:
        listed = await http.get("/hitl/reviews")
        assert (listed.status_code, listed.json()) == (200, {"reviews": []})
        answers = [
            await http.post(
                "/hitl/review",
                json={
                    "thread_id": thread_id,
                    "review_id": review_id,
                    "decisions": approve,
                },
            ),
            await http.post("/hitl/review", json={"thread_id": thread_id, "decisions": approve}),
        ]
    return [(a.status_code, a.json()) for a in answers]


async def check_cancelled(gate: Gateway, thread_id: str, review_id: str) -> None:
    """The review ended cancelled, nothing ran, and a later approval is refused."""
    state = await gate.ended(thread_id)
    assert [(a.name, a.args, a.status) for a in state.actions] == [
        ("delete_file", {"path": "d"}, "cancelled")
    ]
    assert [(e.kind, e.actor, e.review_id) for e in state.audit] == [
        ("requested", None, review_id),
        ("cancelled", None, review_id),
    ]
    assert state.audit[-1].detail == CANCELLED
    [requested, cancelled] = [item.body for item in state.outbox]
    assert requested["event"] == "review.requested"
    assert cancelled == {
        "id": cancelled["id"],
        "event": "review.cancelled",
        "created_at": cancelled["created_at"],
        "thread_id": thread_id,
        "review_id": review_id,
        "reviewer": None,
        "reason": CANCELLED,
        "statuses": {state.actions[0].id: "cancelled"},
    }
    assert [(event, payload["status"]) for event, payload in gate.events[1:]] == [
        ("review.decided", "cancelled")
    ]
    assert [event for event, _ in gate.events] == ["review.requested", "review.decided"]
    assert {k: gate.events[1][1][k] for k in ("thread_id", "review_id", "tool", "args")} == {
        "thread_id": thread_id,
        "review_id": review_id,
        "tool": "delete_file",
        "args": {"path": "d"},
    }
    assert await late_approvals(gate, thread_id, review_id) == [
        (
            400,
            {
                "detail": f"The review {review_id} was cancelled: its actions were not"
                " executed and can no longer be approved."
            },
        ),
        (400, {"detail": "There is no action awaiting approval in this conversation"}),
    ]
    after = await gate.proxy.chat.get_thread(thread_id)
    assert (after.version, [a.status for a in after.actions]) == (state.version, ["cancelled"])
    assert not gate.log.exists()  # the upstream never ran the call


class Recording:
    """A client's write stream that keeps every message it sends."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.sent: list[dict[str, Any]] = []

    async def send(self, item: SessionMessage) -> None:
        self.sent.append(item.message.model_dump(by_alias=True, exclude_none=True))
        await self.stream.send(item)

    async def aclose(self) -> None:
        await self.stream.aclose()

    async def __aenter__(self) -> Recording:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def test_a_call_the_client_times_out_on_is_cancelled_and_never_runs(
    tmp_path: Path,
) -> None:
    """The mcp SDK's ClientSession gives up after its read timeout: the call is cancelled."""
    async with gateway(tmp_path) as gate:
        wire = Recording(gate.write)
        async with ClientSession(gate.read, wire, read_timeout_seconds=5) as session:
            await session.initialize()
            with pytest.raises(MCPError) as timed_out:
                await session.call_tool("delete_file", {"path": "d"}, read_timeout_seconds=0.3)
            requested = gate.events[0][1]
            await check_cancelled(gate, requested["thread_id"], requested["review_id"])
            still = await session.call_tool("read_file", {"path": "r"})  # the session goes on
    assert timed_out.value.error.message == "Request 'tools/call' timed out"
    [call, _] = [m for m in wire.sent if m.get("method") == "tools/call"]
    [cancel] = [m for m in wire.sent if m.get("method") == "notifications/cancelled"]
    assert cancel["params"]["requestId"] == call["id"]
    assert [block.text for block in still.content if isinstance(block, types.TextContent)] == [
        "read_file done",
        '{"path": "r"}',
    ]


async def test_a_call_the_client_cancels_is_cancelled_and_never_runs(tmp_path: Path) -> None:
    """notifications/cancelled for the call's request id ends it; another id changes nothing."""
    async with gateway(tmp_path) as gate:
        await gate.handshake()
        call = {"name": "delete_file", "arguments": {"path": "d"}}
        await gate.send({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": call})
        waiting = await gate.pending()
        other = {"requestId": 8, "reason": "not this one"}
        await gate.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": other})
        await gate.send({"jsonrpc": "2.0", "id": 9, "method": "ping"})
        pong = await gate.read.receive()  # the gateway handled the stray cancel before this
        assert pong.message.model_dump(exclude_none=True) == {
            "jsonrpc": "2.0",
            "id": 9,
            "result": {},
        }
        assert (await gate.proxy.chat.get_thread(waiting.thread_id)).version == waiting.version
        mine = {"requestId": 7, "reason": "the user stopped the agent"}
        await gate.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": mine})
        await check_cancelled(gate, waiting.thread_id, str(waiting.review_id))


async def test_a_call_whose_connection_closes_is_cancelled_and_never_runs(
    tmp_path: Path,
) -> None:
    """The client's connection closes while its call waits: nobody can approve it later."""
    async with gateway(tmp_path) as gate:
        await gate.handshake()
        call = {"name": "delete_file", "arguments": {"path": "d"}}
        await gate.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
        waiting = await gate.pending()
        await gate.write.aclose()  # EOF, no notifications/cancelled
        await check_cancelled(gate, waiting.thread_id, str(waiting.review_id))


async def test_a_client_giving_up_while_the_review_is_being_opened_still_cancels_it(
    tmp_path: Path,
) -> None:
    """Cancelled before the call waits (here: during the review.requested hook): still closed."""
    async with gateway(tmp_path, hold=True) as gate:
        await gate.handshake()
        call = {"name": "delete_file", "arguments": {"path": "d"}}
        await gate.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call})
        await gate.held.wait()  # the hook got review.requested and holds the call there
        waiting = await gate.pending()
        cancel = {"requestId": 3}
        await gate.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
        await check_cancelled(gate, waiting.thread_id, str(waiting.review_id))
