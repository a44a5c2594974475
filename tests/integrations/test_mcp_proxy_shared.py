"""Several gateway processes on one PostgreSQL store, in one test process.

Two :class:`MCPProxy` instances, each with its own upstream server and its
own connections to one PostgreSQL table, stand for two gateway processes: a
call waiting in one and decided on the other's page runs in the one holding
it, once; a starting process leaves the other's waiting calls alone; grants
count their uses across both.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

mcp = pytest.importorskip("mcp")
pytest.importorskip("psycopg")

from mcp import Client, types  # noqa: E402

from tests.helpers import fresh_postgres_table, postgres_dsn  # noqa: E402
from toolguard._core.errors import NoPendingReviewError, ReviewerNotAllowedError  # noqa: E402
from toolguard._gateway.proxy import MCPProxy  # noqa: E402
from toolguard._gateway.shared import (  # noqa: E402
    DECISION_PREFIX,
    OWNER_GONE,
    Processes,
    owner_of,
    share,
)
from toolguard.postgres import PostgresStore  # noqa: E402

from .mcp_proxy_upstream import TOOLS, build_server  # noqa: E402

LIMIT = 30


class Gateway:
    """One gateway "process": its upstream (logging to its own file), proxy and client."""

    def __init__(self, proxy: MCPProxy, client: Client, log: Path, processes: Processes) -> None:
        self.proxy = proxy
        self.client = client
        self.log = log
        self.processes = processes

    def ran(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]


@asynccontextmanager
async def gateway(table: str, log: Path, *, beating: bool = True) -> AsyncIterator[Gateway]:
    async with (
        PostgresStore(postgres_dsn(), table=table) as store,
        Client(build_server(log), mode="legacy") as upstream,
    ):
        proxy = MCPProxy(upstream, TOOLS, store=store, ttl=60)
        processes = share(proxy.chat, proxy.model)
        async with anyio.create_task_group() as tasks:
            proxy._tasks = tasks
            if beating:
                await processes.beat()
                tasks.start_soon(processes.run)
            async with Client(proxy.server(), mode="legacy") as client:
                yield Gateway(proxy, client, log, processes)
            tasks.cancel_scope.cancel()


async def waiting(proxy: MCPProxy) -> tuple[str, str]:
    """The thread and review of the one call waiting (read from the shared store)."""
    while True:
        for thread_id in await proxy.chat.store.thread_ids():  # type: ignore[attr-defined]
            state = await proxy.chat.store.load(thread_id)
            if state is not None and state.status == "awaiting_review" and state.pending:
                return thread_id, state.pending.review_id
        await anyio.sleep(0.02)


@pytest.fixture
async def table() -> AsyncIterator[str]:
    postgres_dsn()
    async with fresh_postgres_table() as name:
        yield name


async def test_a_call_waiting_in_a_decided_on_bs_page_runs_once_in_a(
    table: str, tmp_path: Path
) -> None:
    with anyio.fail_after(LIMIT):
        async with (
            gateway(table, tmp_path / "a.jsonl") as a,
            gateway(table, tmp_path / "b.jsonl") as b,
        ):
            answers: list[types.CallToolResult] = []

            async def call() -> None:
                answers.append(await a.client.call_tool("delete_file", {"path": "notes.txt"}))

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(call)
                thread_id, review_id = await waiting(b.proxy)
                state = await b.proxy.chat.get_thread(thread_id)
                assert state.pending is not None
                assert owner_of(state.pending.actions[0].call_id) == a.processes.id
                # B starting again now leaves A's waiting call alone.
                assert await b.proxy.close_stale() == []
                turn = await b.proxy.chat.submit_review(
                    [{"type": "approve"}], thread_id, review_id=review_id, reviewer="ana"
                )
            assert [a.ran(), b.ran()] == [
                [{"args": {"path": "notes.txt"}, "tool": "delete_file"}],
                [],
            ]
            assert [r.is_error for r in answers] == [False]
            assert (turn.thread_id, [x.status for x in turn.actions]) == (thread_id, ["executed"])
            trail = await a.proxy.chat.audit_trail(thread_id)
            assert [(e.kind, e.actor) for e in trail] == [
                ("requested", None),
                ("decided", "ana"),
                ("executed", "ana"),
            ]
            # The decision is taken: deciding again on either page changes nothing.
            for page in (a, b):
                with pytest.raises(NoPendingReviewError):
                    await page.proxy.chat.submit_review(
                        [{"type": "approve"}], thread_id, review_id=review_id, reviewer="bo"
                    )
            assert len(a.ran()) == 1
            box = await b.proxy.chat.store.load(f"{DECISION_PREFIX}{review_id}")
            assert box is not None
            assert [m["role"] for m in box.messages] == ["user", "assistant"]


async def test_a_refusal_on_bs_page_is_bs_usual_error_and_nothing_is_handed_over(
    table: str, tmp_path: Path
) -> None:
    with anyio.fail_after(LIMIT):
        async with (
            gateway(table, tmp_path / "a.jsonl") as a,
            gateway(table, tmp_path / "b.jsonl") as b,
        ):

            async def nobody(reviewer: str | None, state: Any, actions: Any) -> bool:
                return False

            b.proxy.chat.authorize = nobody
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(a.client.call_tool, "delete_file", {"path": "x"})
                thread_id, review_id = await waiting(b.proxy)
                with pytest.raises(ReviewerNotAllowedError):
                    await b.proxy.chat.submit_review(
                        [{"type": "approve"}], thread_id, review_id=review_id, reviewer="eve"
                    )
                assert await b.proxy.chat.store.load(f"{DECISION_PREFIX}{review_id}") is None
                await a.proxy.chat.submit_review(
                    [{"type": "reject"}], thread_id, review_id=review_id, reviewer="ana"
                )
            assert [a.ran(), b.ran()] == [[], []]


async def test_a_decision_on_a_call_whose_process_is_gone_cancels_it(
    table: str, tmp_path: Path
) -> None:
    with anyio.fail_after(LIMIT):
        async with gateway(table, tmp_path / "b.jsonl") as b:
            async with (
                gateway(table, tmp_path / "a.jsonl") as a,
                anyio.create_task_group() as tasks,
            ):
                tasks.start_soon(a.client.call_tool, "delete_file", {"path": "x"})
                thread_id, review_id = await waiting(b.proxy)
                await a.processes.beat(stopped=True)  # A stops (its client with it)
                assert not await b.processes.alive(a.processes.id)
                with pytest.raises(NoPendingReviewError):
                    await b.proxy.chat.submit_review(
                        [{"type": "approve"}], thread_id, review_id=review_id, reviewer="ana"
                    )
                tasks.cancel_scope.cancel()
            state = await b.proxy.chat.get_thread(thread_id)
            assert [x.status for x in state.actions] == ["cancelled"]
            assert [e.detail for e in state.audit if e.kind == "cancelled"] == [
                f"The review of this action was cancelled: {OWNER_GONE}. It was not executed."
            ]
            assert [a.ran(), b.ran()] == [[], []]


async def test_a_starting_process_closes_the_calls_of_a_gone_process_only(
    table: str, tmp_path: Path
) -> None:
    with anyio.fail_after(LIMIT):
        async with gateway(table, tmp_path / "a.jsonl") as a, anyio.create_task_group() as tasks:
            tasks.start_soon(a.client.call_tool, "delete_file", {"path": "x"})
            thread_id, _ = await waiting(a.proxy)
            async with gateway(table, tmp_path / "b.jsonl", beating=False) as b:
                assert await b.proxy.close_stale() == []  # A lives
                await a.processes.beat(stopped=True)
                assert await b.proxy.close_stale() == [thread_id]  # A is gone
            tasks.cancel_scope.cancel()


async def test_a_grant_made_on_one_process_counts_its_uses_across_both(
    table: str, tmp_path: Path
) -> None:
    with anyio.fail_after(LIMIT):
        async with (
            gateway(table, tmp_path / "a.jsonl") as a,
            gateway(table, tmp_path / "b.jsonl") as b,
        ):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(a.client.call_tool, "delete_file", {"path": "first"})
                thread_id, review_id = await waiting(a.proxy)
                grant = {"scope": "server", "match": "tool", "uses": 4}
                await a.proxy.chat.submit_review(
                    [{"type": "approve", "grant": grant}],
                    thread_id,
                    review_id=review_id,
                    reviewer="ana",
                )
            answers: list[bool] = []

            async def call(gw: Gateway, index: int) -> None:
                with anyio.move_on_after(3):  # an uncovered call waits for a review
                    result = await gw.client.call_tool("delete_file", {"path": f"p{index}"})
                    answers.append(result.is_error)

            async with anyio.create_task_group() as tasks:
                for index in range(8):
                    tasks.start_soon(call, (a, b)[index % 2], index)
            covered = [r for r in a.ran() + b.ran() if r["args"]["path"] != "first"]
            assert (len(covered), answers) == (4, [False] * 4)


async def test_the_call_run_in_a_links_the_request_that_decided_it_on_b(
    table: str, tmp_path: Path, spans: Any
) -> None:
    from opentelemetry import trace
    from opentelemetry.context import Context

    app = trace.get_tracer("test app")
    with anyio.fail_after(LIMIT):
        async with (
            gateway(table, tmp_path / "a.jsonl") as a,
            gateway(table, tmp_path / "b.jsonl") as b,
            anyio.create_task_group() as tasks,
        ):
            with app.start_as_current_span("agent turn") as agent:
                tasks.start_soon(a.client.call_tool, "delete_file", {"path": "x"})
            thread_id, review_id = await waiting(b.proxy)
            with app.start_as_current_span("POST /hitl/review", context=Context()) as request:
                await b.proxy.chat.submit_review(
                    [{"type": "approve"}], thread_id, review_id=review_id, reviewer="ana"
                )
    [call] = [s for s in spans.get_finished_spans() if s.name == "execute_tool delete_file"]
    assert call.context.trace_id == agent.get_span_context().trace_id
    assert [link.context.span_id for link in call.links] == [request.get_span_context().span_id]
    assert len(a.ran()) == 1


async def test_a_judges_limits_count_across_both_processes(table: str, tmp_path: Path) -> None:
    """Two processes' judges (each allowing everything, at most 3 auto-approvals in all) share
    the count in the store: 8 different calls, 4 on each, racing: exactly 3 run."""
    from tests.adversarial.test_judge_gateway_limits import ALLOW, PAY, payment_server
    from toolguard import Judge, ScriptedModel

    paid: list[tuple[str, Any]] = []

    @asynccontextmanager
    async def judged() -> AsyncIterator[tuple[Client, MCPProxy]]:
        judge = Judge(ScriptedModel([ALLOW], repeat=True), auto_approve=True, max_auto_approvals=3)
        async with (
            PostgresStore(postgres_dsn(), table=table) as store,
            Client(payment_server(paid), mode="legacy") as upstream,
        ):
            proxy = MCPProxy(upstream, [PAY], store=store, ttl=60, judge=judge)
            share(proxy.chat, proxy.model)
            async with anyio.create_task_group() as tasks:
                proxy._tasks = tasks
                async with Client(proxy.server(), mode="legacy") as client:
                    yield client, proxy
                tasks.cancel_scope.cancel()

    async def pay(client: Client, amount: int) -> None:
        with anyio.move_on_after(3):  # one the judge may not approve waits for a person
            await client.call_tool("pay_invoice", {"to": "eve", "amount": amount})

    with anyio.fail_after(LIMIT):
        async with judged() as (a, _), judged() as (b, _), anyio.create_task_group() as tasks:
            for amount in range(8):
                tasks.start_soon(pay, (a, b)[amount % 2], 100 + amount)
    assert len(paid) == 3
