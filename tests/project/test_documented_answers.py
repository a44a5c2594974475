"""Every HTTP answer the docs show as JSON has the shape of the real answer.

A ```json block of docs/http.md or docs/mcp.md that shows an answer is marked
``<!-- answer: NAME -->``. The same request is made to a real app (``create_app``
with a scripted model; the MCP gateway's app in front of an in-memory MCP server,
called by an in-memory MCP client) and the two answers are compared by shape: the
same keys at every level, the same JSON types (a string, a number, a boolean,
``null``), the same kinds of list items. Ids, times and digests differ; a tool's
``parameters`` (any JSON Schema) and a call's ``args`` are compared as objects.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from toolguard import (  # noqa: E402
    Message,
    ModelResponse,
    ReviewedChat,
    ScriptedModel,
    ToolCall,
    requires_approval,
)
from toolguard.http import create_app  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["http.md", "mcp.md"]
ANSWER = re.compile(
    r"^[ \t]*<!-- answer: (?P<name>[\w-]+) -->\n[ \t]*```json\n(?P<body>.*?)\n[ \t]*```",
    re.MULTILINE | re.DOTALL,
)
OPAQUE = frozenset({"parameters", "args"})
"""Keys whose value is any JSON object (a JSON Schema, a call's arguments)."""

CHAT_ANSWERS = {"chat-paused", "chat-reply", "review", "cancel", "thread", "tools", "reviews"}
GATEWAY_ANSWERS = {"gateway-tools"}
MAIL = {"to": "alice@example.com", "subject": "Hi", "body": "At 10."}


def shape(value: Any, key: str | None = None) -> Any:
    """The JSON types of ``value`` at every level (list items as the set of their shapes)."""
    if isinstance(value, dict):
        if key in OPAQUE:
            return "object"
        return {k: shape(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return sorted({json.dumps(shape(item), sort_keys=True) for item in value})
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "string"


def documented() -> dict[str, tuple[str, Any]]:
    """Each marked answer: the page it is on and its JSON."""
    found: dict[str, tuple[str, Any]] = {}
    for page in PAGES:
        text = (ROOT / "docs" / page).read_text(encoding="utf-8")
        for match in ANSWER.finditer(text):
            assert match["name"] not in found, f"{match['name']} is marked twice"
            found[match["name"]] = (page, json.loads(match["body"]))
    return found


# ---------------------------------------------------------------------------- the real answers


@requires_approval
def send_email(to: str, subject: str, body: str) -> str:
    """Send an email."""
    return f"sent to {to}"


def react(messages: Sequence[Message]) -> ModelResponse:
    last = messages[-1]
    if last["role"] == "user":
        if "mail" in str(last["content"]):
            return ModelResponse(tool_calls=[ToolCall(id="c1", name="send_email", args=MAIL)])
        return ModelResponse(text="Alice has two mails about the budget.")
    return ModelResponse(text=f"Done: {last['content']}")


async def chat_answers() -> dict[str, Any]:
    """The answers of a chat app, in the docs' scenario (a mail approved by maria)."""
    chat = ReviewedChat(ScriptedModel([react], repeat=True), [send_email])
    app = create_app(chat, reviewer=lambda: "maria")
    transport = httpx.ASGITransport(app=app)
    answers: dict[str, Any] = {}
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http:
        paused = (await http.post("/hitl/chat", json={"message": "mail alice"})).json()
        answers["chat-paused"] = paused
        decided = await http.post(
            "/hitl/review",
            json={
                "thread_id": paused["thread_id"],
                "review_id": paused["review_id"],
                "decisions": [{"type": "approve"}],
            },
        )
        answers["review"] = decided.json()
        answers["thread"] = (await http.get(f"/hitl/threads/{paused['thread_id']}")).json()
        answers["tools"] = (await http.get("/hitl/tools")).json()
        waiting = (await http.post("/hitl/chat", json={"message": "mail bob"})).json()
        answers["reviews"] = (await http.get("/hitl/reviews")).json()
        cancel = {"thread_id": waiting["thread_id"], "review_id": waiting["review_id"]}
        answers["cancel"] = (await http.post("/hitl/cancel", json=cancel)).json()
        answers["chat-reply"] = (await http.post("/hitl/chat", json={"message": "hi"})).json()
    return answers


async def gateway_answers(log: Path) -> dict[str, Any]:
    """The answers of an MCP gateway's app in front of an in-memory MCP server."""
    pytest.importorskip("mcp")
    from mcp import Client

    from tests.integrations.mcp_proxy_upstream import TOOLS, build_server
    from toolguard import MemoryStore
    from toolguard._gateway.proxy import MCPProxy
    from toolguard._gateway.routes import DEFAULT_PORT, build_app

    async with Client(build_server(log), mode="legacy") as upstream:
        proxy = MCPProxy(upstream, TOOLS, store=MemoryStore(), ttl=60)
        app = build_app(proxy.chat, calls=proxy.calls)
        transport = httpx.ASGITransport(app=app)
        base_url = f"http://127.0.0.1:{DEFAULT_PORT}"
        async with httpx.AsyncClient(transport=transport, base_url=base_url) as http:
            tools = (await http.get("/hitl/tools")).json()
    [delete_file] = [tool for tool in tools["tools"] if tool["name"] == "delete_file"]
    return {"gateway-tools": {"tools": [delete_file]}}


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    log = tmp_path_factory.mktemp("gateway") / "executions.jsonl"

    async def collect() -> dict[str, Any]:
        with anyio.fail_after(30):
            return {**await chat_answers(), **await gateway_answers(log)}

    return anyio.run(collect)


# ---------------------------------------------------------------------------- the comparison


def test_the_marked_answers_are_the_ones_checked() -> None:
    """Each answer the test makes is marked once in the docs, and no mark is left unchecked."""
    assert {name: page for name, (page, _) in documented().items()} == {
        **dict.fromkeys(CHAT_ANSWERS, "http.md"),
        **dict.fromkeys(GATEWAY_ANSWERS, "mcp.md"),
    }


@pytest.mark.parametrize("name", sorted(CHAT_ANSWERS | GATEWAY_ANSWERS))
def test_a_documented_answer_has_the_real_answers_shape(name: str, real: dict[str, Any]) -> None:
    _, example = documented()[name]
    assert shape(example) == shape(real[name])


def test_the_shape_tells_keys_types_and_list_items_apart() -> None:
    assert shape({"a": 1, "b": [None, "x"], "args": {"k": 1}}) == {
        "a": "number",
        "b": ['"null"', '"string"'],
        "args": "object",
    }
    assert shape({"reply": None}) != shape({"reply": "done"})
    assert shape({"tools": [{"name": "x"}]}) != shape({"tools": [{"name": "x", "approval": {}}]})
