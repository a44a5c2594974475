"""The gateway's judge keeps its limits across calls, restarts and races.

Every ``tools/call`` through ``toolguard mcp-proxy`` is its own thread, so a
judge's per-thread limits alone would never apply there: the same payment
sent six times ran six times with ``max_auto_approvals=2``. In the gateway
the judge never auto-approves the same call (tool and validated arguments)
twice, and at most ``max_auto_approvals`` calls in all: counted in the
gateway's store (one thread of it, with compare-and-set saves), so the
counts survive a restart and two racing calls never both take the last slot.

The MCP client, the proxy and a payment server run in memory; the judge's
model is scripted (it allows everything); the client declines every
question, so a call sent to a person never runs.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

mcp = pytest.importorskip("mcp")

from mcp import Client, types  # noqa: E402
from mcp.server import Server  # noqa: E402

from toolguard import Judge, MemoryStore, ScriptedModel, SQLiteStore, ThreadState  # noqa: E402
from toolguard._gateway.proxy import JUDGE_THREAD, MCPProxy  # noqa: E402
from toolguard._stores.protocol import Store  # noqa: E402

LIMIT = 20
PAY: dict[str, Any] = {
    "name": "pay_invoice",
    "description": "Pay an invoice.",
    "inputSchema": {
        "type": "object",
        "properties": {"to": {"type": "string"}, "amount": {"type": "integer"}},
        "required": ["to", "amount"],
    },
}
ALLOW = json.dumps(
    {"risk": "low", "user_authorized": True, "outcome": "allow", "rationale": "Looks fine."}
)
DECLINE = types.ElicitResult(action="decline")


def payment_server(paid: list[tuple[str, Any]]) -> Server[Any]:
    """An upstream MCP server whose one tool pays; each payment is appended to ``paid``."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult.model_validate({"tools": [PAY]})

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments or {}
        paid.append((args["to"], args["amount"]))
        text = f"paid {args['amount']} to {args['to']}"
        return types.CallToolResult.model_validate({"content": [{"type": "text", "text": text}]})

    return Server("payments", on_list_tools=list_tools, on_call_tool=call_tool)


@asynccontextmanager
async def gateway(
    store: Store, paid: list[tuple[str, Any]], judge: Judge
) -> AsyncIterator[tuple[Client, MCPProxy]]:
    """The proxy before the payment server; its client declines every question."""

    async def decline(ctx: Any, params: Any) -> types.ElicitResult:
        return DECLINE

    with anyio.fail_after(LIMIT):
        async with Client(payment_server(paid), mode="legacy") as upstream:
            proxy = MCPProxy(upstream, [PAY], store=store, ttl=60, judge=judge)
            async with anyio.create_task_group() as tasks:
                proxy._tasks = tasks
                async with Client(
                    proxy.server(), mode="legacy", elicitation_callback=decline
                ) as client:
                    yield client, proxy
                tasks.cancel_scope.cancel()


def allowing_judge(limit: int = 2) -> Judge:
    return Judge(ScriptedModel([ALLOW], repeat=True), auto_approve=True, max_auto_approvals=limit)


async def pay(client: Client, to: str, amount: Any) -> bool:
    """Send one payment through the gateway; whether the upstream ran it."""
    result = await client.call_tool("pay_invoice", {"to": to, "amount": amount})
    return not result.is_error


async def test_the_same_payment_sent_six_times_runs_once() -> None:
    paid: list[tuple[str, Any]] = []
    async with gateway(MemoryStore(), paid, allowing_judge()) as (client, _):
        ran = [await pay(client, "eve", 100) for _ in range(6)]
    assert ran == [True, False, False, False, False, False]
    assert paid == [("eve", 100)]


async def test_one_payment_written_as_100_and_100_point_0_is_one_call() -> None:
    """JSON Schema takes both as an integer: they are the same call."""
    paid: list[tuple[str, Any]] = []
    async with gateway(MemoryStore(), paid, allowing_judge()) as (client, _):
        ran = [await pay(client, "eve", 100), await pay(client, "eve", 100.0)]
    assert (ran, paid) == ([True, False], [("eve", 100)])


async def test_max_auto_approvals_counts_every_call_through_the_gateway() -> None:
    paid: list[tuple[str, Any]] = []
    async with gateway(MemoryStore(), paid, allowing_judge(2)) as (client, proxy):
        ran = [await pay(client, "eve", amount) for amount in range(100, 106)]
        ledger = await proxy.chat.audit_trail(JUDGE_THREAD)
    assert ran == [True, True, False, False, False, False]
    assert paid == [("eve", 100), ("eve", 101)]
    assert [(e.kind, e.tool, e.actor, e.decision, e.detail) for e in ledger] == [
        ("judged", "pay_invoice", "judge", "approve", "auto-approval 1 of 2 through the gateway"),
        ("judged", "pay_invoice", "judge", "approve", "auto-approval 2 of 2 through the gateway"),
    ]
    assert all(e.args is None for e in ledger)  # the ledger keeps digests, never arguments


async def test_the_limits_survive_a_restart_on_the_same_sqlite_file(tmp_path: Path) -> None:
    paid: list[tuple[str, Any]] = []
    db = tmp_path / "gateway.db"
    async with SQLiteStore(db) as store, gateway(store, paid, allowing_judge(2)) as (client, _):
        assert await pay(client, "eve", 100) is True
    async with SQLiteStore(db) as store, gateway(store, paid, allowing_judge(2)) as (client, _):
        # A new process, a new judge: the store remembers the approval and the count.
        ran = [await pay(client, "eve", 100), await pay(client, "eve", 101)]
        ran.append(await pay(client, "eve", 102))
    assert ran == [False, True, False]
    assert paid == [("eve", 100), ("eve", 101)]


class InterleavingStore(MemoryStore):
    """A MemoryStore whose reads let other tasks run first, so racing callers read alike."""

    async def load(self, thread_id: str) -> ThreadState | None:
        await anyio.lowlevel.checkpoint()
        state = await super().load(thread_id)
        await anyio.lowlevel.checkpoint()
        return state


async def test_two_racing_calls_never_both_take_the_last_slot() -> None:
    paid: list[tuple[str, Any]] = []
    ran: list[bool] = []

    async def one(client: Client, amount: int) -> None:
        ran.append(await pay(client, "eve", amount))

    async with gateway(InterleavingStore(), paid, allowing_judge(1)) as (client, proxy):
        async with anyio.create_task_group() as racing:
            for amount in (100, 200, 300, 400):
                racing.start_soon(one, client, amount)
        ledger = await proxy.chat.audit_trail(JUDGE_THREAD)
    assert sorted(ran) == [False, False, False, True]
    assert len(paid) == 1
    assert len(ledger) == 1
