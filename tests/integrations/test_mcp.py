"""toolguard.integrations.mcp against a real MCP server, in memory and over stdio."""

from __future__ import annotations

import base64
import itertools
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

mcp = pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters, types  # noqa: E402
from mcp.server import Server  # noqa: E402

from tests.helpers import MCP_SERVER_TABLE  # noqa: E402
from toolguard import (  # noqa: E402
    Classifier,
    ModelResponse,
    ReviewedChat,
    Runner,
    ScriptedModel,
    ToolCall,
    ToolResult,
    Toolset,
    UnsupportedPolicyError,
    validate_decisions,
)
from toolguard.integrations.mcp import MCPToolError, toolset  # noqa: E402

from .mcp_server import TOOLS, build_server, executions  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 30
"""Seconds any MCP connection of a test may take."""


@asynccontextmanager
async def connected(
    log: Path, kind: str = "client", classifier: Classifier | None = None
) -> AsyncIterator[Toolset]:
    """The test server's tools through an in-memory ``mcp.Client`` or its ``ClientSession``."""
    async with Client(build_server(log)) as client:
        yield await toolset(client.session if kind == "session" else client, classifier=classifier)


def stdio_command(log: Path) -> tuple[str, list[str], dict[str, str]]:
    """The test server as a stdio subprocess: command, arguments, environment."""
    env = {"TOOLGUARD_MCP_LOG": str(log), "PYTHONPATH": str(ROOT)}
    return sys.executable, ["-m", "tests.integrations.mcp_server"], env


@asynccontextmanager
async def held(kind: str, log: Path) -> AsyncIterator[Any]:
    """The test server behind the object a user holds: ``kind`` names which one."""
    with anyio.fail_after(LIMIT):
        if kind in ("client", "session"):
            async with Client(build_server(log)) as client:
                yield client.session if kind == "session" else client
        elif kind == "fastmcp":
            fastmcp = pytest.importorskip("fastmcp")
            from fastmcp.client.transports import StdioTransport

            command, args, env = stdio_command(log)
            transport = StdioTransport(command=command, args=args, env=env, cwd=str(ROOT))
            async with fastmcp.Client(transport) as fast_client:
                yield fast_client
        else:
            agents_mcp = pytest.importorskip("agents.mcp")
            command, args, env = stdio_command(log)
            params = {"command": command, "args": args, "env": env, "cwd": str(ROOT)}
            async with agents_mcp.MCPServerStdio(
                params, name="files", client_session_timeout_seconds=LIMIT
            ) as server:
                yield server


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "executions.jsonl"


@pytest.mark.parametrize("kind", ["client", "session"])
async def test_every_tool_keeps_its_name_description_and_full_schema(log: Path, kind: str) -> None:
    async with connected(log, kind) as tools:
        assert list(tools) == list(TOOLS)  # both tools/list pages, in order
        for name, (description, schema, _) in TOOLS.items():
            assert (tools[name].name, tools[name].description) == (name, description)
            assert tools[name].parameters == schema
        assert tools.table() == MCP_SERVER_TABLE
    assert executions(log) == []


async def test_a_read_only_tool_runs_at_once(log: Path) -> None:
    async with connected(log) as tools:
        step = await Runner(tools).run([ToolCall(id="c1", name="read_file", args={"path": "a"})])
    assert step.pending is None
    assert step.results == [
        ToolResult(
            call_id="c1",
            name="read_file",
            status="success",
            content='read_file done\n{"path": "a"}',
            value='read_file done\n{"path": "a"}',
        )
    ]
    assert executions(log) == [{"tool": "read_file", "args": {"path": "a"}}]


async def test_structured_content_reaches_the_model_once(log: Path) -> None:
    """``stats`` answers ``{"files": 3}`` twice (a text block and structuredContent)."""
    model = ScriptedModel(
        [ModelResponse(tool_calls=[ToolCall(id="c1", name="stats", args={})]), "Three."]
    )
    async with connected(log) as tools:
        done = await ReviewedChat(model, tools).send_message("how many files?")
    assert done.reply == "Three."
    assert model.calls[1][-1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": '{"files": 3}',
        "status": "success",
    }
    assert executions(log) == [{"tool": "stats", "args": {}}]


async def test_a_guarded_tool_pauses_with_the_exact_payload_and_approve_runs_it_once(
    log: Path,
) -> None:
    async with connected(log) as tools:
        runner = Runner(tools)
        step = await runner.run(
            [ToolCall(id="c1", name="list_files", args={"path": "/srv", "mode": "text"})]
        )
        assert step.pending_review is not None
        assert step.pending_review.model_dump() == {
            "action_requests": [
                {
                    "name": "list_files",
                    "args": {"path": "/srv", "mode": "text"},
                    "description": "Tool `list_files` is awaiting approval",
                }
            ],
            "review_configs": [
                {"action_name": "list_files", "allowed_decisions": ["approve", "edit", "reject"]}
            ],
        }
        assert executions(log) == []
        assert step.pending is not None
        decisions = validate_decisions(step.pending, [{"type": "approve"}])
        done = await runner.resume(step.pending, decisions)
    assert [(r.status, r.content) for r in done.results] == [
        ("success", 'list_files done\n{"mode": "text", "path": "/srv"}')
    ]
    assert executions(log) == [{"tool": "list_files", "args": {"mode": "text", "path": "/srv"}}]


async def test_a_rejection_reason_reaches_the_model_and_nothing_runs(log: Path) -> None:
    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=[ToolCall(id="c1", name="delete_file", args={"path": "/etc"})]
            ),
            "Understood.",
        ]
    )
    async with connected(log) as tools:
        chat = ReviewedChat(model, tools)
        turn = await chat.send_message("delete /etc")
        assert turn.pending_review is not None
        done = await chat.submit_review(
            [{"type": "reject", "message": "Never touch /etc."}], turn.thread_id
        )
    assert done.reply == "Understood."
    assert model.calls[1][-1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "Rejected by the reviewer, not executed: Never touch /etc.",
        "status": "error",
    }
    assert executions(log) == []


async def test_an_edit_runs_the_edited_arguments_and_replaces_the_call(log: Path) -> None:
    async with connected(log) as tools:
        runner = Runner(tools)
        step = await runner.run([ToolCall(id="c1", name="archive_file", args={"path": "/a"})])
        assert step.pending is not None
        edit = {"type": "edit", "edited_action": {"name": "archive_file", "args": {"path": "/b"}}}
        done = await runner.resume(step.pending, [edit])
    assert done.calls == [ToolCall(id="c1", name="archive_file", args={"path": "/b"})]
    assert [r.content for r in done.results] == ['archive_file done\n{"path": "/b"}']
    assert executions(log) == [{"tool": "archive_file", "args": {"path": "/b"}}]


@pytest.mark.parametrize(
    ("name", "args", "error"),
    [
        ("read_file", {}, "'path': Field required"),
        (
            "read_file",
            {"path": "a", "mode": "raw"},
            "'mode': 'raw' is not one of ['text', 'binary']",
        ),
        ("purge_cache", {"path": 3}, "'path': 3 is not of type 'string'"),
        (
            "book_room",
            {"event": {"title": "Standup", "room": "C"}, "attendees": [{"name": "x"}]},
            "'attendees.0.email': Field required; 'event.room': 'C' is not one of ['A', 'B']",
        ),
    ],
)
async def test_bad_arguments_get_a_schema_error_without_asking(
    log: Path, name: str, args: dict[str, Any], error: str
) -> None:
    async with connected(log) as tools:
        step = await Runner(tools).run([ToolCall(id="c1", name=name, args=args)])
    assert step.pending is None
    assert [(r.status, r.content) for r in step.results] == [
        ("error", f"Invalid arguments for tool `{name}`: {error}")
    ]
    assert executions(log) == []


async def test_a_ref_schema_validates_and_runs_once_approved(log: Path) -> None:
    args = {"event": {"title": "Standup", "room": "A"}, "attendees": [{"email": "a@x.io"}]}
    async with connected(log) as tools:
        runner = Runner(tools)
        step = await runner.run([ToolCall(id="c1", name="book_room", args=args)])
        assert step.pending is not None
        await runner.resume(step.pending, [{"type": "approve"}])
    assert executions(log) == [{"tool": "book_room", "args": args}]


async def test_an_mcp_error_result_becomes_an_error_tool_result(log: Path) -> None:
    async with connected(log) as tools:
        step = await Runner(tools).run([ToolCall(id="c1", name="fail_always", args={"path": "x"})])
        with pytest.raises(MCPToolError, match=r"^no such file: y$"):
            await tools["fail_always"](path="y")
    assert [(r.status, r.content) for r in step.results] == [
        ("error", "Tool `fail_always` failed: MCPToolError: no such file: x")
    ]
    assert executions(log) == [
        {"tool": "fail_always", "args": {"path": "x"}},
        {"tool": "fail_always", "args": {"path": "y"}},
    ]


async def test_the_operators_lists_win_over_the_servers_hints(log: Path) -> None:
    classifier = Classifier(always=["read_file"], never=["purge_cache", "delete_file"])
    async with connected(log, classifier=classifier) as tools:
        assert [(c.name, c.needs_approval, c.reason) for c in tools.classifications[:5]] == [
            ("read_file", True, "listed in always"),
            (
                "list_files",
                True,
                (
                    "the server does not mark it readOnlyHint: true"
                    " (MCP tools are destructive by default)"
                ),
            ),
            ("archive_file", True, "the word 'archive' is an approval verb (data)"),
            ("purge_cache", False, "listed in never (exempt)"),
            ("delete_file", False, "listed in never (exempt)"),
        ]
        step = await Runner(tools).run([ToolCall(id="c1", name="purge_cache", args={"path": "/"})])
    assert step.pending is None
    assert executions(log) == [{"tool": "purge_cache", "args": {"path": "/"}}]


def _expected(ro: Any, destructive: Any, verb: bool, listed: str | None) -> tuple[bool, str]:
    """The documented rules, written out plainly."""
    if listed == "always":
        return True, "always"
    if listed == "never":
        return False, "never"
    if verb:
        return True, "verb"
    if destructive is True:
        return True, "annotation"
    return ro is not True, "annotation"


MISSING = object()


@pytest.mark.parametrize(
    ("ro", "destructive", "verb", "listed"),
    list(
        itertools.product(
            [MISSING, True, False, "true", 1],
            [MISSING, True, False, "true"],
            [False, True],
            [None, "always", "never"],
        )
    ),
)
def test_annotation_rules_every_combination(
    ro: Any, destructive: Any, verb: bool, listed: str | None
) -> None:
    name = "send_report" if verb else "fetch_report"
    annotations: dict[str, Any] = {"title": "Report"}
    if ro is not MISSING:
        annotations["readOnlyHint"] = ro
    if destructive is not MISSING:
        annotations["destructiveHint"] = destructive
    classifier = Classifier(
        always=[name] if listed == "always" else [], never=[name] if listed == "never" else []
    )
    result = classifier.explain(name, annotations=annotations)
    assert (result.needs_approval, result.rule) == _expected(ro, destructive, verb, listed)
    assert classifier.requires_approval(name, annotations=annotations) is result.needs_approval
    # Without annotations the classifier's answer and texts are what they always were.
    assert classifier.explain(name) == Classifier(
        always=classifier.always, never=classifier.never
    ).explain(name)


def test_annotations_must_be_a_mapping() -> None:
    with pytest.raises(TypeError) as info:
        Classifier().explain("x", annotations=["readOnlyHint"])  # type: ignore[arg-type]
    assert str(info.value) == (
        'annotations must be a mapping of MCP tool annotations ({"readOnlyHint": true, ...}),'
        " got list"
    )


def scripted_server(
    pages: dict[str | None, dict[str, Any]], results: dict[str, dict[str, Any]] | None = None
) -> Server[Any]:
    """A real MCP server answering ``tools/list`` page by page and each call from ``results``."""

    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult.model_validate(pages[params.cursor if params else None])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult.model_validate((results or {})[params.name])

    return Server("scripted", on_list_tools=list_tools, on_call_tool=call_tool)


READ_ONLY_TOOL = {
    "inputSchema": {"type": "object", "properties": {}},
    "annotations": {"readOnlyHint": True},
}
PNG = base64.b64encode(b"\x89PNG").decode()


async def test_a_looping_listing_and_an_invalid_schema_get_clear_errors() -> None:
    tool = {"name": "t", "inputSchema": {"type": "object"}}
    looping = {None: {"tools": [tool], "nextCursor": "a"}, "a": {"tools": [], "nextCursor": "a"}}
    async with Client(scripted_server(looping)) as client:
        with pytest.raises(RuntimeError) as loop:
            await toolset(client)
    assert str(loop.value) == "The MCP server repeated the tools/list cursor 'a': its listing loops"
    broken = {"type": "object", "properties": {"a": {"type": "nonsense"}}}
    bad = {None: {"tools": [{"name": "t", "inputSchema": broken}]}}
    async with Client(scripted_server(bad)) as client:
        with pytest.raises(ValueError, match="cannot be guarded") as schema:
            await toolset(client)
    assert str(schema.value) == (
        "The MCP server's tool 't' cannot be guarded: Tool.from_schema: parameters of 't' is not"
        " a valid JSON Schema: 'nonsense' is not valid under any of the given schemas"
    )


ACCEPTED_TEXT = (
    "toolset() takes a connected mcp.ClientSession, an entered mcp.Client, a connected OpenAI"
    " Agents SDK MCP server (agents.mcp.MCPServer: MCPServerStdio, MCPServerStreamableHttp,"
    " MCPServerSse) or an entered fastmcp.Client, got "
)


class LookAlike:
    """Has ``list_tools`` and ``call_tool`` but is no MCP client: it is refused, not guessed at."""

    async def list_tools(self, params: Any = None) -> dict[str, Any]:
        return {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("never called")


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"tools": []}, "builtins.dict"),
        (object(), "builtins.object"),
        ([], "builtins.list"),
        (LookAlike(), "tests.integrations.test_mcp.LookAlike"),
    ],
)
async def test_anything_else_is_a_type_error_naming_what_is_accepted(
    given: object, named: str
) -> None:
    with pytest.raises(TypeError) as info:
        await toolset(given)
    assert str(info.value) == ACCEPTED_TEXT + named


async def test_a_pydantic_ai_mcp_toolset_is_sent_to_its_integration() -> None:
    pydantic_ai_mcp = pytest.importorskip("pydantic_ai.mcp")
    with pytest.raises(TypeError) as info:
        await toolset(pydantic_ai_mcp.MCPToolset("http://127.0.0.1:9/mcp"))
    assert str(info.value) == (
        ACCEPTED_TEXT + "pydantic_ai.mcp.MCPToolset; guard a Pydantic AI MCPToolset with"
        " toolguard.integrations.pydantic_ai.toolset()"
    )


def test_an_agents_server_with_its_own_approval_setting_is_refused(log: Path) -> None:
    agents_mcp = pytest.importorskip("agents.mcp")
    command, args, env = stdio_command(log)
    server = agents_mcp.MCPServerStdio(
        {"command": command, "args": args, "env": env}, name="files", require_approval="always"
    )
    with pytest.raises(UnsupportedPolicyError) as info:
        anyio.run(toolset, server)
    assert str(info.value) == (
        "The MCP server 'files' has its own require_approval setting, which toolguard cannot"
        " apply: toolguard decides which calls wait. Build the server without require_approval"
        ' and say it to toolguard instead: toolset(server, classifier=Classifier(always=["TOOL",'
        ' ...])), or toolguard.guard(tools, rules=Rules(ask=["TOOL"]))'
    )
    assert executions(log) == []


@pytest.mark.parametrize("kind", ["session", "client", "fastmcp", "agents"])
async def test_each_object_a_user_holds_lists_and_calls_through_itself(
    log: Path, kind: str
) -> None:
    """Both tools/list pages, names, descriptions, schemas and annotations; calls run once."""
    async with held(kind, log) as server:
        tools = await toolset(server)
        assert list(tools) == list(TOOLS)
        for name, (description, schema, _) in TOOLS.items():
            assert (tools[name].name, tools[name].description) == (name, description)
            assert tools[name].parameters == schema
        assert tools.table() == MCP_SERVER_TABLE
        runner = Runner(tools)
        step = await runner.run(
            [
                ToolCall(id="c1", name="read_file", args={"path": "r"}),
                ToolCall(id="c2", name="delete_file", args={"path": "d"}),
                ToolCall(id="c3", name="stats", args={}),
            ]
        )
        assert executions(log) == [
            {"tool": "read_file", "args": {"path": "r"}},
            {"tool": "stats", "args": {}},
        ]
        assert step.pending is not None
        done = await runner.resume(step.pending, [{"type": "approve"}])
    assert [(r.call_id, r.status, r.content) for r in done.results] == [
        ("c1", "success", 'read_file done\n{"path": "r"}'),
        ("c2", "success", 'delete_file done\n{"path": "d"}'),
        ("c3", "success", '{"files": 3}'),
    ]
    assert executions(log) == [
        {"tool": "read_file", "args": {"path": "r"}},
        {"tool": "stats", "args": {}},
        {"tool": "delete_file", "args": {"path": "d"}},
    ]


MIXED: dict[str, dict[str, Any]] = {
    "get_snapshot": {
        "content": [
            {"type": "text", "text": '{"rows": 2}'},
            {"type": "image", "data": PNG, "mimeType": "image/png"},
        ],
        "structuredContent": {"rows": 2},
    },
    "get_report": {
        "content": [
            {"type": "text", "text": "Report ready."},
            {"type": "image", "data": PNG, "mimeType": "image/png"},
            {"type": "audio", "data": "AAEC", "mimeType": "audio/wav"},
            {"type": "resource_link", "uri": "file:///r/report.pdf", "name": "report.pdf"},
            {
                "type": "resource",
                "resource": {"uri": "file:///r/notes.txt", "mimeType": "text/plain", "text": "ok"},
            },
            {
                "type": "resource",
                "resource": {"uri": "file:///r/raw.bin", "mimeType": "x/bin", "blob": "AAECAw=="},
            },
        ]
    },
    "get_code": {"content": [], "structuredContent": {"code": 7}, "isError": True},
    "get_nothing": {"content": [], "isError": True},
}


async def test_results_show_each_part_once_and_describe_what_is_not_text() -> None:
    pages = {None: {"tools": [{"name": name, **READ_ONLY_TOOL} for name in MIXED]}}
    async with Client(scripted_server(pages, MIXED)) as client:
        tools = await toolset(client)
        assert await tools["get_snapshot"]() == {
            "structuredContent": {"rows": 2},
            "content": ["[image: image/png, 4 bytes]"],
        }
        assert await tools["get_report"]() == (
            "Report ready.\n[image: image/png, 4 bytes]\n[audio: audio/wav, 3 bytes]\n"
            "[resource link: file:///r/report.pdf (report.pdf)]\n[resource: file:///r/notes.txt]\n"
            "ok\n[resource: file:///r/raw.bin, x/bin, 4 bytes]"
        )
        with pytest.raises(MCPToolError) as code:
            await tools["get_code"]()
        assert str(code.value) == '{"code": 7}'
        with pytest.raises(MCPToolError) as nothing:
            await tools["get_nothing"]()
        assert str(nothing.value) == "the MCP tool reported an error without any text"
        step = await Runner(tools).run(
            [
                ToolCall(id="c1", name="get_snapshot", args={}),
                ToolCall(id="c2", name="get_code", args={}),
            ]
        )
    assert [(r.status, r.content) for r in step.results] == [
        (
            "success",
            '{"structuredContent": {"rows": 2}, "content": ["[image: image/png, 4 bytes]"]}',
        ),
        ("error", 'Tool `get_code` failed: MCPToolError: {"code": 7}'),
    ]


async def test_a_stdio_subprocess_server(log: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tests.integrations.mcp_server"],
        env={"TOOLGUARD_MCP_LOG": str(log), "PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )
    async with Client(params) as client:
        tools = await toolset(client)
        assert tools.table() == MCP_SERVER_TABLE
        runner = Runner(tools)
        step = await runner.run(
            [
                ToolCall(id="c1", name="read_file", args={"path": "r"}),
                ToolCall(id="c2", name="delete_file", args={"path": "d"}),
                ToolCall(id="c3", name="delete_file", args={"path": 1}),
            ]
        )
        assert executions(log) == [{"tool": "read_file", "args": {"path": "r"}}]
        assert step.pending is not None
        assert [a.args for a in step.pending.actions] == [{"path": "d"}]
        done = await runner.resume(step.pending, [{"type": "approve"}])
    assert [(r.call_id, r.status) for r in done.results] == [
        ("c1", "success"),
        ("c2", "success"),
        ("c3", "error"),
    ]
    assert executions(log) == [
        {"tool": "read_file", "args": {"path": "r"}},
        {"tool": "delete_file", "args": {"path": "d"}},
    ]


@pytest.mark.parametrize("with_middleware", [True, False])
async def test_mcp_tools_in_a_langchain_agent(log: Path, with_middleware: bool) -> None:
    """MCP tools given to LangChain's create_agent keep their review (async, ainvoke)."""
    pytest.importorskip("langchain")
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    from toolguard.integrations import langchain as tg

    class FakeModel(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    turn = AIMessage(
        content="",
        tool_calls=[
            {"id": "c1", "name": "delete_file", "args": {"path": "p"}, "type": "tool_call"},
            {"id": "c2", "name": "read_file", "args": {"path": "r"}, "type": "tool_call"},
        ],
    )
    saver = InMemorySaver()
    config: Any = {"configurable": {"thread_id": "mcp"}}
    async with connected(log) as tools:

        def agent(*replies: AIMessage) -> Any:
            middleware = [tg.middleware(tools)] if with_middleware else []
            return create_agent(
                FakeModel(messages=iter(replies)),
                tools=tg.tools(tools),
                middleware=middleware,
                checkpointer=saver,
            )

        paused = await agent(turn).ainvoke({"messages": [HumanMessage("tidy up")]}, config)
        assert [a["name"] for a in paused["__interrupt__"][0].value["action_requests"]] == [
            "delete_file"
        ]
        assert [e["tool"] for e in executions(log)] == ([] if with_middleware else ["read_file"])
        done = await agent(AIMessage("Done.")).ainvoke(
            Command(resume=[{"type": "approve"}]), config
        )
    assert sorted(
        (m.tool_call_id, m.content) for m in done["messages"] if isinstance(m, ToolMessage)
    ) == [("c1", 'delete_file done\n{"path": "p"}'), ("c2", 'read_file done\n{"path": "r"}')]
    assert sorted(e["tool"] for e in executions(log)) == ["delete_file", "read_file"]
