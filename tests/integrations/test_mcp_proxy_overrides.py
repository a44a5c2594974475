"""``mcp-proxy --ask TOOL`` and ``--allow TOOL``: the operator corrects a server's annotations.

In process: a real MCP upstream (the low-level server) whose ``get-env`` reads a
secret but is marked ``readOnlyHint: true`` and whose ``drop_table`` is marked
``destructiveHint: true``, the gateway (:class:`~toolguard._gateway.proxy.MCPProxy`
with the rules and classifier of
:func:`~toolguard._gateway.overrides.operator_policy`, as ``mcp-proxy`` builds
them), a real MCP client, and the approval page's API to decide.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from mcp import Client, types  # noqa: E402
from mcp.server import Server  # noqa: E402

from toolguard import Rules, SQLiteStore  # noqa: E402
from toolguard._gateway.overrides import operator_policy  # noqa: E402
from toolguard._gateway.proxy import MCPProxy  # noqa: E402
from toolguard._gateway.routes import build_app  # noqa: E402
from toolguard._gateway.starting import StartUpError  # noqa: E402

LIMIT = 20  # seconds: the bound of every test
NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}
TOOLS: list[dict[str, Any]] = [
    {
        "name": "get-env",
        "description": "Shows the server's environment.",
        "inputSchema": NO_ARGS,
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "drop_table",
        "description": "Drops a table.",
        "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
        "annotations": {"destructiveHint": True},
    },
    {
        "name": "list_tables",
        "description": "Lists the tables.",
        "inputSchema": NO_ARGS,
        "annotations": {"readOnlyHint": True},
    },
]
ASKED = {
    "needs_approval": True,
    "rule": "always",
    "reason": "--ask get-env: a person decides every call, whatever the server's annotations say",
}
ALLOWED = {
    "needs_approval": False,
    "rule": "never",
    "reason": (
        "--allow drop_table: runs without review, whatever the server's annotations say"
        " (a deny or ask rule of --rules still applies)"
    ),
}


class Gateway:
    """The gateway under test: its client, its page API and what the upstream ran."""

    def __init__(self, client: Client, http: Any, proxy: MCPProxy, effects: list[str]) -> None:
        self.client = client
        self.http = http
        self.proxy = proxy
        self.effects = effects

    async def call(self, name: str, args: dict[str, Any] | None = None) -> tuple[bool, str]:
        result = await self.client.call_tool(name, args or {})
        return bool(result.is_error), "".join(getattr(c, "text", "") for c in result.content)

    async def reviews(self) -> list[dict[str, Any]]:
        reviews: list[dict[str, Any]] = (await self.http.get("/hitl/reviews")).json()["reviews"]
        return reviews

    async def approvals(self) -> dict[str, Any]:
        """``GET /hitl/tools``: each tool's ``approval`` (whether it waits, and why)."""
        listed = (await self.http.get("/hitl/tools")).json()["tools"]
        return {tool["name"]: tool["approval"] for tool in listed}

    async def approved_call(self, name: str) -> tuple[bool, str]:
        """Call ``name``; it waits for a person, who approves it on the page."""
        box: list[tuple[bool, str]] = []
        before = list(self.effects)
        async with anyio.create_task_group() as calls:

            async def call() -> None:
                box.append(await self.call(name))

            calls.start_soon(call)
            while not (waiting := await self.reviews()):  # noqa: ASYNC110 - polls the page API
                await anyio.sleep(0.01)
            [review] = waiting
            assert self.effects == before  # nothing ran while it waited
            assert review["pending_review"]["action_requests"][0]["name"] == name
            body = {
                "thread_id": review["thread_id"],
                "review_id": review["review_id"],
                "decisions": [{"type": "approve"}],
            }
            assert (await self.http.post("/hitl/review", json=body)).status_code == 200
        return box[0]


def upstream(effects: list[str]) -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult.model_validate({"tools": TOOLS})

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        effects.append(params.name)
        text = "API_KEY=sk-live-123" if params.name == "get-env" else f"{params.name} done"
        return types.CallToolResult.model_validate({"content": [{"type": "text", "text": text}]})

    return Server("lying-upstream", on_list_tools=list_tools, on_call_tool=call_tool)


@asynccontextmanager
async def gateway(
    tmp_path: Path, *, ask: list[str], allow: list[str], rules: Rules | None = None
) -> AsyncIterator[Gateway]:
    effects: list[str] = []
    with anyio.fail_after(LIMIT):
        async with Client(upstream(effects), mode="legacy") as up, anyio.create_task_group() as tg:
            merged, classifier = operator_policy(TOOLS, rules, ask=ask, allow=allow)
            proxy = MCPProxy(
                up,
                TOOLS,
                store=SQLiteStore(tmp_path / "gateway.sqlite3"),
                rules=merged,
                classifier=classifier,
            )
            proxy._tasks = tg
            transport = httpx.ASGITransport(build_app(proxy.chat))
            async with (
                httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as http,
                Client(proxy.server(), mode="legacy") as client,
            ):
                yield Gateway(client, http, proxy, effects)
            tg.cancel_scope.cancel()


async def test_without_ask_a_read_only_marked_secret_reader_runs_at_once(tmp_path: Path) -> None:
    """The lie the options correct: the server's readOnlyHint lets get-env through."""
    async with gateway(tmp_path, ask=[], allow=[]) as g:
        assert await g.call("get-env") == (False, "API_KEY=sk-live-123")
        assert g.effects == ["get-env"]


async def test_ask_makes_a_read_only_marked_tool_wait_for_a_person(tmp_path: Path) -> None:
    async with gateway(tmp_path, ask=["get-env"], allow=[]) as g:
        assert await g.approved_call("get-env") == (False, "API_KEY=sk-live-123")
        assert g.effects == ["get-env"]
        assert await g.call("list_tables") == (False, "list_tables done")  # others unchanged
        tools = await g.approvals()
    assert tools["get-env"] == ASKED
    assert g.proxy.toolset.explain("get-env").reason == ASKED["reason"]
    rules = g.proxy.toolset.rules
    assert rules is not None
    assert rules.explain("get-env").reason == "matched the ask rule 'get-env'"


async def test_allow_runs_a_destructive_marked_tool_without_review(tmp_path: Path) -> None:
    async with gateway(tmp_path, ask=[], allow=["drop_table"]) as g:
        assert await g.call("drop_table", {"name": "tmp"}) == (False, "drop_table done")
        assert g.effects == ["drop_table"]
        assert await g.reviews() == []
        tools = await g.approvals()
    assert tools["drop_table"] == ALLOWED
    assert tools["list_tables"] == {
        "needs_approval": False,
        "rule": "annotation",
        "reason": "the server marks it readOnlyHint: true and the word 'list' is a read verb",
    }


async def test_the_most_restrictive_word_wins(tmp_path: Path) -> None:
    """A deny rule of the rules file beats --allow; --ask beats --allow of the same tool."""
    rules = Rules(deny=['drop_table(name="prod*")'])
    async with gateway(
        tmp_path, ask=["get-env"], allow=["get-env", "drop_table"], rules=rules
    ) as g:
        assert await g.call("drop_table", {"name": "prod_users"}) == (
            True,
            (
                'The call to `drop_table` is denied by the rule `deny drop_table(name="prod*")`.'
                " It was not executed."
            ),
        )
        assert g.effects == []
        assert await g.call("drop_table", {"name": "tmp"}) == (False, "drop_table done")
        assert await g.approved_call("get-env") == (False, "API_KEY=sk-live-123")
        assert g.effects == ["drop_table", "get-env"]


def test_a_name_the_upstream_does_not_list_is_refused_with_the_close_matches() -> None:
    with pytest.raises(StartUpError) as caught:
        operator_policy(TOOLS, None, ask=["get-env"], allow=["drop-table"])
    assert str(caught.value) == (
        "--allow drop-table: the upstream MCP server lists no tool of that name; did you mean"
        " drop_table? (it lists get-env, drop_table, list_tables)"
    )


def test_glob_characters_in_a_tool_name_are_taken_literally() -> None:
    listed = [*TOOLS, {"name": "run*", "inputSchema": NO_ARGS}]
    rules, _ = operator_policy(listed, None, ask=[], allow=["run*"])
    assert rules is not None
    assert rules.decide("run*", {}).effect == "allow"
    assert rules.decide("run_shell", {}).effect is None  # not a glob over every run... tool
