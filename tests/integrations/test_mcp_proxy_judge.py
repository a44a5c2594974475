"""The gateway with a judge: ``toolguard mcp-proxy --judge-model`` in one process.

The judge is built from the command's options (:func:`toolguard._cli.mcp_proxy.judge_of`)
and its model is the scripted OpenAI-compatible server on 127.0.0.1; the MCP
client, the proxy and the upstream server run in memory.
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
pytest.importorskip("openai")

from mcp import Client, types  # noqa: E402

from tests import openai_server  # noqa: E402
from tests.helpers import MODEL_ENV_VARS  # noqa: E402
from tests.openai_server import ScriptedOpenAIServer, reply_text  # noqa: E402
from toolguard import MemoryStore  # noqa: E402
from toolguard._cli import mcp_proxy  # noqa: E402
from toolguard._cli.main import _parser  # noqa: E402
from toolguard._gateway.proxy import CLIENT_REVIEWER, JUDGE_THREAD, MCPProxy  # noqa: E402

from .mcp_proxy_upstream import TOOLS, build_server  # noqa: E402

scripted_openai = openai_server.scripted_openai  # the fixture, for the tests below

LIMIT = 20
JUDGE = "judge-model"
ALLOW = {
    "risk": "low",
    "user_authorized": True,
    "outcome": "allow",
    "rationale": "Deleting a scratch file is harmless.",
}
ASK = {
    "risk": "medium",
    "user_authorized": False,
    "outcome": "ask",
    "rationale": "Nobody asked for this read.",
}


@pytest.fixture(autouse=True)
def _judge_env(monkeypatch: pytest.MonkeyPatch, scripted_openai: ScriptedOpenAIServer) -> None:
    """The environment's OpenAI settings point at the scripted server."""
    for name in MODEL_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_openai.base_url)


@asynccontextmanager
async def gateway(
    log: Path,
    options: list[str],
    *,
    events: list[tuple[str, dict[str, Any]]],
    answer: types.ElicitResult | None = None,
) -> AsyncIterator[tuple[Client, MCPProxy]]:
    """The proxy with the judge of ``options`` (the command line's) before the upstream."""
    args = _parser().parse_args(["mcp-proxy", *options, "--", "upstream"])

    async def record(event: str, payload: dict[str, Any]) -> None:
        events.append((event, payload))

    async def ask(ctx: Any, params: Any) -> types.ElicitResult:
        assert answer is not None
        return answer

    judge = mcp_proxy.judge_of(args)
    assert judge is not None
    async with judge.model.client:  # type: ignore[attr-defined]  # the judge's HTTP client
        with anyio.fail_after(LIMIT):
            async with Client(build_server(log), mode="legacy") as upstream:
                proxy = MCPProxy(
                    upstream, TOOLS, store=MemoryStore(), ttl=60, on_event=record, judge=judge
                )
                async with anyio.create_task_group() as tasks:
                    proxy._tasks = tasks
                    callback = ask if answer is not None else None
                    async with Client(
                        proxy.server(), mode="legacy", elicitation_callback=callback
                    ) as client:
                        yield client, proxy
                    tasks.cancel_scope.cancel()


def executions(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def text(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


async def audit_of(proxy: MCPProxy) -> list[Any]:
    ids = await proxy.chat.store.thread_ids()  # type: ignore[attr-defined]
    [thread_id] = [i for i in ids if i != JUDGE_THREAD]  # the gateway's count of auto-approvals
    return await proxy.chat.audit_trail(thread_id)


async def test_the_verdict_joins_the_approval_question(
    tmp_path: Path, scripted_openai: ScriptedOpenAIServer
) -> None:
    """--judge-model alone: the guarded call waits for a person, the verdict in its review."""
    log = tmp_path / "log.jsonl"
    events: list[tuple[str, dict[str, Any]]] = []
    scripted_openai.add(reply_text(json.dumps(ALLOW)))
    approve = types.ElicitResult(action="accept", content={"decision": "approve"})
    async with gateway(log, ["--judge-model", JUDGE], events=events, answer=approve) as (
        client,
        proxy,
    ):
        result = await client.call_tool("delete_file", {"path": "scratch.txt"})
        audit = await audit_of(proxy)
    assert text(result) == ["delete_file done", '{"path": "scratch.txt"}']
    assert events[0][1]["pending_review"]["action_requests"] == [
        {
            "name": "delete_file",
            "args": {"path": "scratch.txt"},
            "description": (
                "Tool `delete_file` is awaiting approval | Judge (judge-model): low risk, the"
                " user asked for it. Deleting a scratch file is harmless."
            ),
        }
    ]
    assert [(e.kind, e.actor) for e in audit] == [
        ("judged", None),
        ("requested", None),
        ("decided", CLIENT_REVIEWER),
        ("executed", CLIENT_REVIEWER),
    ]
    # A gateway has no person's messages: the judge reads the call alone.
    [request] = scripted_openai.requests
    assert json.loads(request["messages"][1]["content"]) == {
        "user_messages": [],
        "proposed_call": {
            "tool": "delete_file",
            "description": "Delete a file (claims read-only).",
            "arguments": {"path": "scratch.txt"},
        },
    }


async def test_with_auto_approve_the_call_runs_without_a_person(
    tmp_path: Path, scripted_openai: ScriptedOpenAIServer
) -> None:
    """--judge-auto-approve: the call is forwarded and answers exactly as the upstream did."""
    log = tmp_path / "log.jsonl"
    events: list[tuple[str, dict[str, Any]]] = []
    scripted_openai.add(reply_text(json.dumps(ALLOW)))
    options = ["--judge-model", JUDGE, "--judge-auto-approve"]
    async with gateway(log, options, events=events) as (client, proxy):
        result = await client.call_tool("delete_file", {"path": "scratch.txt"})
        audit = await audit_of(proxy)
    assert (result.is_error, text(result)) == (
        False,
        ["delete_file done", '{"path": "scratch.txt"}'],
    )
    assert events == []  # no review
    assert [(e.kind, e.actor, e.decision, e.detail) for e in audit] == [
        ("judged", "judge", "approve", ALLOW["rationale"])
    ]
    assert executions(log) == [{"tool": "delete_file", "args": {"path": "scratch.txt"}}]


async def test_scope_all_sends_a_read_the_judge_questions_to_a_person(
    tmp_path: Path, scripted_openai: ScriptedOpenAIServer
) -> None:
    """--judge-scope all: a read-only call is judged too; the judge's ask makes a person decide."""
    log = tmp_path / "log.jsonl"
    events: list[tuple[str, dict[str, Any]]] = []
    scripted_openai.add(reply_text(json.dumps(ASK)))
    reject = types.ElicitResult(action="accept", content={"decision": "reject"})
    options = ["--judge-model", JUDGE, "--judge-scope", "all"]
    async with gateway(log, options, events=events, answer=reject) as (client, proxy):
        result = await client.call_tool("read_file", {"path": "secrets.txt"})
        audit = await audit_of(proxy)
    assert result.is_error is True
    assert [name for name, _ in events] == ["review.requested", "review.decided"]
    assert [(e.kind, e.actor) for e in audit] == [
        ("judged", None),
        ("requested", None),
        ("decided", CLIENT_REVIEWER),
        ("rejected", CLIENT_REVIEWER),
    ]
    assert executions(log) == []  # nothing ran


async def test_without_scope_all_a_read_is_forwarded_unjudged(
    tmp_path: Path, scripted_openai: ScriptedOpenAIServer
) -> None:
    log = tmp_path / "log.jsonl"
    events: list[tuple[str, dict[str, Any]]] = []
    async with gateway(log, ["--judge-model", JUDGE], events=events) as (client, proxy):
        result = await client.call_tool("read_file", {"path": "notes.txt"})
        threads = await proxy.chat.store.thread_ids()  # type: ignore[attr-defined]
    assert text(result) == ["read_file done", '{"path": "notes.txt"}']
    assert (threads, scripted_openai.requests, events) == ([], [], [])
