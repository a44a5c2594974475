"""The gateway's logic in one process: in-memory MCP client, proxy server and upstream server.

Fast checks of what the subprocess tests (``test_mcp_proxy.py``) do not reach:
the event hook, tools the proxy cannot guard or did not list, the reviews
router, start-up cleanup of a previous run's reviews, and the CLI's usage errors.
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
httpx = pytest.importorskip("httpx")

from mcp import Client, types  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from toolguard import MemoryStore  # noqa: E402
from toolguard._cli.main import main as cli_main  # noqa: E402
from toolguard._gateway.proxy import CLIENT_REVIEWER, MCPProxy  # noqa: E402
from toolguard._gateway.question import approval_message  # noqa: E402
from toolguard._gateway.routes import DEFAULT_PORT, build_app  # noqa: E402

from .mcp_proxy_upstream import (  # noqa: E402
    PROMPTS,
    RESOURCE_TEMPLATES,
    RESOURCES,
    TOOLS,
    build_server,
)

LIMIT = 20


@asynccontextmanager
async def gateway(
    log: Path,
    *,
    listed: list[dict[str, Any]] | None = None,
    store: MemoryStore | None = None,
    events: list[tuple[str, dict[str, Any]]] | None = None,
    answer: types.ElicitResult | None = None,
    mode: str = "legacy",
) -> AsyncIterator[tuple[Client, MCPProxy]]:
    async def record(event: str, payload: dict[str, Any]) -> None:
        if events is not None:
            events.append((event, payload))

    async def ask(ctx: Any, params: Any) -> types.ElicitResult:
        assert answer is not None
        return answer

    with anyio.fail_after(LIMIT):
        async with Client(build_server(log), mode="legacy") as upstream:
            proxy = MCPProxy(
                upstream,
                TOOLS if listed is None else listed,
                store=store or MemoryStore(),
                ttl=60,
                on_event=record,
            )
            callback = ask if answer is not None else None
            async with anyio.create_task_group() as tasks:
                proxy._tasks = tasks
                async with Client(
                    proxy.server(), mode=mode, elicitation_callback=callback
                ) as client:
                    yield client, proxy
                tasks.cancel_scope.cancel()


def executions(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def text(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_events_and_audit_of_an_approval_by_elicitation(tmp_path: Path, mode: str) -> None:
    log = tmp_path / "log.jsonl"
    events: list[tuple[str, dict[str, Any]]] = []
    approve = types.ElicitResult(action="accept", content={"decision": "approve"})
    async with gateway(log, events=events, answer=approve, mode=mode) as (client, proxy):
        result = await client.call_tool("delete_file", {"path": "d"})
        [thread_id] = await proxy.chat.store.thread_ids()  # type: ignore[attr-defined]
        audit = await proxy.chat.audit_trail(thread_id)
    assert text(result) == ["delete_file done", '{"path": "d"}']
    assert [(e.kind, e.actor) for e in audit] == [
        ("requested", None),
        ("decided", CLIENT_REVIEWER),
        ("executed", CLIENT_REVIEWER),
    ]
    assert [name for name, _ in events] == ["review.requested", "review.decided"]
    requested, decided = events[0][1], events[1][1]
    assert (requested["tool"], requested["args"], requested["thread_id"]) == (
        "delete_file",
        {"path": "d"},
        thread_id,
    )
    assert requested["pending_review"]["action_requests"] == [
        {
            "name": "delete_file",
            "args": {"path": "d"},
            "description": "Tool `delete_file` is awaiting approval",
        }
    ]
    assert {k: decided[k] for k in ("tool", "args", "status")} == {
        "tool": "delete_file",
        "args": {"path": "d"},
        "status": "executed",
    }
    assert executions(log) == [{"tool": "delete_file", "args": {"path": "d"}}]


async def test_invalid_arguments_are_refused_before_anyone_is_asked(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    events: list[tuple[str, dict[str, Any]]] = []
    approve = types.ElicitResult(action="accept", content={"decision": "approve"})
    async with gateway(log, events=events, answer=approve) as (client, _):
        result = await client.call_tool("delete_file", {"path": 7})
    assert result.is_error is True
    assert text(result) == [
        (
            "Error, not executed: Invalid arguments for tool `delete_file`: 'path': 7 is not"
            " of type 'string'"
        )
    ]
    assert events == []
    assert executions(log) == []


async def test_unlisted_and_unguardable_tools_never_run(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    bad_schema = {"type": "object", "properties": {"path": {"type": 5}}}
    broken = {**TOOLS[0], "name": "broken", "inputSchema": bad_schema}
    async with gateway(log, listed=[*TOOLS, broken]) as (client, proxy):
        assert sorted(proxy.unguardable) == ["broken"]
        unknown = await client.call_tool("not_listed", {})
        unguarded = await client.call_tool("broken", {"path": "x"})
        listed = [t.name for t in (await client.list_tools()).tools]
    assert (text(unknown), unknown.is_error) == (
        ["Unknown tool `not_listed`: the upstream MCP server did not list it."],
        True,
    )
    assert unguarded.is_error is True
    assert text(unguarded)[0].startswith("toolguard cannot guard the tool `broken`: ")
    assert text(unguarded)[0].endswith(" It was not executed.")
    assert listed == [*(t["name"] for t in TOOLS), "broken"]
    assert executions(log) == []


async def test_start_up_closes_what_a_previous_run_left_open(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    store = MemoryStore()
    async with gateway(log, store=store) as (_, first):
        opened = await first._open("delete_file", {"path": "d"})
        assert not isinstance(opened, str)
        thread_id, review_id, _, _ = opened
        app = build_app(first.chat)
        transport = httpx.ASGITransport(app=app)
        base_url = f"http://127.0.0.1:{DEFAULT_PORT}"  # a Host the page answers by default
        async with httpx.AsyncClient(transport=transport, base_url=base_url) as http:
            listed = (await http.get("/hitl/reviews")).json()
    assert [(r["thread_id"], r["review_id"]) for r in listed["reviews"]] == [(thread_id, review_id)]
    async with gateway(log, store=store) as (_, second):
        assert await second.close_stale() == [thread_id]
        assert await second.close_stale() == []
        state = await second.chat.get_thread(thread_id)
    assert [a.status for a in state.actions] == ["cancelled"]
    assert [e.kind for e in state.audit] == ["requested", "cancelled"]
    assert state.actions[0].result is not None
    assert state.actions[0].result.content == (
        "The review of this action was cancelled: the toolguard mcp-proxy that held this call"
        " stopped before a decision arrived. It was not executed."
    )
    assert executions(log) == []


def test_a_call_too_deep_to_show_is_not_asked_about() -> None:
    deep: Any = 1
    for _ in range(5_000):
        deep = [deep]
    with pytest.raises(ValueError, match=r"^the arguments of `t` cannot be shown as JSON: "):
        approval_message("t", {"a": deep})
    long = approval_message("t", {"a": "x" * 5_000})
    assert long.splitlines()[-1] == json.dumps({"a": "x" * 5_000})


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (
            ["mcp-proxy"],
            (
                "error: give the upstream MCP server's command after --, e.g."
                " toolguard mcp-proxy -- npx -y @modelcontextprotocol/server-filesystem /tmp"
                " (or --upstream-url URL)\n"
            ),
        ),
        (
            ["mcp-proxy", "--upstream-url", "http://127.0.0.1:9/mcp", "--", "server"],
            (
                "error: give either --upstream-url or the upstream MCP server's command after"
                " --, not both\n"
            ),
        ),
        (
            ["mcp-proxy", "--upstream-url", "file:///etc/passwd"],
            "error: --upstream-url must be an http:// or https:// URL, got 'file:///etc/passwd'\n",
        ),
        (
            ["mcp-proxy", "--ttl", "0", "--", "server"],
            "error: --ttl must be a positive number of seconds, got 0.0\n",
        ),
    ],
)
def test_usage_errors(argv: list[str], error: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(argv) == 2
    assert capsys.readouterr() == ("", error)


async def test_an_edit_on_the_page_runs_the_edited_call_once(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    results: list[types.CallToolResult] = []
    async with gateway(log) as (client, proxy):

        async def call() -> None:
            results.append(await client.call_tool("delete_file", {"path": "d"}))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call)
            threads: list[str] = []
            while not threads:
                await anyio.sleep(0.01)
                threads = await proxy.chat.store.thread_ids()  # type: ignore[attr-defined]
            state = await proxy.chat.get_thread(threads[0])
            while state.status != "awaiting_review":
                await anyio.sleep(0.01)
                state = await proxy.chat.get_thread(threads[0])
            edit = {"type": "edit", "edited_action": {"name": "delete_file", "args": {"path": "e"}}}
            await proxy.chat.submit_review([edit], threads[0], reviewer="alice")
    assert text(results[0]) == ["delete_file done", '{"path": "e"}']
    assert executions(log) == [{"tool": "delete_file", "args": {"path": "e"}}]


async def test_resources_and_prompts_are_forwarded_as_they_are(tmp_path: Path) -> None:
    """Read-only: listed, read and fetched from the upstream unchanged, with no review."""
    log = tmp_path / "log.jsonl"
    store = MemoryStore()
    events: list[tuple[str, dict[str, Any]]] = []
    async with gateway(log, store=store, events=events) as (client, _):
        resources = await client.list_resources()
        templates = await client.list_resource_templates()
        read = await client.read_resource("file:///srv/readme.md")
        with pytest.raises(MCPError) as missing:
            await client.read_resource("file:///etc/shadow")
        prompts = await client.list_prompts()
        prompt = await client.get_prompt("summarise", {"topic": "the budget"})
        capabilities = client.server_capabilities
    assert wire(resources, "resources") == {"resources": RESOURCES}
    assert wire(templates, "resource_templates") == {"resourceTemplates": RESOURCE_TEMPLATES}
    readme = {"uri": "file:///srv/readme.md", "mimeType": "text/markdown", "text": "# Read me"}
    assert wire(read, "contents") == {"contents": [readme]}
    assert (missing.value.error.code, missing.value.error.message) == (
        -32002,
        "Resource not found: file:///etc/shadow",
    )
    assert wire(prompts, "prompts") == {"prompts": PROMPTS}
    assert wire(prompt, "description", "messages") == {
        "description": "Summarise a topic.",
        "messages": [
            {"role": "user", "content": {"type": "text", "text": "Summarise the budget."}}
        ],
    }
    assert capabilities is not None
    assert (capabilities.resources is not None, capabilities.prompts is not None) == (True, True)
    assert (await store.thread_ids(), events, executions(log)) == ([], [], [])


async def test_nothing_but_tools_when_the_upstream_has_only_tools(tmp_path: Path) -> None:
    with anyio.fail_after(LIMIT):
        async with Client(build_server(tmp_path / "log.jsonl"), mode="legacy") as upstream:
            proxy = MCPProxy(upstream, TOOLS, store=MemoryStore(), ttl=60)
            proxy.upstream = _ToolsOnly(upstream)
            async with Client(proxy.server(), mode="legacy") as client:
                capabilities = client.server_capabilities
                with pytest.raises(MCPError) as refused:
                    await client.list_resources()
    assert capabilities is not None
    assert (capabilities.tools is not None, capabilities.resources, capabilities.prompts) == (
        True,
        None,
        None,
    )
    assert refused.value.error.code == -32601  # method not found


def wire(result: Any, *fields: str) -> dict[str, Any]:
    """The payload fields of a result in wire format (not the protocol's cache hints)."""
    data: dict[str, Any] = result.model_dump(by_alias=True, exclude_none=True, include=set(fields))
    return data


class _ToolsOnly:
    """The upstream as a tools-only server: its capabilities have no resources or prompts."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.server_capabilities = types.ServerCapabilities(tools=types.ToolsCapability())

    async def call_tool(self, name: str, args: dict[str, Any]) -> Any:
        return await self.client.call_tool(name, args)
