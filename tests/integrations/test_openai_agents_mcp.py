"""An MCP server's tools through toolguard's Agents SDK integration give the model what the
Agents SDK's own MCP path gives: the text of the content blocks (not the ``{"result": ...}``
structured content an MCP server adds to a text answer), or, from a server built with
``use_structured_content=True``, the structured content as JSON.

Both paths run a real Agent against the local scripted Chat Completions server with the same
stdio MCP server, and the tool message the model receives is compared.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
agents_mcp = pytest.importorskip("agents.mcp")

from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled  # noqa: E402

from tests.openai_server import ScriptedOpenAIServer, reply_text, reply_tool_calls  # noqa: E402
from toolguard.integrations import openai_agents as tg  # noqa: E402
from toolguard.integrations.mcp import toolset  # noqa: E402

SERVER = """\
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("notes")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def read_note(name: str) -> str:
    \"\"\"Read a note.\"\"\"
    return f"note {name}: buy milk, caf\\u00e9"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def count_notes() -> dict[str, int]:
    \"\"\"Count the notes.\"\"\"
    return {"notes": 3}


server.run()
"""


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    set_tracing_disabled(True)


@pytest.fixture
def server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as running:
        yield running


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "notes_server.py"
    path.write_text(SERVER, encoding="utf-8")
    return path


async def tool_message(
    scripted: ScriptedOpenAIServer,
    script: Path,
    call: tuple[str, dict[str, Any]],
    *,
    guarded: bool,
    use_structured_content: bool,
) -> str:
    """The content of the tool message the model receives for ``call``."""
    params = {"command": sys.executable, "args": [str(script)]}
    async with agents_mcp.MCPServerStdio(
        params,
        name="notes",
        use_structured_content=use_structured_content,
        client_session_timeout_seconds=30,
    ) as mcp_server:
        scripted.add(reply_tool_calls([("c1", *call)]), reply_text("Done."))
        async with scripted.client() as client:
            model = OpenAIChatCompletionsModel(model="scripted-model", openai_client=client)
            if guarded:
                tools = tg.function_tools(await toolset(mcp_server))
                agent: Agent[Any] = Agent(name="a", model=model, tools=list(tools))
            else:
                agent = Agent(name="a", model=model, mcp_servers=[mcp_server])
            result = await Runner.run(agent, "read my note", context={})
    assert result.final_output == "Done."
    [message] = [m for m in scripted.requests[-1]["messages"] if m["role"] == "tool"]
    return read(message["content"])


def read(content: str | list[dict[str, Any]]) -> str:
    """The text a tool message gives the model: the SDK's own MCP path sends a text block as a
    list of one text part, a function tool's result as a string."""
    if isinstance(content, str):
        return content
    assert [part["type"] for part in content] == ["text"]
    text: str = content[0]["text"]
    return text


@pytest.mark.parametrize("use_structured_content", [False, True])
@pytest.mark.parametrize(
    ("call", "native", "structured"),
    [
        (
            ("read_note", {"name": "shopping"}),
            "note shopping: buy milk, caf\u00e9",
            '{"result": "note shopping: buy milk, caf\\u00e9"}',
        ),
        (("count_notes", {}), '{\n  "notes": 3\n}', '{"notes": 3}'),
    ],
    ids=["text", "object"],
)
async def test_the_model_reads_what_the_sdks_own_mcp_path_gives(  # noqa: PLR0917 - fixtures
    server: ScriptedOpenAIServer,
    script: Path,
    call: tuple[str, dict[str, Any]],
    native: str,
    structured: str,
    use_structured_content: bool,
) -> None:
    expected = structured if use_structured_content else native
    own = await tool_message(
        server, script, call, guarded=False, use_structured_content=use_structured_content
    )
    guarded = await tool_message(
        server, script, call, guarded=True, use_structured_content=use_structured_content
    )
    assert (own, guarded) == (expected, expected)
